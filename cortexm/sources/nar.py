"""Nix archive (NAR) hashing of a source tree, as `nix hash path` computes it.

Lets `cortexm sources` say whether a tree without git metadata (a tarball, a Nix
store path) has the pinned content, and lets the pin file's NAR hashes be
recomputed without Nix. The format is Eelco Dolstra's thesis, figure 5.2.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path

# What a GitHub tarball (and so fetchFromGitHub) leaves out of a checkout.
DEFAULT_EXCLUDES = frozenset({".git"})


def nar_hash(path: str | Path, excludes: frozenset[str] = DEFAULT_EXCLUDES) -> str:
    """The SRI sha256 of the NAR serialisation of `path` (top-level excludes dropped)."""
    digest = hashlib.sha256()
    _write_str(digest, b"nix-archive-1")
    _serialise(digest, Path(path), excludes)
    return "sha256-" + base64.b64encode(digest.digest()).decode()


def _write_str(digest, data: bytes) -> None:
    digest.update(len(data).to_bytes(8, "little"))
    digest.update(data)
    if len(data) % 8:
        digest.update(b"\0" * (8 - len(data) % 8))


def _serialise(digest, path: Path, excludes: frozenset[str]) -> None:
    st = os.lstat(path)
    _write_str(digest, b"(")
    if stat.S_ISLNK(st.st_mode):
        _write_str(digest, b"type")
        _write_str(digest, b"symlink")
        _write_str(digest, b"target")
        _write_str(digest, os.fsencode(os.readlink(path)))
    elif stat.S_ISDIR(st.st_mode):
        _write_str(digest, b"type")
        _write_str(digest, b"directory")
        names = sorted(os.fsencode(n) for n in os.listdir(path) if n not in excludes)
        for name in names:
            _write_str(digest, b"entry")
            _write_str(digest, b"(")
            _write_str(digest, b"name")
            _write_str(digest, name)
            _write_str(digest, b"node")
            _serialise(digest, path / os.fsdecode(name), frozenset())
            _write_str(digest, b")")
    elif stat.S_ISREG(st.st_mode):
        _write_str(digest, b"type")
        _write_str(digest, b"regular")
        if st.st_mode & stat.S_IXUSR:
            _write_str(digest, b"executable")
            _write_str(digest, b"")
        _write_str(digest, b"contents")
        digest.update(st.st_size.to_bytes(8, "little"))
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if st.st_size % 8:
            digest.update(b"\0" * (8 - st.st_size % 8))
    else:
        raise ValueError(f"{path}: cannot archive a special file")
    _write_str(digest, b")")
