// Memory for one run: the board's arena cut, in order, into the program file,
// the inputs, the planned buffers (at the sizes the method meta gives), the
// method allocator and the temp allocator. Every shortage is one `E memory:`
// line naming the pool and the sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/memory_allocator.h>

namespace cortexm {

class Arena {
 public:
  Arena(uint8_t* begin, uint8_t* end) : begin_(begin), next_(begin), end_(end) {}

  // `size` bytes aligned to 16, or nullptr after logging what did not fit.
  uint8_t* take(size_t size, const char* what);

  size_t size() const { return static_cast<size_t>(end_ - begin_); }
  size_t used() const { return used_ ? used_ : static_cast<size_t>(next_ - begin_); }

 private:
  uint8_t* begin_;
  uint8_t* next_;
  size_t used_ = 0;  // on a hosted board, where blocks come from malloc
  uint8_t* end_;
};

// A MemoryAllocator that says which pool ran out, and which build option sizes it.
class NamedPool : public executorch::runtime::MemoryAllocator {
 public:
  NamedPool(const char* name, const char* option, uint8_t* base, size_t size)
      : MemoryAllocator(static_cast<uint32_t>(size), base), name_(name), option_(option), capacity_(size) {}

  void* allocate(size_t size, size_t alignment = kDefaultAlignment) override;

  size_t peak() const { return peak_; }
  bool exhausted() const { return exhausted_; }

 private:
  const char* name_;
  const char* option_;
  size_t capacity_;
  size_t peak_ = 0;
  bool exhausted_ = false;
};

}  // namespace cortexm
