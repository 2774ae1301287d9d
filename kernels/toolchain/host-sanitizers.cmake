# Toolchain file for the host build of the runner: the system's C and C++ compilers, with
# AddressSanitizer and UBSan on everything (ExecuTorch's runtime, its kernels, CMSIS-NN's
# scalar C, the runner), and debug information so their reports name functions and lines.
# Left shifts of negative values are left alone: CMSIS-NN relies on them, and GCC defines
# them (it does not use C's latitude to treat signed `<<` as undefined; GCC manual,
# "Integers implementation").
set(CMAKE_C_COMPILER cc)
set(CMAKE_CXX_COMPILER c++)
set(_cortexm_sanitize "-fsanitize=address,undefined -fno-sanitize=shift-base -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g")
set(CMAKE_C_FLAGS_INIT "${_cortexm_sanitize}")
set(CMAKE_CXX_FLAGS_INIT "${_cortexm_sanitize}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-fsanitize=address,undefined")
