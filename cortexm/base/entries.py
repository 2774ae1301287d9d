"""Cache entries kept by content: a folder written whole under a temporary name, its manifest
last, then renamed into place; read back only while every file matches the manifest. The export
cache (cortexm.testing.cache) and the run store (cortexm.sim.memo) keep their entries this way.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from cortexm.base import children, manifest

MANIFEST = "entry.json"  # written last: every other file of the entry, with size and sha256
TMP_PREFIX = ".tmp-"  # .tmp-PID-XXXX: an entry being written by process PID


def intact(folder: Path, damaged: Callable[[str], None] | None = None) -> dict[str, dict] | None:
    """The manifest of the entry at `folder`, None where there is none. A damaged entry (its
    manifest missing or unreadable, a file missing, truncated or changed) is removed, and
    `damaged` told what is wrong."""
    if not folder.is_dir():
        return None
    written = manifest.read(folder / MANIFEST)
    problem = "its manifest is missing or unreadable" if written is None else manifest.damage(folder, written)
    if problem is None:
        return written
    if damaged is not None:
        damaged(problem)
    shutil.rmtree(folder, ignore_errors=True)
    return None


def new(parent: Path) -> Path:
    """A fresh temporary folder under `parent` to write an entry in, once the unfinished entries
    of processes that are gone are removed."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(parent)
    return Path(tempfile.mkdtemp(dir=parent, prefix=f"{TMP_PREFIX}{os.getpid()}-"))


def publish(tmp: Path, final: Path) -> None:
    """Seal `tmp` with its manifest and move it to `final` in one step; where another process
    stored the same entry first, `tmp` is dropped."""
    manifest_data = {manifest.KEY: manifest.of_folder(tmp, skip=MANIFEST)}
    (tmp / MANIFEST).write_text(json.dumps(manifest_data, indent=1) + "\n")
    try:
        tmp.rename(final)
    except OSError:  # another process stored the same entry first
        shutil.rmtree(tmp, ignore_errors=True)


def remove_abandoned(folder: Path) -> None:
    """Removes the unfinished entries of processes that are gone (killed mid-write)."""
    for tmp in folder.glob(f"{TMP_PREFIX}*"):
        pid = tmp.name[len(TMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not children.alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)

