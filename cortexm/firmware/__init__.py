"""Runner firmware: cross-compiling ExecuTorch, its kernels and CMSIS-NN per core.

The C/CMake side lives in the repository's kernels/ (the runner and its CMake
project) and fvp/boards/ (startup code and linker scripts per board); this
package drives it and caches what it builds.
"""

from cortexm.firmware.build import BuildOptions, Runner, build_runner  # noqa: F401
from cortexm.firmware.ops import model_ops, suite_ops  # noqa: F401
