"""The torch-free .pte reader against ExecuTorch's own deserializer, and on damaged files."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cortexm.pte import PteError, load, loader, parse
from cortexm.pte.program import KernelCall, ListValue, TensorValue


@pytest.mark.parametrize("case", ["keyword_spotting", "transpose_conv2d", "softmax", "bmm"])
def test_reader_agrees_with_executorch_deserializer(exported, case):
    from executorch.exir._serialize._program import deserialize_pte_binary

    data = exported(case, "cortex-m55").read_bytes()
    ours = parse(data).plan()
    theirs = deserialize_pte_binary(data).program.execution_plan[0]

    assert [(o.name, o.overload) for o in ours.operators] == [(o.name, o.overload) for o in theirs.operators]
    their_calls = [i.instr_args for i in theirs.chains[0].instructions]
    assert len(ours.instructions) == len(their_calls)
    for mine, their in zip(ours.instructions, their_calls, strict=True):
        assert isinstance(mine, KernelCall)
        assert (mine.op_index, list(mine.args)) == (their.op_index, list(their.args))
    assert list(ours.non_const_buffer_sizes) == list(theirs.non_const_buffer_sizes)
    assert (list(ours.inputs), list(ours.outputs)) == (list(theirs.inputs), list(theirs.outputs))
    for mine, their in zip(ours.values, theirs.values, strict=True):
        val = their.val
        if isinstance(mine, TensorValue):
            assert list(mine.sizes) == list(val.sizes)
            assert list(mine.dim_order) == list(val.dim_order)
            assert mine.scalar_type == int(val.scalar_type)
            assert mine.data_buffer_idx == val.data_buffer_idx
        elif isinstance(mine, ListValue):
            assert list(mine.items) == list(val.items)
        elif type(val).__name__ in _SCALAR_FIELDS:
            theirs_value = getattr(val, _SCALAR_FIELDS[type(val).__name__])
            assert mine == (tuple(theirs_value) if isinstance(theirs_value, list) else theirs_value)
        else:
            assert mine is None and type(val).__name__ == "Null"


_SCALAR_FIELDS = {"Int": "int_val", "Bool": "bool_val", "Double": "double_val", "String": "string_val",
                  "DoubleList": "items", "BoolList": "items"}


def test_truncated_files_raise_pte_error(exported):
    data = exported("conv2d", "cortex-m7").read_bytes()
    for cut in [0, 3, 7, 8, 20, 40, len(data) // 3, len(data) // 2, len(data) - 100, len(data) - 1]:
        with pytest.raises(PteError):
            parse(data[:cut])


def test_bit_flips_never_escape_as_other_errors(exported):
    """Every single-bit corruption either still parses or fails with PteError (no crash, no hang)."""
    data = exported("keyword_spotting", "cortex-m7").read_bytes()
    rng = random.Random(1234)
    program_size = parse(data).program_size
    outcomes = {"parsed": 0, "refused": 0}
    for _ in range(1500):
        flipped = bytearray(data)
        pos = rng.randrange(program_size)  # the flatbuffer part; segment bytes are opaque data
        flipped[pos] ^= 1 << rng.randrange(8)
        try:
            program = parse(bytes(flipped))
        except PteError:
            outcomes["refused"] += 1
            continue
        outcomes["parsed"] += 1
        loader.problems(program)  # what verify reads of a program that parses: no other error either
    # Both happen: a reader that refused everything, or read anything, would be no reader.
    assert outcomes["parsed"] > 0 and outcomes["refused"] > 0, outcomes


@pytest.mark.parametrize("data", [b"", b"hello world, not a program", bytes(range(256)) * 8])
def test_not_a_program(data):
    with pytest.raises(PteError, match="not an ExecuTorch program"):
        parse(data)


def _not_a_file(kind: str, tmp_path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo.pte")
        return tmp_path / "fifo.pte"
    if kind == "directory":
        (tmp_path / "dir.pte").mkdir()
        return tmp_path / "dir.pte"
    if kind == "sparse 3 GiB":
        with open(tmp_path / "huge.pte", "wb") as f:
            f.truncate(3 << 30)  # no blocks written: reading it whole would take 3 GiB
        return tmp_path / "huge.pte"
    return Path("/dev/zero")


@pytest.mark.parametrize("command", ["inspect", "verify"])
@pytest.mark.parametrize("kind", ["fifo", "directory", "/dev/zero", "sparse 3 GiB"])
def test_what_is_not_a_program_file_is_one_error_line(command, kind, tmp_path):
    """A FIFO would block the read forever, /dev/zero never end, a huge file be read whole:
    each is refused from its metadata, in one `error:` line with exit status 2."""
    path = _not_a_file(kind, tmp_path)
    done = subprocess.run([sys.executable, "-m", "cortexm", command, str(path)], capture_output=True, text=True, timeout=120)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert len(errors) == 1 and errors[0].startswith(f"error: {path}: "), done.stderr


def test_load_reads_the_header_then_only_the_flatbuffer(exported, tmp_path, monkeypatch):
    """Like Program::load: the header first, then the program's own bytes, whatever follows them."""
    source = exported("conv2d", "cortex-m7")
    padded = tmp_path / "padded.pte"
    shutil.copy(source, padded)
    with open(padded, "r+b") as f:
        f.truncate((1 << 30) + source.stat().st_size)  # a sparse gigabyte after the segments
    reads: list[int] = []
    real_open = Path.open

    class Counted:
        def __init__(self, f):
            self.f = f

        def read(self, n: int = -1) -> bytes:
            data = self.f.read(n)
            reads.append(len(data))
            return data

        def fileno(self) -> int:
            return self.f.fileno()

        def __enter__(self):
            return self

        def __exit__(self, *_):
            self.f.close()

    original = parse(source.read_bytes())
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: Counted(real_open(self, *a, **k)))
    program = load(padded)
    assert program.plans == original.plans and program.file_size == (1 << 30) + source.stat().st_size
    assert sum(reads) == original.program_size


def test_a_header_that_is_no_programs_is_refused_before_the_rest_is_read(tmp_path):
    path = tmp_path / "zeros.pte"
    with open(path, "wb") as f:
        f.truncate(1 << 30)
    with pytest.raises(PteError, match="not an ExecuTorch program"):
        load(path)
