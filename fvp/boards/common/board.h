/* What a runner gets from the board support: console, command line, exit status,
 * a cycle counter and the memory left over for models. Implemented once for all
 * boards in this folder; a board folder only says where memory is and how fast
 * the CPU clock runs (board.cmake, memory.ld). */
#ifndef CORTEXM_BOARD_H
#define CORTEXM_BOARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CPU clock of the board in Hz, the clock SysTick counts (board.cmake sets it). */
extern const uint32_t board_cpu_hz;

/* The command line the simulator passes (QEMU -semihosting-config arg=...,
 * FVP cpu0.semihosting-cmd_line), split into words in place; argv[0] is the
 * program name. Returns argc, -1 when the host gives none, or -2 when it does not fit
 * (more than max_args words, or more than size - 1 characters): never a cut one. */
int board_command_line(char* buffer, size_t size, char** argv, int max_args);

/* Flushes stdio and ends the simulation with `status` as the host's exit status. */
__attribute__((noreturn)) void board_exit(int status);

/* Writes a NUL-terminated string to the host console without stdio, so it
 * works inside a fault handler. */
void board_write(const char* text);

/* Ticks of the CPU clock since board_counter_start(); 64-bit, counts across
 * SysTick wraps. */
void board_counter_start(void);
uint64_t board_counter_read(void);

/* The RAM left for models after code, data, heap and stack: [begin, end). */
uint8_t* board_arena_begin(void);
uint8_t* board_arena_end(void);

/* The deepest the stack went since reset, and the bytes reserved for it (the stack is
 * painted at reset and read back: 0 where the board cannot tell); the heap newlib took. */
size_t board_stack_used(void);
size_t board_stack_size(void);
size_t board_heap_used(void);
size_t board_heap_size(void);

#ifdef __cplusplus
}
#endif

#endif
