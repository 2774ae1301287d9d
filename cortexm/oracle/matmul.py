"""Matrix products: quantized_linear (arm_fully_connected_s8) and quantized_batch_matmul
(arm_batch_matmul_s8).

What enters: the schema's arguments (offsets already in CMSIS-NN's convention: added to
the values, so `-zero_point` for the inputs; the batch matmul's `lhs_zero_point` and
`rhs_zero_point` are passed to CMSIS-NN as offsets unchanged) and the output. What
leaves: the int8 values written, per-tensor requantized (epilogue.py).

quantized_linear: acc = bias + sum((x + input_offset) * (w + filter_offset)) over the
last input dimension, weights [out_features, in_features]. A program lowered for an MVE
core carries `kernel_sum` (bias + input_offset * sum(w + filter_offset), precomputed)
instead of the bias; the MVE kernel computes acc = kernel_sum + sum(x * w) +
filter_offset * sum(x) and ignores the bias, and the oracle does the same whenever
`kernel_sum` is given. (The scalar and DSP kernels ignore `kernel_sum`: they read the
bias, so such a program run on a non-MVE core loses its bias.) Only the first
requantize multiplier and shift are read.

quantized_batch_matmul: out[b] = requantize((lhs[b] + lhs_offset) @ (rhs_transposed[b] + rhs_offset).T),
clamped to int8.
"""

from __future__ import annotations

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.epilogue import requantize_to_int8
from cortexm.oracle.tensor import Tensor, from_memory, memory, require


def _first(value) -> int:
    return int((memory(value) if isinstance(value, Tensor) else np.asarray(value)).reshape(-1)[0])


def quantized_linear(args: dict, out: Tensor) -> np.ndarray:
    op = "quantized_linear"
    x, w, bias, kernel_sum = args["input"], args["weights"], args["bias"], args["kernel_sum"]
    require(x.data.dtype == np.int8 and w.data.dtype == np.int8 and out.data.dtype == np.int8, op,
            "input, weights and output must be int8")
    in_features, out_features = x.shape[-1], out.shape[-1]
    batches = x.numel // max(in_features, 1)
    require(w.numel >= in_features * out_features and out.numel == batches * out_features, op,
            "weights or output do not match the input")
    values = memory(x).astype(np.int64).reshape(batches, in_features)
    weights = memory(w).astype(np.int64)[: in_features * out_features].reshape(out_features, in_features)
    filter_offset = int(fp.wrap32(args["filter_offset"]))
    sums: np.ndarray | int
    if kernel_sum is not None:
        require(kernel_sum.data.dtype == np.int32 and kernel_sum.numel >= out_features, op, "kernel_sum must be int32[out]")
        sums = memory(kernel_sum).astype(np.int64)[:out_features]
        acc = sums + values @ weights.T + filter_offset * values.sum(axis=1, keepdims=True)
    else:
        require(bias is None or bias.data.dtype == np.int32, op, "bias must be int32")
        sums = 0 if bias is None else memory(bias).astype(np.int64)[:out_features]
        acc = sums + (values + int(fp.wrap32(args["input_offset"]))) @ (weights + filter_offset).T
    result = requantize_to_int8(acc, _first(args["requantize_multipliers"]), _first(args["requantize_shifts"]),
                                args["output_offset"], args["activation_min"], args["activation_max"])
    return from_memory(result, out)


def quantized_batch_matmul(args: dict, out: Tensor) -> np.ndarray:
    op = "quantized_batch_matmul"
    lhs, rhs = args["lhs"], args["rhs_transposed"]
    require(all(t.data.dtype == np.int8 for t in (lhs, rhs, out)), op, "all tensors must be int8")
    require(lhs.data.ndim == rhs.data.ndim == out.data.ndim == 3, op, "all tensors must be 3-D")
    (batch, rows, inner), (rhs_batch, cols, rhs_inner) = lhs.shape, rhs.shape
    require(batch == rhs_batch and inner == rhs_inner, op, "batch and inner dims must match")
    require(out.shape == (batch, rows, cols), op, "output shape mismatch")
    left = memory(lhs).astype(np.int64).reshape(lhs.shape) + int(fp.wrap32(args["lhs_zero_point"]))
    right = memory(rhs).astype(np.int64).reshape(rhs.shape) + int(fp.wrap32(args["rhs_zero_point"]))
    acc = left @ right.transpose(0, 2, 1)
    result = requantize_to_int8(acc, args["output_multiplier"], args["output_shift"], args["output_zero_point"], -128, 127)
    return from_memory(result, out)
