// The runner's exit statuses (the board support uses 4 and 5 for unexpected
// interrupts and faults, see fvp/boards/common).
#pragma once

namespace cortexm {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // the program could not be loaded or run
constexpr int kExitUsage = 2;   // bad command line or input files
constexpr int kExitMemory = 3;  // a memory pool is too small for the program
constexpr int kExitAbort = 6;   // ExecuTorch aborted (ET_CHECK)
constexpr int kExitGuard = 7;   // a kernel wrote outside its buffers (--guard)

}  // namespace cortexm
