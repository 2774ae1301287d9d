"""An evaluation set: inputs the user expects the model to see, to measure its accuracy on.

    DIR/            a folder: each .npy file (in name order) one sample of a one-input model, or
                    a stack of them; DIR/labels.npy, if there, one class per sample
    SET.npz         `x` (a one-input model) or `x0`, `x1`, ... (one per input), each a stack of
                    samples; `y`, if there, one class per sample
    FILE.npy        one file of such a folder

A sample has the shape of the model's example input; a stack has one more leading dimension.
Where the example's first dimension is 1 (a batch of one) it may be left out: [16] is one
sample and [N, 16] a stack of N for an example input [1, 16]. Labels are integers, one per row of the first classifier output
over the whole set (one per sample for a batch of one), in the same order.

Everything is read before anything is measured, as numbers only: a .npy's header first, so
an array of Python objects is refused unread (cortexm.pte.tensors.read_npy), and an .npz
member by member, its sizes checked before any is inflated. A set that cannot be read is one
line. `digest` is the files' names and bytes as read: what decides a verdict measured on them,
so the export cache keys on it (cortexm.testing.cache).
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cortexm.base import files
from cortexm.base.errors import CortexmError
from cortexm.pte.tensors import read_npy

# The inputs of a microcontroller model are small: a set larger than this is not one.
MAX_BYTES = 1 << 30
LABELS = "labels.npy"  # a folder's labels
WHAT = "an evaluation set is a folder of .npy files (and labels.npy), one .npz (x or x0, x1, ...; y) or one .npy"


@dataclass(frozen=True)
class EvalSet:
    path: str  # where it was read
    name: str  # the folder's or the file's name, as the sidecar records it
    digest: str  # sha256 of the files' names and bytes
    inputs: tuple[tuple[np.ndarray, ...], ...]  # per model input, its arrays in order
    labels: np.ndarray | None  # int64, flat


def read(path: str | Path) -> EvalSet:
    """The evaluation set at `path`, or one line saying why it is none."""
    path = Path(path)
    if path.is_dir():
        return _folder(path)
    files.regular(path, "evaluation set", MAX_BYTES)
    if path.suffix == ".npz":
        return _npz(path)
    if path.suffix == ".npy":
        data = path.read_bytes()
        return EvalSet(str(path), path.name, _digest([(path.name, data)]), ((_array(data, str(path)),),), None)
    raise CortexmError(f"{path}: {WHAT}")


def _folder(path: Path) -> EvalSet:
    names = sorted(p.name for p in path.iterdir() if p.suffix == ".npy" and not p.name.startswith("."))
    if not [n for n in names if n != LABELS]:
        raise CortexmError(f"{path}: no .npy file in it ({WHAT})")
    read, total = [], 0
    for name in names:
        total += files.regular(path / name, "evaluation sample", MAX_BYTES).stat().st_size
        if total > MAX_BYTES:
            raise CortexmError(f"{path}: more than {MAX_BYTES} B of .npy files, larger than any evaluation set cortexm reads")
        read.append((name, (path / name).read_bytes()))
    arrays = {name: _array(data, str(path / name)) for name, data in read}
    labels = _labels(arrays.pop(LABELS), str(path / LABELS)) if LABELS in arrays else None
    return EvalSet(str(path), path.name, _digest(read), (tuple(arrays.values()),), labels)


_INPUT = re.compile(r"x(\d*)")


def _npz(path: Path) -> EvalSet:
    data = path.read_bytes()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if sum(m.file_size for m in members) > MAX_BYTES:
                raise CortexmError(f"{path}: its arrays hold more than {MAX_BYTES} B, larger than any evaluation set "
                                   "cortexm reads")
            arrays = {}
            for member in members:
                key = member.filename.removesuffix(".npy")
                if member.filename == key or not (key == "y" or _INPUT.fullmatch(key)):
                    raise CortexmError(f"{path}: holds {member.filename!r}; {WHAT}")
                with archive.open(member) as f:
                    arrays[key] = _array(f.read(), f"{path}:{key}")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as e:
        raise CortexmError(f"{path}: not a readable .npz file ({e})") from None
    labels = _labels(arrays.pop("y"), f"{path}:y") if "y" in arrays else None
    if list(arrays) == ["x"]:
        inputs = [arrays["x"]]
    else:
        count = len(arrays)
        if not count or "x" in arrays or sorted(arrays) != sorted(f"x{k}" for k in range(count)):
            raise CortexmError(f"{path}: holds {', '.join(sorted(arrays)) or 'no inputs'}; the inputs are x (one) "
                               "or x0 ... xN-1, one per model input")
        inputs = [arrays[f"x{k}"] for k in range(count)]
    return EvalSet(str(path), path.name, _digest([(path.name, data)]), tuple((a,) for a in inputs), labels)


def _array(data: bytes, where: str) -> np.ndarray:
    """A .npy's numbers, finite."""
    array = read_npy(io.BytesIO(data), where)
    if array.dtype.kind not in "biuf":
        raise CortexmError(f"{where}: holds {array.dtype} values, not numbers")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise CortexmError(f"{where}: holds NaN or infinite values")
    return array


def _labels(array: np.ndarray, where: str) -> np.ndarray:
    if array.dtype.kind not in "iu":
        raise CortexmError(f"{where}: labels are class indices (integers), not {array.dtype} values")
    if array.size and int(array.min()) < 0:
        raise CortexmError(f"{where}: a label is negative ({int(array.min())}); labels are class indices")
    return array.astype(np.int64).reshape(-1)


def _digest(named: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in named:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def samples(evaluation: EvalSet, examples: tuple) -> list[tuple]:
    """The set as input tuples of the model whose example inputs are `examples` (torch tensors):
    each of its dtype and memory format; one line where the set does not fit them."""
    import torch

    if len(evaluation.inputs) != len(examples):
        raise CortexmError(f"it holds {len(evaluation.inputs)} input{'s' if len(evaluation.inputs) != 1 else ''}, "
                           f"the model takes {len(examples)}")
    columns = []
    for k, (arrays, example) in enumerate(zip(evaluation.inputs, examples, strict=True)):
        shape = list(example.shape)
        stacks = [_stack(a, shape, k) for a in arrays]
        columns.append(np.concatenate(stacks) if len(stacks) > 1 else stacks[0])
    counts = {len(c) for c in columns}
    if len(counts) != 1:
        raise CortexmError(f"its inputs hold {', '.join(str(len(c)) for c in columns)} samples: one count for all inputs")
    tensors = []
    for k, (column, example) in enumerate(zip(columns, examples, strict=True)):
        dtype = example.dtype
        if not dtype.is_floating_point:
            cast = column.astype(torch.empty((), dtype=dtype).numpy().dtype)
            if (cast.astype(np.float64) != column.astype(np.float64)).any():
                raise CortexmError(f"input {k}: values that are not {str(dtype).removeprefix('torch.')}, the model's input dtype")
            column = cast
        tensor = torch.from_numpy(np.ascontiguousarray(column)).to(dtype)
        tensors.append(tensor)
    channels_last = [t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
                     for t in examples]
    return [tuple(t[n].contiguous(memory_format=torch.channels_last) if last else t[n].contiguous()
                  for t, last in zip(tensors, channels_last, strict=True)) for n in range(counts.pop())]


def _stack(array: np.ndarray, shape: list[int], k: int) -> np.ndarray:
    """`array` as a stack [N, *shape]: one sample, a stack, or a batch of one's rows."""
    if list(array.shape) == shape:
        return array[None]
    if shape and shape[0] == 1 and list(array.shape) == shape[1:] and array.ndim:  # one sample, its batch of one left out
        return array[None, None]
    if list(array.shape[1:]) == shape:
        return array
    if shape and shape[0] == 1 and list(array.shape[1:]) == shape[1:]:
        return array[:, None]
    rows = f" or [N, {', '.join(map(str, shape[1:]))}]" if shape and shape[0] == 1 else ""
    raise CortexmError(f"input {k}: an array of shape {list(array.shape)}; the model's input {k} is {shape} (one sample "
                       f"{shape}, a stack [N, {', '.join(map(str, shape))}]{rows})")
