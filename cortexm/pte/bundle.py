"""A program and the files its sidecar names, read as data whatever made them.

    bundle = Bundle.open(Path("kws.pte"))
    bundle.sidecar                          # the sidecar (cortexm.pte.sidecar.Sidecar), or None
    bundle.program()                        # the program, read and parsed once for every stage
    raw = bundle.read(entry.file)           # bytes, checked against the sidecar's manifest

A bundle may come from elsewhere (a colleague's export, a download). Every file name its
sidecar gives is a plain name in the program's own folder (no `..`, no folder, no absolute
path, no symlink); every file is used only when it has the size and sha256 the sidecar's
manifest records for it, and only while the program beside it is the one the manifest
records: a file changed since the export would make a verdict about something else (one
changed element of a reference blames the kernel for it). Any of these is one line naming
the file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cortexm.base import files, manifest
from cortexm.base.errors import CortexmError
from cortexm.pte.sidecar import Sidecar, read_sidecar, sidecar_path

if TYPE_CHECKING:
    from cortexm.pte.program import Program

# Larger than any file cortexm writes into a bundle (a model's saved programs are the largest).
MAX_FILE = 512 * 1024 * 1024


@dataclass
class Bundle:
    pte: Path
    sidecar: Sidecar | None
    _program_checked: bool = field(default=False, repr=False)
    _data: bytes | None = field(default=None, repr=False)
    _program: Program | None = field(default=None, repr=False)
    _references_checked: bool = field(default=False, repr=False)

    @property
    def data(self) -> bytes:
        """The program file's bytes, read once."""
        if self._data is None:
            from cortexm.pte.program import MAX_FILE_SIZE

            path = files.regular(self.pte, "program", MAX_FILE_SIZE)
            try:
                self._data = path.read_bytes()
            except OSError as e:
                raise CortexmError(f"{self.pte}: cannot read ({e.strerror or e})") from None
        return self._data

    def program(self, check: bool = True):
        """The program (cortexm.pte.program.Program), parsed once from `data`; with `check`, its
        references are checked as `cortexm.pte.load` checks them (PteError names the first)."""
        if self._program is None:
            from cortexm.pte.read import parse

            try:
                self._program = parse(self.data, check=False)
            except CortexmError as e:
                raise type(e)(f"{self.pte}: {e}") from None
        if check and not self._references_checked:
            from cortexm.pte.program import PteError
            from cortexm.pte.read import check_references

            try:
                check_references(self._program)
            except PteError as e:
                raise PteError(f"{self.pte}: {e}") from None
            self._references_checked = True
        return self._program

    @classmethod
    def open(cls, pte: str | Path) -> Bundle:
        pte = Path(pte)
        return cls(pte, read_sidecar(pte))

    @property
    def folder(self) -> Path:
        return self.pte.parent

    def names(self, kind: str) -> list[str | None]:
        """The file names the sidecar gives for `kind`: "inputs" (each input's file),
        "references" (each output's reference)."""
        if self.sidecar is None:
            return []
        entries = {"inputs": self.sidecar.inputs, "references": self.sidecar.outputs}[kind]
        return [e.file for e in entries]

    def has(self, name: object) -> bool:
        """`name` is a file of the bundle that is there (read() may still refuse it)."""
        return isinstance(name, str) and manifest.safe_name(name) and "/" not in name and (self.folder / name).is_file()

    def path(self, name: object) -> Path:
        """The path of the bundle's file `name`, once read() has passed it (for a simulator that
        copies the file itself)."""
        self.read(name)  # refuses anything but a plain name of the bundle
        return self.folder / str(name)

    def part(self, name: object) -> Bundle:
        """The bundle's program file `name` (the isolated plan) as a Bundle of its own, without a
        sidecar: its bytes as read() passes them, parsed at most once whoever runs it."""
        return Bundle(self.folder / str(name), None, _data=self.read(name))

    def read(self, name: object) -> bytes:
        """The bytes of the bundle's file `name`, as the sidecar's manifest records them."""
        where = sidecar_path(self.pte).name
        if self.sidecar is None:
            raise CortexmError(f"{self.pte}: no sidecar beside it")
        if not isinstance(name, str) or not manifest.safe_name(name) or "/" in name:
            raise CortexmError(f"{where} names {str(name)[:80]!r} as one of its files: not a file name in its folder")
        written = self.sidecar.written
        if not isinstance(written, dict):
            raise CortexmError(f"{where} records no hashes of its files (an older cortexm wrote it): export it again")
        self._check_program(written, where)
        return _checked(self.folder / name, written.get(name), where)

    def _check_program(self, written: dict, where: str) -> None:
        if self._program_checked:
            return
        listed = written.get(self.pte.name)
        _regular(self.pte, self.pte.name, where)
        if not isinstance(listed, dict) or _digest(self.data) != _expected(listed):
            raise CortexmError(f"{self.pte.name} is not the program {where} was written for (changed since the "
                               "export): its files describe another program; export it again")
        self._program_checked = True


def _checked(path: Path, listed, where: str) -> bytes:
    if not isinstance(listed, dict):
        raise CortexmError(f"{path.name}: {where} does not list it among the files it wrote")
    data = _bytes(path, path.name, where)
    if _digest(data) != _expected(listed):
        raise CortexmError(f"{path.name} changed since {where} was written (its sha256 differs from the one recorded): "
                           "export it again")
    return data


def _bytes(path: Path, name: str, where: str) -> bytes:
    _regular(path, name, where)
    return path.read_bytes()


def _regular(path: Path, name: str, where: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise CortexmError(f"{name}: missing ({where} names it)") from None
    if not stat.S_ISREG(info.st_mode):
        raise CortexmError(f"{name}: not a regular file ({where} names it)")
    files.regular(path, "file of a bundle", MAX_FILE)


def _digest(data: bytes) -> tuple[int, str]:
    return len(data), hashlib.sha256(data).hexdigest()


def _expected(listed: dict) -> tuple:
    return listed.get("size"), listed.get("sha256")
