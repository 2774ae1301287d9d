# Toolchain file for the GNU Arm Embedded family (arm-none-eabi-gcc), any Cortex-M core.
#
# The core's own flags (-mcpu, -mfloat-abi, -mfpu) are not repeated here: they live in
# one place, cortexm/base/targets.py, and reach CMake as CORTEXM_CPU_FLAGS, e.g.
#   -DCORTEXM_CPU_FLAGS="-mcpu=cortex-m55;-mthumb;-mfloat-abi=hard"
# ARM_TOOLCHAIN_PREFIX selects another installation (e.g. the Arm GNU Toolchain from Nix).

set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(ARM_TOOLCHAIN_PREFIX "arm-none-eabi-" CACHE STRING "Prefix (optionally with a path) of the arm-none-eabi tools")
set(CMAKE_C_COMPILER "${ARM_TOOLCHAIN_PREFIX}gcc")
set(CMAKE_CXX_COMPILER "${ARM_TOOLCHAIN_PREFIX}g++")
set(CMAKE_ASM_COMPILER "${ARM_TOOLCHAIN_PREFIX}gcc")
set(CMAKE_OBJCOPY "${ARM_TOOLCHAIN_PREFIX}objcopy" CACHE FILEPATH "")
set(CMAKE_SIZE "${ARM_TOOLCHAIN_PREFIX}size" CACHE FILEPATH "")

# No host to run test executables on: try_compile builds a static library instead.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# try_compile projects need the core flags too, or they pick a multilib that does not match.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CORTEXM_CPU_FLAGS)
if(NOT CORTEXM_CPU_FLAGS)
  message(FATAL_ERROR "set CORTEXM_CPU_FLAGS to the core's compiler flags, e.g. -mcpu=cortex-m7;-mthumb;-mfloat-abi=hard;-mfpu=fpv5-d16")
endif()
string(REPLACE ";" " " _cortexm_cpu_flags "${CORTEXM_CPU_FLAGS}")

# Every function and object in its own section, so --gc-sections keeps only what is reached.
set(_cortexm_common "${_cortexm_cpu_flags} -ffunction-sections -fdata-sections")
set(CMAKE_C_FLAGS_INIT "${_cortexm_common}")
set(CMAKE_CXX_FLAGS_INIT "${_cortexm_common} -fno-exceptions -fno-rtti -fno-unwind-tables -fno-asynchronous-unwind-tables")
set(CMAKE_ASM_FLAGS_INIT "${_cortexm_cpu_flags}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_cortexm_cpu_flags} -Wl,--gc-sections")

# Deterministic archives (members without timestamps, uids or modes) whatever the ar's default
# (Debian's is D, a release toolchain's may not be): two builds give the same bytes.
foreach(_cortexm_lang C CXX ASM)
  set(CMAKE_${_cortexm_lang}_ARCHIVE_CREATE "<CMAKE_AR> qcD <TARGET> <LINK_FLAGS> <OBJECTS>")
  set(CMAKE_${_cortexm_lang}_ARCHIVE_APPEND "<CMAKE_AR> qD <TARGET> <LINK_FLAGS> <OBJECTS>")
  set(CMAKE_${_cortexm_lang}_ARCHIVE_FINISH "<CMAKE_RANLIB> -D <TARGET>")
endforeach()

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
