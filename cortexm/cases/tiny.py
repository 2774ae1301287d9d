"""The real-model tier: the four MLPerf Tiny reference architectures, as a user deploys them.

DS-CNN (keyword spotting, 49x10 MFCC), MobileNetV1 0.25 (visual wake words, 96x96 RGB),
ResNet-8 (image classification, CIFAR-10's 32x32) and the fully connected autoencoder with
BatchNorm1d (anomaly detection, 640 log-mel features), written in plain PyTorch after the
MLPerf Tiny reference models (mlcommons/tiny, benchmark/training).

Their weights are seeded to look trained, not drawn from one uniform init: every layer's
output channels have ranges a decade apart (log-uniform scales), and each convolution or
linear is followed by a BatchNorm with its own statistics, which the lowering folds in, so
per-channel quantization matters as it does on a real model. The classifiers end in a
softmax, as deployed, and are confident on their example input (the logits have a trained
classifier's spread, and the example is the most confident of a batch of inputs): a trained
model's softmax gives its top class nearly all the probability on most inputs, and
a row of four or more columns driven to the top of its range is what no other case gives the
softmax kernel. Inputs are what the models meet: MFCCs (normal, a few units
wide), images in [0, 1], normalized log-mel frames.

Each case is a deployment: the test app prints its line (share lowered, dead constants,
flash and RAM, instructions, instructions per MAC, SQNR and top-1 against float).
"""

from __future__ import annotations

import torch
from torch import nn

from cortexm.cases.registry import register

CALIBRATION = 8
BATCH = 32  # inputs a model's BatchNorm statistics and its example are drawn from
LOGIT_STD = 4.0  # a trained classifier's spread of logits over the classes


def _trained_like(module: nn.Module, draw) -> nn.Module:
    """Weights and BatchNorm statistics as a trained model has them (module docstring): each
    layer's output channels scaled a decade apart, every BatchNorm given its own affine
    parameters and the statistics of the activations it sees (measured on BATCH inputs, as
    training leaves them), so activations stay in range through depth and the folded weights'
    per-channel ranges differ."""
    # The statistics are measured in float64 and rounded to float32: in float32, a batch's sums
    # depend on how many threads share them, and the model (so its goldens) on the machine.
    for layer in module.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            out = layer.weight.shape[0]
            fan_in = layer.weight[0].numel()
            scale = 10 ** (torch.rand(out) * 1.2 - 0.6)
            shape = (out,) + (1,) * (layer.weight.dim() - 1)
            layer.weight.data = torch.randn(layer.weight.shape) * (scale / fan_in ** 0.5).reshape(shape)
            if layer.bias is not None:
                layer.bias.data = torch.randn(out) * 0.05
        elif isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
            layer.weight.data = 10 ** (torch.rand(layer.num_features) * 0.8 - 0.4)
            layer.bias.data = torch.randn(layer.num_features) * 0.2
            layer.reset_running_stats()
            layer.momentum = None  # the running statistics become the batch's averages
    module.train()
    with torch.no_grad():
        module.double()(torch.cat([draw() for _ in range(BATCH)]).double())
    return module.float().eval()


def _confident(module: nn.Module, classifier: nn.Linear, draw) -> torch.Tensor:
    """Scale the last layer to a trained classifier's logit spread (a standard deviation of
    LOGIT_STD over the classes), and return the most confident of BATCH drawn inputs: the
    example, whose top class leads the next by the most."""
    with torch.no_grad():
        inputs = [draw() for _ in range(BATCH)]
        captured = []
        hook = classifier.register_forward_hook(lambda m, i, o: captured.append(o.float()))
        module.double()
        for x in inputs:
            module(x.double())
        module.float()
        hook.remove()
        logits = torch.cat(captured)
        factor = LOGIT_STD / float(logits.std(dim=1).mean())
        classifier.weight.mul_(factor)
        classifier.bias.mul_(factor)
        top2 = (logits * factor).topk(2, dim=1).values
        return inputs[int((top2[:, 0] - top2[:, 1]).argmax())]


def _bn_relu(channels: int, relu6: bool = False) -> list[nn.Module]:
    return [nn.BatchNorm2d(channels), nn.ReLU6() if relu6 else nn.ReLU()]


class DSCNN(nn.Module):
    """DS-CNN small (MLPerf Tiny KWS): conv 10x4 / 2 to 64 channels, four depthwise-separable
    blocks, average pool, 12 classes."""

    def __init__(self, channels: int = 64, classes: int = 12) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(1, channels, (10, 4), (2, 2), (5, 1), bias=False), *_bn_relu(channels)]
        for _ in range(4):
            layers += [nn.Conv2d(channels, channels, 3, 1, 1, groups=channels, bias=False), *_bn_relu(channels),
                       nn.Conv2d(channels, channels, 1, bias=False), *_bn_relu(channels)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d((25, 5))
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x):
        x = torch.flatten(self.pool(self.features(x)), 1)
        return torch.softmax(self.classifier(x), dim=1)


class MobileNetV1(nn.Module):
    """MobileNetV1 with width 0.25 at 96x96 (MLPerf Tiny VWW): ReLU6 throughout, 2 classes."""

    PLAN = ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 1), (128, 1), (128, 1),
            (256, 2), (256, 1))

    def __init__(self, classes: int = 2) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, 8, 3, 2, 1, bias=False), *_bn_relu(8, relu6=True)]
        c = 8
        for out, stride in self.PLAN:
            layers += [nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False), *_bn_relu(c, relu6=True),
                       nn.Conv2d(c, out, 1, bias=False), *_bn_relu(out, relu6=True)]
            c = out
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(3)
        self.classifier = nn.Linear(c, classes)

    def forward(self, x):
        x = torch.flatten(self.pool(self.features(x)), 1)
        return torch.softmax(self.classifier(x), dim=1)


class Residual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), *_bn_relu(c_out),
                                  nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out))
        self.skip = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                     if stride != 1 or c_in != c_out else None)

    def forward(self, x):
        return torch.relu(self.body(x) + (self.skip(x) if self.skip is not None else x))


class ResNet8(nn.Module):
    """ResNet-8 (MLPerf Tiny image classification): three residual stacks of 16, 32, 64
    channels on 32x32 RGB, 10 classes."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), *_bn_relu(16))
        self.stacks = nn.Sequential(Residual(16, 16, 1), Residual(16, 32, 2), Residual(32, 64, 2))
        self.pool = nn.AvgPool2d(8)
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        x = torch.flatten(self.pool(self.stacks(self.stem(x))), 1)
        return torch.softmax(self.classifier(x), dim=1)


class FCAutoEncoder(nn.Module):
    """The MLPerf Tiny anomaly-detection autoencoder: 640 -> 128 x4 -> 8 -> 128 x4 -> 640, each
    hidden layer Linear, BatchNorm1d, ReLU."""

    def __init__(self, features: int = 640, hidden: int = 128, code: int = 8) -> None:
        super().__init__()
        sizes = [features, hidden, hidden, hidden, hidden, code, hidden, hidden, hidden, hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:], strict=False):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
        layers.append(nn.Linear(hidden, features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def _mfcc() -> torch.Tensor:
    """A 49x10 MFCC frame stack: the first coefficient carries the energy, the rest a few units."""
    spread = torch.tensor([8.0, 4.0, 3.0, 2.5, 2.0, 1.8, 1.6, 1.4, 1.2, 1.0])
    # .to, not .contiguous: a one-channel tensor is contiguous either way, and only .to gives it
    # the channels-last strides the lowering reads its layout from.
    return (torch.randn(1, 1, 49, 10) * spread + torch.tensor([-6.0] + [0.0] * 9)).to(memory_format=torch.channels_last)


def _rgb(size: int) -> torch.Tensor:
    return torch.rand(1, 3, size, size).to(memory_format=torch.channels_last)


def _classifier_case(module: nn.Module, draw) -> tuple:
    module = _trained_like(module, draw)
    classifier = module.classifier
    assert isinstance(classifier, nn.Linear)  # every classifier case ends in one
    example = _confident(module, classifier, draw)
    return module, (example,), [(example,)] + [(draw(),) for _ in range(CALIBRATION - 1)]


def _deployment(name: str, doc: str):
    return register(name, doc, deployment=True)


@_deployment("tiny_kws_dscnn", "MLPerf Tiny KWS: DS-CNN small, 49x10 MFCC, 12 classes with softmax")
def _():
    return _classifier_case(DSCNN(), _mfcc)


@_deployment("tiny_vww_mobilenet", "MLPerf Tiny VWW: MobileNetV1 0.25 at 96x96 RGB, 2 classes with softmax")
def _():
    return _classifier_case(MobileNetV1(), lambda: _rgb(96))


@_deployment("tiny_ic_resnet8", "MLPerf Tiny IC: ResNet-8 on 32x32 RGB, 10 classes with softmax")
def _():
    return _classifier_case(ResNet8(), lambda: _rgb(32))


@_deployment("tiny_ad_autoencoder", "MLPerf Tiny AD: fully connected autoencoder 640-128x4-8-128x4-640 with BatchNorm1d")
def _():
    draw = lambda: torch.randn(1, 640)  # noqa: E731 - normalized log-mel frames
    module = _trained_like(FCAutoEncoder(), draw)
    example = draw()
    return module, (example,), [(example,)] + [(draw(),) for _ in range(CALIBRATION - 1)]
