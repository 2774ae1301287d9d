/* Arm semihosting calls the runner needs beyond newlib's librdimon (which does
 * files and the console): the command line and an exit status. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "board.h"

enum {
  SYS_WRITE0 = 0x04,
  SYS_GET_CMDLINE = 0x15,
  SYS_EXIT = 0x18,
  SYS_EXIT_EXTENDED = 0x20,
};

enum {
  ADP_STOPPED_APPLICATION_EXIT = 0x20026,
  ADP_STOPPED_RUNTIME_ERROR_UNKNOWN = 0x20023,
};

/* stdio may only be flushed once the reset handler has set it up: a fault can
 * come before (RAM then holds anything, hence a magic value, not a flag). */
enum { STDIO_READY = 0x5741D10 };
volatile uint32_t board_stdio_state;

static int semihosting_call(int operation, void* argument) {
  register int r0 __asm__("r0") = operation;
  register void* r1 __asm__("r1") = argument;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void board_stdio_started(void) {
  board_stdio_state = STDIO_READY;
}

void board_write(const char* text) {
  semihosting_call(SYS_WRITE0, (void*)text);
}

int board_command_line(char* buffer, size_t size, char** argv, int max_args) {
  struct {
    char* buffer;
    size_t size;
  } block = {buffer, size - 1};
  if (semihosting_call(SYS_GET_CMDLINE, &block) != 0) {
    return -1;
  }
  if (block.size >= size - 1) {
    return -2; /* filled to the last byte: it may go on */
  }
  buffer[block.size] = '\0';
  int argc = 0;
  for (char* word = strtok(buffer, " "); word != NULL; word = strtok(NULL, " ")) {
    if (argc == max_args) {
      return -2;
    }
    argv[argc++] = word;
  }
  return argc;
}

void board_exit(int status) {
  if (board_stdio_state == STDIO_READY) {
    fflush(stdout);
    fflush(stderr);
  }
  if (status != 0) {
    /* Only the extended call carries a status on 32-bit targets; a host
     * without it returns, and the plain call still reports a failure. */
    struct {
      int reason;
      int status;
    } block = {ADP_STOPPED_APPLICATION_EXIT, status};
    semihosting_call(SYS_EXIT_EXTENDED, &block);
    semihosting_call(SYS_EXIT, (void*)ADP_STOPPED_RUNTIME_ERROR_UNKNOWN);
  } else {
    semihosting_call(SYS_EXIT, (void*)ADP_STOPPED_APPLICATION_EXIT);
  }
  for (;;) {
  }
}
