#include "scheduler/seq_arena.h"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/check.h"

namespace loom {

SeqArena::~SeqArena() {
  for (void* chunk : chunks_) {
    ASAN_UNPOISON_MEMORY_REGION(chunk, kChunkBytes);
    std::free(chunk);
  }
}

size_t SeqArena::chunk_bytes() const {
  MutexLock lock(mu_);
  return chunks_.size() * kChunkBytes;
}

size_t SeqArena::ClassOf(size_t bytes) {
  const size_t rounded = std::bit_ceil(std::max(bytes, kMinClassBytes));
  return static_cast<size_t>(std::countr_zero(rounded) - std::countr_zero(kMinClassBytes));
}

void* SeqArena::Allocate(size_t bytes) {
  if (bytes > kMaxClassBytes) {
    return ::operator new (bytes, std::align_val_t{64});
  }
  const size_t size_class = ClassOf(bytes);
  const size_t class_bytes = kMinClassBytes << size_class;
  MutexLock lock(mu_);
  if (FreeBlock* block = free_[size_class]; block != nullptr) {
    free_[size_class] = block->next;
    ASAN_UNPOISON_MEMORY_REGION(block, class_bytes);
    return block;
  }
  if (static_cast<size_t>(end_ - next_) < class_bytes) {
    // The rest of the old chunk (less than one block of this class) is left
    // unused; classes are powers of two, so chunks fill with little waste.
    void* chunk = std::aligned_alloc(kChunkBytes, kChunkBytes);
    if (chunk == nullptr) {
      throw std::bad_alloc();
    }
    madvise(chunk, kChunkBytes, MADV_HUGEPAGE);
    ASAN_POISON_MEMORY_REGION(chunk, kChunkBytes);
    chunks_.push_back(chunk);
    next_ = static_cast<char*>(chunk);
    end_ = next_ + kChunkBytes;
  }
  void* block = next_;
  next_ += class_bytes;
  ASAN_UNPOISON_MEMORY_REGION(block, class_bytes);
  return block;
}

void SeqArena::Deallocate(void* p, size_t bytes) {
  if (p == nullptr) {
    return;
  }
  if (bytes > kMaxClassBytes) {
    ::operator delete (p, std::align_val_t{64});
    return;
  }
  const size_t size_class = ClassOf(bytes);
  MutexLock lock(mu_);
  auto* block = static_cast<FreeBlock*>(p);
  block->next = free_[size_class];
  free_[size_class] = block;
  // Under ASan a list used after it was freed is caught as with malloc; the
  // free-list link stays readable.
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<char*>(block) + sizeof(FreeBlock),
                            (kMinClassBytes << size_class) - sizeof(FreeBlock));
}

TokenList::~TokenList() { LOOM_CHECK(data_ == nullptr) << "a TokenList must be released"; }

void TokenList::Assign(std::span<const int32_t> tokens, size_t capacity, SeqArena& arena) {
  size_ = 0;
  if (std::max(capacity, tokens.size()) > capacity_) {
    Reallocate(std::max(capacity, tokens.size()), arena);
  }
  if (!tokens.empty()) {
    std::memcpy(data_, tokens.data(), tokens.size() * sizeof(int32_t));
  }
  size_ = static_cast<uint32_t>(tokens.size());
}

void TokenList::Grow(SeqArena& arena) {
  Reallocate(std::max<size_t>(1, 2 * size_t{capacity_}), arena);
}

void TokenList::Reallocate(size_t capacity, SeqArena& arena) {
  LOOM_CHECK(capacity <= UINT32_MAX);
  auto* data = static_cast<int32_t*>(arena.Allocate(capacity * sizeof(int32_t)));
  if (size_ > 0) {
    std::memcpy(data, data_, size_t{size_} * sizeof(int32_t));
  }
  arena.Deallocate(data_, size_t{capacity_} * sizeof(int32_t));
  data_ = data;
  capacity_ = static_cast<uint32_t>(capacity);
}

void TokenList::Release(SeqArena& arena) {
  arena.Deallocate(data_, size_t{capacity_} * sizeof(int32_t));
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

}  // namespace loom
