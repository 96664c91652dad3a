// Memory for the scheduler's sequence records and token lists. Every step
// reads each running sequence's record and appends a token to its list; with
// thousands of them scattered over 4 KiB heap pages, nearly every touch also
// misses the TLB. The arena carves them out of 2 MiB chunks advised to use
// transparent huge pages, in power-of-two size classes with a free list
// each, so a step touches a few dozen pages and a finished request's memory
// goes to the next one without malloc. The scheduler owns one and passes it
// to every call that takes or gives back memory. Thread-safe: memory is taken
// and given back once per request, not per token, so a lock costs nothing
// that matters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
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

// A sequence's tokens in memory from a SeqArena. It holds no arena pointer, so
// it is 16 bytes where a std::vector with a stateful allocator would be 32,
// and stays in the sequence record's first cache line: calls that take or give
// back memory name the arena, and Release must be called before the list is
// destroyed.
class TokenList {
 public:
  TokenList() = default;
  ~TokenList();

  TokenList(const TokenList&) = delete;
  TokenList& operator=(const TokenList&) = delete;

  // Replaces the contents with tokens, with room for at least capacity tokens.
  void Assign(std::span<const int32_t> tokens, size_t capacity, SeqArena& arena);
  void PushBack(int32_t token, SeqArena& arena) {
    if (size_ == capacity_) {
      Grow(arena);
    }
    data_[size_++] = token;
  }
  // Gives the memory back; the list is then empty.
  void Release(SeqArena& arena);

  [[nodiscard]] const int32_t* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] size_t capacity() const { return capacity_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] int32_t operator[](size_t i) const { return data_[i]; }
  [[nodiscard]] int32_t back() const { return data_[size_ - 1]; }
  // NOLINTNEXTLINE(google-explicit-constructor): a list reads as its tokens.
  operator std::span<const int32_t>() const { return {data_, size_}; }

 private:
  // Doubles the capacity, as std::vector does.
  void Grow(SeqArena& arena);
  void Reallocate(size_t capacity, SeqArena& arena);

  int32_t* data_ = nullptr;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
};
static_assert(sizeof(TokenList) == 16);

}  // namespace loom
