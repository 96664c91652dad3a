// A std::allocator replacement for the pool's large per-block arrays (block
// records, free-queue links, prefix index). They are read at random block ids,
// so with 4 KiB pages nearly every access also misses the TLB; arrays of 2 MiB
// or more are aligned to 2 MiB and advised to use transparent huge pages.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace loom {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  explicit HugePageAllocator(const HugePageAllocator<U>& /*other*/) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) {
      return static_cast<T*>(::operator new(bytes));
    }
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) {
      throw std::bad_alloc();
    }
    // Only advice: without THP the array simply keeps small pages.
    madvise(p, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePage) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }

  template <typename U>
  friend bool operator==(const HugePageAllocator& /*a*/, const HugePageAllocator<U>& /*b*/) {
    return true;
  }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
};

}  // namespace loom
