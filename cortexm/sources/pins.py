"""The pin file (pins.toml at the repository root), read by Nix and by this module."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from cortexm.base import files
from cortexm.base.errors import CortexmError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PINS_ENV = "CORTEXM_PINS"


def pins_path() -> Path:
    """Where the pin file is: $CORTEXM_PINS, else beside the package."""
    if os.environ.get(PINS_ENV):
        return Path(os.environ[PINS_ENV])
    package = Path(__file__).resolve().parent.parent  # cortexm/
    for candidate in (package.parent / "pins.toml", package / "pins.toml"):
        if candidate.is_file():
            return candidate
    raise CortexmError(f"pins.toml not found beside the cortexm package; set {PINS_ENV}")


FORMAT = 1  # the pin file layout this module (and flake.nix) reads

# The pin file's schema: what every consumer (this module, flake.nix, nix/) reads from it.
# A key maps to a check of its value, or to a nested schema; "*" matches every key of a table.
_REV = ("a 40-digit git revision", lambda v: isinstance(v, str) and len(v) == 40 and _is_hex(v))
_TEXT = ("a string", lambda v: isinstance(v, str) and v != "")
_SHA256 = ("a sha256 of 64 hex digits", lambda v: isinstance(v, str) and len(v) == 64 and _is_hex(v))
_NAR = ("an SRI hash (sha256-...=) or \"\" when not established",
        lambda v: isinstance(v, str) and (v == "" or (v.startswith("sha256-") and len(v) == 51 and v.endswith("="))))
_FILE = {"url": _TEXT, "sha256": _SHA256, "provenance": _TEXT}
_SOURCE = {"owner": _TEXT, "repo": _TEXT, "rev": _REV, "nar_hash": _NAR, "nar_hash_provenance": _TEXT}
SCHEMA = {
    "format": ("the integer 1", lambda v: v == FORMAT and type(v) is int),
    "executorch": {**_SOURCE, "version": _TEXT},
    "cmsis-nn": _SOURCE,
    "toolchain": {"name": _TEXT, "version": _TEXT, "files": {"*": _FILE}},
    "fvp": {"*": {"version": _TEXT, "binary": _TEXT, "files": {"*": {**_FILE, "model_dir": _TEXT}}}},
    "nixpkgs": {"owner": _TEXT, "repo": _TEXT, "rev": _REV, "nar_hash": _NAR},
    "flatbuffers": {"version": _TEXT, "tag": _TEXT, "nar_hash": _NAR},
    "python": {"version": _TEXT},
    "wheels": {"*": {"version": _TEXT, "files": {"*": {**_FILE, "file": _TEXT}}}},
}


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def schema_problem(data: Any, schema: dict = SCHEMA, where: str = "") -> str | None:
    """The first place `data` departs from `schema`, as 'KEY: must be ...', or None."""
    if not isinstance(data, dict):
        return f"{where or 'the file'}: must be a table"
    for key, rule in schema.items():
        keys = list(data) if key == "*" else [key]
        if key == "*" and not keys:
            return f"{where}: must have at least one entry"
        for name in keys:
            path = f"{where}.{name}" if where else name
            if name not in data:
                return f"{path}: missing"
            if isinstance(rule, dict):
                problem = schema_problem(data[name], rule, path)
                if problem:
                    return problem
            elif not rule[1](data[name]):
                return f"{path}: must be {rule[0]}, is {data[name]!r}"[:200]
    return None


@cache
def load(path: Path | None = None) -> dict[str, Any]:
    """The pin file, checked against SCHEMA (one line naming the first key that is wrong)."""
    path = path or pins_path()
    try:
        with open(files.regular(path, "pin file", 16 << 20), "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise CortexmError(f"{path}: cannot read the pin file ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise CortexmError(f"{path}: not valid TOML ({e})") from None
    problem = schema_problem(data)
    if problem:
        raise CortexmError(f"{path}: {problem}")
    return data


def distinct(got: str, want: str, digits: int = 12) -> tuple[str, str]:
    """Two revisions abbreviated as usual, or whole when their abbreviations are equal."""
    if got[:digits] == want[:digits]:
        return got, want
    return got[:digits], want[:digits]


@dataclass(frozen=True)
class Check:
    """One comparison of something real against its pin."""

    what: str
    ok: bool | None  # None: could not be checked here
    detail: str


def check_installed_executorch(pins: dict[str, Any]) -> Check:
    want = pins["executorch"]["rev"]
    try:
        from executorch import version  # a plain module: cheap, no torch import
    except ImportError:
        return Check("executorch git_version", None, "not installed")
    got = getattr(version, "git_version", "unknown")
    ver = getattr(version, "__version__", "?")
    if got == want:
        return Check("executorch git_version", True, f"{ver} at {got[:12]}, as pinned")
    got, want = distinct(got, want)
    return Check("executorch git_version", False, f"{ver} at {got}, pin is {want}")


def check_installed_wheel_versions(pins: dict[str, Any]) -> list[Check]:
    from importlib import metadata

    checks = []
    for name, entry in pins["wheels"].items():
        want = entry["version"]
        try:
            got = metadata.version(name)
        except metadata.PackageNotFoundError:
            checks.append(Check(f"installed {name}", None, "not installed"))
            continue
        # torch's CPU build reports "2.13.0+cpu": the local tag names the build, not the release.
        ok = got.split("+", 1)[0] == want
        checks.append(Check(f"installed {name}", ok, f"{got}" + ("" if ok else f", pin is {want}")))
    return checks


def wheel_folders() -> list[Path]:
    """Where wheel files may be here: cortexm's wheel cache, and pip's --find-links folders."""
    from cortexm.sources import cache_dir

    links = [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "").split() if p and "://" not in p]
    return [cache_dir() / "wheels", *links]


def check_wheel_files(pins: dict[str, Any]) -> list[Check]:
    """Each pinned wheel file found here hashes to its pin (a pin edited by hand, or a file
    replaced, fails here before Nix or pip meet it)."""
    from cortexm.base.manifest import sha256

    checks = []
    for wheel in pins["wheels"].values():
        for entry in wheel["files"].values():
            found = next((f / entry["file"] for f in wheel_folders() if (f / entry["file"]).is_file()), None)
            if found is None:
                continue
            got = sha256(found)
            ok = got == entry["sha256"]
            checks.append(Check(f"wheel {entry['file']}", ok, "sha256 as pinned" if ok else
                                f"{found} has sha256 {got[:16]}..., pin is {entry['sha256'][:16]}..."))
    if not checks:
        checks.append(Check("wheel files", None, f"none of the pinned wheel files is in {', '.join(map(str, wheel_folders()))}"))
    return checks


def check_toolchain(pins: dict[str, Any], gcc: str) -> Check:
    """Is `gcc`, the arm-none-eabi-gcc runners are built with, the pinned release (major.minor)?
    Another GCC compiles CMSIS-NN otherwise: up to 12.2 it has no MVE softmax (ARM_GCC_12_2_ICE)."""
    want = pins["toolchain"]["version"]  # "15.2.rel1"
    try:
        got = subprocess.run([gcc, "-dumpversion"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return Check(f"installed {gcc}", None, "not found")
    ok = got.split(".")[:2] == want.split(".")[:2]
    return Check(f"installed {gcc}", ok, got + ("" if ok else f", pin is {pins['toolchain']['name']} {want}: "
                                                 "CMSIS-NN compiles to other code with it"))


def check_cmsis_nn_pin_in_tree(pins: dict[str, Any], executorch_src: Path) -> Check:
    """Does the ExecuTorch tree's CMSIS_NN_VERSION equal the CMSIS-NN pin?"""
    from cortexm.sources import executorch_cmsis_nn_version

    want = pins["cmsis-nn"]["rev"]
    got = executorch_cmsis_nn_version(executorch_src)
    if got is None:
        return Check("CMSIS_NN_VERSION in executorch tree", None, f"not found under {executorch_src}")
    if got == want:
        return Check("CMSIS_NN_VERSION in executorch tree", True, f"{got[:12]}, as pinned")
    got, want = distinct(got, want)
    return Check("CMSIS_NN_VERSION in executorch tree", False, f"{got}, pin is {want}")
