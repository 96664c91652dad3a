#include "base/zero_pages.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace loom {

ZeroPagesBase::ZeroPagesBase(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  // MAP_NORESERVE: the pool is a ceiling, not a commitment; pages count
  // against memory once written.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = p;
}

ZeroPagesBase::~ZeroPagesBase() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

ZeroPagesBase::ZeroPagesBase(ZeroPagesBase&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

ZeroPagesBase& ZeroPagesBase::operator=(ZeroPagesBase&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, bytes_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace loom
