"""A bit-exact integer reference for the cortex_m operators, in numpy (no torch).

What enters: one kernel call of a lowered program, `KERNELS[name](args, out)`. `name` is
the operator without overload ("cortex_m::quantized_conv2d"); `args` maps the schema's
argument names (operators.yaml, functional form, without `out`) to values: a `Tensor`
for a tensor (None for an absent optional one), Python ints, floats and bools, lists of
ints, and a ScalarType as the torch dtype's name ("int8"); `out` is a `Tensor` of the
output's logical shape, dtype and dim order, holding what its memory holds before the
call (zeros, normally).

What leaves: the output's values in its logical shape and dtype, bit for bit what
ExecuTorch's C++ kernel (backends/cortex_m/ops/op_*.cpp at cff6f4dd) writes through
CMSIS-NN's scalar code (dbf45dbf), derived from the integer semantics CMSIS-NN
implements (TFLite Micro's reference kernels). A call the C++ kernel would refuse
(ET_CHECK or context.fail) raises ValueError naming the reason; so does a call whose
result C leaves undefined. Where the C++ reads memory in an order other than the
logical one (conv and pool read NHWC, pad and transpose work on memory), the oracle
reads the same bytes; see tensor.py.

Deliberate choices, each stated in its module: the transposed convolution is the
semantics CMSIS-NN is tested against, not dbf45dbf's defects (conv.py); a
quantized_linear that carries a kernel_sum (lowered for MVE) is evaluated as the MVE
kernel evaluates it (matmul.py; backends.kernels_for gives the table of one CMSIS-NN
variant, for a program run on a core it was not lowered for); the five `*_nhwc`
operators (executorch 1.5.1, whose C++ is not in the cff6f4dd tree) read NHWC sizes and
otherwise make the calls of their legacy counterparts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cortexm.oracle import conv, elementwise, matmul, movement, pool, quant, softmax
from cortexm.oracle.tensor import Tensor

_MODULE_KERNELS = {
    quant: ("quantize_per_tensor", "dequantize_per_tensor"),
    elementwise: ("quantized_add", "quantized_mul", "quantized_div", "quantized_activation", "minimum", "maximum"),
    matmul: ("quantized_linear", "quantized_batch_matmul"),
    softmax: ("softmax",),
    movement: ("transpose", "pad"),
    conv: ("quantized_conv2d", "quantized_conv2d_nhwc", "quantized_depthwise_conv2d",
           "quantized_depthwise_conv2d_nhwc", "quantized_transpose_conv2d", "quantized_transpose_conv2d_nhwc"),
    pool: ("quantized_avg_pool2d", "quantized_avg_pool2d_nhwc", "quantized_max_pool2d", "quantized_max_pool2d_nhwc"),
}

KERNELS: dict[str, Callable[[dict[str, Any], Tensor], np.ndarray]] = {
    f"cortex_m::{name}": getattr(module, name) for module, names in _MODULE_KERNELS.items() for name in names
}

# Operators the oracle cannot reproduce bit for bit, with why. Every cortex_m operator is covered.
UNSUPPORTED_REASON: dict[str, str] = {}

__all__ = ["KERNELS", "Tensor", "UNSUPPORTED_REASON"]
