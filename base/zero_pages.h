// A large array of trivially copyable T that reads as zeros and takes
// physical memory only as its pages are first written: anonymous private
// pages from mmap, which the kernel commits on first touch. The CPU KV pool
// is sized for the worst case, so resident memory follows the KV in use
// instead of the pool's size. Move-only; allocation failure throws
// std::bad_alloc, as std::vector's does.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace loom {

class ZeroPagesBase {
 protected:
  ZeroPagesBase() = default;
  explicit ZeroPagesBase(size_t bytes);
  ~ZeroPagesBase();
  ZeroPagesBase(ZeroPagesBase&& other) noexcept;
  ZeroPagesBase& operator=(ZeroPagesBase&& other) noexcept;

  void* base_ = nullptr;
  size_t bytes_ = 0;
};

template <typename T>
class ZeroPages : private ZeroPagesBase {
  static_assert(std::is_trivially_copyable_v<T>, "zero pages hold plain values");

 public:
  ZeroPages() = default;
  explicit ZeroPages(size_t n) : ZeroPagesBase(n * sizeof(T)), size_(n) {}
  ZeroPages(ZeroPages&& other) noexcept
      : ZeroPagesBase(std::move(other)), size_(std::exchange(other.size_, 0)) {}
  ZeroPages& operator=(ZeroPages&& other) noexcept {
    ZeroPagesBase::operator=(std::move(other));
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  T* data() { return static_cast<T*>(base_); }
  const T* data() const { return static_cast<const T*>(base_); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

 private:
  size_t size_ = 0;
};

}  // namespace loom
