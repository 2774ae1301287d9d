"""Cache entries kept by content: a folder written whole under a temporary name, its manifest
last, then renamed into place; read back only while every file matches the manifest. The export
cache (cortexm.testing.cache) and the run store (cortexm.sim.memo) keep their entries this way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from cortexm.base import children, manifest, writes

MANIFEST = "entry.json"  # written last: every other file of the entry, with size and sha256
TMP_PREFIX = ".tmp-"  # .tmp-PID-XXXX: an entry being written by process PID
# In every temporary folder cortexm makes, first: `cortexm PID NAME`. A folder of that name
# without it is not cortexm's (a store may be a folder the user keeps other things in) and is
# never removed.
UNFINISHED = ".cortexm-unfinished"


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
    writes.remove_tree(folder)
    return None


def new(parent: Path) -> Path:
    """A fresh temporary folder under `parent` to write an entry in, once the unfinished entries
    of processes that are gone are removed."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(parent)
    folder = writes.new_folder(parent, prefix=f"{TMP_PREFIX}{os.getpid()}-")
    writes.new_file(folder / UNFINISHED, f"cortexm {os.getpid()} {folder.name}\n")
    return folder


def publish(tmp: Path, final: Path) -> None:
    """Seal `tmp` with its manifest and move it to `final` in one step; where another process
    stored the same entry first, `tmp` is dropped."""
    writes.remove(tmp / UNFINISHED)
    manifest_data = {manifest.KEY: manifest.of_folder(tmp, skip=MANIFEST)}
    writes.new_file(tmp / MANIFEST, json.dumps(manifest_data, indent=1) + "\n")
    try:
        writes.move(tmp, final)
    except OSError:  # another process stored the same entry first
        writes.remove_tree(tmp)


def remove_abandoned(folder: Path) -> None:
    """Removes the unfinished entries of cortexm processes that are gone (killed mid-write):
    only folders whose UNFINISHED file says cortexm made them, under that name, in a process
    that no longer runs."""
    for tmp in folder.glob(f"{TMP_PREFIX}*"):
        try:
            words = (tmp / UNFINISHED).read_text(encoding="ascii").split()
        except (OSError, UnicodeDecodeError):
            continue  # not cortexm's
        if (len(words) == 3 and words[0] == "cortexm" and words[1].isdigit() and words[2] == tmp.name
                and not tmp.is_symlink() and not children.alive(int(words[1]))):
            writes.remove_tree(tmp)

