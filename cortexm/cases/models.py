"""Small whole models of the kind people deploy to microcontrollers."""

from __future__ import annotations

import torch
from torch import nn

from cortexm.cases import defects
from cortexm.cases.ops import image, vector
from cortexm.cases.registry import register


def _conv_bn_relu(c_in: int, c_out: int, kernel, stride=1, padding=0, groups=1, relu=True) -> list[nn.Module]:
    bn = nn.BatchNorm2d(c_out)
    assert bn.running_mean is not None and bn.running_var is not None  # track_running_stats is on
    # Non-trivial statistics, so folding the batch norm into the convolution matters.
    bn.running_mean.uniform_(-0.2, 0.2)
    bn.running_var.uniform_(0.5, 1.5)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-0.2, 0.2)
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, kernel, stride, padding, groups=groups, bias=False), bn]
    if relu:
        layers.append(nn.ReLU())
    return layers


class KeywordSpotting(nn.Module):
    """DS-CNN keyword spotter (MLPerf Tiny KWS): 49x10 MFCC in, 12 classes out."""

    def __init__(self, channels: int = 64, blocks: int = 4, classes: int = 12) -> None:
        super().__init__()
        layers = _conv_bn_relu(1, channels, (10, 4), stride=(2, 2), padding=(5, 1))
        for _ in range(blocks):
            layers += _conv_bn_relu(channels, channels, 3, padding=1, groups=channels)
            layers += _conv_bn_relu(channels, channels, 1)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d((25, 5))
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x):
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class InvertedResidual(nn.Module):
    """MobileNetV2 block: expand 1x1, depthwise 3x3, project 1x1, residual add."""

    def __init__(self, c_in: int, c_out: int, expand: int, stride: int) -> None:
        super().__init__()
        hidden = c_in * expand
        self.residual = stride == 1 and c_in == c_out
        self.block = nn.Sequential(
            *_conv_bn_relu(c_in, hidden, 1),
            *_conv_bn_relu(hidden, hidden, 3, stride=stride, padding=1, groups=hidden),
            *_conv_bn_relu(hidden, c_out, 1, relu=False),
        )

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class TinyMobileNet(nn.Module):
    """A MobileNetV2-style classifier for 32x32 RGB input, 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn_relu(3, 16, 3, stride=2, padding=1))
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, expand=2, stride=1),
            InvertedResidual(16, 24, expand=4, stride=2),
            InvertedResidual(24, 24, expand=4, stride=1),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(24, 10)

    def forward(self, x):
        x = self.pool(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(x, 1))


class AutoEncoder(nn.Module):
    """MLP autoencoder (MLPerf Tiny anomaly detection shape, narrowed): 128 -> 8 -> 128."""

    def __init__(self, dim: int = 128, hidden: int = 64, code: int = 8) -> None:
        super().__init__()
        sizes = [dim, hidden, hidden, code, hidden, hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:], strict=False):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(hidden, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


@register("keyword_spotting", "DS-CNN keyword spotter (MLPerf Tiny KWS), 49x10 input, 12 classes")
def _():
    return KeywordSpotting().eval(), (image(1, 49, 10),)


@register("mobilenet_inverted_residual", "MobileNetV2-style net: inverted residual blocks with a residual add")
def _():
    return TinyMobileNet().eval(), (image(3, 32, 32),)


@register("mlp_autoencoder", "MLP autoencoder 128-64-64-8-64-64-128 (MLPerf Tiny anomaly detection style)")
def _():
    return AutoEncoder().eval(), (vector(1, 128),)


class AttentionBlock(nn.Module):
    """A transformer block of the shape ExecuTorch #21943 lowers: one attention head (query and
    key projections, scaled scores, softmax, the weighted sum of the input), its output
    projection and residual, and an MLP with its residual."""

    def __init__(self, dim: int = 16, value_projection: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.o = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim) if value_projection else None
        self.up, self.down = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.scale = dim ** -0.5

    def forward(self, x):
        scores = torch.bmm(self.q(x), self.k(x).transpose(1, 2)) * self.scale
        values = self.v(x) if self.v is not None else x
        x = x + self.o(torch.bmm(torch.softmax(scores, dim=-1), values))
        return x + self.down(torch.relu(self.up(x)))


@register("attention_block", "a transformer block (ExecuTorch #21943): attention with its scale, softmax, residuals, MLP",
          known_failures=(defects.EXECUTORCH_CONSTANT_MUL,))
def _():
    return AttentionBlock().eval(), (vector(1, 8, 16),)


@register("attention_value_projection", "the attention block with a value projection: bmm of a linear's output",
          known_failures=(defects.EXECUTORCH_BMM_OF_LINEAR,))
def _():
    return AttentionBlock(value_projection=True).eval(), (vector(1, 8, 16),)


class SmallConvNet(nn.Module):
    """Two convolutions and a global average pool, the start of any image classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.AvgPool2d(8)

    def forward(self, x):
        return self.pool(torch.relu(self.c2(torch.relu(self.c1(x)))))


@register("conv_net_nchw_input", "two convolutions and a pool given a contiguous (NCHW) input, as PyTorch makes it",
          known_failures=(defects.NCHW_INPUT,))
def _():
    return SmallConvNet().eval(), (torch.rand(1, 3, 8, 8),)
