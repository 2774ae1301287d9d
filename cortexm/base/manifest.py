"""Manifests: the files cortexm wrote, each with its size and sha256.

    written = manifest.of_files(folder, ["x.pte", "x.input-0.bin"])   # {name: {size, sha256}}
    manifest.damage(folder, written)        # None, or "x.pte has 10 B, 4126 B were written"

One record, two uses:
- ownership: cortexm replaces or deletes only files that a manifest it wrote lists with the
  content they still have. Anything else is the user's, replaced only with --force, and the
  check runs before the expensive work, so a refusal costs nothing.
- integrity: a cache entry is used only when every file its manifest lists is there, whole. The
  manifest is written last, so an entry without one is unfinished or older than manifests.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cortexm.base.errors import CortexmError

KEY = "written"  # in a sidecar, build.json, provenance.json: {relative path: {size, sha256}}
NAME_MAX = 255


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def entry(path: Path) -> dict:
    return {"size": Path(path).stat().st_size, "sha256": sha256(path)}


def of_files(folder: Path, names: list[str]) -> dict[str, dict]:
    """The manifest of files just written in `folder`."""
    return {name: entry(Path(folder) / name) for name in names}


def of_folder(folder: Path, skip: str = "") -> dict[str, dict]:
    """The manifest of every file under `folder` but `skip` (the file that will hold it)."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): entry(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).as_posix() != skip}


def read(path: Path) -> dict[str, dict] | None:
    """The manifest a JSON file cortexm wrote holds, or None (absent, unreadable, none in it)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    written = data.get(KEY) if isinstance(data, dict) else None
    if not isinstance(written, dict) or not all(isinstance(e, dict) for e in written.values()):
        return None
    return written


def matches(path: Path, listed: dict) -> bool:
    """`path` is a regular file with the size and content `listed`."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        return False
    return path.stat().st_size == listed.get("size") and sha256(path) == listed.get("sha256")


def damage(folder: Path, written: dict[str, dict]) -> str | None:
    """What is wrong with the files `written` lists under `folder`, or None when all are whole."""
    for name, listed in sorted(written.items()):
        path = Path(folder) / name
        if not path.is_file():
            return f"{name} is missing"
        size = path.stat().st_size
        if size != listed.get("size"):
            return f"{name} has {size} B, {listed.get('size')} B were written"
        if sha256(path) != listed.get("sha256"):
            return f"{name} changed since it was written"
    return None


# --- ownership: checks before cortexm writes where a user may keep files ------------------

def check_writable(target: Path, what: str = "output", folder: bool = False) -> None:
    """The folder `target` (a file, or a `folder`) goes to exists as a writable folder, or can be
    made; every name in its path fits."""
    target = Path(target)
    for part in target.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise CortexmError(f"{part[:40]}...: a name in the {what} path is longer than {NAME_MAX} bytes")
    if target.is_dir() and not folder:
        raise CortexmError(f"{target}: is a directory")
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise CortexmError(f"{target}: {ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise CortexmError(f"{target}: {ancestor} is not writable")


def check_owned(folder: Path, names: list[str], written: dict[str, dict] | None, force: bool, retry: str) -> None:
    """Every one of `names` that exists in `folder` is listed in `written` as it is now, unless
    `force`. `retry` says what to do instead (e.g. 'choose another -o')."""
    for name in names:
        path = Path(folder) / name
        if not os.path.lexists(path):
            continue
        if path.is_symlink() or not path.is_file():
            raise CortexmError(f"{path} exists and is not a regular file; {retry}")
        if not force and not (written and name in written and matches(path, written[name])):
            raise CortexmError(f"{path} exists and was not written by cortexm (or was changed since); "
                               f"{retry}, or pass --force to replace it")


def check_folder_owned(folder: Path, manifest_file: str, force: bool, retry: str) -> None:
    """`folder` is absent, empty, or holds only what the manifest in `folder/manifest_file` lists
    as it is now (that file aside), unless `force`. Whatever `force` says, it must be a folder."""
    folder = Path(folder)
    if not os.path.lexists(folder):
        return
    if folder.is_symlink() or not folder.is_dir():
        raise CortexmError(f"{folder} exists and is not a folder; {retry}")
    if force or not any(folder.iterdir()):
        return
    written = read(folder / manifest_file)
    for path in sorted(folder.rglob("*"), key=lambda p: (p.relative_to(folder).as_posix() != manifest_file, p)):
        rel = path.relative_to(folder).as_posix()
        if (rel == manifest_file and written is not None) or (path.is_dir() and not path.is_symlink()):
            continue
        if not (written and rel in written and matches(path, written[rel])):
            raise CortexmError(f"{folder} holds {rel}, which cortexm did not write (or which was changed since); "
                               f"{retry}, or pass --force")
