"""softmax: op_softmax.cpp -> arm_softmax_s8 (arm_nn_softmax_common_s8, s8 output).

What enters: the schema's arguments (int8 input, softmax over the last dimension, the
input multiplier and shift that scale `diff = x - row_max` into Q5.26, diff_min) and the
output. What leaves: the int8 values written (output zero point -128, scale 1/256).

Per memory row of `row_size` values: elements with diff >= diff_min contribute
exp(diff) (EXP_ON_NEG of MUL_SAT(diff << shift, multiplier)) / 2**12 to a sum; each such
element's output is 1/(1 + sum) (ONE_OVER1 after normalising the sum by its leading
zeros) times its exp, divided by 2**(35 - headroom), minus 128, clamped to int8; every
other element is -128. diff == diff_min is included.

Undefined in C, so refused here: a sum of 2**28 or more (about 512 elements at the row's
maximum), where the kernel shifts by 32 or more bits, whose result then depends on the core.
"""

from __future__ import annotations

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.tensor import Tensor, from_memory, memory, require

ACCUM_BITS = 12
OUTPUT_ZERO_POINT = -128  # op_softmax.cpp kCmsisSoftmaxZeroPoint


def softmax(args: dict, out: Tensor) -> np.ndarray:
    op = "softmax"
    x = args["input"]
    require(x.data.dtype == np.int8 and out.data.dtype == np.int8, op, "only int8 tensors are supported")
    rank, dim = x.data.ndim, int(args["dim"])
    require((dim if dim >= 0 else dim + rank) == rank - 1, op, "only last-dimension softmax is supported")
    multiplier, shift, diff_min = args["input_multiplier"], args["input_shift"], args["diff_min"]
    require(-(2**31) <= multiplier < 2**31 and -31 <= shift <= 31, op, "input multiplier or shift out of range")
    require(shift >= 0, op, "negative input_shift (the kernel computes 1 << shift)")
    row_size = x.shape[-1]
    require(row_size > 0 and x.numel // row_size > 0, op, "empty rows")
    require(args["output_zero_point"] == OUTPUT_ZERO_POINT, op, f"expected output zero_point={OUTPUT_ZERO_POINT}")

    values = memory(x).astype(np.int64).reshape(-1, row_size)
    diff = values - values.max(axis=1, keepdims=True)
    taken = diff >= fp.wrap32(diff_min)
    exps = fp.exp_on_negative_values(fp.doubling_high_mult(fp.wrap32(diff * fp.wrap32(1 << shift)), fp.wrap32(multiplier)))
    total = np.where(taken, fp.divide_by_power_of_two(exps, ACCUM_BITS), 0).sum(axis=1, keepdims=True)
    require(bool(np.all(total < 2**28)), op, "sum of exponentials >= 2**28: the kernel shifts by 32 bits or more")
    headroom = fp.clz(total)
    normalised = fp.wrap32(np.where(total > 0, total << np.minimum(headroom, 31), 0) - 2**31)
    shifted_scale = fp.one_over_one_plus_x_for_x_in_0_1(normalised)
    bits_over_unit = np.where(total > 0, ACCUM_BITS - headroom + 23, 0)
    result = fp.divide_by_power_of_two(fp.doubling_high_mult(shifted_scale, exps), bits_over_unit) + OUTPUT_ZERO_POINT
    result = np.where(taken, np.clip(result, -128, 127), -128)
    return from_memory(result.astype(np.int8), out)
