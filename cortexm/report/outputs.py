"""Report files at paths a user names (--json, --junit): checked before the run, written whole
at its end.

    paths = outputs.check({"--json": json_path, "--junit": junit})   # before any work
    outputs.write(paths["--json"], text)                              # at the end, atomically

The ownership rule of cortexm.base.manifest, for one file: a report replaces only a regular file
that is a report of the same kind that cortexm wrote (a report records what wrote it: a test
report's JSON has cortexm's meta and its results, an upstream-tests report its cores; a JUnit
report's suite is cortexm's), never a symlink, never a user's file, never another file of
cortexm's (a sidecar names cortexm too). A folder that does not exist yet is
made. A path that cannot be written (a full or read-only disk) is one line before the run, not a
lost report after it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cortexm.base import files, manifest, writes
from cortexm.base.errors import CortexmError, StorageError

# The <testsuites name=...> of the JUnit reports cortexm writes (test, report merge, upstream-tests).
JUNIT_SUITES = ("cortexm", "executorch cortex_m tests")
_LARGEST_REPORT = 1 << 30


def check(paths: dict[str, str | Path | None], kind: str = "test") -> dict[str, Path | None]:
    """option -> path, each checked: it may be written, and replacing what is there loses
    nothing of the user's (a --json path holds a JSON report of `kind`, "test" or "upstream",
    a --junit path a JUnit report). Options whose value is None are left out of the checks."""
    checked: dict[str, Path | None] = {}
    seen: dict[Path, str] = {}
    for option, value in paths.items():
        if value is None:
            checked[option] = None
            continue
        path = Path(value)
        # The file it names, however it is spelled (./r.json, a/../r.json, a link to the folder).
        where = _resolved(path)
        same = seen.get(where)
        if same:
            raise CortexmError(f"{path}: given to both {same} and {option} (the same file)")
        seen[where] = option
        manifest.check_writable(path, f"{option} report")
        if os.path.lexists(path):
            if path.is_symlink() or not path.is_file():
                raise CortexmError(f"{path} exists and is not a regular file (a link is never followed); "
                                   f"choose another {option} path")
            if not is_report(path, "junit" if option == "--junit" else kind):
                what = "JUnit report" if option == "--junit" else f"{kind} report"
                raise CortexmError(f"{path} exists and is not a {what} cortexm wrote; remove it or choose another "
                                   f"{option} path")
        checked[option] = path
    return checked


def _resolved(path: Path) -> Path:
    """The file `path` names: its folder resolved (links followed, `..` gone), its own name kept
    (a link at the name itself is refused later, never followed)."""
    return Path(os.path.realpath(path.parent)) / path.name


def is_report(path: Path, kind: str | None = None) -> bool:
    """`path` holds a report that cortexm wrote, of `kind` when given: "junit", or a JSON report
    of `cortexm test` (and sweep, report merge: "test") or of `upstream-tests` ("upstream")."""
    try:
        text = files.regular(path, "report", _LARGEST_REPORT).read_text()
    except (CortexmError, OSError, UnicodeDecodeError):
        return False
    if text.lstrip().startswith("<"):
        import xml.etree.ElementTree as ET

        try:
            root = ET.fromstring(text)
        except ET.ParseError:
            return False
        return kind in (None, "junit") and root.tag == "testsuites" and root.get("name") in JUNIT_SUITES
    try:
        data = json.loads(text)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    meta = data.get("meta")
    test = isinstance(meta, dict) and "cortexm" in meta and isinstance(data.get("results"), list)
    upstream = isinstance(data.get("cortexm"), str) and isinstance(data.get("cores"), dict) and "tests" in data
    return {"test": test, "upstream": upstream, None: test or upstream}.get(kind, False)


def write(path: Path | None, text: str) -> None:
    """`text` at `path` (checked before), whole or not at all; nothing when `path` is None."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        writes.atomic(path, text.encode())
    except OSError as e:
        raise StorageError(f"{path}: the report could not be written ({e.strerror or e})") from None
