"""What a source tree or folder is, as a short string: the part of a build's cache key
that changes exactly when its content does.

A git checkout is its commit plus a digest of its uncommitted changes (tracked
edits and untracked files); anything else is its NAR hash (cortexm.sources.nar), the
hash Nix and the pin file use.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cortexm import sources
from cortexm.sources import nar


@dataclass(frozen=True)
class TreeIdentity:
    rev: str | None  # git commit, None when not a git checkout
    changes: str | None  # digest of uncommitted changes, None when clean
    nar_hash: str | None  # set when not a git checkout

    @property
    def key(self) -> str:
        if self.rev is None:
            assert self.nar_hash is not None, "a tree that is not a git checkout is named by its content"
            return self.nar_hash if self.nar_hash.startswith("content:") else f"nar:{self.nar_hash}"
        return f"git:{self.rev}" + (f"+{self.changes}" if self.changes else "")

    def describe(self) -> str:
        if self.rev is None:
            return f"content {self.nar_hash}"
        return self.rev + (f" with uncommitted changes ({self.changes})" if self.changes else "")


def _git(path: Path, *args: str) -> bytes:
    out = subprocess.run(["git", "-C", str(path), *args], capture_output=True, timeout=120)
    return out.stdout if out.returncode == 0 else b""


@cache
def tree(path: Path, ignore: tuple[str, ...] = ()) -> TreeIdentity:
    """The identity of the tree at `path` (computed once per process; `current` computes it
    again); uncommitted changes of files matching an `ignore` glob (git pathspec, e.g.
    "backends/cortex_m/**/*.py": what a build never reads) are not part of it."""
    return current(path, ignore)


def current(path: Path, ignore: tuple[str, ...] = ()) -> TreeIdentity:
    """The identity of the tree at `path` as it is now (`tree`, uncached)."""
    rev = sources.git_rev(path)
    if rev is None:
        # A tree without git (a copy, a store path): its content, less what `ignore` names, so a
        # second copy of a tree with only its lowering's Python edited builds no runner again.
        return TreeIdentity(None, None, content_digest(path, ignore) if ignore else nar.nar_hash(path))
    spec = ["--", ".", *(f":(exclude,glob){pattern}" for pattern in ignore)] if ignore else []
    digest = hashlib.sha256(_git(path, "diff", "HEAD", "--binary", *spec))
    untracked = _git(path, "ls-files", "--others", "--exclude-standard", "-z", *spec).split(b"\0")
    for name in sorted(n for n in untracked if n):
        digest.update(name + b"\0")
        file = path / name.decode(errors="surrogateescape")
        if file.is_file():
            digest.update(file.read_bytes())
    changed = bool(_git(path, "status", "--porcelain", *spec).strip())
    return TreeIdentity(rev, digest.hexdigest()[:16] if changed else None, None)


def content_digest(path: Path, ignore: tuple[str, ...]) -> str:
    """'content:<sha256>' of every file below `path` (name, executable bit, bytes; .git left
    out) but those matching an `ignore` glob (git's: `**` any folders, `*` within one)."""
    import os

    patterns = [_glob(p) for p in ignore]
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(names):
            file = Path(root) / name
            rel = file.relative_to(path).as_posix()
            if any(p.match(rel) for p in patterns) or not file.is_file():
                continue
            digest.update(rel.encode() + b"\0" + (b"x" if os.access(file, os.X_OK) else b"-"))
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return f"content:{digest.hexdigest()}"


def _glob(pattern: str) -> re.Pattern:
    """A git glob pathspec as a pattern of a relative path: `**/` any folders (none too), `*`
    and `?` within one name."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


# Beside the firmware sources but never read by a build: documentation, Nix packaging.
NOT_BUILD_INPUTS = (".md", ".nix")


def files_digest(*folders: Path, leave_out: tuple[str, ...] = ()) -> str:
    """sha256 over the names and contents of every file below `folders` that a build reads
    (`leave_out`: names of folders below them that it does not)."""
    digest = hashlib.sha256()
    skipped = {"__pycache__", *leave_out}
    for folder in folders:
        for file in sorted(p for p in folder.rglob("*")
                           if p.is_file() and not skipped.intersection(p.relative_to(folder).parts)
                           and p.suffix not in NOT_BUILD_INPUTS):
            digest.update(str(file.relative_to(folder.parent)).encode() + b"\0")
            digest.update(file.read_bytes())
    return digest.hexdigest()
