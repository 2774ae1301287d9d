"""Running a build step, and where builds go: what the runner build and the CMSIS-NN module
build share (cortexm.firmware.build, .helper), without either's logic.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from cortexm import sources
from cortexm.base import children, trust, writes
from cortexm.base.errors import CortexmError, StorageError

BUILD_CACHE_ENV = "CORTEXM_BUILD_CACHE"


def builds_dir() -> Path:
    """~/.cache/cortexm/builds, or $CORTEXM_BUILD_CACHE (CI caches, tests)."""
    return trust.require_private(Path(os.environ.get(BUILD_CACHE_ENV) or sources.cache_dir() / "builds"),
                                 "runner build cache", f"set {BUILD_CACHE_ENV} to a folder of your own")


def build_jobs() -> int:
    return int(os.environ.get("CORTEXM_BUILD_JOBS") or os.cpu_count() or 2)


_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


# What the environment could slip into a compile or a link without entering a build's key: the
# flags CMake reads from the environment on a first configure, its own settings, and what GCC
# reads (include and library paths, its own location). A build is what its key says, so builds
# run without them (as Nix builds do). Nix's own compiler wrapper variables (NIX_*) stay: there
# the derivation is the key.
_BUILD_ENV_DROPPED = ("CFLAGS", "CXXFLAGS", "CPPFLAGS", "ASMFLAGS", "LDFLAGS", "CC", "CXX", "ASM", "CPATH",
                     "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH",
                     "GCC_EXEC_PREFIX", "GCC_COMPARE_DEBUG", "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES",
                     "MAKEFLAGS", "NINJA_STATUS")


def build_environment() -> dict[str, str]:
    """This process's environment without what would change a build behind its key."""
    return {k: v for k, v in os.environ.items() if k not in _BUILD_ENV_DROPPED and not k.startswith("CMAKE_")}


def _run(work: Path, command: list[str], log_name: str, what: str, task=None) -> None:
    """Runs a build step into its log, in build_environment(); ninja's [N/M] lines move `task` along."""
    log = work / log_name
    with writes.stream(log) as f, children.started(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, text=True, errors="replace",
                                               env=build_environment()) as process:
        assert process.stdout is not None  # stdout=PIPE
        for line in process.stdout:
            f.write(line)
            step = _NINJA_STEP.match(line)
            if step and task is not None:
                task.update(completed=int(step.group(1)), total=int(step.group(2)))
        returncode = process.wait()
    if returncode != 0:
        text = log.read_text(errors="replace")
        full = _NO_ROOM.search(text)
        if full:  # the disk, not the code: the run stops with the place named
            raise StorageError(f"{work}: {what} failed: {full.group(0)} (log: {log})")
        raise CortexmError(f"{what} failed: {first_problem(text)} (log: {log})")


_NO_ROOM = re.compile(r"No space left on device|Disk quota exceeded|Read-only file system")


_PROBLEM_PATTERNS = (
    re.compile(r"select_kernels: (.*)"),  # an operator the tree has no kernel for
    re.compile(r"^.*?(\S+:\d+:\d+: (?:fatal )?error: .*)$"),  # compiler
    re.compile(r"^.*(undefined reference to .*)$"),  # linker
    re.compile(r"^.*(region `\S+' overflowed by .*)$"),  # linker: board memory too small
    re.compile(r"^CMake Error.*"),
    re.compile(r"^FAILED: .*"),
)


def first_problem(log: str) -> str:
    """The line of a build log that says best what went wrong."""
    lines = log.splitlines()
    for pattern in _PROBLEM_PATTERNS:
        for n, line in enumerate(lines):
            m = pattern.search(line)
            if not m:
                continue
            if line.startswith("CMake Error"):
                detail = next((l.strip() for l in lines[n + 1:] if l.strip()), "")
                return f"{line.strip()} {detail}".strip()
            return (m.group(1) if m.groups() else m.group(0)).strip()
    return next((l.strip() for l in reversed(lines) if l.strip()), "no output")
