"""Data movement: transpose (arm_transpose_s8) and pad (arm_pad_s8), in memory order.

What enters: the schema's arguments and the output. What leaves: the int8 values written.

- transpose: the input's memory read as its logical sizes (rank 1 to 4), permuted by
  `perm`, written as the output's sizes. For rank 2 arm_transpose_s8 swaps the two
  dimensions whatever `perm` says (perm [0, 1] transposes too).
- pad: arm_pad_s8 over 4-D dims. The dims are the input's sizes in memory order when the
  tensor is channels_last (or ambiguous: C == 1, or H == W == 1), else its logical sizes,
  1-padded in front for rank < 4; `pre_pad` and `post_pad` are already in that order (the
  AoT pass permutes them); `(int8_t)pad_value` fills.
"""

from __future__ import annotations

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.tensor import CHANNELS_LAST, Tensor, from_memory, is_channels_last, memory, require

MAX_RANK = 4


def _check(op: str, x: Tensor, out: Tensor) -> None:
    require(x.data.dtype == np.int8 and out.data.dtype == np.int8, op, "only int8 tensors are supported")
    require(1 <= x.data.ndim <= MAX_RANK, op, f"expected tensor rank in [1, {MAX_RANK}]")


def transpose(args: dict, out: Tensor) -> np.ndarray:
    op = "transpose"
    x, perm = args["input"], [int(p) for p in args["perm"]]
    _check(op, x, out)
    rank = x.data.ndim
    require(len(perm) == rank, op, "permutation length does not match tensor rank")
    require(sorted(perm) == list(range(rank)), op, "perm is not a permutation of the dimensions")
    values = memory(x).reshape(x.shape)
    if rank == 2:  # arm_transpose_s8 swaps rows and columns whatever perm and the output sizes say
        require(out.numel == x.numel, op, "output and input sizes differ")
        return from_memory(values.T.reshape(-1), out)
    moved = np.transpose(values, perm)
    require(moved.shape == out.shape, op, f"output sizes {out.shape} are not the permuted input's {moved.shape}")
    return from_memory(moved.reshape(-1), out)


def pad(args: dict, out: Tensor) -> np.ndarray:
    op = "pad"
    x = args["input"]
    _check(op, x, out)
    rank = x.data.ndim
    pre, post = [int(v) for v in args["pre_pad"]], [int(v) for v in args["post_pad"]]
    require(len(pre) >= MAX_RANK and len(post) >= MAX_RANK, op, "pre_pad and post_pad need four entries")
    require(min(pre[:MAX_RANK] + post[:MAX_RANK]) >= 0, op, "negative padding")
    sizes = [x.shape[d] for d in CHANNELS_LAST] if is_channels_last(x) else list(x.shape)
    dims = [1] * (MAX_RANK - rank) + sizes
    padded = np.pad(memory(x).reshape(dims), list(zip(pre[:MAX_RANK], post[:MAX_RANK], strict=False)),
                    constant_values=int(fp.wrap8(args["pad_value"])))
    return from_memory(padded.reshape(-1), out)
