"""quantize_per_tensor and dequantize_per_tensor: float32 arithmetic in ExecuTorch's C++.

What enters: the schema's arguments (op_quantize_per_tensor.cpp, op_dequantize_per_tensor.cpp)
and the output tensor. What leaves: the values the scalar loop writes. Both kernels run
elementwise over memory, so dim orders only need to agree between input and output.

quantize: `zero_point + (int32_t)nearbyint(inv_scale * x)` with `inv_scale = 1.0f / (float)scale`,
all in float32 and rounding half to even, then clamped to [quant_min, quant_max]. A product
outside int32 (or NaN) is converted as the Cortex-M converts (VCVT, or libgcc's
__aeabi_f2iz without an FPU): saturated, NaN to 0; the sum with the zero point wraps.
The M55's Helium loop (16 values at a time) rounds inside a fused multiply-add instead;
this is the scalar loop every core runs for the remainder and every non-MVE core for all.

dequantize: `(float)((int32_t)q - zero_point) * (float)scale`, in float32.
"""

from __future__ import annotations

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.tensor import Tensor, from_memory, memory, require

_QTYPES = {"int8": np.int8, "int16": np.int16}


def _qtype(op: str, dtype: str) -> type:
    name = str(dtype).removeprefix("torch.")
    require(name in _QTYPES, op, f"dtype {dtype} is not int8 or int16")
    return _QTYPES[name]


def _check_bounds(op: str, qtype: type, quant_min: int, quant_max: int) -> None:
    info: np.iinfo = np.iinfo(qtype)
    require(quant_min >= info.min and quant_max <= info.max, op,
            f"[{quant_min}, {quant_max}] exceeds the range of {np.dtype(qtype).name}")


def _float_to_int32(values: np.ndarray) -> np.ndarray:
    """(int32_t) of a float32 holding an integer, as an Arm core converts: saturating, NaN to 0."""
    as64 = np.nan_to_num(values.astype(np.float64), nan=0.0, posinf=2.0**31, neginf=-(2.0**31))
    return np.clip(as64, -(2.0**31), 2.0**31 - 1).astype(np.int64)


def quantize_per_tensor(args: dict, out: Tensor) -> np.ndarray:
    op = "quantize_per_tensor"
    x = args["input"]
    qtype = _qtype(op, args["dtype"])
    require(x.data.dtype == np.float32, op, "input must be float32")
    require(out.data.dtype == qtype, op, "out dtype must match dtype")
    _check_bounds(op, qtype, args["quant_min"], args["quant_max"])
    inv_scale = np.float32(1.0) / np.float32(args["scale"])
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.rint(inv_scale * memory(x))
    q = fp.wrap32(int(fp.wrap32(args["zero_point"])) + _float_to_int32(rounded))
    q = np.minimum(np.maximum(q, int(fp.wrap32(args["quant_min"]))), int(fp.wrap32(args["quant_max"])))
    return from_memory(q.astype(np.int64).astype(qtype), out)


def dequantize_per_tensor(args: dict, out: Tensor) -> np.ndarray:
    op = "dequantize_per_tensor"
    x = args["input"]
    qtype = _qtype(op, args["dtype"])
    require(x.data.dtype == qtype, op, "input dtype must match dtype")
    require(out.data.dtype == np.float32, op, "out must be float32")
    require(args["quant_min"] <= args["zero_point"] <= args["quant_max"], op,
            "zero_point outside [quant_min, quant_max]")
    _check_bounds(op, qtype, args["quant_min"], args["quant_max"])
    centred = memory(x).astype(np.int64) - int(fp.wrap32(args["zero_point"]))
    return from_memory(centred.astype(np.float32) * np.float32(args["scale"]), out)
