"""Checking a path a user names before it is opened.

    files.regular(path, "program", limit=2 << 30)

A FIFO would block a read forever, /dev/zero would never end, a directory gives an OSError
that names nothing: each gets one line instead, and a file larger than `limit` is refused
before a byte of it is read.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from cortexm.base.errors import CortexmError

# A .pte a Cortex-M can hold is a few MiB; past 2 GiB its 32-bit offsets cannot address it.
MAX_PROGRAM = 2 << 30


def regular(path: str | Path, what: str = "file", limit: int | None = None) -> Path:
    """`path`, when it is a regular file (or a link to one) of at most `limit` bytes."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise CortexmError(f"{path}: no such file") from None
    except OSError as e:
        raise CortexmError(f"{path}: {e.strerror or e}") from None
    if stat.S_ISDIR(info.st_mode):
        raise CortexmError(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(info.st_mode):
        device = stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device" if device else "not a regular file"
        raise CortexmError(f"{path}: is {kind}, not a {what}")
    if limit is not None and info.st_size > limit:
        raise CortexmError(f"{path}: {info.st_size} B, larger than any {what} cortexm reads ({limit} B)")
    return path


_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.+ -]{0,126}[A-Za-z0-9_.+-])?")


def check_name(name: object, what: str = "name") -> str:
    """`name`, when it can be a part of a path as it is and a line of a table (a case's, a
    model's): letters, digits, `_ . + -` and inner spaces, not starting with a dot or a dash, at
    most 128 characters."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise CortexmError(f"{what} {str(name)[:60]!r} cannot name a file: use letters, digits, _ . + - and "
                           "inner spaces (not first: . or -), at most 128 characters")
    return name


# A document nested deeper than this is no report, sidecar or manifest of cortexm's.
MAX_JSON_DEPTH = 200


def read_json(path: str | Path, what: str, limit: int = 1 << 30):
    """The JSON document at `path` (a regular file of at most `limit` bytes), or one line saying
    why not: not JSON, not UTF-8, or nested deeper than MAX_JSON_DEPTH (which Python's parser
    would meet as a RecursionError, or worse, in whatever reads the result)."""
    import json

    path = regular(path, what, limit)
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise CortexmError(f"{path}: not a {what} (not UTF-8 text)") from None
    except OSError as e:
        raise CortexmError(f"{path}: cannot read ({e.strerror or e})") from None
    if _nesting(text) > MAX_JSON_DEPTH:
        raise CortexmError(f"{path}: not a {what} (nested deeper than {MAX_JSON_DEPTH})")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CortexmError(f"{path}: not a {what} ({str(e)[:100]})") from None


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')  # alternatives that cannot both match: no backtracking
_BRACKETS = re.compile(r"[\[\]{}]")


def _nesting(text: str) -> int:
    """How deep brackets nest in `text`, strings left out: linear, no recursion."""
    import itertools

    steps = (1 if b in "[{" else -1 for b in _BRACKETS.findall(_STRINGS.sub("", text)))
    return max(itertools.accumulate(steps), default=0)
