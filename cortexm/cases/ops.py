"""Single-operator cases: one per lowering the cortex_m backend performs, with the
parameters (stride, padding, dilation, ceil_mode, ...) that select different
CMSIS-NN code paths."""

from __future__ import annotations

import torch
from torch import nn

from cortexm.cases import defects
from cortexm.cases.registry import register


def image(c: int, h: int, w: int, n: int = 1) -> torch.Tensor:
    """A channels_last input in [-1, 1): the layout the legacy lowering expects."""
    return (torch.rand(n, c, h, w) * 2 - 1).to(memory_format=torch.channels_last)


def vector(*shape: int) -> torch.Tensor:
    return torch.rand(*shape) * 2 - 1


class Apply(nn.Module):
    """Wraps a function of the inputs (and optional layers) as a module."""

    def __init__(self, fn, **layers: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        for name, layer in layers.items():
            self.add_module(name, layer)

    def forward(self, *xs):
        return self.fn(self, *xs)


class Pack(nn.Module):
    """Independent cases in one module (cortexm.cases.exhaustive): branch j reads inputs
    j * arity to (j + 1) * arity and gives output j."""

    def __init__(self, branches: nn.ModuleList, arity: int) -> None:
        super().__init__()
        self.branches, self.arity = branches, arity

    def forward(self, *xs):
        return tuple(b(*xs[j * self.arity:(j + 1) * self.arity]) for j, b in enumerate(self.branches))


def layer(module: nn.Module, x: torch.Tensor) -> tuple:
    return module.eval(), (x,)


# --- convolution -------------------------------------------------------------

@register("conv2d", "3x3 convolution, 4->8 channels, padding 1")
def _():
    return layer(nn.Conv2d(4, 8, 3, padding=1), image(4, 8, 8))


@register("conv2d_stride2", "3x3 convolution, stride 2, no padding")
def _():
    return layer(nn.Conv2d(3, 8, 3, stride=2), image(3, 11, 11))


@register("conv2d_padding_asym", "3x5 kernel with padding (1, 2) and stride (1, 2)")
def _():
    return layer(nn.Conv2d(4, 6, (3, 5), stride=(1, 2), padding=(1, 2)), image(4, 7, 9))


@register("conv2d_dilation2", "3x3 convolution, dilation 2 (no im2col fast path)")
def _():
    return layer(nn.Conv2d(4, 8, 3, dilation=2, padding=2), image(4, 9, 9))


@register("conv2d_1x1", "pointwise 1x1 convolution, 16->8 channels")
def _():
    return layer(nn.Conv2d(16, 8, 1), image(16, 6, 6))


@register("conv2d_one_input_channel_1x1", "1x1 convolution of one channel to 4 (lowered as a depthwise conv; "
          "on MVE its scratch is sized from the wrong filter dims)",
          known_failures=(defects.EXECUTORCH_DEPTHWISE_ONE_CHANNEL_SCRATCH,))
def _():
    return layer(nn.Conv2d(1, 4, 1), image(1, 5, 6))


@register("conv2d_1xn", "1x3 kernel over a 1-row input (CMSIS-NN's 1xN path)")
def _():
    return layer(nn.Conv2d(8, 8, (1, 3), padding=(0, 1)), image(8, 1, 16))


@register("conv2d_groups", "grouped convolution, 8->8 channels in 2 groups")
def _():
    return layer(nn.Conv2d(8, 8, 3, padding=1, groups=2), image(8, 6, 6))


@register("conv2d_relu", "convolution with a fused ReLU")
def _():
    return layer(nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU()), image(4, 8, 8))


@register("conv2d_relu6_stride2", "convolution with a fused ReLU6, stride 2")
def _():
    return layer(nn.Sequential(nn.Conv2d(3, 6, 3, stride=2, padding=1), nn.ReLU6()), image(3, 9, 9))


@register("depthwise_conv2d", "3x3 depthwise convolution, 8 channels")
def _():
    return layer(nn.Conv2d(8, 8, 3, padding=1, groups=8), image(8, 8, 8))


@register("depthwise_conv2d_multiplier", "depthwise convolution with channel multiplier 2")
def _():
    return layer(nn.Conv2d(4, 8, 3, padding=1, groups=4), image(4, 7, 7))


@register("depthwise_conv2d_stride2", "5x5 depthwise, stride 2, padding 2")
def _():
    return layer(nn.Conv2d(8, 8, 5, stride=2, padding=2, groups=8), image(8, 10, 10))


@register("depthwise_conv2d_single_channel", "depthwise with one input channel (a regular conv on MVE)")
def _():
    return layer(nn.Conv2d(1, 1, 3, padding=1, groups=1), image(1, 8, 8))


@register("transpose_conv2d", "2x2 transposed convolution, stride 2")
def _():
    return layer(nn.ConvTranspose2d(8, 4, 2, stride=2), image(8, 4, 4))


@register("transpose_conv2d_padding", "3x3 transposed convolution, stride 2, padding 1 (padding not a multiple of the stride)",
          known_failures=(defects.CMSIS_NN_TRANSPOSE_CONV_ROWS,))
def _():
    return layer(nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1), image(4, 5, 5))


@register("transpose_conv2d_narrow_filter", "4x1 transposed convolution, stride (1, 2): the filter narrower than the stride",
          known_failures=(defects.CMSIS_NN_TRANSPOSE_CONV_SCRATCH,))
def _():
    return layer(nn.ConvTranspose2d(4, 4, (4, 1), stride=(1, 2)), image(4, 4, 5))


@register("transpose_conv2d_pointwise_stride", "1x1 transposed convolution, stride (2, 3), of a 1x1 input",
          known_failures=(defects.CMSIS_NN_TRANSPOSE_CONV_SCRATCH, defects.CMSIS_NN_TRANSPOSE_CONV_ROW_OVERRUN))
def _():
    return layer(nn.ConvTranspose2d(1, 1, 1, stride=(2, 3), bias=False), image(1, 1, 1))


@register("transpose_conv2d_row_overrun", "3x3 transposed convolution, stride 2, padding (2, 0), batch 2: "
          "padding beyond kernel - stride, a multiple of the stride",
          known_failures=(defects.CMSIS_NN_TRANSPOSE_CONV_ROW_OVERRUN,))
def _():
    return layer(nn.ConvTranspose2d(4, 4, 3, stride=2, padding=(2, 0)), image(4, 4, 4, n=2))


@register("transpose_conv2d_output_padding",
          "transposed convolution with output_padding 1: not lowered, runs on portable kernels",
          notes="the cortex_m quantizer rejects non-zero output_padding (CMSIS-NN has no such parameter)",
          float_ops={"convolution": "the cortex_m quantizer rejects non-zero output_padding (CMSIS-NN has no such parameter)"})
def _():
    return layer(nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1), image(4, 5, 5))


# --- fully connected ----------------------------------------------------------

@register("linear", "fully connected 32->16 with bias")
def _():
    return layer(nn.Linear(32, 16), vector(2, 32))


@register("linear_no_bias", "fully connected 24->10 without bias")
def _():
    return layer(nn.Linear(24, 10, bias=False), vector(1, 24))


@register("linear_relu", "fully connected with a fused ReLU")
def _():
    return layer(nn.Sequential(nn.Linear(16, 16), nn.ReLU()), vector(4, 16))


@register("bmm", "batched matrix multiply of two activations")
def _():
    return Apply(lambda m, a, b: torch.bmm(a, b)).eval(), (vector(2, 4, 8), vector(2, 8, 6))


class MatmulConstant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", torch.rand(12, 8) * 2 - 1)

    def forward(self, x):
        return torch.matmul(x, self.w)


@register("matmul_constant", "matmul of an activation by a constant matrix",
          known_failures=(defects.EXECUTORCH_MATMUL_CONSTANT,))
def _():
    return MatmulConstant().eval(), (vector(1, 3, 12),)


# --- pooling ------------------------------------------------------------------

@register("avg_pool2d", "2x2 average pool, stride 2")
def _():
    return layer(nn.AvgPool2d(2, 2), image(8, 8, 8))


@register("global_avg_pool_hw", "adaptive average pool to 1x1 of a 5x7 map (DecomposeMeanPass, h != w)")
def _():
    return layer(nn.AdaptiveAvgPool2d(1), image(8, 5, 7))


@register("avg_pool2d_padding", "3x3 average pool, stride 2, padding 1 (padding excluded from the count)")
def _():
    return layer(nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), image(4, 9, 9))


@register("avg_pool2d_count_include_pad", "3x3 average pool, stride 2, padding 1, count_include_pad (lowered to pad + pool)")
def _():
    return layer(nn.AvgPool2d(3, 2, padding=1, count_include_pad=True), image(4, 9, 9))


@register("avg_pool2d_ceil_mode", "2x3 average pool, stride (2, 3), ceil_mode")
def _():
    return layer(nn.AvgPool2d((2, 3), (2, 3), ceil_mode=True), image(4, 7, 8))


@register("max_pool2d", "2x2 max pool, stride 2")
def _():
    return layer(nn.MaxPool2d(2, 2), image(8, 8, 8))


@register("max_pool2d_padding", "3x3 max pool, stride 2, padding 1")
def _():
    return layer(nn.MaxPool2d(3, 2, padding=1), image(4, 9, 9))


@register("max_pool2d_ceil_mode", "3x3 max pool, stride 2, ceil_mode: not lowered, runs on portable kernels",
          notes="the cortex_m backend leaves ceil_mode max pooling to the portable int8 kernel")
def _():
    return layer(nn.MaxPool2d(3, 2, ceil_mode=True), image(4, 8, 8))


@register("mean_hw", "global average over H and W (decomposed to an average pool)",
          known_failures=(defects.EXECUTORCH_SPATIAL_MEAN,))
def _():
    return Apply(lambda m, x: x.mean(dim=(2, 3), keepdim=True)).eval(), (image(8, 5, 5),)


# --- elementwise --------------------------------------------------------------

@register("add", "elementwise add of two activations")
def _():
    return Apply(lambda m, a, b: a + b).eval(), (image(4, 5, 5), image(4, 5, 5))


@register("add_broadcast", "add with a broadcast operand: not lowered, runs on portable float kernels",
          notes="the cortex_m backend lowers only same-shape adds",
          float_ops={"add": "the cortex_m backend lowers only same-shape adds"})
def _():
    return Apply(lambda m, a, b: a + b).eval(), (vector(2, 3, 8), vector(1, 1, 8))


@register("mul", "elementwise multiply of two activations")
def _():
    return Apply(lambda m, a, b: a * b).eval(), (image(4, 5, 5), image(4, 5, 5))


@register("minimum", "elementwise minimum of two activations (arm_minimum_s8)",
          known_failures=(defects.EXECUTORCH_MINMAX_OUTPUT_LAYOUT,))
def _():
    return Apply(lambda m, a, b: torch.minimum(a, b)).eval(), (image(4, 5, 5), image(4, 5, 5))


@register("maximum", "elementwise maximum of two activations (arm_maximum_s8)",
          known_failures=(defects.EXECUTORCH_MINMAX_OUTPUT_LAYOUT,))
def _():
    return Apply(lambda m, a, b: torch.maximum(a, b)).eval(), (image(4, 5, 5), image(4, 5, 5))


@register("div", "elementwise division of two activations (quantized_div: float quotient, no CMSIS-NN)")
def _():
    # A divisor away from 0 keeps the quotient's range, hence its quantization step, sane.
    return Apply(lambda m, a, b: a / b).eval(), (image(4, 5, 5),
                                                 (image(4, 5, 5).abs() + 0.5).contiguous(memory_format=torch.channels_last))


@register("mul_relu_single_channel", "multiply then ReLU of [1,1,1,2] tensors (size-1 channel and height)",
          known_failures=(defects.EXECUTORCH_DIM_ORDER_SIZE_ONE,))
def _():
    return Apply(lambda m, a, b: torch.relu(a * b)).eval(), (image(1, 1, 2), image(1, 1, 2))


# --- activations --------------------------------------------------------------

@register("quantize_beyond_int16", "ReLU of inputs up to 400x the calibrated range (quantize must saturate)",
          known_failures=(defects.EXECUTORCH_QUANTIZE_MVE_WRAP,), data="beyond")
def _():
    calibration = [(vector(2, 32),) for _ in range(4)]
    return Apply(lambda m, x: torch.relu(x)).eval(), (torch.linspace(-400.0, 400.0, 64).reshape(2, 32),), calibration


@register("relu", "standalone ReLU")
def _():
    return Apply(lambda m, x: torch.relu(x)).eval(), (image(4, 6, 6),)


@register("clamp", "standalone clamp to [-0.5, 0.75]")
def _():
    return Apply(lambda m, x: torch.clamp(x, -0.5, 0.75)).eval(), (image(4, 6, 6),)


@register("hardtanh", "standalone hardtanh to [-0.25, 0.5]")
def _():
    return Apply(lambda m, x: nn.functional.hardtanh(x, -0.25, 0.5)).eval(), (image(4, 6, 6),)


@register("linear_hardswish", "fully connected followed by hardswish")
def _():
    return layer(nn.Sequential(nn.Linear(16, 16), nn.Hardswish()), vector(2, 16))


@register("linear_hardsigmoid", "fully connected followed by hardsigmoid (fused into the linear's output "
          "quantization)")
def _():
    return layer(nn.Sequential(nn.Linear(16, 16), nn.Hardsigmoid()), vector(2, 16))


@register("sigmoid", "sigmoid through a 256-entry lookup table")
def _():
    return Apply(lambda m, x: torch.sigmoid(x)).eval(), (vector(2, 32) * 4,)


@register("softmax", "softmax over the last dimension")
def _():
    return Apply(lambda m, x: torch.softmax(x, dim=-1)).eval(), (vector(4, 10) * 3,)


# --- data movement ------------------------------------------------------------

@register("pad", "constant pad of H and W")
def _():
    return Apply(lambda m, x: nn.functional.pad(x, (1, 2, 2, 1))).eval(), (vector(1, 3, 4, 5),)


@register("pad_value", "constant pad by 0.25 of an input in [0, 2]: the pad value and a zero point other than 0")
def _():
    return Apply(lambda m, x: nn.functional.pad(x, (2, 1, 1, 2), value=0.25)).eval(), (vector(1, 3, 4, 5) + 1,)


@register("permute", "permute NHWC -> NCHW")
def _():
    return Apply(lambda m, x: x.permute(0, 3, 1, 2)).eval(), (vector(2, 3, 4, 5),)


@register("transpose", "transpose of the last two dimensions")
def _():
    return Apply(lambda m, x: x.transpose(1, 2)).eval(), (vector(2, 6, 5),)


# --- boundary data (cortexm.cases.data): outputs at the activation bounds in every channel,
# requantize exactly on rounding half steps, windows entirely at the minimum and maximum,
# every pair of int8 values --------------------------------------------------------------

# The solver freezes a window once it lands a target in it, so each case has more independent
# windows (pixels, rows) than targets: every channel meets each target (the sidecar's
# data_targets, and the runner's value counters with --coverage, say so).
@register("conv2d_bounds", "convolution 5->6, 3x2 kernel, stride (1, 2), padding 1, ReLU6: every channel's output "
          "driven to both activation bounds and beyond", data="bounds")
def _():
    return layer(nn.Sequential(nn.Conv2d(5, 6, (3, 2), (1, 2), 1), nn.ReLU6()), image(5, 12, 14))


@register("conv2d_midpoints", "convolution 3->5, 3x3, padding 1: requantize on rounding half steps (+0.5, -0.5 "
          "and further out) in every channel", data="midpoints")
def _():
    return layer(nn.Conv2d(3, 5, 3, padding=1), image(3, 13, 12))


@register("depthwise_conv2d_midpoints", "3x3 depthwise, 7 channels, padding 1 (CMSIS-NN's 3x3 path on DSP): "
          "requantize on rounding half steps in every channel", data="midpoints")
def _():
    return layer(nn.Conv2d(7, 7, 3, padding=1, groups=7), image(7, 8, 7))


@register("depthwise_conv2d_bounds", "3x3 depthwise, 16 channels, padding 1, ReLU6 (the DSP 3x3 path; on MVE the "
          "kernel that clamps 4 pixels x 4 channels): every channel lane beyond both bounds at every pixel position",
          data="bounds")
def _():
    conv = nn.Conv2d(16, 16, 3, padding=1, groups=16)
    with torch.no_grad():  # filters of one size, no bias: every channel can pass both bounds
        conv.weight.mul_(0.3 / conv.weight.abs().amax(dim=(1, 2, 3), keepdim=True))
        conv.bias.zero_()
    return layer(nn.Sequential(conv, nn.ReLU6()), image(16, 8, 8))


@register("depthwise_conv2d_dilated_bounds", "depthwise with multiplier 2, 3x3, dilation (2, 1), padding (1, 2), "
          "ReLU6 (the generic path): every channel at both activation bounds", data="bounds")
def _():
    return layer(nn.Sequential(nn.Conv2d(3, 6, 3, padding=(1, 2), dilation=(2, 1), groups=3), nn.ReLU6()),
                 image(3, 10, 11))


@register("depthwise_conv2d_dilated_w_bounds", "depthwise 2x2, dilation (1, 2), padding 1, ReLU6: dilated windows "
          "cut by the right edge at odd and even distances (the generic path), every channel at both bounds",
          data="bounds")
def _():
    return layer(nn.Sequential(nn.Conv2d(4, 4, 2, padding=1, dilation=(1, 2), groups=4), nn.ReLU6()), image(4, 6, 7))


@register("linear_bounds", "fully connected 17->5, ReLU6, batch 24: outputs at both activation bounds", data="bounds")
def _():
    return layer(nn.Sequential(nn.Linear(17, 5), nn.ReLU6()), vector(24, 17))


@register("linear_midpoints", "fully connected 13->7, batch 32: requantize on rounding half steps", data="midpoints")
def _():
    return layer(nn.Linear(13, 7), vector(32, 13))


@register("avg_pool2d_extremes", "2x2 average pool, stride 1, 5 channels, batch 2: windows entirely at the minimum "
          "and at the maximum", data="extremes")
def _():
    return layer(nn.AvgPool2d(2, 1), image(5, 4, 5, n=2))


@register("max_pool2d_extremes", "3x2 max pool, stride (1, 2), padding 1, 6 channels: windows entirely at the "
          "minimum and at the maximum", data="extremes")
def _():
    return layer(nn.MaxPool2d((3, 2), (1, 2), 1), image(6, 6, 5))


def _square(fn, narrow: bool):
    """Two [256, 256] activations holding every pair of int8 values once (data "square").
    `narrow`: calibrated on pairs that are never both large (a + b small, or |a * b| <= 1/4),
    so the output's range is narrower than the square's: its corners saturate, every lane
    position meets both bounds, and a missing clamp shows."""
    inputs = (vector(256, 256), vector(256, 256))
    if not narrow:
        return Apply(lambda m, a, b: fn(a, b)).eval(), inputs
    samples = [(x, -0.75 * x + 0.05 * vector(256, 256)) if fn is torch.add else (x, (1 - x.abs()) * vector(256, 256))
               for x in (vector(256, 256) for _ in range(8))]
    return Apply(lambda m, a, b: fn(a, b)).eval(), inputs, samples


for _name, _fn, _what in (("add", torch.add, "add"), ("mul", torch.mul, "multiply"),
                          ("minimum", torch.minimum, "minimum"), ("maximum", torch.maximum, "maximum")):
    register(f"{_name}_square", f"{_what} of every pair of int8 values (the 256 x 256 square, contiguous)"
             + ("; calibrated narrower than the square, so its outputs saturate" if _fn in (torch.add, torch.mul) else ""),
             data="square")(lambda fn=_fn: _square(fn, fn in (torch.add, torch.mul)))
