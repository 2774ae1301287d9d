# The host (Linux): the runner as an ordinary program, built with AddressSanitizer and UBSan
# (kernels/toolchain/host-sanitizers.cmake), CMSIS-NN's scalar C as on the Cortex-M3. Every
# planned buffer is its own heap allocation of its exact size, so ASan sees any byte a kernel
# writes or reads outside it.
set(BOARD_CPU_HZ 1000000000)  # board_counter_read counts nanoseconds
set(CORTEXM_HOSTED ON)
