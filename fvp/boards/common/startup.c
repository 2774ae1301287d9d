/* Vector table and reset handler for every board (linked with -nostartfiles:
 * newlib's crt0 would neither enable the FPU/MVE nor know our memory map). */
#include <stdint.h>
#include <stdio.h>

#include "board.h"

extern uint32_t __stack_top;
extern uint32_t __data_load, __data_start, __data_end;
extern uint32_t __bss_start, __bss_end;

extern void initialise_monitor_handles(void); /* newlib's librdimon */
extern void __libc_init_array(void);
extern void board_stdio_started(void); /* semihosting.c */
extern void board_stack_paint(void);   /* memory.c */
extern int main(void);

void Reset_Handler(void);
void Fault_Handler(void);
void SysTick_Handler(void);

static void Unexpected_Handler(void) {
  board_write("F unexpected interrupt\n");
  board_exit(4);
}

/* Cortex-M system exceptions; no device interrupt is enabled, so none is listed. */
__attribute__((section(".vectors"), used)) static void (*const vector_table[16])(void) = {
    (void (*)(void))&__stack_top,
    Reset_Handler,
    Unexpected_Handler, /* NMI */
    Fault_Handler,      /* HardFault */
    Fault_Handler,      /* MemManage */
    Fault_Handler,      /* BusFault */
    Fault_Handler,      /* UsageFault */
    Fault_Handler,      /* SecureFault (Armv8-M) */
    0,
    0,
    0,
    Unexpected_Handler, /* SVCall */
    Unexpected_Handler, /* DebugMonitor */
    0,
    Unexpected_Handler, /* PendSV */
    SysTick_Handler,
};

#define SCB_VTOR (*(volatile uint32_t*)0xE000ED08u)
#define SCB_CPACR (*(volatile uint32_t*)0xE000ED88u)

/* The compiler must not turn the copy loops into FPU/MVE code: the coprocessors
 * are not enabled yet when they run. */
__attribute__((section(".text.reset"), optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize")))
void Reset_Handler(void) {
  SCB_VTOR = (uint32_t)vector_table;
  /* Full access to CP10 and CP11: the FPU, and MVE on Armv8.1-M. Writes are
   * ignored on cores without them. */
  SCB_CPACR |= (0xFu << 20);
  __asm__ volatile("dsb\n\tisb" ::: "memory");

  for (uint32_t *src = &__data_load, *dst = &__data_start; dst < &__data_end;) {
    *dst++ = *src++;
  }
  for (uint32_t* dst = &__bss_start; dst < &__bss_end;) {
    *dst++ = 0;
  }
  board_stack_paint(); /* memory.c: how deep the stack goes is read back at the end */

  initialise_monitor_handles();
  board_stdio_started();
  __libc_init_array(); /* static constructors: kernel registration runs here */
  board_exit(main());
}

/* __libc_init_array calls these; crti.o/crtn.o, which define them, are not linked. */
void _init(void) {}
void _fini(void) {}
