"""Simulator runs remembered by what decides them: a rerun of the test app whose lowering gives
the same programs starts no simulator for them.

A run is decided by the program's bytes, the bytes of its inputs, the runner's ELF, the core, the
runner's command line, the simulator (its kind, the content of the binary it resolves to and its
`--version`) and
cortexm.sim's own code (the command it builds). A run that succeeded is stored with its log and
raw outputs; asked again with a limit above the time it took, it is answered from here, and its
result says so (`SimResult.remembered`). A failure is never stored: a timeout follows the
machine's load, and a failure is rerun to be looked at. A coverage run is never answered from
here: its counters are why it runs.

$CORTEXM_RUN_CACHE moves the store (default: the user cache's `runs`); `off` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from functools import cache
from pathlib import Path

from cortexm.base import children, entries, trust, writes
from cortexm.sim.protocol import SimResult
from cortexm.sources import cache_dir, identity

FORMAT = 1
RESULT = "result.json"
OFF = "off"


def root() -> Path | None:
    """The store, or None when it is turned off."""
    given = os.environ.get("CORTEXM_RUN_CACHE")
    if given == OFF:
        return None
    return trust.require_private(Path(given) if given else cache_dir() / "runs", "run store",
                                 "set CORTEXM_RUN_CACHE to a folder of your own (`off`: no store)")


def key(program: bytes | Path, inputs: list[bytes], elf: Path, core, argv: list[str], simulator) -> str:
    digest = hashlib.sha256(f"cortexm run {FORMAT}\0{core.name}\0{type(simulator).__name__}\0".encode())
    digest.update(_executable(simulator.require(core)).encode() + b"\0" + _code().encode())
    digest.update(json.dumps(argv).encode())
    for part in (program if isinstance(program, bytes) else program.read_bytes(), elf.read_bytes(), *inputs):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def recall(entry: str, timeout: float) -> tuple[SimResult, list[bytes]] | None:
    """The stored run and its raw outputs, when there is one intact that took less than `timeout`;
    a damaged entry is removed and the run made again."""
    where = root()
    if where is None or entries.intact(where / entry) is None:
        return None
    folder = where / entry
    record = json.loads((folder / RESULT).read_text())
    if record["seconds"] >= timeout:
        return None
    result = SimResult(record["exit_code"], record["log"], record["command"], record["seconds"], remembered=True)
    return result, [(folder / f"out-{k}.bin").read_bytes() for k in range(record["outputs"])]


def remember(entry: str, result: SimResult, raw: list[bytes]) -> None:
    """Store a run that succeeded; a store that cannot be written is skipped (it only saves time)."""
    where = root()
    if where is None or not result.ok or result.timed_out or (where / entry).is_dir():
        return
    try:
        tmp = entries.new(where)
    except OSError:
        return
    try:
        for k, data in enumerate(raw):
            writes.new_file(tmp / f"out-{k}.bin", data)
        writes.new_file(tmp / RESULT, json.dumps({"exit_code": result.exit_code, "log": result.log, "command": result.command,
                                              "seconds": result.seconds, "outputs": len(raw)}) + "\n")
        entries.publish(tmp, where / entry)
    except OSError:  # a full disk
        pass
    finally:
        writes.remove_tree(tmp)


def _executable(found: str) -> str:
    """The simulator as the content of the binary it resolves to and what it says its version
    is: another QEMU behind the same name (a version manager's shim, an upgrade) is another
    simulator. (The host runs the runner itself: its ELF is in the key already.)"""
    if not os.path.isfile(found):
        return found
    real = os.path.realpath(found)
    stat = os.stat(real)
    return _identity(real, stat.st_size, stat.st_mtime_ns, stat.st_ino)


@cache
def _identity(real: str, _size: int, _mtime: int, _inode: int) -> str:
    """Once per process and binary as it is on disk (the arguments after `real` say which)."""
    digest = hashlib.sha256()
    with open(real, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    try:
        said = children.run([real, "--version"], timeout=30, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT).stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        said = "(no answer to --version)"
    return f"{digest.hexdigest()}\0{said.strip()}"


@cache
def _code() -> str:
    return identity.files_digest(Path(__file__).resolve().parent)
