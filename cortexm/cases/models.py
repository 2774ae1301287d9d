"""Small whole models of the kind people deploy to microcontrollers."""

from __future__ import annotations

import torch
from torch import nn

from cortexm.cases.registry import register
from cortexm.cases.ops import image, vector


def _conv_bn_relu(c_in: int, c_out: int, kernel, stride=1, padding=0, groups=1, relu=True) -> list[nn.Module]:
    bn = nn.BatchNorm2d(c_out)
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
        for a, b in zip(sizes, sizes[1:]):
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
