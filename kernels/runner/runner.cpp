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
#include <optional>
#include <utility>

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

// What the steps of a run share. Members are made in this order and destroyed in reverse:
// the method before the memory it was loaded into, the arena last.
struct RunContext {
  explicit RunContext(const Options& options) : options(options), arena(board_arena_begin(), board_arena_end()) {}
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  const Options& options;
  cortexm::Arena arena;
  File program_file;
  File inputs[kMaxInputs];
  std::optional<BufferDataLoader> loader;  // the Program reads through it: it stays put
  std::optional<Program> program;
  const char* method_name = nullptr;
  std::optional<MethodMeta> meta;
  size_t planned_count = 0;
  size_t planned_total = 0;  // bytes, guards not counted
  std::optional<cortexm::NamedPool> method_pool;
  std::optional<cortexm::NamedPool> temp_pool;
  std::optional<HierarchicalAllocator> planned_memory;
  std::optional<MemoryManager> memory;
  // Kept in load_method's Result: the timed calls go through it as they did before the split,
  // so instruction counts stay comparable across versions of the runner.
  std::optional<Result<Method>> method;
};

// The planned buffers, static: a program planned one tensor per buffer has too many for the stack.
Span<uint8_t> planned_spans[kMaxPlannedBuffers];
Guarded guarded_buffers[kMaxPlannedBuffers];

// Planned buffer `id`'s guards: `memory` holds `guard` bytes, the buffer's `size`, `guard` bytes.
void write_guards(size_t id, uint8_t* memory, size_t size, size_t guard) {
  guarded_buffers[id] = Guarded{memory, size};
  for (size_t i = 0; i < guard; i++) {
    memory[i] = guard_byte(id, i);
    memory[guard + size + i] = guard_byte(id, guard + i);
  }
}

// The program and the inputs, read whole into the arena before anything loads.
void read_files(RunContext& ctx) {
  ctx.program_file = read_file(ctx.options.program, ctx.arena, "the program");
  for (size_t i = 0; i < ctx.options.input_count; i++) {
    ctx.inputs[i] = read_file(ctx.options.inputs[i], ctx.arena, "an input");
  }
}

int load_program(RunContext& ctx) {
  ctx.loader.emplace(ctx.program_file.data, ctx.program_file.size);
  Result<Program> program = Program::load(&*ctx.loader);
  if (!program.ok()) {
    std::printf("E %s is not a loadable program: %s (0x%x)\n", ctx.options.program, executorch::runtime::to_string(program.error()), static_cast<unsigned>(program.error()));
    return cortexm::kExitFailed;
  }
  ctx.program.emplace(std::move(*program));
  Result<const char*> method_name = ctx.program->get_method_name(0);
  if (!method_name.ok()) {
    std::printf("E %s has no method\n", ctx.options.program);
    return cortexm::kExitFailed;
  }
  ctx.method_name = *method_name;
  Result<MethodMeta> meta = ctx.program->method_meta(ctx.method_name);
  if (!meta.ok()) {
    std::printf("E method %s: no metadata (0x%x)\n", ctx.method_name, static_cast<unsigned>(meta.error()));
    return cortexm::kExitFailed;
  }
  ctx.meta.emplace(*meta);
  return cortexm::kExitOk;
}

// Planned buffer `id` from the arena, between its guards (--guard) and filled (--fill).
int plan_buffer(RunContext& ctx, size_t id) {
  const Options& options = ctx.options;
  Result<int64_t> planned_size = ctx.meta->memory_planned_buffer_size(id);
  if (!planned_size.ok()) {  // a negative size
    std::printf("E method %s: planned buffer %u has no valid size: %s (0x%x)\n", ctx.method_name, static_cast<unsigned>(id),
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
  uint8_t* memory = taken ? ctx.arena.take(taken, what) : nullptr;
  if (taken && memory == nullptr) {
#ifdef CORTEXM_HOSTED
    // The hosted arena mallocs each block and says nothing when malloc fails.
    std::printf("E memory: %s needs %s B, more than this host allocates\n", what, u64_text(taken, text));
#endif
    return cortexm::kExitMemory;
  }
  uint8_t* buffer = size ? memory + options.guard : nullptr;
  if (options.guard) {
    write_guards(id, memory, size, options.guard);
  }
  if (options.fill >= 0 && size) {
    std::memset(buffer, options.fill, size);
  }
  planned_spans[id] = Span<uint8_t>(buffer, size);
  ctx.planned_total += size;
  if (options.trace) {
    std::printf("I planned buffer %u at %p, %lu B\n", static_cast<unsigned>(id), static_cast<void*>(buffer),
                static_cast<unsigned long>(size));
  }
  return cortexm::kExitOk;
}

// The method's memory: its planned buffers, then the method and temp allocator pools.
int plan_memory(RunContext& ctx) {
  ctx.planned_count = ctx.meta->num_memory_planned_buffers();
  if (ctx.planned_count > kMaxPlannedBuffers) {
    std::printf("E method %s plans %u memory buffers, the runner handles %u\n", ctx.method_name, static_cast<unsigned>(ctx.planned_count), static_cast<unsigned>(kMaxPlannedBuffers));
    return cortexm::kExitFailed;
  }
  for (size_t id = 0; id < ctx.planned_count; id++) {
    if (int status = plan_buffer(ctx, id)) {
      return status;
    }
  }
  uint8_t* method_memory = ctx.arena.take(CORTEXM_METHOD_POOL_SIZE, "the method allocator pool (CORTEXM_METHOD_POOL_SIZE)");
  uint8_t* temp_memory = ctx.arena.take(CORTEXM_TEMP_POOL_SIZE, "the temp allocator pool (CORTEXM_TEMP_POOL_SIZE)");
  if (method_memory == nullptr || temp_memory == nullptr) {
    return cortexm::kExitMemory;
  }
  ctx.method_pool.emplace("method allocator", "CORTEXM_METHOD_POOL_SIZE", method_memory, CORTEXM_METHOD_POOL_SIZE);
  ctx.temp_pool.emplace("temp allocator", "CORTEXM_TEMP_POOL_SIZE", temp_memory, CORTEXM_TEMP_POOL_SIZE);
  ctx.planned_memory.emplace(Span<Span<uint8_t>>(planned_spans, ctx.planned_count));
  ctx.memory.emplace(&*ctx.method_pool, &*ctx.planned_memory, &*ctx.temp_pool);
  return cortexm::kExitOk;
}

int load_method(RunContext& ctx) {
  Result<Method>& method = ctx.method.emplace(ctx.program->load_method(ctx.method_name, &*ctx.memory));
  if (!method.ok()) {
    std::printf("E loading method %s failed: %s (0x%x)\n", ctx.method_name, executorch::runtime::to_string(method.error()), static_cast<unsigned>(method.error()));
    return ctx.method_pool->exhausted() ? cortexm::kExitMemory : cortexm::kExitFailed;
  }
  return cortexm::kExitOk;
}

int set_inputs(RunContext& ctx) {
  size_t input_count = ctx.meta->num_inputs();
  if (ctx.options.input_count != input_count) {
    std::printf("E %u input files given, method %s takes %u inputs\n", static_cast<unsigned>(ctx.options.input_count), ctx.method_name, static_cast<unsigned>(input_count));
    return cortexm::kExitUsage;
  }
  for (size_t i = 0; i < input_count; i++) {
    Tag tag = ctx.meta->input_tag(i).get();
    Error error = tag == Tag::Tensor ? set_tensor_input(**ctx.method, *ctx.meta, i, ctx.inputs[i], ctx.options.inputs[i])
                                     : set_scalar_input(**ctx.method, tag, i, ctx.inputs[i], ctx.options.inputs[i]);
    if (error != Error::Ok) {
      std::printf("E setting input %u failed: %s (0x%x)\n", static_cast<unsigned>(i), executorch::runtime::to_string(error), static_cast<unsigned>(error));
      return cortexm::kExitUsage;
    }
  }
  return cortexm::kExitOk;
}

// The memory oracle's run (--guard, --trace): one instruction at a time, every guard checked
// after each (not timed).
int execute_checked(RunContext& ctx) {
  Result<Method>& method = *ctx.method;
  for (size_t instruction = 0;; instruction++) {
    if (ctx.options.trace) {
      std::printf("I instruction %u\n", static_cast<unsigned>(instruction));
      std::fflush(stdout);
    }
    Error status = method->step();
    if (status == Error::EndOfMethod) {
      return cortexm::kExitOk;
    }
    if (!guards_intact(guarded_buffers, ctx.planned_count, ctx.options.guard, instruction)) {
      return cortexm::kExitGuard;
    }
    if (status != Error::Ok) {
      std::printf("E executing method %s failed at instruction %u: %s (0x%x)\n", ctx.method_name,
                  static_cast<unsigned>(instruction), executorch::runtime::to_string(status), static_cast<unsigned>(status));
      return ctx.temp_pool->exhausted() ? cortexm::kExitMemory : cortexm::kExitFailed;
    }
  }
}

// --calls: one instruction at a time, each timed on its own (printing between them is not
// counted): what a change cost, kernel call by kernel call. Adds their ticks to `ticks`.
// Neither this nor execute_timed is inlined into run(): the runner's few instructions inside
// the timed window then do not depend on run()'s frame, and counts stay comparable.
__attribute__((noinline)) Error execute_calls(RunContext& ctx, uint64_t& ticks) {
  Result<Method>& method = *ctx.method;
  for (size_t instruction = 0;; instruction++) {
    board_counter_start();
    Error status = method->step();
    uint64_t spent = board_counter_read();
    if (status != Error::Ok) {
      return status == Error::EndOfMethod ? Error::Ok : status;
    }
    ticks += spent;
    print_call(instruction, spent, ctx.options.icount_shift);
  }
}

// The timed run: `I ticks: T`, and with QEMU's -icount `I instructions: X`.
__attribute__((noinline)) int execute_timed(RunContext& ctx) {
  uint64_t ticks = 0;
  Error status = Error::Ok;
  if (ctx.options.calls) {
    status = execute_calls(ctx, ticks);
  } else {
    Result<Method>& method = *ctx.method;
    board_counter_start();
    status = method->execute();
    ticks = board_counter_read();
  }
  if (status != Error::Ok) {
    std::printf("E executing method %s failed: %s (0x%x)\n", ctx.method_name, executorch::runtime::to_string(status), static_cast<unsigned>(status));
    return ctx.temp_pool->exhausted() ? cortexm::kExitMemory : cortexm::kExitFailed;
  }
  print_u64("ticks", ticks);
  if (ctx.options.icount_shift >= 0) {
    print_u64("instructions", ticks_to_instructions(ticks, ctx.options.icount_shift));
  }
  return cortexm::kExitOk;
}

int write_outputs(RunContext& ctx) {
  Result<Method>& method = *ctx.method;
  size_t output_count = method->outputs_size();
  if (output_count > kMaxOutputs) {
    std::printf("E method %s has %u outputs, the runner writes at most %u\n", ctx.method_name, static_cast<unsigned>(output_count), static_cast<unsigned>(kMaxOutputs));
    return cortexm::kExitFailed;
  }
  for (size_t i = 0; i < output_count; i++) {
    if (!write_output(method->get_output(i), ctx.options.output_base, i)) {
      return cortexm::kExitFailed;
    }
  }
  return cortexm::kExitOk;
}

void report_memory(const RunContext& ctx) {
  std::printf(
      "I memory: program %lu B, planned %lu B, method allocator %lu of %lu B, temp allocator %lu of %lu B, arena %lu of %lu B, "
      "stack %lu of %lu B, heap %lu of %lu B\n",
      static_cast<unsigned long>(ctx.program_file.size),
      static_cast<unsigned long>(ctx.planned_total),
      static_cast<unsigned long>(ctx.method_pool->peak()),
      static_cast<unsigned long>(CORTEXM_METHOD_POOL_SIZE),
      static_cast<unsigned long>(ctx.temp_pool->peak()),
      static_cast<unsigned long>(CORTEXM_TEMP_POOL_SIZE),
      static_cast<unsigned long>(ctx.arena.used()),
      static_cast<unsigned long>(ctx.arena.size()),
      static_cast<unsigned long>(board_stack_used()),
      static_cast<unsigned long>(board_stack_size()),
      static_cast<unsigned long>(board_heap_used()),
      static_cast<unsigned long>(board_heap_size()));
}

// A step's non-zero status ends the run (kExitOk is 0).
static_assert(cortexm::kExitOk == 0, "run() treats a non-zero step status as the run's end");

int run(const Options& options) {
  RunContext ctx(options);
  read_files(ctx);
  if (int status = load_program(ctx)) {
    return status;
  }
  if (int status = plan_memory(ctx)) {
    return status;
  }
  if (int status = load_method(ctx)) {
    return status;
  }
  if (options.load_only) {
    std::printf("I loaded\n");
    return cortexm::kExitOk;
  }
  if (int status = set_inputs(ctx)) {
    return status;
  }
  if (int status = options.guard || options.trace ? execute_checked(ctx) : execute_timed(ctx)) {
    return status;
  }
  if (int status = write_outputs(ctx)) {
    return status;
  }
  report_memory(ctx);
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
