"""Pooling: quantized_avg_pool2d, quantized_max_pool2d and their `*_nhwc` forms.

What enters: the schema's arguments (activations NCHW-sized channels_last, or NHWC for
`*_nhwc`) and the output. What leaves: the int8 values arm_avgpool_s8 / arm_max_pool_s8
(scalar) write, with the checks of cortex_m_ops_common.h prepare_cmsis_pool2d_config.

- avg pool: the integer sum of the window's elements inside the input divided by their
  count (padding is never counted), rounded half away from zero as
  `sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count`, clamped to int8. The
  schema's zero_point, multiplier and shift are not used by the kernel; ceil_mode is
  allowed, and the output size must be the one the C++ expects.
- max pool: the window's maximum over the elements inside the input, clamped to
  [activation_min, activation_max]. An output whose window holds no element keeps what
  its memory held (`out`'s values); ceil_mode and dilation other than 1 are rejected.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.tensor import Tensor, from_memory, memory, require
from cortexm.oracle.window import activations, dims, pairs, require_4d, require_channels_last, windows


def _prepare(op: str, args: dict, out: Tensor, nhwc: bool, dilation, activation: tuple[int, int],
             allow_ceil_mode: bool) -> tuple:
    """prepare_cmsis_pool2d_config: (kernel, stride, padding)."""
    x = args["input"]
    require_4d(op, x, out)
    require(x.data.dtype == np.int8 and out.data.dtype == np.int8, op, "tensors must be int8")
    (n, _, _, c), (on, _, _, oc) = dims(x, nhwc), dims(out, nhwc)
    require(n == on and c == oc, op, "batch and channel dimensions must match between input and output")
    require_channels_last(op, nhwc, x, out)
    kernel, stride, padding, dilation = pairs(op, kernel_size=args["kernel_size"], stride=args["stride"],
                                              padding=args["padding"], dilation=dilation)
    require(allow_ceil_mode or not args["ceil_mode"], op, "ceil_mode=True is not supported")
    require(activation[0] <= activation[1], op, "activation_min must be <= activation_max")
    require(all(-(2**31) <= v < 2**31 for v in activation), op, "activation bounds exceed int32")
    require(dilation == (1, 1), op, "dilation other than 1 is unsupported")
    return kernel, stride, padding


def _output_size(size: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """op_quantized_avg_pool2d.cpp pooling_output_size (C integer division)."""
    numerator = size + 2 * padding - kernel
    output = int(fp.trunc_div(numerator, stride)) + 1
    if ceil_mode and numerator % stride != 0:
        output += 1
    if ceil_mode and (output - 1) * stride >= size + padding:
        output -= 1
    return output


def _avg_pool2d(args: dict, out: Tensor, nhwc: bool) -> np.ndarray:
    op = "quantized_avg_pool2d" + ("_nhwc" if nhwc else "")
    kernel, stride, padding = _prepare(op, args, out, nhwc, [1, 1], (-128, 127), allow_ceil_mode=True)
    x = args["input"]
    n, h, w, c = dims(x, nhwc)
    _, oh, ow, _ = dims(out, nhwc)
    expected = tuple(_output_size(*a, args["ceil_mode"]) for a in zip((h, w), kernel, stride, padding, strict=False))
    require((oh, ow) == expected, op, f"output shape mismatch - actual: {(oh, ow)} expected: {expected}")
    sums = np.zeros((n, oh, ow, c), np.int64)
    counts = np.zeros((1, oh, ow, 1), np.int64)
    for _, _, tap in windows(activations(x, nhwc), (oh, ow), kernel, stride, padding, (1, 1), 0):
        sums += tap
    for _, _, tap in windows(np.ones((1, h, w, 1), np.int64), (oh, ow), kernel, stride, padding, (1, 1), 0):
        counts += tap
    require(bool(np.all(counts > 0)), op, "a window holds no input element (arm_avgpool_s8 returns ARG_ERROR)")
    half = counts // 2
    average = np.where(sums > 0, (sums + half) // counts, -((half - sums) // counts))
    return from_memory(fp.wrap8(np.clip(average, -128, 127)), out)


def _max_pool2d(args: dict, out: Tensor, nhwc: bool) -> np.ndarray:
    op = "quantized_max_pool2d" + ("_nhwc" if nhwc else "")
    low, high = args["activation_min"], args["activation_max"]
    kernel, stride, padding = _prepare(op, args, out, nhwc, args["dilation"], (low, high), allow_ceil_mode=False)
    for name in ("input_zero_point", "output_zero_point"):
        require(-128 <= args[name] <= 127, op, f"{name} must be int8")
    require(args["input_zero_point"] == args["output_zero_point"], op, "input and output zero points must match")
    x = args["input"]
    n, _, _, c = dims(x, nhwc)
    _, oh, ow, _ = dims(out, nhwc)
    outside = -(2**40)
    best = np.full((n, oh, ow, c), outside, np.int64)
    for _, _, tap in windows(activations(x, nhwc), (oh, ow), kernel, stride, padding, (1, 1), outside):
        best = np.maximum(best, tap)
    before = memory(out).astype(np.int64).reshape(n, oh, ow, c)
    values = np.where(best > outside, best, before)
    # clamp_output narrows after MAX and again after MIN four lanes at a time, once for the rest;
    # with activation_min <= activation_max both give (int8_t)MIN(MAX(v, min), max).
    return from_memory(fp.wrap8(np.minimum(np.maximum(values, low), high)), out)


# The legacy kernels read NCHW sizes (channels_last memory), the *_nhwc ones NHWC sizes.
quantized_avg_pool2d = partial(_avg_pool2d, nhwc=False)
quantized_avg_pool2d_nhwc = partial(_avg_pool2d, nhwc=True)
quantized_max_pool2d = partial(_max_pool2d, nhwc=False)
quantized_max_pool2d_nhwc = partial(_max_pool2d, nhwc=True)
