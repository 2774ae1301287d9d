"""Where the ExecuTorch and CMSIS-NN source trees are, and what they are.

A tree is looked up, in order: the command-line flag, the environment variable
(CORTEXM_EXECUTORCH_SRC / CORTEXM_CMSIS_NN_SRC, which CI and Nix set), then the
default folder in the user cache ($XDG_CACHE_HOME/cortexm/sources/<name>, i.e.
~/.cache/cortexm/sources/executorch and .../cmsis-nn).

What enters: flags, environment, the pin file. What leaves: the trees' paths and what
they are. pins.py reads the pin file both Nix and Python read; trees.py says whether a
tree matches its pin and fetches the pinned one; nar.py hashes a tree as Nix does.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cortexm.base.errors import CortexmError


@dataclass(frozen=True)
class SourceKind:
    name: str  # folder name in the default location, and pin-file key
    env: str
    flag: str
    marker: str  # a file every such tree has, to reject a wrong folder early


EXECUTORCH = SourceKind("executorch", "CORTEXM_EXECUTORCH_SRC", "--executorch-src", "backends/cortex_m/ops/operators.yaml")
CMSIS_NN = SourceKind("cmsis-nn", "CORTEXM_CMSIS_NN_SRC", "--cmsis-nn-src", "Include/arm_nnfunctions.h")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cortexm"


def default_path(kind: SourceKind) -> Path:
    return cache_dir() / "sources" / kind.name


@dataclass(frozen=True)
class Located:
    kind: SourceKind
    path: Path | None
    origin: str  # "flag", "env", "default", or "" when not found


def locate(kind: SourceKind, explicit: str | Path | None = None) -> Located:
    """The tree to use for `kind`; raises if an explicitly given path is wrong."""
    for origin, value in (("flag", explicit), ("env", os.environ.get(kind.env))):
        if value:
            path = Path(value).expanduser()
            _require_tree(kind, path, f"{kind.flag}" if origin == "flag" else f"${kind.env}")
            return Located(kind, path.resolve(), origin)
    path = default_path(kind)
    if (path / kind.marker).is_file():
        # Its code is built into runners and (ExecuTorch's) imported: a tree found by default, not
        # named by the user, is used only when no one else can have put it there.
        from cortexm.base import trust

        trust.require_private(path, f"default {kind.name} tree", f"pass {kind.flag} or set {kind.env} to a tree of your "
                              "choice", make=False)
        return Located(kind, path, "default")
    return Located(kind, None, "")


def require(kind: SourceKind, explicit: str | Path | None = None) -> Path:
    """Like `locate`, but a missing tree is an error that says how to provide it."""
    found = locate(kind, explicit)
    if found.path is None:
        raise CortexmError(missing_message(kind))
    return found.path


def missing_message(kind: SourceKind) -> str:
    return (
        f"no {kind.name} source tree: pass {kind.flag} PATH, set {kind.env}, "
        f"or place a checkout at {default_path(kind)} (`cortexm sources --fetch` does that where the network allows)"
    )


def _require_tree(kind: SourceKind, path: Path, given_by: str) -> None:
    if not path.is_dir():
        raise CortexmError(f"{given_by}: {path} is not a directory")
    if not (path / kind.marker).is_file():
        raise CortexmError(f"{given_by}: {path} is not a {kind.name} tree (no {kind.marker})")


def git_rev(path: Path) -> str | None:
    """The commit checked out at `path`, or None if it is not a git checkout."""
    if not (path / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", rev) else None


def git_dirty(path: Path) -> bool:
    out = subprocess.run(
        ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, timeout=60,
    )
    return out.returncode == 0 and bool(out.stdout.strip())


_CMSIS_NN_VERSION = re.compile(r'set\(\s*CMSIS_NN_VERSION\s+"?([0-9a-fA-F]{7,40})"?', re.S)


def executorch_cmsis_nn_version(executorch_src: Path) -> str | None:
    """The CMSIS-NN revision the ExecuTorch tree pins (backends/cortex_m/CMakeLists.txt)."""
    cmake = executorch_src / "backends" / "cortex_m" / "CMakeLists.txt"
    try:
        m = _CMSIS_NN_VERSION.search(cmake.read_text())
    except OSError:
        return None
    return m.group(1) if m else None
