"""The zoo tier: small models of the public families people deploy on microcontrollers,
written here in plain PyTorch the way their papers and reference repositories write them,
not shaped to what the cortex_m backend lowers.

MobileNetV2 inverted residuals, squeeze-excite in its Linear form (MobileNetV3, EfficientNet
ports) and its 1x1-convolution form, hardswish nets, temporal-convolution keyword spotting
(TC-ResNet) written with Conv1d and with Conv2d (1, k), depthwise-separable CNNs at several
input sizes, attention blocks (one with a causal mask), recurrent keyword models (LSTM, GRU),
a U-Net-style encoder-decoder with concatenation skips and transposed convolutions, a
detection-style head (boxes and classes), and autoencoders.

Statistics are a trained model's (cortexm.cases.tiny: BatchNorm statistics measured on a batch
of inputs, channels a decade apart, classifiers as confident as trained ones), inputs what the
task gives (images in [0, 1], MFCCs, normalized features). Each is small enough to run in QEMU
in seconds. `cortexm test --cases bench/zoo/models.py` runs them; `python bench/zoo.py` runs
them and proves every verdict by a path of its own (bench/zoo/proof.py).
"""

from __future__ import annotations

import torch
from torch import nn

from cortexm.cases import defects, register
from cortexm.cases.tiny import _confident, _mfcc, _rgb, _trained_like

CALIBRATION = 8


def _samples(example, draw) -> list:
    return [(example,)] + [(draw(),) for _ in range(CALIBRATION - 1)]


def _classifier(module: nn.Module, draw) -> tuple:
    module = _trained_like(module, draw)
    example = _confident(module, module.classifier, draw)
    return module, (example,), _samples(example, draw)


def _regressor(module: nn.Module, draw) -> tuple:
    module = _trained_like(module, draw)
    example = draw()
    return module, (example,), _samples(example, draw)


def _gray(h: int, w: int):
    return lambda: torch.rand(1, 1, h, w).to(memory_format=torch.channels_last)


def _conv_bn(c_in: int, c_out: int, k=3, stride=1, groups=1, act: type[nn.Module] | None = nn.ReLU) -> list[nn.Module]:
    padding = (k // 2) if isinstance(k, int) else tuple(x // 2 for x in k)
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, k, stride, padding, groups=groups, bias=False), nn.BatchNorm2d(c_out)]
    return layers + ([act()] if act else [])


# --- MobileNetV2: inverted residuals ---------------------------------------------------------

class InvertedResidual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = c_in * expand
        self.use_res = stride == 1 and c_in == c_out
        layers = _conv_bn(c_in, hidden, 1, act=nn.ReLU6) if expand != 1 else []
        layers += _conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6) + _conv_bn(hidden, c_out, 1, act=None)
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's MobileNetV2 at width 0.25, cut to five blocks, on 48x48 RGB."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(*_conv_bn(3, 8, 3, 2, act=nn.ReLU6), InvertedResidual(8, 8, 1, 1),
                                      InvertedResidual(8, 12, 2, 6), InvertedResidual(12, 12, 1, 6),
                                      InvertedResidual(12, 16, 2, 6), InvertedResidual(16, 16, 1, 6),
                                      *_conv_bn(16, 64, 1, act=nn.ReLU6))
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


@register("zoo_mobilenetv2", "MobileNetV2 0.25 (inverted residuals, ReLU6), 48x48 RGB, 5 classes", deployment=True)
def _():
    return _classifier(MobileNetV2(), lambda: _rgb(48))


# --- squeeze-excite, hardswish: MobileNetV3 -------------------------------------------------

class SqueezeExciteLinear(nn.Module):
    """Squeeze-excite as the MobileNetV3 / EfficientNet ports write it with Linear layers."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(nn.Linear(channels, squeeze), nn.ReLU(), nn.Linear(squeeze, channels), nn.Hardsigmoid())

    def forward(self, x):
        b, c, _, _ = x.shape
        return x * self.fc(torch.flatten(self.pool(x), 1)).view(b, c, 1, 1)


class SqueezeExciteConv(nn.Module):
    """Squeeze-excite as torchvision writes it: 1x1 convolutions on the pooled map."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc2 = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)
        self.relu, self.gate = nn.ReLU(), nn.Hardsigmoid()

    def forward(self, x):
        return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))


class SENet(nn.Module):
    def __init__(self, se: type[nn.Module], act: type[nn.Module] = nn.ReLU, classes: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(*_conv_bn(3, 16, 3, 2, act=act), *_conv_bn(16, 16, 3, 1, groups=16, act=act),
                                      se(16, 8), *_conv_bn(16, 24, 1, act=act), *_conv_bn(24, 24, 3, 2, groups=24, act=act),
                                      se(24, 8), *_conv_bn(24, 32, 1, act=act))
        self.classifier = nn.Linear(32, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


@register("zoo_se_linear", "squeeze-excite in its Linear form (pool, flatten, Linear, ReLU, Linear, Hardsigmoid, view, mul)")
def _():
    return _classifier(SENet(SqueezeExciteLinear), lambda: _rgb(32))


@register("zoo_se_conv", "squeeze-excite in its 1x1-convolution form (torchvision's SqueezeExcitation)")
def _():
    return _classifier(SENet(SqueezeExciteConv), lambda: _rgb(32))


class MobileNetV3Block(nn.Module):
    """A MobileNetV3 bneck: expand with hardswish, depthwise, squeeze-excite, project, residual."""

    def __init__(self, c: int, hidden: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(c, hidden, 1, act=nn.Hardswish),
                                  *_conv_bn(hidden, hidden, 3, groups=hidden, act=nn.Hardswish),
                                  SqueezeExciteConv(hidden, 8), *_conv_bn(hidden, c, 1, act=None))

    def forward(self, x):
        return x + self.body(x)


class HardswishNet(nn.Module):
    """MobileNetV3-small's stem and a bneck with hardswish throughout, 32x32 RGB."""

    def __init__(self, classes: int = 6) -> None:
        super().__init__()
        self.features = nn.Sequential(*_conv_bn(3, 16, 3, 2, act=nn.Hardswish), MobileNetV3Block(16, 48),
                                      *_conv_bn(16, 48, 1, act=nn.Hardswish))
        self.head = nn.Sequential(nn.Linear(48, 64), nn.Hardswish())
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1)
        return self.classifier(self.head(x))


@register("zoo_hardswish", "MobileNetV3-small stem and bneck: hardswish, squeeze-excite, residual")
def _():
    return _classifier(HardswishNet(), lambda: _rgb(32))


# --- temporal convolutions: TC-ResNet keyword spotting ---------------------------------------

class TCResNet1d(nn.Module):
    """TC-ResNet8-style keyword spotter over 40 MFCC channels x 32 frames, written with Conv1d."""

    def __init__(self, classes: int = 12) -> None:
        super().__init__()
        self.stem = nn.Conv1d(40, 16, 3, padding=1, bias=False)
        self.b1 = nn.Sequential(nn.Conv1d(16, 24, 9, 2, padding=9 // 2, bias=False), nn.BatchNorm1d(24), nn.ReLU(),
                                nn.Conv1d(24, 24, 9, 1, padding=9 // 2, bias=False), nn.BatchNorm1d(24))
        self.skip = nn.Sequential(nn.Conv1d(16, 24, 1, 2, bias=False), nn.BatchNorm1d(24))
        self.classifier = nn.Linear(24, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.b1(x) + self.skip(x))
        return self.classifier(x.mean(dim=2))


class TCResNet2d(nn.Module):
    """The same keyword spotter as TC-ResNet's TensorFlow code writes it: Conv2d with (1, k)
    kernels over an input of one row, MFCCs as channels."""

    def __init__(self, classes: int = 12) -> None:
        super().__init__()
        self.stem = nn.Conv2d(40, 16, (1, 3), padding=(0, 1), bias=False)
        self.b1 = nn.Sequential(nn.Conv2d(16, 24, (1, 9), (1, 2), padding=(0, 9 // 2), bias=False), nn.BatchNorm2d(24), nn.ReLU(),
                                nn.Conv2d(24, 24, (1, 9), 1, padding=(0, 9 // 2), bias=False), nn.BatchNorm2d(24))
        self.skip = nn.Sequential(nn.Conv2d(16, 24, 1, (1, 2), bias=False), nn.BatchNorm2d(24))
        self.classifier = nn.Linear(24, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.b1(x) + self.skip(x))
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _mfcc_frames(rows: bool):
    def draw():
        x = torch.randn(1, 40, 32) * torch.linspace(3.0, 0.5, 40).reshape(1, 40, 1)
        return x.unsqueeze(2).to(memory_format=torch.channels_last) if rows else x
    return draw


@register("zoo_tcresnet_conv1d", "TC-ResNet keyword spotting written with Conv1d (k 3 and 9, paddings k // 2), 40x32 MFCC")
def _():
    return _classifier(TCResNet1d(), _mfcc_frames(rows=False))


@register("zoo_tcresnet_conv2d", "TC-ResNet keyword spotting written with Conv2d (1, k) (paddings k // 2), 40x1x32 MFCC")
def _():
    return _classifier(TCResNet2d(), _mfcc_frames(rows=True))


# --- depthwise-separable CNNs at several input sizes -----------------------------------------

class DSCNN(nn.Module):
    """A depthwise-separable CNN (MobileNetV1 blocks, max pooling between stages)."""

    def __init__(self, c_in: int, widths: tuple[int, ...], classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = _conv_bn(c_in, widths[0], 3, 2)
        for a, b in zip(widths, widths[1:], strict=False):
            layers += _conv_bn(a, a, 3, 1, groups=a) + _conv_bn(a, b, 1) + [nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(widths[-1], classes)

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


@register("zoo_dscnn_gray28", "depthwise-separable CNN on 28x28 grayscale (digits), 10 classes")
def _():
    return _classifier(DSCNN(1, (8, 16, 24), 10), _gray(28, 28))


@register("zoo_dscnn_rgb64", "depthwise-separable CNN on 64x64 RGB (person detection), 2 classes")
def _():
    return _classifier(DSCNN(3, (8, 16, 32, 32), 2), lambda: _rgb(64))


@register("zoo_dscnn_mfcc", "depthwise-separable CNN on 49x10 MFCC (keyword spotting), 12 classes")
def _():
    return _classifier(DSCNN(1, (16, 24, 32), 12), _mfcc)


class ResNetMaxPool(nn.Module):
    """A ResNet stem as torchvision writes it (7x7 / 2, max pool 3 / 2) and one basic block."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, 16, 7, 2), nn.MaxPool2d(3, 2, 1))
        self.block = nn.Sequential(*_conv_bn(16, 16, 3), *_conv_bn(16, 16, 3, act=None))
        self.classifier = nn.Linear(16, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


@register("zoo_resnet_stem", "ResNet stem (7x7 / 2 conv, 3x3 / 2 max pool) and a basic block, 40x40 RGB")
def _():
    return _classifier(ResNetMaxPool(), lambda: _rgb(40))


# --- attention ------------------------------------------------------------------------------

class PatchTransformer(nn.Module):
    """A tiny ViT: 4x4 patches of a 16x16 image embedded by a strided convolution, one encoder
    layer written out (LayerNorm, single-head attention, MLP with GELU), mean-pooled head."""

    def __init__(self, dim: int = 16, classes: int = 4, causal: bool = False) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, 4, 4)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.classifier = nn.Linear(dim, classes)
        self.scale = dim ** -0.5
        self.causal = causal
        self.register_buffer("mask", torch.triu(torch.full((16, 16), float("-inf")), diagonal=1))

    def forward(self, x):
        x = torch.flatten(self.embed(x), 2).transpose(1, 2)  # [1, 16 tokens, dim]
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) * self.scale
        if self.causal:
            scores = scores + self.mask
        x = x + self.proj(torch.softmax(scores, dim=-1) @ v)
        x = x + self.mlp(self.norm2(x))
        return self.classifier(x.mean(dim=1))


@register("zoo_vit_tiny", "a tiny ViT: conv patch embedding, LayerNorm, single-head attention, GELU MLP, 16x16 RGB",
          known_failures=(defects.EXECUTORCH_BMM_OF_LINEAR,))
def _():
    return _classifier(PatchTransformer(), lambda: _rgb(16))


class CausalAttention(nn.Module):
    """A decoder block over a sequence of sensor features: causal attention with the mask as
    GPT-style code writes it (masked_fill with -inf), ReLU MLP, residuals."""

    def __init__(self, dim: int = 16, tokens: int = 8, value_projection: bool = True) -> None:
        super().__init__()
        self.q, self.k, self.o = (nn.Linear(dim, dim) for _ in range(3))
        self.v = nn.Linear(dim, dim) if value_projection else nn.Identity()
        self.up, self.down = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.register_buffer("future", torch.triu(torch.ones(tokens, tokens, dtype=torch.bool), diagonal=1))
        self.scale = dim ** -0.5

    def forward(self, x):
        scores = (self.q(x) @ self.k(x).transpose(1, 2)) * self.scale
        scores = scores.masked_fill(self.future, float("-inf"))
        x = x + self.o(torch.softmax(scores, dim=-1) @ self.v(x))
        return x + self.down(torch.relu(self.up(x)))


@register("zoo_causal_attention", "a causal attention block: masked_fill(-inf), softmax, value projection, ReLU MLP",
          known_failures=(defects.EXECUTORCH_BMM_OF_LINEAR,))
def _():
    return _regressor(CausalAttention(), lambda: torch.randn(1, 8, 16))


@register("zoo_causal_mixer", "the causal attention block without a value projection (the values are the tokens)")
def _():
    return _regressor(CausalAttention(value_projection=False), lambda: torch.randn(1, 8, 16))


# --- recurrent ------------------------------------------------------------------------------

class RecurrentKWS(nn.Module):
    """A recurrent keyword spotter (the Hello Edge LSTM/GRU models): 10 MFCC per frame, 25 frames."""

    def __init__(self, cell: type[nn.Module], hidden: int = 24, classes: int = 12) -> None:
        super().__init__()
        self.rnn = cell(10, hidden, batch_first=True)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.classifier(out[:, -1])


def _frames():
    return torch.randn(1, 25, 10) * torch.linspace(4.0, 1.0, 10)


@register("zoo_lstm_kws", "LSTM keyword spotter (Hello Edge), 25 frames of 10 MFCC, 12 classes")
def _():
    return _classifier(RecurrentKWS(nn.LSTM), _frames)


@register("zoo_gru_kws", "GRU keyword spotter (Hello Edge), 25 frames of 10 MFCC, 12 classes")
def _():
    return _classifier(RecurrentKWS(nn.GRU), _frames)


# --- encoder-decoders, detection, autoencoders ----------------------------------------------

class TinyUNet(nn.Module):
    """A two-level U-Net for segmentation: concatenation skips, transposed-convolution upsampling."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(*_conv_bn(3, 8, 3))
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), *_conv_bn(8, 16, 3))
        self.bottom = nn.Sequential(nn.MaxPool2d(2), *_conv_bn(16, 16, 3))
        self.up2 = nn.ConvTranspose2d(16, 16, 2, 2)
        self.dec2 = nn.Sequential(*_conv_bn(32, 16, 3))
        self.up1 = nn.ConvTranspose2d(16, 8, 2, 2)
        self.dec1 = nn.Sequential(*_conv_bn(16, 8, 3))
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        d2 = self.dec2(torch.cat([self.up2(self.bottom(e2)), e2], dim=1))
        return self.head(self.dec1(torch.cat([self.up1(d2), e1], dim=1)))


@register("zoo_unet", "a two-level U-Net: concatenation skips, transposed convolutions, 32x32 RGB, 3 classes per pixel")
def _():
    return _regressor(TinyUNet(), lambda: _rgb(32))


class DetectionHead(nn.Module):
    """A single-shot detector's shape (FOMO / SSD-lite): a depthwise-separable backbone and a
    head of two 1x1 convolutions per cell, boxes and class scores, as two outputs."""

    def __init__(self, anchors: int = 2, classes: int = 3) -> None:
        super().__init__()
        self.backbone = nn.Sequential(*_conv_bn(3, 16, 3, 2), *_conv_bn(16, 16, 3, 1, groups=16), *_conv_bn(16, 32, 1),
                                      *_conv_bn(32, 32, 3, 2, groups=32), *_conv_bn(32, 32, 1))
        self.boxes = nn.Conv2d(32, anchors * 4, 1)
        self.scores = nn.Conv2d(32, anchors * classes, 1)

    def forward(self, x):
        f = self.backbone(x)
        return self.boxes(f), torch.sigmoid(self.scores(f))


@register("zoo_detection_head", "a single-shot detection head: boxes and sigmoid class scores per cell, 48x48 RGB")
def _():
    return _regressor(DetectionHead(), lambda: _rgb(48))


class ConvAutoEncoder(nn.Module):
    """A convolutional autoencoder (image anomaly detection): strided convolutions down,
    transposed convolutions up, sigmoid reconstruction."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(*_conv_bn(1, 8, 3, 2), *_conv_bn(8, 16, 3, 2))
        self.decoder = nn.Sequential(nn.ConvTranspose2d(16, 8, 2, 2), nn.BatchNorm2d(8), nn.ReLU(),
                                     nn.ConvTranspose2d(8, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


@register("zoo_conv_autoencoder",
          "a convolutional autoencoder: strided convolutions, transposed convolutions, sigmoid, 32x32 gray")
def _():
    return _regressor(ConvAutoEncoder(), _gray(32, 32))


class DenseAutoEncoder(nn.Module):
    """A vibration anomaly autoencoder (the Edge Impulse / TinyML-book shape): 64 FFT bins,
    tanh bottleneck."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 8), nn.Tanh(),
                                 nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 64))

    def forward(self, x):
        return self.net(x)


@register("zoo_dense_autoencoder", "a dense anomaly autoencoder 64-32-8-32-64 with BatchNorm1d and a tanh bottleneck")
def _():
    return _regressor(DenseAutoEncoder(), lambda: torch.randn(1, 64))
