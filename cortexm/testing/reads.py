"""What a case's own code reads while it runs: the files it opens or lists, the environment
variables it looks up, the modules it imports and the installed packages they come from. An
export is cached with this record and used again only while every item is what it was: a
factory that loads `weights.npy`, reads `$MODEL_WIDTH` or builds its model from an installed
package is exported again when that changes (the key of cortexm.testing.cache covers only
what is known before the code runs).

    with reads.recording() as record:        # around the user's code, in an export worker
        bundle = modelsource.load(case)
    facts = record.facts()                    # stored in the cache entry (reads.json)
    reads.changed(facts)                      # later: None, or what is no longer as it was

Recorded by an audit hook (sys.addaudithook: "open", "os.listdir", "os.scandir") and a look
at os.environ's reads; Python's own installation is left out (its packages are recorded by
version), and so are cortexm's own code and cache (keyed apart) and the kernel's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import sysconfig
import threading
from collections.abc import Iterator, Mapping
from functools import cache, lru_cache
from importlib import metadata
from pathlib import Path

FILE = "case-reads.record"  # its name in a cache entry (a case's sidecar is CASE.json)

_ACTIVE: list[Record] = []
_LOCK = threading.Lock()
_SKIP_PREFIXES = ("/proc/", "/sys/", "/dev/")


class Record:
    """The inputs seen while it was active (see the module docstring)."""

    def __init__(self, skip: tuple[str, ...] = ()) -> None:
        self.skip = skip
        self.files: dict[str, str] = {}  # path -> digest when first seen (what the code read)
        self.env: dict[str, str | None] = {}

    def saw_path(self, path: str, listing: bool) -> None:
        if path not in self.files and not _skipped(path) and not os.path.realpath(path).startswith(self.skip or ("\0",)):
            self.files[path] = "absent"  # held while it is read: the read opens it again
            self.files[path] = _digest(path, listing)

    def facts(self) -> dict:
        """What was read, as stored with the export: files (and the user's modules) by content,
        variables by value, installed packages by version."""
        files = dict(self.files)
        for module in list(sys.modules.values()):
            where = getattr(module, "__file__", None)
            if where and not _installed(where) and not _skipped(where):
                files.setdefault(os.path.abspath(where), _digest(os.path.abspath(where), False))
        return {"files": dict(sorted(files.items())), "env": dict(sorted(self.env.items())),
                "packages": _packages()}


@contextlib.contextmanager
def recording(skip: tuple[Path, ...] = ()) -> Iterator[Record]:
    """A Record of what the block reads (from every thread: a factory's helpers count too),
    but for what is under `skip` (the cache the export writes into)."""
    _install()
    _install_roots()  # found now: cortexm's own reads are not the user's
    record = Record(tuple(os.path.join(os.path.realpath(p), "") for p in skip))
    with _LOCK:
        _ACTIVE.append(record)
    try:
        yield record
    finally:
        with _LOCK:
            _ACTIVE.remove(record)


def merged(*facts: dict) -> dict:
    """One record of several (a case file's import, then its factory)."""
    out: dict = {"files": {}, "env": {}, "packages": {}}
    for f in facts:
        for kind in out:
            out[kind].update(f.get(kind, {}))
    return out


def changed(facts: dict) -> str | None:
    """None while every input of `facts` is what it was; else which one changed, in words."""
    for name, value in facts.get("env", {}).items():
        if os.environ.get(name) != value:
            return f"the environment variable {name}"
    for dist, version in facts.get("packages", {}).items():
        now = _version(dist)
        if now != version:
            return f"the installed package {dist} ({version} -> {now or 'absent'})"
    for path, digest in facts.get("files", {}).items():
        if _digest(path, digest.startswith("listing:")) != digest:
            return path
    return None


# --- the hooks -------------------------------------------------------------------------------

_INSTALLED = False


def _install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    sys.addaudithook(_audit)
    if type(os.environ) is os._Environ:  # exactly the stock class, not a user's
        os.environ.__class__ = _RecordedEnviron


_INSIDE = threading.local()  # set while the hook reads a file itself: its own opens are not the user's


def _audit(event: str, args: tuple) -> None:
    if not _ACTIVE or event not in ("open", "os.listdir", "os.scandir") or getattr(_INSIDE, "busy", False):
        return
    _INSIDE.busy = True
    try:
        _seen(event, args)
    finally:
        _INSIDE.busy = False


def _seen(event: str, args: tuple) -> None:
    path = args[0] if args else None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        return  # a descriptor: its file was seen when it was opened
    path = os.path.abspath(os.fspath(path))
    for record in list(_ACTIVE):
        record.saw_path(path, event != "open")


class _RecordedEnviron(os._Environ):
    """os.environ, noting each variable the code looks up (`[]`, `get`, `in`, os.getenv)."""

    def __getitem__(self, key):
        if _ACTIVE and not getattr(_INSIDE, "busy", False):
            try:
                value = super().__getitem__(key)
            except KeyError:
                value = None
            for record in list(_ACTIVE):
                record.env.setdefault(key, value)
        return super().__getitem__(key)


# --- what is left out, and how a thing is named by content --------------------------------------

@lru_cache(maxsize=1)
def _install_roots() -> tuple[str, ...]:
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {sys.base_prefix, sys.prefix}
    return tuple(sorted(os.path.join(os.path.realpath(r), "") for r in roots if r))


_OWN = os.path.join(str(Path(__file__).resolve().parent.parent), "")  # cortexm's code: in the key already


def _installed(path: str) -> bool:
    real = os.path.realpath(path)
    return "site-packages" in real.split(os.sep) or real.startswith(_install_roots())


def _skipped(path: str) -> bool:
    real = os.path.realpath(path)
    return (real.startswith(_SKIP_PREFIXES) or "__pycache__" in real.split(os.sep) or _installed(real)
            or real.startswith(_OWN))


def _digest(path: str, listing: bool) -> str:
    """The content of a file, the names in a folder ("listing:..."), or "absent". A file is
    read once per process while its size, time and inode hold: a warm run checks hundreds of
    entries whose records name the same few files."""
    try:
        if not listing:
            st = os.stat(path)
            if not stat.S_ISDIR(st.st_mode):
                seen = (path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
                if seen not in _READ:
                    _READ[seen] = _read(path, False)
                return _READ[seen]
    except OSError:
        return "absent"
    return _read(path, listing)


_READ: dict[tuple, str] = {}


def _read(path: str, listing: bool) -> str:
    try:
        if listing or os.path.isdir(path):
            return "listing:" + hashlib.sha256("\0".join(sorted(os.listdir(path))).encode()).hexdigest()
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return "absent"


@cache
def _distributions() -> Mapping[str, list[str]]:
    """Top-level name -> distributions, read once per process (a scan of every installed
    distribution's metadata, long; the versions are checked again by `changed`)."""
    return metadata.packages_distributions()


def _packages() -> dict[str, str]:
    """Every installed distribution a loaded module comes from, by version."""
    by_top = _distributions()
    found: dict[str, str] = {}
    for name in list(sys.modules):
        for dist in by_top.get(name.partition(".")[0], ()):
            if dist not in found:
                found[dist] = _version(dist) or "absent"
    return dict(sorted(found.items()))


@cache
def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
