#include "arena.h"

#include <cstdio>
#include <cstdlib>

namespace cortexm {

uint8_t* Arena::take(size_t size, const char* what) {
#ifdef CORTEXM_HOSTED
  // Each block its own allocation of its exact size: AddressSanitizer sees every byte
  // outside it. (Never freed: the program ends with the run.)
  (void)what;
  uint8_t* block = static_cast<uint8_t*>(std::malloc(size ? size : 1));
  used_ += size;
  return block;
#endif
  uintptr_t start = (reinterpret_cast<uintptr_t>(next_) + 15u) & ~uintptr_t{15u};
  size_t left = start <= reinterpret_cast<uintptr_t>(end_) ? static_cast<size_t>(end_ - reinterpret_cast<uint8_t*>(start)) : 0;
  if (size > left) {
    std::printf(
        "E memory: %s needs %lu B, the arena has %lu of %lu B left; give the board's ARENA region more RAM\n",
        what,
        static_cast<unsigned long>(size),
        static_cast<unsigned long>(left),
        static_cast<unsigned long>(this->size()));
    return nullptr;
  }
  next_ = reinterpret_cast<uint8_t*>(start) + size;
  return reinterpret_cast<uint8_t*>(start);
}

void* NamedPool::allocate(size_t size, size_t alignment) {
  // Checked here, before the base class logs its own less telling message.
  uintptr_t next = reinterpret_cast<uintptr_t>(base_address()) + used_size();
  size_t padding = alignment ? static_cast<size_t>(-next & (alignment - 1)) : 0;
  if (size + padding > free_size()) {
    exhausted_ = true;
    std::printf(
        "E memory: %s pool exhausted: %lu B requested, %lu of %lu B free; build with a larger %s\n",
        name_,
        static_cast<unsigned long>(size),
        static_cast<unsigned long>(free_size()),
        static_cast<unsigned long>(capacity_),
        option_);
    return nullptr;
  }
  void* memory = MemoryAllocator::allocate(size, alignment);
  if (used_size() > peak_) {
    peak_ = used_size();
  }
  return memory;
}

}  // namespace cortexm
