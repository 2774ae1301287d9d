// ExecuTorch's platform layer (runtime/platform/platform.h) on the board support.
//
// Log lines follow upstream's runner: a level letter, then the message, so
// `E ...`/`F ...` lines mark failures for tools that scan the output
// (backends/arm/test/runner_utils.py) as well as for cortexm.
#include <cstdio>

#include <executorch/runtime/platform/platform.h>

#include "board.h"
#include "exit_status.h"

extern "C" {

void et_pal_init(void) {}

ET_NORETURN void et_pal_abort(void) {
  std::printf("F ExecuTorch aborted\n");
  board_exit(cortexm::kExitAbort);
}

et_timestamp_t et_pal_current_ticks(void) {
  return board_counter_read();
}

et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void) {
  return {1000000000u, board_cpu_hz};
}

void et_pal_emit_log_message(
    ET_UNUSED et_timestamp_t timestamp,
    et_pal_log_level_t level,
    const char* filename,
    ET_UNUSED const char* function,
    size_t line,
    const char* message,
    ET_UNUSED size_t length) {
  std::printf("%c [%s:%lu] %s\n", static_cast<char>(level), filename, static_cast<unsigned long>(line), message);
}

// The runner gives ExecuTorch all memory through its allocators.
void* et_pal_allocate(ET_UNUSED size_t size) {
  return nullptr;
}

void et_pal_free(ET_UNUSED void* ptr) {}

}  // extern "C"
