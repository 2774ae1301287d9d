"""Folders cortexm takes code or verdicts from: only the user's own, as ssh treats ~/.ssh.

What is in cortexm's caches runs or decides: a runner ELF from the build cache runs under the
simulator, a CMSIS-NN module from it is imported, an export's program and references are judged
as they are, a run-store entry *is* a verdict (its exit status and instruction count, no
simulator run). Whoever can write such a folder writes those. So a cache folder is used only
when it, and every folder above it, belongs to the user (or to root) and no one else can write
it; a folder above it that others can write is allowed only with the sticky bit (/tmp), where
no one but its owner can rename or remove what is in it. Otherwise one line names the folder
and the fix, and nothing is read from it or written to it.

What this cannot see: content the user's own account put there (a CI cache restored from
another job, a copy from another machine). docs/commands.md, "What a shared CI cache may hold",
says what it may hold.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cortexm.base.errors import CortexmError


class UntrustedFolder(CortexmError):
    """A cache or output folder someone other than the user (or root) can write."""


_TRUSTED: set[tuple[str, int]] = set()  # (folder, uid) found private in this process


def require_private(folder: Path | str, what: str, fix: str, make: bool = True) -> Path:
    """`folder` as given, once it and every folder above it are the user's or root's and
    writable by no one else (a sticky folder above it may be); else UntrustedFolder naming the
    first that is not and `fix` (what the user can do instead). `make`: the folder is made
    first where it is missing, so that no one else can make it between the check and its use
    (where it cannot be made, a full or read-only disk, the folders above it are judged and
    the write that follows says what is wrong)."""
    folder = Path(folder)
    uid = os.geteuid()
    if (str(folder), uid) in _TRUSTED:
        return folder
    if make:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
    problem = _problem(Path(os.path.abspath(folder)), uid) or _problem(Path(os.path.realpath(folder)), uid)
    if problem is not None:
        raise UntrustedFolder(f"the {what} {folder} is not yours alone ({problem}): cortexm takes no code or "
                              f"verdicts from a folder another user can write; {fix}")
    if folder.is_dir():  # judged as it is: one made later is judged then
        _TRUSTED.add((str(folder), uid))
    return folder


def _problem(path: Path, uid: int) -> str | None:
    """What makes `path` (absolute) writable by someone else, or None."""
    first = True  # the folder itself: no sticky exception for it (others could add entries)
    for place in (path, *path.parents):
        try:
            info = os.lstat(place)
        except FileNotFoundError:
            first = False  # missing: the user will make it, in the first folder that exists
            continue
        except OSError as e:
            return f"{place} cannot be examined: {e.strerror}"
        if info.st_uid not in (uid, 0):
            return f"{place} belongs to {_user(info.st_uid)}"
        if stat.S_ISLNK(info.st_mode):  # a link's own mode means nothing; where it leads is checked too
            first = False
            continue
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and (first or not info.st_mode & stat.S_ISVTX):
            who = "others" if info.st_mode & stat.S_IWOTH else "its group"
            return f"{place} is writable by {who}, mode {stat.S_IMODE(info.st_mode):04o}; chmod go-w {place}"
        first = False
    return None


def _user(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"
