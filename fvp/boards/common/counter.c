/* A 64-bit count of CPU clock ticks from SysTick.
 *
 * QEMU has no cycle counter (DWT reads 0), but with -icount its SysTick advances a
 * fixed virtual time per instruction, so ticks convert exactly to instructions
 * (kernels/runner: `I instructions:`). */
#include <stdint.h>

#include "board.h"

#define REG(address) (*(volatile uint32_t*)(address))
#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)
#define SCB_ICSR REG(0xE000ED04u)

enum {
  CSR_ENABLE = 1u << 0,
  CSR_TICKINT = 1u << 1,
  CSR_CLKSOURCE_CPU = 1u << 2,
  ICSR_PENDSTSET = 1u << 26,
  RELOAD = 0xFFFFFFu,
};

const uint32_t board_cpu_hz = BOARD_CPU_HZ;

static volatile uint32_t wraps;

void SysTick_Handler(void) {
  wraps++;
}

void board_counter_start(void) {
  SYST_CSR = 0;
  SYST_RVR = RELOAD;
  SYST_CVR = 0; /* any write clears it; the count starts at RELOAD */
  wraps = 0;
  SYST_CSR = CSR_CLKSOURCE_CPU | CSR_TICKINT | CSR_ENABLE;
}

uint64_t board_counter_read(void) {
  __asm__ volatile("cpsid i" ::: "memory");
  uint32_t value = SYST_CVR;
  uint32_t whole = wraps;
  /* Wrapped, but the interrupt has not run yet: count that wrap, and re-read the
   * value, which is now surely after the reload. */
  if (SCB_ICSR & ICSR_PENDSTSET) {
    whole += 1;
    value = SYST_CVR;
  }
  __asm__ volatile("cpsie i" ::: "memory");
  return (uint64_t)whole * (RELOAD + 1u) + (RELOAD - value);
}
