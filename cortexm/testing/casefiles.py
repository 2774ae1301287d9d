"""A user's case files: imported once, each registering its cases (`cortexm test --cases`).

What enters: a Python file's path. What leaves: the cases it registered (cortexm.cases), and
which file registered a case (its export's cache key reads the file and what it imports).
"""

from __future__ import annotations

import sys
from pathlib import Path

from cortexm import cases as case_registry
from cortexm.base.errors import CortexmError

_FILE_CASES: dict[Path, set[str]] = {}
_FILE_SOURCES: dict[Path, bytes] = {}  # what each file held when it was read: what every worker runs


# Seconds importing a case file may take (`cortexm test --timeout`): an endless loop at import
# is one line, not a run that never ends.
IMPORT_TIMEOUT = 120.0


def load_case_file(path: Path, timeout: float | None = IMPORT_TIMEOUT, source: bytes | None = None) -> None:
    """Import a user file whose `@register(...)` functions add cases. Whatever the file does at
    import (raises, exits, loops past `timeout` seconds) is one line. Its bytes are read once
    (`source`: as another process read them): what is keyed and run is that content, whatever
    the file holds by the time an export worker imports it."""
    import importlib.util
    import zlib

    from cortexm.base import limits

    path = path.resolve()
    if path in _FILE_CASES:
        return
    if source is None:
        try:
            source = path.read_bytes()
        except OSError as e:
            raise CortexmError(f"{path}: no such case file" if not path.is_file() else f"{path}: {e.strerror}") from None
    before = {c.name for c in case_registry.all_cases()}
    spec = importlib.util.spec_from_file_location(f"cortexm_user_cases_{zlib.crc32(str(path).encode()):08x}", path)
    if spec is None:  # no loader for its suffix
        raise CortexmError(f"{path}: not a Python file (a case file ends in .py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.export looks up the module of functions it traces
    try:
        code = compile(source, str(path), "exec", dont_inherit=True)
        with limits.time_limit(timeout):
            exec(code, module.__dict__)
    except limits.Expired:
        raise CortexmError(f"{path}: importing it took longer than {timeout:g} s (an endless loop at import?); "
                           "--timeout sets the limit") from None
    except SystemExit as e:
        raise CortexmError(f"{path}: importing it called sys.exit({e.code!r}): a case file only registers cases") from None
    except CortexmError as e:
        raise CortexmError(f"{path}: {e}") from e
    except Exception as e:
        raise CortexmError(f"{path}: importing it raised {type(e).__name__}: {e}") from e
    _FILE_CASES[path] = {c.name for c in case_registry.all_cases()} - before
    _FILE_SOURCES[path] = source
    if not _FILE_CASES[path]:
        raise CortexmError(f"{path}: registers no case (use @cortexm.cases.register)")


def source_of(path: Path) -> bytes:
    """The bytes of a case file as this process read and ran them."""
    return _FILE_SOURCES[path.resolve()]


def was_read(path: Path) -> bool:
    return path.resolve() in _FILE_SOURCES


def _registered_by(files: list[Path]) -> set[str]:
    return set().union(*(_FILE_CASES[f.resolve()] for f in files))


def _case_file(case: str) -> Path | None:
    return next((p for p, names in _FILE_CASES.items() if case in names), None)
