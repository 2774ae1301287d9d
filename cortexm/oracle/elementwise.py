"""Elementwise kernels: quantized add/mul/div, the LUT activation, minimum and maximum.

What enters: the schema's arguments and the output tensor. What leaves: the values the
kernel writes. These kernels walk memory: add and mul take two equally sized buffers, or
(channel broadcast) a buffer of C values applied to every C-sized run of the other,
which is per-channel only when that other tensor is channels_last; minimum and maximum
read memory as the logical sizes and broadcast over the last four dimensions.

- quantized_add (op_quantized_add.cpp -> arm_elementwise_add_s8): each input
  `((x - zp) << 20)` requantized by its own multiplier and shift, the sum requantized by
  the output's, plus the output zero point, clamped to [activation_min, activation_max].
- quantized_mul (-> arm_elementwise_mul_s8): `(x1 - zp1) * (x2 - zp2)` requantized, plus
  the output zero point, clamped to int8.
- quantized_div (op_quantized_div.cpp, no CMSIS-NN): float32 quotient, `std::round` (half
  away from zero) of quotient * output_scale, plus the zero point, clamped, 0 for a zero divisor.
- quantized_activation: `lut[(uint8_t)(x + 128)]`.
- minimum / maximum (arm_minimum_s8 / arm_maximum_s8): the C code's own broadcast walk
  over the last four dimensions. Where it stays inside both operands it is numpy's
  broadcasting; where it steps outside one (e.g. [1, 2, 1, 1] against [1, 2, 2, 1]: after
  a row taken as a scalar the pointer still moves by the width correction) the C code
  reads past the tensor, and the oracle raises.
"""

from __future__ import annotations

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.epilogue import requantize_to_int8
from cortexm.oracle.tensor import Tensor, from_memory, memory, require

ADD_LEFT_SHIFT = 20  # op_quantized_add.cpp: `const int32_t left_shift = 20`


def _require_int8(op: str, *tensors: Tensor) -> None:
    for t in tensors:
        require(t.data.dtype == np.int8, op, "tensors must be int8")


def _is_channel_broadcast(a: Tensor, b: Tensor) -> bool:
    """cortex_m_ops_common.h is_channel_broadcast."""
    if a.data.ndim != 4 or b.data.ndim != 4 or a.shape[1] != b.shape[1]:
        return False
    return a.numel == a.shape[1] or b.numel == b.shape[1]


def _check_quant(op: str, multiplier: int, shift: int) -> None:
    """cortex_m_ops_common.h validate_single_quant_params."""
    require(-(2**31) <= multiplier <= 2**31 - 1, op, f"multiplier {multiplier} outside int32")
    require(-31 <= shift <= 31, op, f"shift {shift} outside [-31, 31]")


def _runs(op: str, args: dict, out: Tensor, first: tuple, second: tuple) -> tuple:
    """The two operands as the C++ loop hands them to CMSIS-NN, one output run at a time:
    (the long operand, its parameters), (the short operand tiled over the runs, its parameters)."""
    a, b = args["self"], args["other"]
    broadcast = _is_channel_broadcast(a, b)
    if not broadcast:
        require(a.shape == b.shape and out.shape == a.shape, op, "input and output sizes must match")
    x1, x2 = memory(a).astype(np.int64), memory(b).astype(np.int64)
    if broadcast and a.numel < b.numel:  # std::swap of pointers and parameters
        x1, x2, first, second = x2, x1, second, first
    run = a.shape[1] if broadcast else out.numel
    require(out.numel % max(run, 1) == 0 and x1.size >= out.numel and x2.size >= run, op,
            "the output does not split into runs of the operands")
    index = np.arange(out.numel)
    return (x1[index], first), (x2[index % run], second)


def quantized_add(args: dict, out: Tensor) -> np.ndarray:
    op = "quantized_add"
    _require_int8(op, args["self"], args["other"], out)
    params = [(args[f"{p}_zero_point"], args[f"{p}_multiplier"], args[f"{p}_shift"]) for p in ("self", "other", "output")]
    for _, multiplier, shift in params:
        _check_quant(op, multiplier, shift)
    (x1, (zp1, m1, s1)), (x2, (zp2, m2, s2)) = _runs(op, args, out, params[0], params[1])
    _, out_m, out_s = params[2]

    def rescaled(x, zp, m, s):
        shifted = fp.wrap32((x + fp.wrap32(-fp.wrap32(zp))) << ADD_LEFT_SHIFT)
        return fp.requantize(shifted, fp.wrap32(m), s)

    total = fp.wrap32(rescaled(x1, zp1, m1, s1) + rescaled(x2, zp2, m2, s2))
    return from_memory(requantize_to_int8(total, out_m, out_s, args["output_zero_point"],
                                          args["activation_min"], args["activation_max"]), out)


def quantized_mul(args: dict, out: Tensor) -> np.ndarray:
    op = "quantized_mul"
    _require_int8(op, args["self"], args["other"], out)
    _check_quant(op, args["output_multiplier"], args["output_shift"])
    (x1, zp1), (x2, zp2) = _runs(op, args, out, args["self_zero_point"], args["other_zero_point"])
    product = fp.wrap32((x1 + fp.wrap32(-fp.wrap32(zp1))) * (x2 + fp.wrap32(-fp.wrap32(zp2))))
    return from_memory(requantize_to_int8(product, args["output_multiplier"], args["output_shift"],
                                          args["output_zero_point"], -128, 127), out)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """std::round on float32: exact (v - trunc(v) is exact in binary floating point)."""
    whole = np.trunc(v)
    with np.errstate(invalid="ignore"):
        step = (np.abs(v - whole) >= 0.5).astype(np.float32)
    return (whole + np.copysign(step, v)).astype(np.float32)


def quantized_div(args: dict, out: Tensor) -> np.ndarray:
    op = "quantized_div"
    a, b = args["self"], args["other"]
    qtype = out.data.dtype
    require(qtype in (np.int8, np.int16), op, "only int8 and int16 are supported")
    require(a.data.dtype == qtype and b.data.dtype == qtype, op, "input dtypes must match the output")
    require(a.shape == b.shape and out.shape == a.shape, op, "input and output sizes must match")
    numerator = (memory(a).astype(np.int64) - fp.wrap32(args["self_zero_point"])).astype(np.float32)
    denominator = (memory(b).astype(np.int64) - fp.wrap32(args["other_zero_point"])).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quotient = np.where(denominator != 0, numerator / np.where(denominator != 0, denominator, 1), np.float32(0))
        scaled = _round_half_away(quotient.astype(np.float32) * np.float32(args["output_scale"]))
    scaled = scaled + np.float32(fp.wrap32(args["output_zero_point"]))
    info = np.iinfo(qtype)
    low, high = np.float32(info.min), np.float32(info.max)
    clamped = np.where(scaled < high, scaled, high)  # std::min(kActivationMax, scaled)
    clamped = np.where(low < clamped, clamped, low)  # std::max(kActivationMin, ...)
    return from_memory(np.trunc(clamped).astype(np.int64).astype(qtype), out)


def quantized_activation(args: dict, out: Tensor) -> np.ndarray:
    op = "quantized_activation"
    x, lut = args["input"], args["lut"]
    _require_int8(op, x, lut, out)
    require(lut.numel == 256, op, "lut must have 256 entries")
    require(x.numel == out.numel, op, "input and output must have the same numel")
    index = (memory(x).astype(np.int64) + 128) & 0xFF
    return from_memory(memory(lut)[index], out)


def _dims4(t: Tensor) -> tuple[int, int, int, int]:
    """The cmsis_nn_dims the C++ builds: the last four sizes, 1 where the rank is smaller."""
    sizes = (1, 1, 1, 1) + t.shape
    return sizes[-4], sizes[-3], sizes[-2], sizes[-1]


class _Walk:
    """arm_maximum_s8 / arm_minimum_s8's walk over two operands: pointers that advance by the
    C code's steps (the broadcast "diffs" included), and an output written in order."""

    def __init__(self, op: str, v1: np.ndarray, v2: np.ndarray, pick):
        self.op, self.v1, self.v2, self.pick = op, v1, v2, pick
        self.written: list[np.ndarray] = []

    def _read(self, values: np.ndarray, at: int, count: int) -> np.ndarray:
        require(0 <= at and at + count <= values.size, self.op, "the broadcast walk reads outside an operand")
        return values[at: at + count]

    def same(self, p1: int, p2: int, count: int) -> None:  # arm_max_no_broadcast_s8
        self.written.append(self.pick(self._read(self.v1, p1, count), self._read(self.v2, p2, count)))

    def scalar_first(self, p1: int, p2: int, count: int) -> None:  # arm_max_scalar_s8(input_1, input_2)
        self.written.append(self.pick(self._read(self.v1, p1, 1), self._read(self.v2, p2, count)))

    def scalar_second(self, p1: int, p2: int, count: int) -> None:  # arm_max_scalar_s8(input_2, input_1)
        self.written.append(self.pick(self._read(self.v2, p2, 1), self._read(self.v1, p1, count)))


def _broadcast_walk(walk: _Walk, d1: tuple, d2: tuple, d_out: tuple) -> None:
    """The loop nest of arm_maximum_s8 (arm_minimum_s8 is the same), dbf45dbf."""
    (n1, h1, w1, c1), (n2, h2, w2, c2), (on, oh, ow, _) = d1, d2, d_out
    if d1 == d2:
        walk.same(0, 0, n1 * h1 * w1 * c1)
        return
    if n1 * h1 * w1 * c1 == 1:
        walk.scalar_first(0, 0, n2 * h2 * w2 * c2)
        return
    if n2 * h2 * w2 * c2 == 1:
        walk.scalar_second(0, 0, n1 * h1 * w1 * c1)
        return
    width_1_diff = 0 if w1 >= w2 else c1
    width_2_diff = 0 if w2 >= w1 else c2
    height_1_diff = width_1_diff if h1 >= h2 else -w1 * (c1 - width_1_diff)
    height_2_diff = width_2_diff if h2 >= h1 else -w2 * (c2 - width_2_diff)
    batch_1_diff = c1 * w1 * h1 if n1 >= n2 else 0
    batch_2_diff = c2 * w2 * h2 if n2 >= n1 else 0
    base1 = base2 = 0
    for _ in range(on):
        p1, p2 = base1, base2
        if (h1, w1, c1) == (h2, w2, c2):
            walk.same(p1, p2, h1 * w1 * c1)
        elif h1 * w1 * c1 == 1:
            walk.scalar_first(p1, p2, h2 * w2 * c2)
        elif h2 * w2 * c2 == 1:
            walk.scalar_second(p1, p2, h1 * w1 * c1)
        else:
            for _ in range(oh):
                if (w1, c1) == (w2, c2):
                    walk.same(p1, p2, w1 * c1)
                    p1, p2 = p1 + w1 * c1, p2 + w1 * c1
                elif w1 * c1 == 1:
                    walk.scalar_first(p1, p2, w2 * c2)
                    p1, p2 = p1 + 1, p2 + w2 * c2
                elif w2 * c2 == 1:
                    walk.scalar_second(p1, p2, w1 * c1)
                    p1, p2 = p1 + w1 * c1, p2 + 1
                else:
                    for _ in range(ow):
                        if c1 == c2:
                            walk.same(p1, p2, c1)
                            p1, p2 = p1 + c1, p2 + c1
                        elif c1 == 1:
                            walk.scalar_first(p1, p2, c2)
                            p1, p2 = p1 + 1, p2 + c2
                        elif c2 == 1:
                            walk.scalar_second(p1, p2, c1)
                            p1, p2 = p1 + c1, p2 + 1
                        p1, p2 = p1 - width_1_diff, p2 - width_2_diff
                p1, p2 = p1 + height_1_diff, p2 + height_2_diff
        base1, base2 = base1 + batch_1_diff, base2 + batch_2_diff


def _min_max(op: str, args: dict, out: Tensor, pick) -> np.ndarray:
    a, b = args["self"], args["other"]
    _require_int8(op, a, b, out)
    try:
        target = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"{op}: broadcast shape mismatch between inputs") from None
    require(tuple(target) == out.shape, op, f"out must have the broadcast shape {tuple(target)}")
    walk = _Walk(op, memory(a).astype(np.int64), memory(b).astype(np.int64), pick)
    _broadcast_walk(walk, _dims4(a), _dims4(b), _dims4(out))
    values = np.concatenate(walk.written) if walk.written else np.zeros(0, np.int64)
    require(values.size <= out.numel, op, "the broadcast walk writes past the output")
    written = memory(out).astype(np.int64)  # what the walk does not reach keeps its memory
    written[: values.size] = values
    return from_memory(written, out)


def minimum(args: dict, out: Tensor) -> np.ndarray:
    return _min_max("minimum", args, out, np.minimum)


def maximum(args: dict, out: Tensor) -> np.ndarray:
    return _min_max("maximum", args, out, np.maximum)
