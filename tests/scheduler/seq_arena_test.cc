#include "scheduler/seq_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

namespace loom {
namespace {

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(SeqArenaTest, BlocksAreAlignedDisjointAndKeepTheirContents) {
  SeqArena arena;
  std::vector<std::pair<unsigned char*, size_t>> blocks;
  for (size_t bytes : {1UL, 200UL, 256UL, 257UL, 1000UL, 4096UL, 70000UL, 262144UL}) {
    auto* p = static_cast<unsigned char*>(arena.Allocate(bytes));
    ASSERT_TRUE(Aligned64(p)) << bytes;
    std::memset(p, static_cast<int>(blocks.size() + 1), bytes);
    blocks.emplace_back(p, bytes);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [p, bytes] = blocks[i];
    for (size_t b = 0; b < bytes; ++b) {
      ASSERT_EQ(p[b], static_cast<unsigned char>(i + 1)) << "block " << i << " byte " << b;
    }
  }
  for (const auto& [p, bytes] : blocks) {
    arena.Deallocate(p, bytes);
  }
}

TEST(SeqArenaTest, AFreedBlockServesTheNextRequestOfItsClass) {
  SeqArena arena;
  void* a = arena.Allocate(300);   // the 512-byte class
  void* b = arena.Allocate(1024);  // another class
  arena.Deallocate(a, 300);
  EXPECT_EQ(arena.Allocate(400), a) << "same class, reused";
  EXPECT_NE(arena.Allocate(300), a) << "taken again, so a fresh block";
  arena.Deallocate(b, 1024);
  EXPECT_NE(arena.Allocate(512), b) << "another class does not reuse it";
}

TEST(SeqArenaTest, TakesChunksOnlyWhenTheNewestIsFull) {
  SeqArena arena;
  EXPECT_EQ(arena.chunk_bytes(), 0U);
  constexpr size_t kPerChunk = SeqArena::kChunkBytes / SeqArena::kMaxClassBytes;
  std::vector<void*> blocks;
  for (size_t i = 0; i < kPerChunk; ++i) {
    blocks.push_back(arena.Allocate(SeqArena::kMaxClassBytes));
  }
  EXPECT_EQ(arena.chunk_bytes(), SeqArena::kChunkBytes);
  blocks.push_back(arena.Allocate(SeqArena::kMaxClassBytes));
  EXPECT_EQ(arena.chunk_bytes(), 2 * SeqArena::kChunkBytes);
  // Larger than the largest class: not from a chunk.
  void* big = arena.Allocate(SeqArena::kMaxClassBytes + 1);
  EXPECT_TRUE(Aligned64(big));
  EXPECT_EQ(arena.chunk_bytes(), 2 * SeqArena::kChunkBytes);
  arena.Deallocate(big, SeqArena::kMaxClassBytes + 1);
  for (void* p : blocks) {
    arena.Deallocate(p, SeqArena::kMaxClassBytes);
  }
}

TEST(SeqArenaTest, TokenListsGrowAcrossClassesAndKeepTheirTokens) {
  SeqArena arena;
  TokenList tokens;
  for (int32_t i = 0; i < 100000; ++i) {
    tokens.PushBack(i * 7, arena);
  }
  ASSERT_EQ(tokens.size(), 100000U);
  for (int32_t i = 0; i < 100000; ++i) {
    ASSERT_EQ(tokens[static_cast<size_t>(i)], i * 7);
  }
  EXPECT_EQ(tokens.back(), 99999 * 7);
  tokens.Release(arena);
  EXPECT_TRUE(tokens.empty());
}

TEST(SeqArenaTest, AssignKeepsTheRequestedRoomAndGrowsPastIt) {
  SeqArena arena;
  TokenList tokens;
  const std::vector<int32_t> prompt = {1, 2, 3};
  tokens.Assign(prompt, 10, arena);
  EXPECT_EQ(tokens.capacity(), 10U);
  const int32_t* data = tokens.data();
  for (int32_t i = 0; i < 7; ++i) {
    tokens.PushBack(4 + i, arena);
  }
  EXPECT_EQ(tokens.data(), data) << "no reallocation within the room asked for";
  tokens.PushBack(11, arena);
  EXPECT_EQ(tokens.capacity(), 20U);
  const std::span<const int32_t> view = tokens;
  EXPECT_EQ(std::vector<int32_t>(view.begin(), view.end()),
            std::vector<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  tokens.Release(arena);
}

TEST(SeqArenaTest, ThreadsShareTheArena) {
  SeqArena arena;
  auto work = [&arena](unsigned char tag) {
    std::vector<unsigned char*> held;
    for (int round = 0; round < 2000; ++round) {
      const size_t bytes = 256U << (round % 5);
      auto* p = static_cast<unsigned char*>(arena.Allocate(bytes));
      std::memset(p, tag, bytes);
      held.push_back(p);
      if (held.size() > 8) {
        unsigned char* old = held.front();
        const size_t old_bytes = 256U << ((round - 8) % 5);
        for (size_t b = 0; b < old_bytes; ++b) {
          ASSERT_EQ(old[b], tag);
        }
        arena.Deallocate(old, old_bytes);
        held.erase(held.begin());
      }
    }
    for (size_t i = 0; i < held.size(); ++i) {
      arena.Deallocate(held[i], 256U << ((2000 - held.size() + i) % 5));
    }
  };
  std::thread a(work, 0xA5);
  std::thread b(work, 0x5A);
  a.join();
  b.join();
}

#if defined(__SANITIZE_ADDRESS__)
TEST(SeqArenaDeathTest, ReadingAFreedBlockIsCaughtUnderAsan) {
  SeqArena arena;
  auto* p = static_cast<volatile int32_t*>(arena.Allocate(1024));
  p[100] = 7;
  arena.Deallocate(const_cast<int32_t*>(p), 1024);
  EXPECT_DEATH((void)p[100], "use-after-poison");
}
#endif

}  // namespace
}  // namespace loom
