"""Convolutions: quantized_conv2d, quantized_depthwise_conv2d, quantized_transpose_conv2d,
and their explicit-NHWC forms (`*_nhwc`).

What enters: the schema's arguments (activations NCHW-sized channels_last, or NHWC for
`*_nhwc`; weights as the lowering stores them: conv and transposed conv OHWI, depthwise
[1, H, W, C_out]; int32 bias; int32 per-channel multipliers and shifts) and the output.
What leaves: the int8 values CMSIS-NN's scalar kernels write (CMSIS-NN tests its DSP
and MVE kernels bit-exact against the same reference).

acc[oc] = bias[oc] + sum over taps of (x + input_offset) * w, in int32, then
requantized per output channel (epilogue.py). Where a tap falls outside the input:

- conv2d (arm_convolve_wrapper_s8): the 1x1 kernels (no padding) never meet one; the
  general kernel fills its im2col buffer with `(int8_t)-input_offset` and widens to 16
  bits with the offset, so such a tap contributes `(int16_t)((int8_t)-off + off) * w`,
  0 for any offset an int8 zero point gives, and every value is widened
  `(int16_t)(x + (int16_t)off)`. Groups: C_in / weight.size(3) groups, as CMSIS-NN.
- depthwise (arm_depthwise_conv_wrapper_s8, with channel multiplier): the tap is skipped.
- transposed conv: out[o] = sum over i*stride + k - padding == o, the TFLite reference
  semantics, which the wrapper's reverse-conv path (C > 16, strides <= 2) computes;
  outputs past the last input's reach hold the bias alone. The other path,
  arm_transpose_conv_s8 (dbf45dbf), departs from it when padding_h % stride_h != 0
  (CMSIS-NN #230, fixed by 4a8f5b5d), when kernel + output_padding - padding >
  max(kernel, stride) in h or w (those last outputs are never written), and with batch > 1
  when padding_h > kernel_h - stride_h + output_padding_h (rows written past the batch).
  The reference is the semantics, not the defects (tests/oracle/test_oracle.py names them).
  Dilation must be 1 (CMSIS-NN ignores it; the lowering rejects it).

Refused: activation bounds outside int16 (arm_convolve_s8 narrows them for pairs of
outputs but not for a last odd one), and a grouped convolution without a bias.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.epilogue import requantize_to_int8
from cortexm.oracle.tensor import Tensor, flat, from_memory, memory, require
from cortexm.oracle.window import activations, dims, pairs, require_4d, require_channels_last, windows


def _common(op: str, args: dict, out: Tensor, nhwc: bool) -> tuple:
    """The checks every conv kernel makes; returns (bias, multipliers, shifts)."""
    x, w, bias = args["input"], args["weight"], args["bias"]
    require_4d(op, x, w, out)
    require(x.data.dtype == np.int8 and out.data.dtype == np.int8, op, "input and output must be int8")
    require(w.data.dtype == np.int8, op, "weight must be int8")
    require(bias is None or bias.data.dtype == np.int32, op, "bias must be int32")
    channels = dims(out, nhwc)[3]
    multipliers, shifts = flat(args["requantize_multipliers"]), flat(args["requantize_shifts"])
    require(multipliers.size == channels and shifts.size == channels, op, "per-channel params must match output channels")
    require(bias is None or bias.numel >= channels, op, "bias shorter than the output channels")
    bias_values = np.zeros(channels, np.int64) if bias is None else memory(bias).astype(np.int64)[:channels]
    return bias_values, multipliers, shifts


def _finish(args: dict, out: Tensor, acc: np.ndarray, bias, multipliers, shifts) -> np.ndarray:
    result = requantize_to_int8(fp.wrap32(acc + bias), multipliers, shifts, args["output_offset"],
                                args["activation_min"], args["activation_max"])
    return from_memory(result, out)


def _conv2d(args: dict, out: Tensor, nhwc: bool) -> np.ndarray:
    op = "quantized_conv2d" + ("_nhwc" if nhwc else "")
    bias, multipliers, shifts = _common(op, args, out, nhwc)
    x, w = args["input"], args["weight"]
    n, h, wd, c = dims(x, nhwc)
    if c > 1:
        require_channels_last(op, nhwc, x)
    on, oh, ow, oc = dims(out, nhwc)
    if oc > 1:
        require_channels_last(op, nhwc, out)
    stride, padding, dilation = pairs(op, stride=args["stride"], padding=args["padding"], dilation=args["dilation"])
    o, kh, kw, ki = w.shape
    require(ki > 0 and c // ki > 0 and c % (c // ki) == 0 and oc % (c // ki) == 0, op,
            f"{c} input channels do not split into groups of {ki}")
    require(o == oc and on == n, op, "weight and output do not match")
    _require_int16_bounds(op, args)
    groups = c // ki
    require(groups == 1 or args["bias"] is not None, op, "grouped convolution without a bias: arm_convolve_s8 "
            "offsets the null bias pointer per group and reads from it (the lowering supplies a zero bias)")
    offset = int(fp.wrap32(args["input_offset"]))
    values = activations(x, nhwc)
    one_by_one = padding == (0, 0) and (kh, kw) == (1, 1) and dilation == (1, 1) and groups == 1
    if one_by_one:  # arm_convolve_1x1_s8(_fast): int32 arithmetic, nothing outside the input
        require(_extent_fits(oh, ow, stride, h, wd), op, "the output reaches past the input")
        values, fill = values + offset, 0
    else:  # arm_convolve_s8: im2col of int16 values, padding filled with (int8_t)-input_offset
        values = fp.wrap16(values + int(fp.wrap16(offset)))
        fill = int(fp.wrap16(fp.wrap8(-offset) + fp.wrap16(offset)))
    weights = memory(w).astype(np.int64).reshape(groups, oc // groups, kh, kw, ki)
    acc = np.zeros((n * oh * ow, groups, oc // groups), np.int64)
    for i, j, tap in windows(values, (oh, ow), (kh, kw), stride, padding, dilation, fill):
        acc += np.einsum("pgk,gok->pgo", tap.reshape(-1, groups, ki), weights[:, :, i, j, :])
    return _finish(args, out, acc.reshape(n, oh, ow, oc), bias, multipliers, shifts)


def _require_int16_bounds(op: str, args: dict) -> None:
    require(-(2**15) <= args["activation_min"] and args["activation_max"] < 2**15, op,
            "activation bounds outside int16 (arm_nn_mat_mult_kernel_s8_s16 narrows them)")


def _extent_fits(oh: int, ow: int, stride: tuple[int, int], h: int, w: int) -> bool:
    return (oh - 1) * stride[0] < h and (ow - 1) * stride[1] < w


def _depthwise(args: dict, out: Tensor, nhwc: bool) -> np.ndarray:
    op = "quantized_depthwise_conv2d" + ("_nhwc" if nhwc else "")
    bias, multipliers, shifts = _common(op, args, out, nhwc)
    x, w = args["input"], args["weight"]
    n, h, wd, c = dims(x, nhwc)
    on, oh, ow, oc = dims(out, nhwc)
    multiplier = int(args["depth_multiplier"])
    if not nhwc:
        require(n == 1, op, f"batch size must be 1, got {n}")
    require(w.shape[0] == 1, op, "weight dim 0 must be 1 ([1, H, W, C_out])")
    require(w.shape[3] == oc and oc == c * multiplier and on == n, op, "channels do not match")
    require_channels_last(op, nhwc, x, out)
    stride, padding, dilation = pairs(op, stride=args["stride"], padding=args["padding"], dilation=args["dilation"])
    _, kh, kw, _ = w.shape
    # Taps outside the input are skipped: a padding value of -offset contributes (-off + off) * w = 0.
    values = activations(x, nhwc) + int(fp.wrap32(args["input_offset"]))
    values = np.repeat(values, multiplier, axis=3)  # output channel oc reads input channel oc // multiplier
    weights = memory(w).astype(np.int64).reshape(kh, kw, oc)
    acc = np.zeros((n, oh, ow, oc), np.int64)
    for i, j, tap in windows(values, (oh, ow), (kh, kw), stride, padding, dilation, 0):
        acc += tap * weights[i, j]
    return _finish(args, out, acc, bias, multipliers, shifts)


def _transpose_conv2d(args: dict, out: Tensor, nhwc: bool) -> np.ndarray:
    op = "quantized_transpose_conv2d" + ("_nhwc" if nhwc else "")
    bias, multipliers, shifts = _common(op, args, out, nhwc)
    x, w = args["input"], args["weight"]
    require_channels_last(op, nhwc, x, out)
    n, h, wd, c = dims(x, nhwc)
    on, oh, ow, oc = dims(out, nhwc)
    (sh, sw), (ph, pw), dilation = pairs(op, stride=args["stride"], padding=args["padding"], dilation=args["dilation"])
    o, kh, kw, ki = w.shape
    require(o == oc, op, f"weight output channels ({o}) != output channels ({oc})")
    require(ki == c and on == n, op, "weight input channels or batch do not match")
    require(dilation == (1, 1), op, "dilation other than 1 (CMSIS-NN's transposed convolution ignores it)")
    _require_int16_bounds(op, args)  # the reverse-conv path runs arm_convolve_s8
    offset = int(fp.wrap32(args["input_offset"]))
    require(-127 <= offset <= 128, op, "input_offset outside [-127, 128] (CMSIS-NN's two transposed-conv "
            "paths treat the inserted zeros differently there)")
    values = activations(x, nhwc) + offset
    weights = memory(w).astype(np.int64).reshape(oc, kh, kw, c)
    rows, cols = max((h - 1) * sh + kh, ph + oh), max((wd - 1) * sw + kw, pw + ow)
    acc = np.zeros((n, rows, cols, oc), np.int64)
    for i in range(kh):
        for j in range(kw):
            acc[:, i: i + (h - 1) * sh + 1: sh, j: j + (wd - 1) * sw + 1: sw, :] += values @ weights[:, i, j, :].T
    return _finish(args, out, acc[:, ph: ph + oh, pw: pw + ow, :], bias, multipliers, shifts)


# The legacy kernels read NCHW sizes (channels_last memory), the *_nhwc ones NHWC sizes.
quantized_conv2d = partial(_conv2d, nhwc=False)
quantized_conv2d_nhwc = partial(_conv2d, nhwc=True)
quantized_depthwise_conv2d = partial(_depthwise, nhwc=False)
quantized_depthwise_conv2d_nhwc = partial(_depthwise, nhwc=True)
quantized_transpose_conv2d = partial(_transpose_conv2d, nhwc=False)
quantized_transpose_conv2d_nhwc = partial(_transpose_conv2d, nhwc=True)
