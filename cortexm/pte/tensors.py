"""A program's tensors as numpy arrays and back (raw bytes in a dim order, the logical shape), their
digests, outputs compared with a reference in quantization steps (LSB), and a user's .npy read
without unpickling anything: what the simulator, the lowering and the test app all read and write."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from cortexm.base.errors import CortexmError

if TYPE_CHECKING:
    from cortexm.pte.sidecar import Tensor

# numpy types of the program's tensor dtypes (cortexm.pte.program.SCALAR_TYPES names).
DTYPES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "bool": np.bool_, "qint8": np.int8, "quint8": np.uint8, "qint32": np.int32,
}


@dataclass
class OutputDiff:
    index: int
    max_lsb: float  # max |actual - reference| in quantization steps (or raw units without quant)
    mismatches: int  # elements that differ at all
    elements: int
    # (logical index, actual, reference, diff in LSB) of the largest differences
    worst: list[tuple[tuple[int, ...], float, float, float]] = field(default_factory=list)


def to_logical(raw: bytes, dtype: str, shape: Sequence[int], dim_order: Sequence[int]) -> np.ndarray:
    """Bytes laid out in `dim_order` -> an array of the logical (e.g. NCHW) shape."""
    numpy_type = DTYPES.get(dtype)
    if numpy_type is None:
        raise ValueError(f"{dtype} has no numpy type")
    order = list(dim_order) or list(range(len(shape)))
    stored = np.frombuffer(raw, dtype=numpy_type).reshape([shape[d] for d in order])
    return stored.transpose(np.argsort(order))


def to_raw(values: np.ndarray, dim_order: list[int]) -> bytes:
    """An array of the logical shape -> its bytes laid out in `dim_order` (to_logical's inverse)."""
    order = list(dim_order) or list(range(values.ndim))
    return np.ascontiguousarray(values.transpose(order)).tobytes()


def logical(raw: bytes, entry: Tensor) -> np.ndarray:
    """A sidecar input/output's bytes (the program's dim order) in logical order."""
    return to_logical(raw, entry.dtype, entry.shape, entry.dim_order)


def compare(actual: np.ndarray, reference: np.ndarray, entry: Tensor, index: int, worst: int = 5) -> OutputDiff:
    """Differences of one output, in LSB of its quantization when it has one."""
    if actual.shape != reference.shape:
        raise ValueError(f"output {index}: shape {list(actual.shape)} differs from the reference's {list(reference.shape)}")
    quant = entry.quant
    scale = quant.scale if quant and entry.dtype.startswith("float") else 1.0
    diff = np.abs(actual.astype(np.float64) - reference.astype(np.float64)) / scale
    if quant:
        diff = np.round(diff, 3)  # float rounding of dequantized values, not a real difference
    order = np.argsort(diff, axis=None)[::-1][:worst]
    worst_list = [
        (tuple(int(i) for i in np.unravel_index(flat, diff.shape)), float(actual.flat[flat]), float(reference.flat[flat]),
         float(diff.flat[flat]))
        for flat in order if diff.flat[flat] > 0
    ]
    return OutputDiff(index, float(diff.max()) if diff.size else 0.0, int((diff > 0).sum()), int(diff.size), worst_list)


def compare_outputs(outputs: list[np.ndarray], references: list[np.ndarray], entries: Sequence[Tensor]) -> list[OutputDiff]:
    """Every output against its reference, as `cortexm run` shows them and the test app's stage
    `compare` judges them: one OutputDiff per output both have (`entries`: the sidecar's)."""
    return [compare(actual, ref, entry, k)
            for k, (actual, ref, entry) in enumerate(zip(outputs, references, entries, strict=False))]


def reference_outputs(bundle) -> list[np.ndarray]:
    """The reference outputs a bundle (cortexm.pte.bundle.Bundle) holds, each checked against its manifest."""
    return [logical(bundle.read(e.file), e) for e in bundle.sidecar.outputs]


def digests(outputs: list[np.ndarray]) -> list[str]:
    """What identifies outputs across cores: shape, dtype and bytes in logical order."""
    return [hashlib.sha256(f"{a.dtype}{list(a.shape)}".encode() + np.ascontiguousarray(a).tobytes()).hexdigest()
            for a in (np.asarray(v) for v in outputs)]


def read_npy(source: str | Path | BinaryIO, where: str) -> np.ndarray:
    """The array of a .npy file (a path, or a binary file at its start), or one line naming
    `where`: its header is read first, so an array of Python objects (which numpy would unpickle)
    is refused unread."""
    try:
        opened = open(source, "rb") if isinstance(source, (str, Path)) else contextlib.nullcontext(source)
        with opened as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            _, _, dtype = read_header(f)
            if dtype.hasobject:
                raise CortexmError(f"{where}: holds Python objects, not numbers")
            f.seek(0)
            return np.lib.format.read_array(f, allow_pickle=False)
    except CortexmError:
        raise
    except (ValueError, OSError, EOFError) as e:
        raise CortexmError(f"{where}: not a readable .npy file ({e})") from None
