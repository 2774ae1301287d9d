# Corstone-300 FVP: Cortex-M55 at 25 MHz (SysTick ticks; the FVP is not cycle accurate).
set(BOARD_CPU_HZ 25000000)
