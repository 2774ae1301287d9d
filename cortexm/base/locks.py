"""One cortexm process at a time on a place it writes: an output folder, a cache entry.

    locks.hold(Path("out/kws.pte"), "the export to out/kws.pte")           # refused if taken
    with locks.waiting(cache_folder / key, "the cached export of relu"):    # waits its turn
        ...

Two processes writing one folder mix their work (a run compares one program's outputs with
another's reference). A lock is an flock on a file in cortexm's own cache folder named by the
place's resolved path, so a user's folder gets no lock file; the kernel releases it when the
process ends, however it ends, so a kill -9 leaves nothing to clean. A place a user chose is
refused with one line naming the process that holds it; a cache entry is waited for (the
other process is making what this one wants).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from pathlib import Path

from cortexm.base import trust, writes
from cortexm.base.errors import CortexmError

_HELD: dict[str, object] = {}  # lock path -> its open file, for as long as the process lives


def _lock_file(place: Path) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    # Another user who could write here could plant a link where a lock file goes, and the lock
    # would write through it.
    folder = trust.require_private(Path(base) / "cortexm" / "locks", "lock folder",
                                   "set XDG_CACHE_HOME to a folder of your own")
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(str(Path(place).resolve()).encode()).hexdigest()[:32]
    return folder / f"{key}.lock"


def hold(place: Path, what: str, retry: str = "wait for it to finish, or choose another place") -> None:
    """Take the lock of `place` for the rest of this process, or raise naming who has it."""
    path = _lock_file(place)
    if str(path) in _HELD:
        return
    handle = writes.opened(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise CortexmError(f"{what} is being written by another cortexm ({holder}); {retry}") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    _HELD[str(path)] = handle


@contextlib.contextmanager
def waiting(place: Path):
    """Hold the lock of `place` while the block runs, waiting for another process's turn."""
    path = _lock_file(place)
    with writes.stream(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
