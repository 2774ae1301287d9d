"""The kernels as one CMSIS-NN variant runs them: SCALAR (Cortex-M3), DSP (M4, M7, M33),
MVE (M55).

What enters: the variant's name. What leaves: a KERNELS-like table for it.

The M55 build also runs ExecuTorch's own Helium loops, which round quantize_per_tensor
otherwise than its scalar loop (cortexm.oracle.helium): `helium=False` leaves them out, for
comparing with what rounds as the scalar loop does (operators.py).

CMSIS-NN's variants compute the same values, with one exception in what ExecuTorch hands
them: arm_fully_connected_s8 reads the bias on SCALAR and DSP and ignores the kernel_sum
(ctx.buf); on MVE it reads the kernel_sum and ignores the bias, and fails (ARG_ERROR)
without one. `KERNELS` evaluates a quantized_linear by the form its arguments carry (a
program on the core it was lowered for); these tables evaluate it as the named variant
does, so a program lowered for one variant and run on another is computed as it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cortexm.oracle import KERNELS
from cortexm.oracle.tensor import Tensor, require

BACKENDS = ("SCALAR", "DSP", "MVE")
LINEAR = "cortex_m::quantized_linear"
QUANTIZE = "cortex_m::quantize_per_tensor"


def _linear_reading_bias(args: dict[str, Any], out: Tensor) -> np.ndarray:
    return KERNELS[LINEAR](dict(args, kernel_sum=None), out)


def _linear_reading_kernel_sum(args: dict[str, Any], out: Tensor) -> np.ndarray:
    require(args["kernel_sum"] is not None, "quantized_linear",
            "no kernel_sum: the MVE arm_fully_connected_s8 returns ARG_ERROR without ctx.buf")
    return KERNELS[LINEAR](dict(args, bias=None), out)


def kernels_for(backend: str, helium: bool = True) -> dict[str, Callable[[dict[str, Any], Tensor], np.ndarray]]:
    """KERNELS as a core with CMSIS-NN variant `backend` ("SCALAR", "DSP" or "MVE") computes them."""
    from cortexm.oracle import helium as helium_loops

    name = backend.upper()
    if name not in BACKENDS:
        raise ValueError(f"unknown CMSIS-NN backend {backend!r} (expected one of {', '.join(BACKENDS)})")
    table = _TABLES.get(name)
    if table is None:
        table = _TABLES[name] = {**KERNELS, LINEAR: _linear_reading_kernel_sum if name == "MVE" else _linear_reading_bias}
    if helium and name == "MVE":
        return {**table, QUANTIZE: helium_loops.quantize_per_tensor}
    return table


_TABLES: dict[str, dict] = {}
