"""ExecuTorch's own Helium (MVE) loops, where they compute otherwise than its scalar ones.

What enters: a quantize_per_tensor call (cortexm.oracle's interface). What leaves: the
values the M55 build writes.

CMSIS-NN's variants are bit-exact with each other; ExecuTorch's C++ is not everywhere.
op_quantize_per_tensor.cpp quantizes 16 values (int8; 8 for int16) at a time on the M55
as `bits(fma(x, inv_scale, 1.5 * 2^23)) - bits(1.5 * 2^23) + zero_point`: the product
rounds once, inside the fused multiply-add, where the scalar loop (every other core, and
the M55's remainder) rounds it to float32 and then again in nearbyint. Values within one
float32 step of a rounding tie quantize to neighbouring integers on the M55 and on the
other cores: a difference of rounding, reproduced here
(cortexm.cases.defects.EXECUTORCH_QUANTIZE_MVE_ROUNDING). The loop also narrows to int16
(truncating) before it clamps, so a value beyond 32767 steps wraps instead of saturating:
a defect (EXECUTORCH_QUANTIZE_MVE_WRAP), not reproduced here; this saturates, as the
kernel means to.
"""

from __future__ import annotations

import numpy as np

from cortexm.oracle import quant
from cortexm.oracle.tensor import Tensor, from_memory, memory

_MAGIC_FLOAT = np.float32(12582912.0)  # 1.5 * 2^23
_MAGIC_INT = 0x4B400000  # its bit pattern


def fma_magic(x: np.ndarray, inv_scale: np.float32) -> np.ndarray:
    """bits(fl32(x * inv_scale + 1.5 * 2^23)) - bits(1.5 * 2^23): the product exact, one rounding."""
    product = x.astype(np.float64) * np.float64(inv_scale)  # exact: two 24-bit mantissas
    out = np.empty(x.shape, np.int64)
    small = np.abs(product) < 2.0**22
    # While 1.5 * 2^23 + p stays in [2^23, 2^24) the float32 rounding is round-half-even
    # of the exact product: computed in integers, so no double rounding.
    out[small] = _round_half_even(x[small], inv_scale)
    with np.errstate(over="ignore", invalid="ignore"):
        total = (product[~small] + np.float64(_MAGIC_FLOAT)).astype(np.float32)  # exact sum, one rounding
    out[~small] = total.view(np.int32).astype(np.int64) - _MAGIC_INT
    return out


def _round_half_even(x: np.ndarray, inv_scale: np.float32) -> np.ndarray:
    """round-half-even(x * inv_scale) for float32 x, exactly, in integers."""
    mx, ex = np.frexp(x.astype(np.float64))
    mi, ei = np.frexp(np.float64(inv_scale))
    ix = np.round(mx * 2.0**24).astype(np.int64)  # x = ix * 2^(ex - 24)
    ii = np.int64(round(mi * 2.0**24))
    product = ix * ii  # < 2^48
    shift = 48 - ex - ei  # the exact value is product * 2^-shift
    sign, mag = np.sign(product), np.abs(product)
    result = np.zeros_like(mag)
    left = shift <= 0
    result[left] = mag[left] << np.minimum(-shift[left], 62)
    right = ~left & (shift < 63)
    s = shift[right]
    q, rem, half = mag[right] >> s, mag[right] & ((np.int64(1) << s) - 1), np.int64(1) << (s - 1)
    result[right] = q + ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    return sign * result


def quantize_per_tensor(args: dict, out: Tensor) -> np.ndarray:
    """quantize_per_tensor as the M55 build runs it: the Helium loop, then the scalar remainder."""
    scalar = quant.quantize_per_tensor(args, out)  # checks the call, and computes the remainder
    qtype = out.data.dtype
    lanes = 16 if qtype == np.int8 else 8
    flat = memory(Tensor(scalar, out.dim_order)).astype(np.int64)
    x = memory(args["input"])
    blocks = (x.size // lanes) * lanes
    if blocks:
        inv_scale = np.float32(1.0) / np.float32(args["scale"])
        q = (fma_magic(x[:blocks], inv_scale) + int(args["zero_point"])).astype(np.int32)  # 32-bit subtraction
        flat[:blocks] = np.clip(q, args["quant_min"], args["quant_max"])
    return from_memory(flat.astype(qtype), out)
