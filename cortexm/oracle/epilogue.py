"""The output stage every CMSIS-NN int8 kernel ends with.

What enters: int32 accumulators (int64 arrays holding int32 values, channels last),
the multiplier and shift (per channel: broadcast along the last axis), the output offset
and the activation bounds. What leaves: the int8 values written, as int64.

    acc = arm_nn_requantize(acc, multiplier, shift) + output_offset;
    acc = MIN(MAX(acc, activation_min), activation_max);
    *out = (int8_t)acc;
"""

from __future__ import annotations

import numpy as np

from cortexm.oracle import fixedpoint as fp


def requantize_to_int8(acc, multiplier, shift, output_offset: int, activation_min: int, activation_max: int) -> np.ndarray:
    """The requantize, offset, clamp and narrowing of the int32 accumulators."""
    result = fp.wrap32(fp.requantize(fp.wrap32(acc), fp.wrap32(multiplier), shift) + fp.wrap32(output_offset))
    result = np.minimum(np.maximum(result, fp.wrap32(activation_min)), fp.wrap32(activation_max))
    return fp.wrap8(result)
