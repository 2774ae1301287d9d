"""Every file cortexm writes, moves or removes goes through here (tests/project/test_layout.py fails on
any other module that opens a file for writing).

    writes.atomic(path, data)              # whole or not at all; a link at `path` is replaced
    with writes.stream(log) as f: ...      # a log or a growing file, never through a link
    writes.copy(src, dst); writes.move(a, b); writes.remove(path); writes.remove_tree(folder)

What every primitive guarantees:
- nothing is written through a symbolic link: a link where the file goes is replaced (atomic,
  move) or refused (stream, copy), never followed to wherever it points;
- with `inside`, the file's folder, links resolved, is that folder or one below it: a folder
  link on the way that leads out is refused (one line naming it);
- what a primitive removes is what its caller names; whose files those are (a manifest of
  cortexm's, a cache entry, a marker in a temporary folder) is the caller's rule, checked
  before it calls here: cortexm.base.manifest for folders a user keeps files in, the caches'
  own rules for theirs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from cortexm.base.errors import CortexmError

_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _inside(path: Path, inside: Path | None) -> None:
    if inside is None:
        return
    root = os.path.realpath(inside)
    where = os.path.realpath(path.parent)
    if where != root and not where.startswith(root.rstrip(os.sep) + os.sep):
        raise CortexmError(f"{path}: its folder leads out of {inside} (a link on the way); nothing is written there")


def atomic(path: Path | str, data: bytes | str, inside: Path | None = None) -> None:
    """`path` holds `data` whole, or is as it was (a symlink at `path` is replaced, never followed)."""
    atomic_all([(Path(path), data.encode() if isinstance(data, str) else data)], inside)


def atomic_all(files: list[tuple[Path, bytes]], inside: Path | None = None) -> None:
    """Every file whole, or none changed: all are written beside their place first, under names
    no user chose (a full disk stops it there, and the partial files go), then renamed into
    place in order, the last one last (a manifest that vouches for the others)."""
    written: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            _inside(path, inside)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".partial")
            written.append((tmp, path))
            os.fchmod(fd, 0o666 & ~_UMASK)  # as a plain open() would make it, not mkstemp's 0600
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except BaseException:
        for tmp, _path in written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    for tmp, path in written:
        os.replace(tmp, path)


def new_file(path: Path | str, data: bytes | str) -> None:
    """`data` into `path` in a folder cortexm made for it (a run folder, a cache entry being
    written): plain, not atomic, and never through a link."""
    with stream(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def stream(path: Path | str, mode: str = "w", inside: Path | None = None, **kwargs: Any) -> Iterator[IO[Any]]:
    """`path` opened for writing (`mode` "w", "wb", "a", "ab", "a+"), never through a link at it:
    for logs and files written as work goes on."""
    with opened(path, mode, inside, **kwargs) as f:
        yield f


def opened(path: Path | str, mode: str = "w", inside: Path | None = None, **kwargs: Any) -> IO[Any]:
    """As `stream`, for a file kept open beyond one block (a lock file); the caller closes it."""
    path = Path(path)
    _inside(path, inside)
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    if "+" in mode:
        flags = (flags & ~os.O_WRONLY) | os.O_RDWR
    flags |= os.O_APPEND if "a" in mode else os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CortexmError(f"{path} is a link; cortexm writes nothing through one") from None
        raise
    return os.fdopen(fd, mode, **kwargs)


def copy(src: Path | str, dst: Path | str, inside: Path | None = None) -> None:
    """The content of `src` into `dst` (its mode too), never through a link at `dst`."""
    dst = Path(dst)
    _inside(dst, inside)
    if dst.is_symlink():
        dst.unlink()
    with open(src, "rb") as source, stream(dst, "wb") as target:
        shutil.copyfileobj(source, target)
    shutil.copymode(src, dst)


def copy_tree(src: Path | str, dst: Path | str) -> None:
    """A new folder `dst` with what `src` holds (links copied as links, never followed)."""
    shutil.copytree(src, dst, symlinks=True)


def link(target: Path | str, at: Path | str) -> None:
    """A symbolic link at `at` (which must not exist) to `target`."""
    os.symlink(target, at)


def move(src: Path | str, dst: Path | str) -> None:
    """`src` renamed to `dst` in one step (a file, or a folder over a missing or empty one)."""
    os.replace(src, dst)


@contextlib.contextmanager
def temporary_folder(parent: Path | str | None = None, prefix: str = "cortexm-") -> Iterator[Path]:
    """A fresh folder of cortexm's own for the block, removed with all in it after."""
    folder = new_folder(parent, prefix)
    try:
        yield folder
    finally:
        remove_tree(folder)


def remove_folder(folder: Path | str) -> None:
    """`folder` gone if it is empty (OSError otherwise)."""
    Path(folder).rmdir()


def new_folder(parent: Path | str | None = None, prefix: str = "cortexm-") -> Path:
    """A fresh folder of cortexm's own (a name no one else has), under `parent` or the system's."""
    return Path(tempfile.mkdtemp(dir=parent, prefix=prefix))


def remove(path: Path | str) -> None:
    """The file (or link) `path` gone, if it is there."""
    Path(path).unlink(missing_ok=True)


def remove_tree(folder: Path | str) -> None:
    """`folder` and all in it gone (a link is removed as a link, never followed)."""
    folder = Path(folder)
    if folder.is_symlink():
        folder.unlink()
        return
    shutil.rmtree(folder, ignore_errors=True)


def probe(folder: Path | str) -> None:
    """One byte written to a new file in `folder` and removed again (OSError: it cannot be written)."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=".cortexm-probe-")
    try:
        os.write(fd, b"\0")
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(name)


def unpack(tar, folder: Path, refuse) -> None:
    """Every member of the tarfile `tar` into `folder`: with Python's "data" filter where this
    Python has it (3.10.12, 3.11.4 and later); before those, each member passed to `refuse`
    (which raises for one that could reach outside `folder`, checked against what is on disk by
    then) and unpacked without setuid bits, group or other writes, or owners."""
    import tarfile

    if hasattr(tarfile, "data_filter"):
        tar.extractall(folder, filter="data")
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    for member in tar:
        refuse(member)
        member.mode &= 0o755
        member.uid = member.gid = 0
        member.uname = member.gname = ""
        tar.extract(member, folder, set_attrs=not member.issym(), numeric_owner=True)


def save_npy(path: Path | str, array, inside: Path | None = None) -> None:
    """`array` as a .npy file (no pickled objects), written whole."""
    import io

    import numpy as np

    data = io.BytesIO()
    np.save(data, array, allow_pickle=False)
    atomic(path, data.getvalue(), inside)
