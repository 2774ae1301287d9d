/* Faults end the run with the fault registers on one `F ` line and exit status 5.
 *
 * A core running code built for another (an M55 runner on an M7) lands here at
 * its first unknown instruction, so this must itself use only instructions every
 * Cortex-M has: it formats by hand, and kernels/CMakeLists.txt compiles it without
 * vectorisation (MVE) or low-overhead loops (Armv8.1-M DLS/LE). */
#include <stdint.h>

#include "board.h"

#define REG(address) (*(volatile uint32_t*)(address))
#define SCB_CFSR REG(0xE000ED28u)
#define SCB_HFSR REG(0xE000ED2Cu)
#define SCB_MMFAR REG(0xE000ED34u)
#define SCB_BFAR REG(0xE000ED38u)

enum { EXIT_FAULT = 5 };

struct cause {
  uint32_t bit;
  const char* text;
};

/* CFSR bits, most telling first (Armv7-M/Armv8-M ARM, B3.2.15). */
static const struct cause causes[] = {
    {1u << 16, "undefined instruction (code built for another core?)"},
    {1u << 19, "no coprocessor: FPU/MVE instruction on a core without it or with it disabled"},
    {1u << 17, "invalid state"},
    {1u << 18, "invalid exception return"},
    {1u << 20, "stack overflow"},
    {1u << 24, "unaligned access"},
    {1u << 25, "division by zero"},
    {1u << 9, "precise bus error at BFAR"},
    {1u << 10, "imprecise bus error"},
    {1u << 8, "instruction bus error"},
    {1u << 12, "bus error on exception stacking"},
    {1u << 1, "data access violation at MMFAR"},
    {1u << 0, "instruction access violation"},
};

static char* put_text(char* out, const char* text) {
  while (*text) {
    *out++ = *text++;
  }
  return out;
}

static char* put_hex(char* out, const char* name, uint32_t value) {
  out = put_text(out, name);
  *out++ = '0';
  *out++ = 'x';
  for (int shift = 28; shift >= 0; shift -= 4) {
    *out++ = "0123456789abcdef"[(value >> shift) & 0xF];
  }
  return out;
}

/* `frame` is the exception stack frame: r0-r3, r12, lr, pc, xpsr. */
__attribute__((used)) static void report_fault(const uint32_t* frame) {
  static char line[320];
  uint32_t cfsr = SCB_CFSR;
  const char* why = (SCB_HFSR & (1u << 1)) ? "vector table read failed" : "fault";
  for (unsigned i = 0; i < sizeof(causes) / sizeof(causes[0]); i++) {
    if (cfsr & causes[i].bit) {
      why = causes[i].text;
      break;
    }
  }
  char* out = put_text(line, "F HardFault: ");
  out = put_text(out, why);
  out = put_hex(out, " CFSR=", cfsr);
  out = put_hex(out, " HFSR=", SCB_HFSR);
  out = put_hex(out, " MMFAR=", SCB_MMFAR);
  out = put_hex(out, " BFAR=", SCB_BFAR);
  out = put_hex(out, " PC=", frame[6]);
  out = put_hex(out, " LR=", frame[5]);
  *out++ = '\n';
  *out = '\0';
  board_write(line);
  board_exit(EXIT_FAULT);
}

/* Finds the stack the fault was taken on (bit 2 of EXC_RETURN) and hands its frame on. */
__attribute__((naked)) void Fault_Handler(void) {
  __asm__ volatile(
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "b report_fault\n\t");
}
