// executor_runner: runs any ExecuTorch program on a simulated Cortex-M.
//
// Speaks upstream's semihosting protocol (backends/arm/test/runner_utils.py), so
// its tooling works unchanged:
//
//   executor_runner -m program.pte -o out -i i0.bin [-i i1.bin ...] [--icount-shift N]
//                   [--guard BYTES] [--fill BYTE] [--trace 1] [--load-only 1]
//
// The program and inputs are read from the host at run time, inputs as raw bytes
// in the program's dim order (scalar inputs: 8-byte int64/float64, 1-byte bool);
// output K is written raw to out-K.bin. Failures are `E `/`F ` lines and a
// non-zero exit status. The time of execute() is printed in SysTick ticks; given
// the QEMU -icount shift it is also printed as an exact instruction count.
//
// --guard BYTES puts a guard region of that size before and after every planned
// buffer, filled with a pattern, runs the method one instruction at a time and
// checks every guard after each: a kernel writing outside its buffers is named by
// instruction, buffer and bytes (`E guard: ...`, exit 7). With a program planned one
// tensor per buffer (cortexm.checking.memory_plan) that names the tensor. --fill BYTE fills
// the planned buffers before the run: two runs with different fills that give
// different outputs read memory nothing wrote. --trace 1 runs one instruction at a
// time too and prints `I instruction K` before each, so a sanitizer's report (the host
// build) follows the instruction that caused it.
//
// --load-only 1 loads the program and its method exactly as a run does (Program::load
// with the default verification, the method meta, the planned buffers, load_method)
// and stops there: `I loaded` and exit status 0 when everything loaded, else the usual
// `E ` line and a non-zero status. Inputs are not needed (given, they are read); nothing
// executes. It is the runtime's verdict on a program, e.g. for checking `cortexm verify`
// against it.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include "arena.h"
#include "board.h"
#include "exit_status.h"

#ifndef CORTEXM_METHOD_POOL_SIZE
#define CORTEXM_METHOD_POOL_SIZE (256 * 1024)
#endif
#ifndef CORTEXM_TEMP_POOL_SIZE
#define CORTEXM_TEMP_POOL_SIZE (64 * 1024)
#endif

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::extension::BufferDataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::Tag;
using executorch::runtime::TensorInfo;

// A packed program's 16 inputs take 32 words, the memory oracle's options and the
// simulator's a few more.
constexpr int kMaxArgs = 64;
constexpr size_t kMaxInputs = 16;
constexpr size_t kMaxPlannedBuffers = 512;  // a program planned one tensor per buffer has many
constexpr size_t kMaxOutputs = 16;

struct File {
  uint8_t* data = nullptr;
  size_t size = 0;
};

struct Options {
  const char* program = nullptr;
  const char* output_base = nullptr;
  const char* inputs[kMaxInputs] = {};
  size_t input_count = 0;
  int icount_shift = -1;  // QEMU's -icount shift; -1 when not on QEMU
  size_t guard = 0;  // bytes of guard around each planned buffer; 0: none
  int fill = -1;  // byte to fill the planned buffers with before the run; -1: none
  bool trace = false;  // print each instruction before it runs
  bool load_only = false;  // stop after load_method: `I loaded`
  bool calls = false;  // time every instruction: `I call N instructions: X` (the cost of each kernel call)
};

[[noreturn]] void fail(int status) {
  board_exit(status);
}

Options parse_arguments(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; i++) {
    const char* flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value == nullptr) {
      std::printf("E usage: %s needs a value\n", flag);
      fail(cortexm::kExitUsage);
    }
    i++;
    if (std::strcmp(flag, "-m") == 0) {
      options.program = value;
    } else if (std::strcmp(flag, "-o") == 0) {
      options.output_base = value;
    } else if (std::strcmp(flag, "-i") == 0) {
      if (options.input_count == kMaxInputs) {
        std::printf("E usage: more than %u inputs\n", static_cast<unsigned>(kMaxInputs));
        fail(cortexm::kExitUsage);
      }
      options.inputs[options.input_count++] = value;
    } else if (std::strcmp(flag, "--icount-shift") == 0) {
      options.icount_shift = std::atoi(value);
    } else if (std::strcmp(flag, "--guard") == 0) {
      options.guard = static_cast<size_t>(std::atoi(value));
    } else if (std::strcmp(flag, "--fill") == 0) {
      options.fill = std::atoi(value) & 0xff;
    } else if (std::strcmp(flag, "--trace") == 0) {
      options.trace = std::atoi(value) != 0;
    } else if (std::strcmp(flag, "--load-only") == 0) {
      options.load_only = std::atoi(value) != 0;
    } else if (std::strcmp(flag, "--calls") == 0) {
      options.calls = std::atoi(value) != 0;
    } else {
      // Upstream's runner ignores what it does not know (e.g. --server_mode); so do we.
      std::printf("I ignoring %s %s\n", flag, value);
    }
  }
  if (options.program == nullptr || options.output_base == nullptr) {
    std::printf("E usage: executor_runner -m program.pte -o output_base -i input.bin [-i ...]\n");
    fail(cortexm::kExitUsage);
  }
  return options;
}

File read_file(const char* path, cortexm::Arena& arena, const char* what) {
  FILE* file = std::fopen(path, "rb");
  if (file == nullptr) {
    std::printf("E cannot open %s %s (errno %d)\n", what, path, errno);
    fail(cortexm::kExitUsage);
  }
  std::fseek(file, 0, SEEK_END);
  long size = std::ftell(file);
  std::fseek(file, 0, SEEK_SET);
  File result;
  result.size = size > 0 ? static_cast<size_t>(size) : 0;
  result.data = arena.take(result.size, what);
  if (result.data == nullptr) {
    fail(cortexm::kExitMemory);
  }
  if (std::fread(result.data, 1, result.size, file) != result.size) {
    std::printf("E cannot read %s %s: short read\n", what, path);
    fail(cortexm::kExitUsage);
  }
  std::fclose(file);
  return result;
}

// "int8[1,8,8,4]" for messages.
const char* describe(const TensorInfo& info) {
  static char text[96];
  int n = std::snprintf(text, sizeof(text), "%s[", executorch::runtime::toString(info.scalar_type()));
  auto sizes = info.sizes();
  for (size_t d = 0; d < sizes.size() && n < static_cast<int>(sizeof(text)) - 12; d++) {
    n += std::snprintf(text + n, sizeof(text) - n, d ? ",%d" : "%d", static_cast<int>(sizes[d]));
  }
  std::snprintf(text + n, sizeof(text) - n, "]");
  return text;
}

bool input_size_fits(size_t index, const char* path, size_t size, const char* what, size_t expected) {
  if (size == expected) {
    return true;
  }
  std::printf(
      "E input %u: %s has %lu B, the program's input %u is %s = %lu B\n",
      static_cast<unsigned>(index),
      path,
      static_cast<unsigned long>(size),
      static_cast<unsigned>(index),
      what,
      static_cast<unsigned long>(expected));
  return false;
}

Error set_tensor_input(Method& method, const MethodMeta& meta, size_t index, const File& file, const char* path) {
  Result<TensorInfo> info = meta.input_tensor_meta(index);
  if (!info.ok()) {
    return info.error();
  }
  if (!input_size_fits(index, path, file.size, describe(info.get()), info->nbytes())) {
    return Error::InvalidArgument;
  }
  // set_input copies the data into the planned input, or aliases it when the
  // input is not planned: the file buffer lives until the end of the run.
  TensorImpl impl(
      info->scalar_type(),
      static_cast<ssize_t>(info->sizes().size()),
      const_cast<TensorImpl::SizesType*>(info->sizes().data()),
      file.data,
      const_cast<TensorImpl::DimOrderType*>(info->dim_order().data()));
  return method.set_input(EValue(Tensor(&impl)), index);
}

// Non-tensor inputs must be set too, or execute() fails with "Input N has not been
// set"; the runtime checks the value against the one the program was exported with.
Error set_scalar_input(Method& method, Tag tag, size_t index, const File& file, const char* path) {
  if (tag != Tag::Int && tag != Tag::Double && tag != Tag::Bool) {
    std::printf("E input %u: a %s, which the runner cannot read from a file\n", static_cast<unsigned>(index), executorch::runtime::tag_to_string(tag));
    return Error::InvalidArgument;
  }
  if (!input_size_fits(index, path, file.size, executorch::runtime::tag_to_string(tag), tag == Tag::Bool ? 1 : 8)) {
    return Error::InvalidArgument;
  }
  EValue value;
  if (tag == Tag::Int) {
    int64_t v;
    std::memcpy(&v, file.data, sizeof(v));
    value = EValue(v);
  } else if (tag == Tag::Double) {
    double v;
    std::memcpy(&v, file.data, sizeof(v));
    value = EValue(v);
  } else {
    value = EValue(file.data[0] != 0);
  }
  return method.set_input(value, index);
}

bool write_output(const EValue& value, const char* base, size_t index) {
  const void* data = nullptr;
  size_t size = 0;
  if (value.isTensor()) {
    data = value.toTensor().const_data_ptr();
    size = value.toTensor().nbytes();
  } else if (value.isInt()) {
    data = &value.payload.copyable_union.as_int;
    size = sizeof(int64_t);
  } else if (value.isDouble()) {
    data = &value.payload.copyable_union.as_double;
    size = sizeof(double);
  } else if (value.isBool()) {
    data = &value.payload.copyable_union.as_bool;
    size = 1;
  } else {
    std::printf("E output %u: a %s, which cannot be written\n", static_cast<unsigned>(index), executorch::runtime::tag_to_string(value.tag));
    return false;
  }
  char path[96];
  std::snprintf(path, sizeof(path), "%s-%u.bin", base, static_cast<unsigned>(index));
  FILE* file = std::fopen(path, "wb");
  if (file == nullptr || std::fwrite(data, 1, size, file) != size) {
    std::printf("E cannot write output %u to %s (errno %d)\n", static_cast<unsigned>(index), path, errno);
    return false;
  }
  std::fclose(file);
  std::printf("I output %u: %lu B to %s\n", static_cast<unsigned>(index), static_cast<unsigned long>(size), path);
  return true;
}

// The guard byte at position i of a buffer's guard: varied, so a kernel writing a
// constant (zeros, a zero point) cannot match it by chance.
uint8_t guard_byte(size_t buffer, size_t i) {
  return static_cast<uint8_t>(0xA5u ^ (i * 29u) ^ (buffer * 101u));
}

struct Guarded {
  uint8_t* before = nullptr;  // `guard` bytes, then the buffer, then `guard` bytes
  size_t size = 0;
};

// Reports every guard the last instruction changed; true when all are intact.
bool guards_intact(const Guarded* buffers, size_t count, size_t guard, size_t instruction) {
  bool intact = true;
  for (size_t id = 0; id < count; id++) {
    for (int side = 0; side < 2; side++) {
      const uint8_t* region = side == 0 ? buffers[id].before : buffers[id].before + guard + buffers[id].size;
      long first = -1, last = -1;
      for (size_t i = 0; i < guard; i++) {
        if (region[i] != guard_byte(id, side * guard + i)) {
          last = static_cast<long>(i);
          if (first < 0) {
            first = static_cast<long>(i);
          }
        }
      }
      if (first < 0) {
        continue;
      }
      intact = false;
      if (side == 1) {
        std::printf("E guard: instruction %u wrote past the end of planned buffer %u (%lu B): bytes %ld to %ld after it\n",
                    static_cast<unsigned>(instruction), static_cast<unsigned>(id), static_cast<unsigned long>(buffers[id].size),
                    first, last);
      } else {
        std::printf("E guard: instruction %u wrote before the start of planned buffer %u (%lu B): bytes %ld to %ld before it\n",
                    static_cast<unsigned>(instruction), static_cast<unsigned>(id), static_cast<unsigned long>(buffers[id].size),
                    static_cast<long>(guard) - first, static_cast<long>(guard) - last);
      }
    }
  }
  return intact;
}

// `value` in decimal, in `text` (newlib's printf may lack %llu).
const char* u64_text(uint64_t value, char (&text)[21]) {
  char* digit = text + sizeof(text) - 1;
  *digit = '\0';
  do {
    *--digit = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  return digit;
}

void print_u64(const char* label, uint64_t value) {
  char text[21];
  std::printf("I %s: %s\n", label, u64_text(value, text));
}

// With -icount shift=N QEMU advances 2^N ns of virtual time per instruction and
// SysTick counts the board's CPU clock in that time: instructions = ticks * 1e9 / (f * 2^N).
uint64_t ticks_to_instructions(uint64_t ticks, int shift) {
  uint64_t ns_per_instruction_times_hz = static_cast<uint64_t>(board_cpu_hz) << shift;
  return (ticks * 1000000000ull + ns_per_instruction_times_hz / 2) / ns_per_instruction_times_hz;
}

// One instruction's cost: `I call N ticks: T`, and with QEMU's -icount `I call N instructions: X`.
void print_call(size_t instruction, uint64_t ticks, int icount_shift) {
  char text[21];
  std::printf("I call %u ticks: %s\n", static_cast<unsigned>(instruction), u64_text(ticks, text));
  if (icount_shift >= 0) {
    std::printf("I call %u instructions: %s\n", static_cast<unsigned>(instruction),
                u64_text(ticks_to_instructions(ticks, icount_shift), text));
  }
}

int run(const Options& options) {
  cortexm::Arena arena(board_arena_begin(), board_arena_end());
  File program_file = read_file(options.program, arena, "the program");
  File inputs[kMaxInputs];
  for (size_t i = 0; i < options.input_count; i++) {
    inputs[i] = read_file(options.inputs[i], arena, "an input");
  }

  BufferDataLoader loader(program_file.data, program_file.size);
  Result<Program> program = Program::load(&loader);
  if (!program.ok()) {
    std::printf("E %s is not a loadable program: %s (0x%x)\n", options.program, executorch::runtime::to_string(program.error()), static_cast<unsigned>(program.error()));
    return cortexm::kExitFailed;
  }
  Result<const char*> method_name = program->get_method_name(0);
  if (!method_name.ok()) {
    std::printf("E %s has no method\n", options.program);
    return cortexm::kExitFailed;
  }
  Result<MethodMeta> meta = program->method_meta(*method_name);
  if (!meta.ok()) {
    std::printf("E method %s: no metadata (0x%x)\n", *method_name, static_cast<unsigned>(meta.error()));
    return cortexm::kExitFailed;
  }

  size_t planned_count = meta->num_memory_planned_buffers();
  if (planned_count > kMaxPlannedBuffers) {
    std::printf("E method %s plans %u memory buffers, the runner handles %u\n", *method_name, static_cast<unsigned>(planned_count), static_cast<unsigned>(kMaxPlannedBuffers));
    return cortexm::kExitFailed;
  }
  static Span<uint8_t> planned[kMaxPlannedBuffers];
  static Guarded guarded[kMaxPlannedBuffers];
  size_t planned_total = 0;
  for (size_t id = 0; id < planned_count; id++) {
    Result<int64_t> planned_size = meta->memory_planned_buffer_size(id);
    if (!planned_size.ok()) {  // a negative size
      std::printf("E method %s: planned buffer %u has no valid size: %s (0x%x)\n", *method_name, static_cast<unsigned>(id),
                  executorch::runtime::to_string(planned_size.error()), static_cast<unsigned>(planned_size.error()));
      return cortexm::kExitFailed;
    }
    char what[48];
    std::snprintf(what, sizeof(what), "planned buffer %u", static_cast<unsigned>(id));
    char text[21];
    // On a 32-bit core a size of 4 GiB or more would wrap to a small one, and the load would
    // fail naming `allocator size (0)`: name the size instead.
    if (static_cast<uint64_t>(*planned_size) > SIZE_MAX - 2 * options.guard) {
      std::printf("E memory: %s needs %s B, more than this core can address\n", what, u64_text(static_cast<uint64_t>(*planned_size), text));
      return cortexm::kExitMemory;
    }
    size_t size = static_cast<size_t>(*planned_size);
    size_t taken = size + 2 * options.guard;
    uint8_t* memory = taken ? arena.take(taken, what) : nullptr;
    if (taken && memory == nullptr) {
#ifdef CORTEXM_HOSTED
      // The hosted arena mallocs each block and says nothing when malloc fails.
      std::printf("E memory: %s needs %s B, more than this host allocates\n", what, u64_text(taken, text));
#endif
      return cortexm::kExitMemory;
    }
    uint8_t* buffer = size ? memory + options.guard : nullptr;
    if (options.guard) {
      guarded[id] = Guarded{memory, size};
      for (size_t i = 0; i < options.guard; i++) {
        memory[i] = guard_byte(id, i);
        memory[options.guard + size + i] = guard_byte(id, options.guard + i);
      }
    }
    if (options.fill >= 0 && size) {
      std::memset(buffer, options.fill, size);
    }
    planned[id] = Span<uint8_t>(buffer, size);
    planned_total += size;
    if (options.trace) {
      std::printf("I planned buffer %u at %p, %lu B\n", static_cast<unsigned>(id), static_cast<void*>(buffer),
                  static_cast<unsigned long>(size));
    }
  }
  uint8_t* method_memory = arena.take(CORTEXM_METHOD_POOL_SIZE, "the method allocator pool (CORTEXM_METHOD_POOL_SIZE)");
  uint8_t* temp_memory = arena.take(CORTEXM_TEMP_POOL_SIZE, "the temp allocator pool (CORTEXM_TEMP_POOL_SIZE)");
  if (method_memory == nullptr || temp_memory == nullptr) {
    return cortexm::kExitMemory;
  }
  cortexm::NamedPool method_pool("method allocator", "CORTEXM_METHOD_POOL_SIZE", method_memory, CORTEXM_METHOD_POOL_SIZE);
  cortexm::NamedPool temp_pool("temp allocator", "CORTEXM_TEMP_POOL_SIZE", temp_memory, CORTEXM_TEMP_POOL_SIZE);
  HierarchicalAllocator planned_memory({planned, planned_count});
  MemoryManager memory(&method_pool, &planned_memory, &temp_pool);

  Result<Method> method = program->load_method(*method_name, &memory);
  if (!method.ok()) {
    std::printf("E loading method %s failed: %s (0x%x)\n", *method_name, executorch::runtime::to_string(method.error()), static_cast<unsigned>(method.error()));
    return method_pool.exhausted() ? cortexm::kExitMemory : cortexm::kExitFailed;
  }
  if (options.load_only) {
    std::printf("I loaded\n");
    return cortexm::kExitOk;
  }

  size_t input_count = meta->num_inputs();
  if (options.input_count != input_count) {
    std::printf("E %u input files given, method %s takes %u inputs\n", static_cast<unsigned>(options.input_count), *method_name, static_cast<unsigned>(input_count));
    return cortexm::kExitUsage;
  }
  for (size_t i = 0; i < input_count; i++) {
    Tag tag = meta->input_tag(i).get();
    Error error = tag == Tag::Tensor ? set_tensor_input(*method, *meta, i, inputs[i], options.inputs[i])
                                     : set_scalar_input(*method, tag, i, inputs[i], options.inputs[i]);
    if (error != Error::Ok) {
      std::printf("E setting input %u failed: %s (0x%x)\n", static_cast<unsigned>(i), executorch::runtime::to_string(error), static_cast<unsigned>(error));
      return cortexm::kExitUsage;
    }
  }

  if (options.guard || options.trace) {
    // One instruction at a time, every guard checked after each (not timed).
    for (size_t instruction = 0;; instruction++) {
      if (options.trace) {
        std::printf("I instruction %u\n", static_cast<unsigned>(instruction));
        std::fflush(stdout);
      }
      Error status = method->step();
      if (status == Error::EndOfMethod) {
        break;
      }
      if (!guards_intact(guarded, planned_count, options.guard, instruction)) {
        return cortexm::kExitGuard;
      }
      if (status != Error::Ok) {
        std::printf("E executing method %s failed at instruction %u: %s (0x%x)\n", *method_name,
                    static_cast<unsigned>(instruction), executorch::runtime::to_string(status), static_cast<unsigned>(status));
        return temp_pool.exhausted() ? cortexm::kExitMemory : cortexm::kExitFailed;
      }
    }
  } else {
    uint64_t ticks = 0;
    Error status = Error::Ok;
    if (options.calls) {
      // One instruction at a time, each timed on its own (printing between them is not counted):
      // what a change cost, kernel call by kernel call.
      for (size_t instruction = 0;; instruction++) {
        board_counter_start();
        status = method->step();
        uint64_t spent = board_counter_read();
        if (status != Error::Ok) {
          break;
        }
        ticks += spent;
        print_call(instruction, spent, options.icount_shift);
      }
      if (status == Error::EndOfMethod) {
        status = Error::Ok;
      }
    } else {
      board_counter_start();
      status = method->execute();
      ticks = board_counter_read();
    }
    if (status != Error::Ok) {
      std::printf("E executing method %s failed: %s (0x%x)\n", *method_name, executorch::runtime::to_string(status), static_cast<unsigned>(status));
      return temp_pool.exhausted() ? cortexm::kExitMemory : cortexm::kExitFailed;
    }
    print_u64("ticks", ticks);
    if (options.icount_shift >= 0) {
      print_u64("instructions", ticks_to_instructions(ticks, options.icount_shift));
    }
  }

  size_t output_count = method->outputs_size();
  if (output_count > kMaxOutputs) {
    std::printf("E method %s has %u outputs, the runner writes at most %u\n", *method_name, static_cast<unsigned>(output_count), static_cast<unsigned>(kMaxOutputs));
    return cortexm::kExitFailed;
  }
  for (size_t i = 0; i < output_count; i++) {
    if (!write_output(method->get_output(i), options.output_base, i)) {
      return cortexm::kExitFailed;
    }
  }
  std::printf(
      "I memory: program %lu B, planned %lu B, method allocator %lu of %lu B, temp allocator %lu of %lu B, arena %lu of %lu B, "
      "stack %lu of %lu B, heap %lu of %lu B\n",
      static_cast<unsigned long>(program_file.size),
      static_cast<unsigned long>(planned_total),
      static_cast<unsigned long>(method_pool.peak()),
      static_cast<unsigned long>(CORTEXM_METHOD_POOL_SIZE),
      static_cast<unsigned long>(temp_pool.peak()),
      static_cast<unsigned long>(CORTEXM_TEMP_POOL_SIZE),
      static_cast<unsigned long>(arena.used()),
      static_cast<unsigned long>(arena.size()),
      static_cast<unsigned long>(board_stack_used()),
      static_cast<unsigned long>(board_stack_size()),
      static_cast<unsigned long>(board_heap_used()),
      static_cast<unsigned long>(board_heap_size()));
  return cortexm::kExitOk;
}

}  // namespace

#if defined(CORTEXM_COVERAGE) && !defined(CORTEXM_HOSTED)
extern "C" void cortexm_write_coverage(void);  // runner/coverage.c
#endif

int main() {
  static char command_line[1024];
  char* argv[kMaxArgs];
  int argc = board_command_line(command_line, sizeof(command_line), argv, kMaxArgs);
  if (argc == -2) {
    std::printf("E usage: the command line does not fit (at most %d words, %u characters)\n", kMaxArgs,
                static_cast<unsigned>(sizeof(command_line) - 1));
    return cortexm::kExitUsage;
  }
  if (argc < 0) {
    std::printf("E the simulator passed no command line, or one over %u characters (semihosting SYS_GET_CMDLINE "
                "failed)\n", static_cast<unsigned>(sizeof(command_line) - 1));
    return cortexm::kExitUsage;
  }
  executorch::runtime::runtime_init();
  int status = run(parse_arguments(argc, argv));
#if defined(CORTEXM_COVERAGE) && !defined(CORTEXM_HOSTED)
  // On the host, libgcov writes the counters at exit; on a core the runner does.
  cortexm_write_coverage();
#endif
  return status;
}
