/* Heap and arena bounds from the linker script (sections.ld). */
#include <errno.h>
#include <stdint.h>

#include "board.h"

extern uint8_t __heap_start, __heap_end;
extern uint8_t __arena_start, __arena_end;
extern uint32_t __stack_bottom, __stack_top;

static uint8_t* heap_top = &__heap_start;

/* What board_stack_used() looks for: a word the stack never held since reset. */
#define STACK_PAINT 0xC5A5C5A5u

/* Called at reset, before main: paints the stack below the caller's frame. */
void board_stack_paint(void) {
  uint32_t* sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (volatile uint32_t* p = &__stack_bottom; p < (volatile uint32_t*)sp - 16;) {
    *p++ = STACK_PAINT;
  }
}

size_t board_stack_used(void) {
  const uint32_t* p = &__stack_bottom;
  while (p < &__stack_top && *p == STACK_PAINT) {
    p++;
  }
  return (size_t)((const uint8_t*)&__stack_top - (const uint8_t*)p);
}

size_t board_stack_size(void) {
  return (size_t)((const uint8_t*)&__stack_top - (const uint8_t*)&__stack_bottom);
}

size_t board_heap_used(void) {
  return (size_t)(heap_top - &__heap_start);
}

size_t board_heap_size(void) {
  return (size_t)(&__heap_end - &__heap_start);
}

uint8_t* board_arena_begin(void) {
  return &__arena_start;
}

uint8_t* board_arena_end(void) {
  return &__arena_end;
}

/* newlib's malloc (stdio buffers) grows here. librdimon's own _sbrk assumes the
 * heap ends at the stack, which is not where our boards put either. */
void* _sbrk(intptr_t increment) {
  if (increment > &__heap_end - heap_top || increment < &__heap_start - heap_top) {
    errno = ENOMEM;
    return (void*)-1;
  }
  uint8_t* previous = heap_top;
  heap_top += increment;
  return previous;
}
