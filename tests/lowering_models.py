"""Small models the cortex_m lowering does not fully take, each for one reason (tests/lowering/test_lowering_reasons.py
exports them as FILE.py:FACTORY through the session's export cache). Shapes are kept small: each
export must cost seconds."""

from __future__ import annotations

import torch
from torch import nn


def _image(c: int, h: int, w: int) -> torch.Tensor:
    return torch.randn(1, c, h, w).to(memory_format=torch.channels_last)


class ConvReluCat(nn.Module):
    """A convolution and its ReLU, concatenated with the input: the concatenation shares its
    quantization parameters with the ReLU's output, whose range then starts below 0, so the
    activation fusion is refused and the convolution is left on int8 without a kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.act = nn.Conv2d(4, 4, 3, padding=1), nn.ReLU()

    def forward(self, x):
        return torch.cat([self.act(self.conv(x)), x], dim=1)


def conv_relu_cat():
    return ConvReluCat().eval(), (_image(4, 6, 6),)


class Recurrent(nn.Module):
    """A keyword model's recurrent core (upstream's test/ops/test_lstm.py shape), in either form."""

    def __init__(self, quantizable: bool = False) -> None:
        super().__init__()
        self.lstm = (torch.ao.nn.quantizable.LSTM if quantizable else nn.LSTM)(input_size=4, hidden_size=3)

    def forward(self, x):
        return self.lstm(x)[0]


def lstm():
    return Recurrent().eval(), (torch.linspace(-1, 1, 8).reshape(2, 1, 4),)


def quantizable_lstm():
    return Recurrent(quantizable=True).eval(), (torch.linspace(-1, 1, 8).reshape(2, 1, 4),)


class Conv1dNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1, self.relu = nn.Conv1d(4, 8, 3, padding=1), nn.ReLU()

    def forward(self, x):
        return self.relu(self.c1(x))


def conv1d_net():
    return Conv1dNet().eval(), (torch.randn(1, 4, 16),)


class Conv2dRowNet(nn.Module):
    """Conv1dNet written as the fix says: a (1, k) Conv2d over [N, C, 1, L] in channels_last."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.relu = nn.Conv2d(4, 8, (1, 3), padding=(0, 1)), nn.ReLU()

    def forward(self, x):
        return self.relu(self.c1(x))


def conv2d_row_net():
    return Conv2dRowNet().eval(), (_image(4, 1, 16),)


class Attention(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        scores = torch.softmax(torch.bmm(self.q(x), self.k(x).transpose(1, 2)), dim=-1)
        return torch.bmm(scores, self.v(x))


class Block(nn.Module):
    """A transformer block's attention with a value projection, as a submodule (`attn`)."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        return x + self.attn(x)


def attention_value_projection():
    return Block().eval(), (torch.randn(1, 4, 8),)


class Scaled(nn.Module):
    """A linear's output times a Python scalar, or (`as_tensor`) times the scalar made a tensor
    of the output's shape, as the fix says."""

    def __init__(self, as_tensor: bool = False) -> None:
        super().__init__()
        self.fc, self.as_tensor = nn.Linear(8, 8), as_tensor
        if as_tensor:
            self.register_buffer("scale", torch.full((1, 4, 8), 0.25))

    def forward(self, x):
        return self.fc(x) * (self.scale if self.as_tensor else 0.25)


def scaled_by_scalar():
    return Scaled().eval(), (torch.randn(1, 4, 8),)


def scaled_by_tensor():
    return Scaled(as_tensor=True).eval(), (torch.randn(1, 4, 8),)


class MeanOverWidth(nn.Module):
    """A mean over one spatial dimension: no lowering takes it, 1.5.1's or main's."""

    def forward(self, x):
        return x.mean(dim=3, keepdim=True)


def mean_over_width():
    return MeanOverWidth().eval(), (_image(8, 5, 5),)
