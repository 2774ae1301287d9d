"""Manifests: the files cortexm wrote, each with its size and sha256.

    written = manifest.of_files(folder, ["x.pte", "x.input-0.bin"])   # {name: {size, sha256}}
    manifest.damage(folder, written)        # None, or "x.pte has 10 B, 4126 B were written"

One record, two uses:
- ownership: cortexm replaces or removes only files inside a folder it writes that a manifest it
  wrote lists, with the content they still have. A name in a manifest is relative and
  normalised (no `..`, no absolute path, no symlink on the way), or the manifest is not
  cortexm's and is trusted for nothing. Anything else is the user's: replaced only with
  --force, and never adopted (the next manifest lists only what cortexm wrote). The checks run
  before the expensive work, so a refusal costs nothing.
- integrity: a cache entry is used only when every file its manifest lists is there, whole. The
  manifest is written last, so an entry without one is unfinished or older than manifests.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath

from cortexm.base import writes
from cortexm.base.errors import CortexmError, StorageError

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


def of_data(files: dict[str, bytes]) -> dict[str, dict]:
    """The manifest of files about to be written, from their bytes."""
    return {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()}


def of_folder(folder: Path, skip: str = "") -> dict[str, dict]:
    """The manifest of every regular file under `folder` but `skip` (the file that will hold it)."""
    return {rel: entry(path) for rel, path in files_in(folder) if rel != skip and _regular(path)}


def files_in(folder: Path) -> list[tuple[str, Path]]:
    """(relative name, path) of everything under `folder` that is not a folder, symlinks
    included as themselves (never followed), in a stable order."""
    found = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = Path(root) / name
            found.append((path.relative_to(folder).as_posix(), path))
    return sorted(found)


def safe_name(name: object) -> bool:
    """A name a manifest may hold: relative, normalised, inside the folder."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        return False
    path = PurePosixPath(name)
    return not path.is_absolute() and path.as_posix() == name and all(p not in ("", ".", "..") for p in path.parts)


def read(path: Path) -> dict[str, dict] | None:
    """The manifest a JSON file cortexm wrote holds, or None (absent, unreadable, none in it, or
    a name no manifest of cortexm's holds: such a file is not cortexm's)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    written = data.get(KEY) if isinstance(data, dict) else None
    if not isinstance(written, dict) or not all(safe_name(n) and isinstance(e, dict) for n, e in written.items()):
        return None
    return written


def inside(folder: Path, name: str) -> Path | None:
    """folder/name when `name` is safe and no part of the way there is a symlink, else None."""
    if not safe_name(name):
        return None
    path = Path(folder)
    for part in PurePosixPath(name).parts:
        path = path / part
        if path.is_symlink():
            return None
    return path


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def matches(path: Path, listed: dict) -> bool:
    """`path` is a regular file (not a symlink) with the size and content `listed`."""
    path = Path(path)
    if not _regular(path):
        return False
    return path.stat().st_size == listed.get("size") and sha256(path) == listed.get("sha256")


def owned(folder: Path, written: dict[str, dict] | None) -> dict[str, dict]:
    """The entries of `written` whose file is inside `folder` and as it was written: the files
    cortexm may replace or remove there."""
    return {name: e for name, e in (written or {}).items()
            if (path := inside(folder, name)) is not None and matches(path, e)}


def damage(folder: Path, written: dict[str, dict]) -> str | None:
    """What is wrong with the files `written` lists under `folder`, or None when all are whole."""
    for name, listed in sorted(written.items()):
        path = inside(folder, name)
        if path is None:
            return f"it lists {name!r}, which is not a name inside it"
        if not _regular(path):
            return f"{name} is missing"
        size = path.stat().st_size
        if size != listed.get("size"):
            return f"{name} has {size} B, {listed.get('size')} B were written"
        if sha256(path) != listed.get("sha256"):
            return f"{name} changed since it was written"
    return None


# --- checks before cortexm writes where a user may keep files ------------------------------

def check_writable(target: Path, what: str = "output", folder: bool = False) -> None:
    """The folder `target` (a file, or a `folder`) goes to exists as a writable folder, or can be
    made; every name in its path fits. Writability is tried (a full or read-only disk says so
    only then), in the nearest folder that exists, which is left as it was."""
    target = Path(target)
    for part in target.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise CortexmError(f"{part[:40]}...: a name in the {what} path is longer than {NAME_MAX} bytes")
    if target.is_dir() and not folder:
        raise CortexmError(f"{target}: is a directory")
    ancestor = target if folder and target.is_dir() else target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise CortexmError(f"{target}: {ancestor} is not a folder")
    probe_writable(ancestor, target, what)


def probe_writable(folder: Path, target: Path | None = None, what: str = "output") -> None:
    """A byte written to a new file in `folder` and removed again, or a StorageError naming
    `target` (default `folder`)."""
    try:
        writes.probe(folder)
    except OSError as e:
        raise StorageError(f"{target or folder}: cannot write the {what} in {folder} ({e.strerror or e})") from None


def check_owned(folder: Path, names: list[str], written: dict[str, dict] | None, force: bool, retry: str) -> None:
    """Every one of `names` that exists in `folder` is listed in `written` as it is now, unless
    `force`. `retry` says what to do instead (e.g. 'choose another -o')."""
    mine = owned(folder, written)
    for name in names:
        path = Path(folder) / name
        if not os.path.lexists(path):
            continue
        if path.is_symlink() or not path.is_file():
            raise CortexmError(f"{path} exists and is not a regular file; {retry}")
        if not force and name not in mine:
            raise CortexmError(f"{path} exists and was not written by cortexm (or was changed since); "
                               f"{retry}, or pass --force to replace it")


def _fingerprint(path: Path) -> tuple:
    info = os.lstat(path)
    return info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino


class OwnedFolder:
    """A folder cortexm writes into where a user may keep files (run --keep, sweep --out,
    upstream-tests --out, test --coverage, arduino-lib -o), with the manifest `manifest_name`
    inside it of what cortexm wrote there.

        out = OwnedFolder(folder, ".cortexm-run.json", "--keep folder", force, "choose another --keep folder",
                          outputs=("program.pte", "i*.bin", "out-*.bin"))
        out.clear()     # remove what an earlier run wrote there (a run that starts afresh)
        ...             # write files
        out.seal()      # the manifest: the files of `outputs` this run wrote

    One rule for every such writer:
    - Made before the work: a folder holding a file cortexm did not write (or that was changed
      since) is refused unless `force`, which means "write over what is at an output path",
      never "delete what is not mine": the user's files are never removed, and those left as
      they were are never listed.
    - Only the files the writer declares (`outputs`, patterns of relative paths) are ever
      listed: a file the user saves into the folder while cortexm writes it is not adopted.
    - The manifest is written first, open (what this process will write, and the user's files
      as they were), and sealed last: after a kill -9 the rerun finds the open manifest of a
      process that is gone, and takes what matches its outputs as cortexm's leftovers.
    - One process at a time (cortexm.base.locks): a second is refused with one line.
    A writer that makes the folder elsewhere and swaps it in whole (`replaces_whole`, the
    Arduino library) only checks and locks here; it carries the user's files over itself.
    """

    def __init__(self, folder: Path, manifest_name: str, what: str, force: bool, retry: str,
                 outputs: tuple[str, ...] = ("*",), offers_force: bool = True, replaces_whole: bool = False) -> None:
        from cortexm.base import locks

        self.folder, self.manifest_name, self.outputs = Path(folder), manifest_name, tuple(outputs)
        check_writable(self.folder, what, folder=True)
        locks.hold(self.folder, f"{self.folder} (the {what})", retry)
        self.ours: dict[str, dict] = {}
        self.theirs: dict[str, tuple] = {}  # the user's files as they were: name -> lstat fingerprint
        if os.path.lexists(self.folder):
            if self.folder.is_symlink() or not self.folder.is_dir():
                raise CortexmError(f"{self.folder} exists and is not a folder; {retry}")
            self._read_folder(force, retry, offers_force)
        if not replaces_whole:  # a writer that swaps in a new folder whole leaves the old one as it is
            self._open()

    def _read_folder(self, force: bool, retry: str, offers_force: bool) -> None:
        record = _record(self.folder / self.manifest_name)
        listed = read(self.folder / self.manifest_name)
        self.ours = owned(self.folder, listed)
        leftovers = record.get("open") if isinstance(record.get("open"), dict) else None
        theirs_then = (leftovers or {}).get("theirs") or {}
        for rel, path in files_in(self.folder):
            if rel in self.ours or (rel == self.manifest_name and record):
                continue
            # An unfinished run's (killed before it sealed): what it declared it writes, and was
            # not the user's then, is cortexm's to remove.
            if leftovers and _matches(rel, leftovers.get("outputs") or ()) and rel not in theirs_then and _regular(path):
                self.ours[rel] = entry(path)
                continue
            self.theirs[rel] = _fingerprint(path)
        if self.theirs and not force:
            changed = [rel for rel in self.theirs if rel in (listed or {})]
            first = (changed or list(self.theirs))[0]
            raise CortexmError(f"{self.folder} holds {first}, which cortexm did not write (or which was changed "
                               f"since); {retry}" + (", or pass --force to write over what is at an output path "
                                                     "(your other files stay)" if offers_force else ""))

    def _open(self) -> None:
        """The manifest, open: written before any output, so a killed run leaves a record."""
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {"open": {"pid": os.getpid(), "outputs": list(self.outputs),
                           "theirs": {rel: list(fp) for rel, fp in self.theirs.items()}}, KEY: self.ours}
        writes.atomic(self.folder / self.manifest_name, (json.dumps(record, indent=1) + "\n").encode())

    def mine(self, rel: str) -> bool:
        """Whether cortexm may write `rel` here: an output, not a user's file (without --force)."""
        return _matches(rel, self.outputs)

    def clear(self) -> None:
        """Removes the files an earlier run listed (as they were written)."""
        for rel in self.ours:
            writes.remove(self.folder / rel)
        self.ours = {}
        self._open()

    def seal(self, extra: dict | None = None) -> None:
        """Writes the manifest: every regular file of the declared outputs but the user's files
        as they were (`extra`: more fields of the manifest file). If it cannot be written, the
        files this run wrote are removed, so no file without a manifest is left to refuse a rerun."""
        written = {}
        try:
            written = {rel: entry(path) for rel, path in files_in(self.folder)
                       if rel != self.manifest_name and _matches(rel, self.outputs) and _regular(path)
                       and self.theirs.get(rel) != _fingerprint(path)}
            writes.atomic(self.folder / self.manifest_name,
                         (json.dumps({**(extra or {}), KEY: {**written}}, indent=1) + "\n").encode())
        except OSError:
            for rel in written:
                writes.remove(self.folder / rel)
            raise


def _record(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _matches(rel: str, patterns) -> bool:
    import fnmatch

    return any(fnmatch.fnmatchcase(rel, str(p)) for p in patterns)
