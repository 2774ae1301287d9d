"""Sliding windows over NHWC memory, shared by the convolution and pooling kernels.

What enters: 4-D tensors and window geometry. What leaves: int64 arrays in NHWC order
(the order CMSIS-NN reads and writes), and, per kernel tap, the input values that tap
meets at every output position.

A legacy kernel (`nhwc=False`) takes its sizes as NCHW (`size(1)` is C) and its memory as
NHWC, which a channels_last tensor holds; a `*_nhwc` kernel takes NHWC sizes and memory.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cortexm.oracle.tensor import Tensor, is_channels_last, memory, require


def dims(t: Tensor, nhwc: bool) -> tuple[int, int, int, int]:
    """(N, H, W, C) as the kernel reads them from the tensor's sizes."""
    if nhwc:
        n, h, w, c = t.shape
    else:
        n, c, h, w = t.shape
    return n, h, w, c


def activations(t: Tensor, nhwc: bool) -> np.ndarray:
    """The tensor's memory read as NHWC of its (N, H, W, C), int64."""
    return memory(t).astype(np.int64).reshape(dims(t, nhwc))


def require_4d(op: str, *tensors: Tensor) -> None:
    require(all(t.data.ndim == 4 for t in tensors), op, "tensors must be 4-D")


def require_channels_last(op: str, nhwc: bool, *tensors: Tensor) -> None:
    """The legacy kernels' check (a *_nhwc kernel's tensors are NHWC by their sizes)."""
    if not nhwc:
        require(all(is_channels_last(t) for t in tensors), op, "tensors must use channels_last dimension order")


def pairs(op: str, **values) -> list[tuple[int, int]]:
    """stride/padding/... arguments: each a list of two ints (h, w)."""
    out = []
    for name, value in values.items():
        require(len(value) == 2, op, f"{name} must have length 2")
        out.append((int(value[0]), int(value[1])))
    return out


def extent(out_size: int, kernel: int, stride: int, dilation: int) -> int:
    """Input rows (or columns) the windows of `out_size` outputs span, padding included."""
    return (out_size - 1) * stride + (kernel - 1) * dilation + 1 if out_size > 0 else 0


def padded(x: np.ndarray, before: tuple[int, int], size: tuple[int, int], fill: int) -> np.ndarray:
    """x (N, H, W, C) placed at row/column `before` in an (N, *size, C) field of `fill`."""
    n, h, w, c = x.shape
    field = np.full((n, size[0], size[1], c), fill, dtype=np.int64)
    top, left = before
    rows = slice(max(top, 0), min(top + h, size[0]))
    cols = slice(max(left, 0), min(left + w, size[1]))
    if rows.start < rows.stop and cols.start < cols.stop:
        field[:, rows, cols, :] = x[:, rows.start - top: rows.stop - top, cols.start - left: cols.stop - left, :]
    return field


def windows(x: np.ndarray, out_hw: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int],
            padding: tuple[int, int], dilation: tuple[int, int], fill: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """For each tap (kh, kw): the (N, OH, OW, C) input values it meets, `fill` outside the input."""
    (oh, ow), (kh_n, kw_n), (sh, sw), (ph, pw), (dh, dw) = out_hw, kernel, stride, padding, dilation
    if oh <= 0 or ow <= 0:
        return
    field = padded(x, (ph, pw), (extent(oh, kh_n, sh, dh), extent(ow, kw_n, sw, dw)), fill)
    for kh in range(kh_n):
        for kw in range(kw_n):
            yield kh, kw, field[:, kh * dh: kh * dh + (oh - 1) * sh + 1: sh, kw * dw: kw * dw + (ow - 1) * sw + 1: sw, :]
