"""The pin file (pins.toml at the repository root), read by Nix and by this module."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cortexm.errors import CortexmError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PINS_ENV = "CORTEXM_PINS"


def pins_path() -> Path:
    """Where the pin file is: $CORTEXM_PINS, else beside the package."""
    if os.environ.get(PINS_ENV):
        return Path(os.environ[PINS_ENV])
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "pins.toml", here / "pins.toml"):
        if candidate.is_file():
            return candidate
    raise CortexmError(f"pins.toml not found beside the cortexm package; set {PINS_ENV}")


@lru_cache(maxsize=None)
def load(path: Path | None = None) -> dict[str, Any]:
    path = path or pins_path()
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise CortexmError(f"{path}: cannot read the pin file ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise CortexmError(f"{path}: not valid TOML ({e})") from None


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
    return Check("executorch git_version", False, f"{ver} at {got[:12]}, pin is {want[:12]}")


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


def check_cmsis_nn_pin_in_tree(pins: dict[str, Any], executorch_src: Path) -> Check:
    """Does the ExecuTorch tree's CMSIS_NN_VERSION equal the CMSIS-NN pin?"""
    from cortexm.sources import executorch_cmsis_nn_version

    want = pins["cmsis-nn"]["rev"]
    got = executorch_cmsis_nn_version(executorch_src)
    if got is None:
        return Check("CMSIS_NN_VERSION in executorch tree", None, f"not found under {executorch_src}")
    if got == want:
        return Check("CMSIS_NN_VERSION in executorch tree", True, f"{got[:12]}, as pinned")
    return Check("CMSIS_NN_VERSION in executorch tree", False, f"{got[:12]}, pin is {want[:12]}")
