"""Reading a .pte file: its header and flatbuffer (cortexm.pte.program), then, unless told
otherwise, the references its users could trip over (cortexm.pte.loader)."""

from __future__ import annotations

import os
from pathlib import Path

from cortexm.base import files
from cortexm.pte import loader
from cortexm.pte.program import HEAD_BYTES, MAX_FILE_SIZE, Program, PteError, head, read


def load(path: str | Path, check: bool = True) -> Program:
    """Read and check a .pte file; raises PteError (or CortexmError, for what is not a regular
    file) with a one-line reason. Like Program::load it reads the header first, then only the
    flatbuffer: the segments' bytes are not needed, only where they end."""
    path = files.regular(path, "program", MAX_FILE_SIZE)  # a FIFO, a device, a directory: nothing read
    try:
        with path.open("rb") as f:
            file_size = os.fstat(f.fileno()).st_size
            first = f.read(HEAD_BYTES)
            program_size = head(first, file_size)[0]
            data = first + f.read(max(program_size - len(first), 0))
        return parse(data, check, file_size)
    except OSError as e:
        raise PteError(f"{path}: cannot read ({e.strerror or e})") from None
    except PteError as e:
        raise PteError(f"{path}: {e}") from None


def parse(data: bytes, check: bool = True, file_size: int | None = None) -> Program:
    """The program in `data`: a whole file, or (given the file's `file_size`) its bytes up to
    the end of the flatbuffer, what `load` reads. Damage to the flatbuffer itself raises PteError; with
    `check`, so does the first reference the reader's users could trip over (a value, operator or
    delegate index out of range, a value or instruction of unknown type, a planned tensor
    outside its buffer). Without it those are left for cortexm.pte.loader to report."""
    program = read(data, file_size)
    if check:
        check_references(program)
    return program


def check_references(program: Program) -> None:
    """Raises PteError for the first reference of `program` its readers could trip over (what
    `parse` checks; a program read without the check is checked later with this)."""
    for plan in program.plans:
        first = next(iter(loader.reference_problems(plan)), None)
        if first is not None:
            raise PteError(f"method {plan.name!r}: {first}")
