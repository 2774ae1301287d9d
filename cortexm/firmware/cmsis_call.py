"""A C file that calls CMSIS-NN (cortexm.testing.cmsis_call), built for a core.

What enters: the C file, a core and its board, a CMSIS-NN tree. What leaves: the ELF
(kernels/cmsis_call: CMSIS-NN with the core's flags, as the runner builds it, and the board
support). CMSIS-NN is compiled once per tree content, core and board; a new
C file recompiles only itself.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from cortexm.base import writes
from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core

SOURCE = "call.c"  # the C file's name in the build folder: another file rebuilds without a new configure


def build(c_file: Path, core: Core, board: str, cmsis_nn: Path) -> Path:
    """The ELF of `c_file` for `core` on `board`."""
    from cortexm.base import locks
    from cortexm.firmware import paths
    from cortexm.firmware.commands import _run, builds_dir
    from cortexm.firmware.tools import gcc_version, toolchain_prefix
    from cortexm.sources import identity

    if core.hosted:
        raise CortexmError(f"{core.name}: a CMSIS-NN call is built for a Cortex-M core only")
    if shutil.which("cmake") is None:
        raise CortexmError("cmake not found: the CMSIS-NN call cannot be built")
    key = hashlib.sha256(json.dumps([identity.tree(cmsis_nn).key, core.name, board,
                                     gcc_version(toolchain_prefix())]).encode()).hexdigest()[:16]
    work = builds_dir() / "cmsis-call" / key
    work.mkdir(parents=True, exist_ok=True)
    with locks.waiting(work):
        writes.atomic(work / SOURCE, Path(c_file).read_text())
        if not (work / "build.ninja").is_file() and not (work / "Makefile").is_file():
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            _run(work, ["cmake", *generator, "-S", str(paths.kernels() / "cmsis_call"), "-B", str(work),
                        f"-DCMAKE_TOOLCHAIN_FILE={paths.kernels() / 'toolchain' / 'arm-none-eabi-gcc.cmake'}",
                        f"-DCORTEXM_BOARDS_DIR={paths.boards()}", f"-DARM_TOOLCHAIN_PREFIX={toolchain_prefix()}",
                        f"-DCORTEXM_CPU_FLAGS={';'.join(core.gcc_flags)}", f"-DCORTEXM_BOARD={board}",
                        f"-DCMSIS_NN_SRC={cmsis_nn}", f"-DCALL_SOURCE={work / SOURCE}"],
                 "configure.log", f"configuring the CMSIS-NN call for {core.name}")
        _run(work, ["cmake", "--build", str(work), "--target", "cmsis_call"], "build.log",
             f"building the CMSIS-NN call for {core.name}")
        elf = work / "cmsis_call.elf"
        copy = work / f"cmsis_call-{hashlib.sha256(elf.read_bytes()).hexdigest()[:12]}.elf"
        if not copy.is_file():  # the run reads a file no later build replaces
            writes.copy(elf, copy)
    return copy

