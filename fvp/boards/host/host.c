/* The board API (common/board.h) on a hosted Linux C library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "board.h"

const uint32_t board_cpu_hz = BOARD_CPU_HZ;

/* The runner's main() takes no arguments (a bare-metal program has none): read them back. */
int board_command_line(char* buffer, size_t size, char** argv, int max_args) {
  FILE* file = fopen("/proc/self/cmdline", "rb");
  if (file == NULL) {
    return -1;
  }
  size_t length = fread(buffer, 1, size - 1, file);
  int more = fgetc(file) != EOF;
  fclose(file);
  if (more) {
    return -2;
  }
  buffer[length] = '\0';
  int argc = 0;
  for (size_t i = 0; i < length; i += strlen(buffer + i) + 1) {
    if (argc == max_args) {
      return -2;
    }
    argv[argc++] = buffer + i;
  }
  return argc;
}

void board_exit(int status) {
  fflush(stdout);
  fflush(stderr);
  exit(status);
}

void board_write(const char* text) {
  fputs(text, stderr);
}

static struct timespec started;

void board_counter_start(void) {
  clock_gettime(CLOCK_MONOTONIC, &started);
}

uint64_t board_counter_read(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)(now.tv_sec - started.tv_sec) * 1000000000u + (uint64_t)now.tv_nsec - (uint64_t)started.tv_nsec;
}

/* Not used: the runner's arena takes every block from malloc on a hosted board. */
uint8_t* board_arena_begin(void) {
  return NULL;
}

uint8_t* board_arena_end(void) {
  return NULL;
}

/* The host's stack and heap are the operating system's: not measured. */
size_t board_stack_used(void) {
  return 0;
}

size_t board_stack_size(void) {
  return 0;
}

size_t board_heap_used(void) {
  return 0;
}

size_t board_heap_size(void) {
  return 0;
}
