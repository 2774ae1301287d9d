/* Heap and arena bounds from the linker script (sections.ld). */
#include <errno.h>
#include <stdint.h>

#include "board.h"

extern uint8_t __heap_start, __heap_end;
extern uint8_t __arena_start, __arena_end;

uint8_t* board_arena_begin(void) {
  return &__arena_start;
}

uint8_t* board_arena_end(void) {
  return &__arena_end;
}

/* newlib's malloc (stdio buffers) grows here. librdimon's own _sbrk assumes the
 * heap ends at the stack, which is not where our boards put either. */
void* _sbrk(intptr_t increment) {
  static uint8_t* top = &__heap_start;
  if (increment > &__heap_end - top || increment < &__heap_start - top) {
    errno = ENOMEM;
    return (void*)-1;
  }
  uint8_t* previous = top;
  top += increment;
  return previous;
}
