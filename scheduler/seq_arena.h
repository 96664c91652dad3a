// Memory for the scheduler's sequence records and token lists. Every step
// reads each running sequence's record and appends a token to its list; with
// thousands of them scattered over 4 KiB heap pages, nearly every touch also
// misses the TLB. The arena carves them out of 2 MiB chunks advised to use
// transparent huge pages, in power-of-two size classes with a free list
// each, so a step touches a few dozen pages and a finished request's memory
// goes to the next one without malloc. Thread-safe: memory is taken and
// given back once per request, not per token, so a lock costs nothing that
// matters.
#ifndef LOOM_SCHEDULER_SEQ_ARENA_H_
#define LOOM_SCHEDULER_SEQ_ARENA_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"

namespace loom {

class SeqArena {
 public:
  SeqArena() = default;
  ~SeqArena();

  SeqArena(const SeqArena&) = delete;
  SeqArena& operator=(const SeqArena&) = delete;

  // At least `bytes` bytes, 64-byte aligned. Sizes above the largest class
  // come from operator new.
  [[nodiscard]] void* Allocate(size_t bytes);
  // p must come from Allocate(bytes) on this arena.
  void Deallocate(void* p, size_t bytes);

  // Bytes taken from the system in chunks, for tests.
  [[nodiscard]] size_t chunk_bytes() const;

  // The arena every ArenaAllocator uses; it lives as long as the process.
  static SeqArena& Shared();

  static constexpr size_t kChunkBytes = size_t{2} << 20;
  static constexpr size_t kMinClassBytes = 256;
  // Longer lists (16K tokens and up) come from operator new, so that a burst
  // of long prompts does not leave memory parked in the free lists.
  static constexpr size_t kMaxClassBytes = size_t{64} << 10;

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr size_t kNumClasses = 9;  // 256 B .. 64 KiB
  static_assert(kMinClassBytes << (kNumClasses - 1) == kMaxClassBytes);

  static size_t ClassOf(size_t bytes);

  mutable Mutex mu_;
  std::array<FreeBlock*, kNumClasses> free_ ABSL_GUARDED_BY(mu_){};
  std::vector<void*> chunks_ ABSL_GUARDED_BY(mu_);
  char* next_ ABSL_GUARDED_BY(mu_) = nullptr;  // unused space in the newest chunk
  char* end_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// A std::allocator replacement over the shared arena. Stateless, so that a
// TokenList is as small as a std::vector.
template <typename T>
class ArenaAllocator {
 public:
  using value_type = T;

  ArenaAllocator() = default;
  template <typename U>
  explicit ArenaAllocator(const ArenaAllocator<U>& /*other*/) {}

  T* allocate(size_t n) { return static_cast<T*>(SeqArena::Shared().Allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { SeqArena::Shared().Deallocate(p, n * sizeof(T)); }

  template <typename U>
  friend bool operator==(const ArenaAllocator& /*a*/, const ArenaAllocator<U>& /*b*/) {
    return true;
  }
};

using TokenList = std::vector<int32_t, ArenaAllocator<int32_t>>;

}  // namespace loom

#endif  // LOOM_SCHEDULER_SEQ_ARENA_H_
