"""Tensors as a kernel sees them: logical values plus the order they lie in memory.

What enters: a `Tensor` (values in the logical shape, e.g. NCHW, and the dim order,
outermost first). What leaves: the tensor's memory as the C++ kernel reads it (a flat
array, `memory`), and, for a kernel's result written to memory, the values in the
output's logical shape (`from_memory`).

The cortex_m C++ kernels read sizes in logical order but data in memory order: a conv
kernel takes `input.size(1)` as the channel count and reads the bytes as NHWC, which is
what they are for a channels_last tensor. The oracle does the same, so a tensor whose
dim order a kernel does not expect gives what the kernel would compute from those bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Tensor:
    data: np.ndarray  # values in the LOGICAL shape, numpy dtype
    dim_order: tuple[int, ...]  # memory order, outermost first, e.g. (0, 2, 3, 1) for channels_last

    def __post_init__(self) -> None:
        self.data = np.asarray(self.data)
        self.dim_order = tuple(int(d) for d in self.dim_order)
        if sorted(self.dim_order) != list(range(self.data.ndim)):
            raise ValueError(f"dim_order {self.dim_order} does not fit a tensor of rank {self.data.ndim}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def numel(self) -> int:
        return int(self.data.size)


CHANNELS_LAST = (0, 2, 3, 1)


def contiguous(data) -> Tensor:
    """A tensor in the default (row-major) dim order."""
    data = np.asarray(data)
    return Tensor(data, tuple(range(data.ndim)))


def memory(t: Tensor) -> np.ndarray:
    """The tensor's bytes in memory order, flat."""
    return np.ascontiguousarray(np.transpose(t.data, t.dim_order)).reshape(-1)


def flat(value) -> np.ndarray:
    """An argument a kernel reads as a vector (a tensor's memory, or a list of ints), as int64."""
    return (memory(value) if isinstance(value, Tensor) else np.asarray(value)).astype(np.int64).reshape(-1)


def from_memory(flat: np.ndarray, out: Tensor) -> np.ndarray:
    """Values written to `out`'s memory (flat, memory order), in `out`'s logical shape and dtype."""
    flat = np.asarray(flat).reshape(-1)
    if flat.size != out.numel:
        raise ValueError(f"the kernel writes {flat.size} values, the output holds {out.numel}")
    physical = flat.reshape([out.shape[d] for d in out.dim_order])
    return np.transpose(physical, np.argsort(out.dim_order)).astype(out.data.dtype)


def is_channels_last(t: Tensor) -> bool:
    """cortex_m_ops_common.h is_channels_last_tensor: 4-D, and NHWC or ambiguous (C == 1, or H == W == 1)."""
    if t.data.ndim != 4:
        return False
    n, c, h, w = t.shape
    if c == 1 or (h == 1 and w == 1):
        return True
    return t.dim_order == CHANNELS_LAST


def require(condition: bool, op: str, why: str) -> None:
    """Where the C++ kernel fails (ET_CHECK or context.fail) the oracle raises: nothing is written."""
    if not condition:
        raise ValueError(f"{op}: {why}")
