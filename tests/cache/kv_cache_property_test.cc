// Randomized operations on a tiny pool, checked against a model of what the
// blocks must hold. Every slot written remembers a fingerprint of the whole
// prefix (salt and tokens up to that position) it was computed for; a prefix
// hit or a held block that does not hold exactly the sequence's own prefix is
// a wrong answer, whatever the bookkeeping says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cache/kv_cache_manager.h"

namespace loom {
namespace {

constexpr int32_t kBlockSize = 4;
constexpr size_t kMaxTokens = 40;
constexpr size_t kMaxSeqs = 16;  // running and waiting

// One page per logical block (12 usable blocks), or a hybrid layout: a full
// page and two sliding pages (window 6) per logical block, in a pool of as
// many logical blocks.
KvCacheLayout Layout(bool hybrid) {
  if (!hybrid) return {};
  return {.groups = {{.num_pages = 1}, {.num_pages = 2, .sliding_window = 6}}};
}
int32_t NumBlocks(bool hybrid) { return 1 + 12 * Layout(hybrid).stride(); }

struct SeqModel {
  std::vector<int32_t> tokens;
  std::string salt;
  int32_t num_computed = 0;
  bool running = false;
};

// Fingerprint of (salt, tokens[0..=pos]) for every pos.
std::vector<uint64_t> PrefixFingerprints(const SeqModel& seq) {
  uint64_t fp = 1469598103934665603ULL;
  auto mix = [&fp](uint64_t value) { fp = (fp ^ value) * 1099511628211ULL; };
  for (char c : seq.salt) {
    mix(static_cast<unsigned char>(c));
  }
  mix(0xffff);
  std::vector<uint64_t> fps;
  for (int32_t token : seq.tokens) {
    mix(static_cast<uint32_t>(token));
    fps.push_back(fp);
  }
  return fps;
}

class KvCachePropertyTest : public ::testing::TestWithParam<std::tuple<uint32_t, bool, bool>> {
 protected:
  KvCachePropertyTest()
      : rng_(std::get<0>(GetParam())),
        num_blocks_(NumBlocks(std::get<2>(GetParam()))),
        stride_(Layout(std::get<2>(GetParam())).stride()),
        cache_(KvCacheConfig{.num_blocks = num_blocks_,
                             .block_size = kBlockSize,
                             .enable_prefix_caching = std::get<1>(GetParam()),
                             .layout = Layout(std::get<2>(GetParam()))}),
        slots_(num_blocks_, std::vector<uint64_t>(kBlockSize, 0)),
        min_free_(num_blocks_) {}

  // The pool block that holds position pos of entry e of a table.
  static BlockId At(std::span<const BlockId> table, int32_t stride, int32_t pos, int32_t e) {
    return table[static_cast<size_t>(pos / kBlockSize) * stride + e];
  }
  // Whether entry e must still hold position pos for a sequence that has
  // computed num_computed tokens: always for full pages, within the next
  // query's window for sliding ones.
  bool Needed(int32_t e, int32_t pos, int32_t num_computed) const {
    return !cache_.groups().is_sliding(e) ||
           pos / kBlockSize >= cache_.groups().FirstNeededBlock(num_computed);
  }

  int32_t Uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  CacheRequest Req(int64_t id) {
    const SeqModel& seq = seqs_.at(id);
    return CacheRequest{.seq_id = id, .token_ids = seq.tokens, .cache_salt = seq.salt};
  }

  template <typename Pred>
  int64_t PickSeq(Pred pred) {
    std::vector<int64_t> ids;
    for (const auto& [id, seq] : seqs_) {
      if (pred(seq)) {
        ids.push_back(id);
      }
    }
    if (ids.empty()) {
      return -1;
    }
    return ids[static_cast<size_t>(Uniform(0, static_cast<int32_t>(ids.size()) - 1))];
  }

  // Prompts drawn from a few shared stems over a tiny vocabulary, so that
  // prefixes repeat often.
  SeqModel NewPrompt() {
    static const std::vector<std::vector<int32_t>> kStems = {
        {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
        {1, 2, 3, 4, 9, 9, 9, 9, 8, 8, 8, 8, 7, 7},
        {5, 5, 5, 5, 6, 6, 6, 6, 1, 2, 3, 4, 5, 6}};
    SeqModel seq;
    const auto& stem = kStems[static_cast<size_t>(Uniform(0, 2))];
    seq.tokens.assign(stem.begin(), stem.begin() + Uniform(1, static_cast<int32_t>(stem.size())));
    for (int32_t i = Uniform(0, 6); i > 0; --i) {
      seq.tokens.push_back(Uniform(0, 3));
    }
    seq.salt = Uniform(0, 3) == 0 ? "tenant" : "";
    return seq;
  }

  // What the model would do: write the prefix fingerprints of positions
  // [from, to) into their slots. Shared blocks are never written.
  void Write(int64_t id, int32_t from, int32_t to) {
    const std::vector<uint64_t> fps = PrefixFingerprints(seqs_.at(id));
    const std::span<const BlockId> table = cache_.BlockTable(id);
    for (int32_t pos = from; pos < to; ++pos) {
      for (int32_t e = 0; e < stride_; ++e) {
        const BlockId block = At(table, stride_, pos, e);
        ASSERT_EQ(cache_.pool().ref_cnt(block), 1) << "write into a shared block";
        slots_[block][pos % kBlockSize] = fps[pos];
      }
    }
  }

  // Every computed position of every sequence still holds its own prefix.
  void CheckContents() {
    for (const auto& [id, seq] : seqs_) {
      const std::span<const BlockId> table = cache_.BlockTable(id);
      ASSERT_GE(table.size() / stride_ * kBlockSize, static_cast<size_t>(seq.num_computed));
      if (!seq.running) {
        ASSERT_TRUE(table.empty());
      }
      const std::vector<uint64_t> fps = PrefixFingerprints(seq);
      for (int32_t pos = 0; pos < seq.num_computed; ++pos) {
        for (int32_t e = 0; e < stride_; ++e) {
          if (Needed(e, pos, seq.num_computed)) {
            ASSERT_EQ(slots_[At(table, stride_, pos, e)][pos % kBlockSize], fps[pos]);
          }
        }
      }
    }
  }

  // Allocates slots for n more tokens of a sequence, preempting a random
  // running sequence when there is no room.
  void Schedule(int64_t id, int32_t n, const ComputedBlocks* hits) {
    SeqModel& seq = seqs_.at(id);
    const KvCacheStats before = cache_.Stats();
    int32_t num_revived = 0;
    if (hits != nullptr) {
      for (BlockId block : hits->blocks) {
        num_revived += static_cast<int>(block != kNullBlockId && cache_.pool().ref_cnt(block) == 0);
      }
    }
    if (cache_.AllocateSlots(Req(id), seq.num_computed, n, hits).has_value()) {
      // Free cached blocks leave the free queue by revival or by eviction
      // (counted with one page per block: released sliding pages join them).
      if (!cache_.groups().has_sliding_window()) {
        const int32_t num_evicted =
            before.num_cached_free - cache_.Stats().num_cached_free - num_revived;
        ASSERT_GE(num_evicted, 0);
        num_evictions_ += num_evicted;
      }
      num_revivals_ += num_revived;
      const int32_t start = seq.num_computed + (hits != nullptr ? hits->num_computed_tokens : 0);
      seq.running = true;
      seq.num_computed = start + n;
      Write(id, start, start + n);
      return;
    }
    ++num_no_room_;
    // Nothing changes, bar the sliding pages the window has left.
    const KvCacheStats after = cache_.Stats();
    ASSERT_EQ(after.num_free - before.num_free, before.num_used_sliding - after.num_used_sliding);
    const int64_t victim = PickSeq([](const SeqModel& s) { return s.running; });
    if (victim < 0) {
      return;
    }
    cache_.Free(victim);
    seqs_.at(victim).running = false;
    seqs_.at(victim).num_computed = 0;
  }

  void Admit() {
    int64_t id = PickSeq([](const SeqModel& s) { return !s.running; });
    if (id < 0 || (seqs_.size() < kMaxSeqs && Uniform(0, 2) == 0)) {
      id = next_id_++;
      seqs_[id] = NewPrompt();
    }
    const ComputedBlocks hits = cache_.GetComputedBlocks(Req(id));
    const SeqModel& seq = seqs_.at(id);
    ASSERT_LT(static_cast<size_t>(hits.num_computed_tokens), seq.tokens.size());
    const std::vector<uint64_t> fps = PrefixFingerprints(seq);
    for (int32_t pos = 0; pos < hits.num_computed_tokens; ++pos) {
      for (int32_t e = 0; e < stride_; ++e) {
        if (Needed(e, pos, hits.num_computed_tokens)) {
          ASSERT_EQ(slots_[At(hits.blocks, stride_, pos, e)][pos % kBlockSize], fps[pos]);
        }
      }
    }
    if (!hits.blocks.empty()) {
      ++num_hits_;
    }
    const int32_t remaining = static_cast<int32_t>(seq.tokens.size()) - hits.num_computed_tokens;
    Schedule(id, Uniform(1, remaining), &hits);
  }

  void Step() {
    const int64_t id = PickSeq([](const SeqModel& s) { return s.running; });
    if (id < 0) {
      return;
    }
    SeqModel& seq = seqs_.at(id);
    if (seq.tokens.size() >= kMaxTokens) {
      return Finish(id);
    }
    const int32_t remaining = static_cast<int32_t>(seq.tokens.size()) - seq.num_computed;
    if (remaining > 0) {
      return Schedule(id, Uniform(1, remaining), nullptr);
    }
    seq.tokens.push_back(Uniform(0, 3));
    Schedule(id, 1, nullptr);
  }

  // Step for every running sequence at once, in one AllocateSlotsBatch when
  // the blocks they need fit (a scheduler batches only then).
  void BatchStep() {
    std::vector<int64_t> ids;
    std::vector<SlotRequest> batch;
    int64_t num_needed = 0;
    for (auto& [id, seq] : seqs_) {
      if (!seq.running || seq.tokens.size() >= kMaxTokens) {
        continue;
      }
      if (seq.num_computed == static_cast<int32_t>(seq.tokens.size())) {
        seq.tokens.push_back(Uniform(0, 3));
      }
      const int32_t n = Uniform(1, static_cast<int32_t>(seq.tokens.size()) - seq.num_computed);
      const int32_t num_blocks = (seq.num_computed + n + kBlockSize - 1) / kBlockSize;
      num_needed += std::max<int64_t>(
          0, num_blocks * stride_ - static_cast<int64_t>(cache_.BlockTable(id).size()));
      ids.push_back(id);
      batch.push_back(SlotRequest{
          .req = Req(id), .num_computed_tokens = seq.num_computed, .num_new_tokens = n});
    }
    if (batch.empty() || num_needed > cache_.NumFreeBlocks()) {
      return;
    }
    const KvCacheStats before = cache_.Stats();
    std::vector<std::span<const BlockId>> tables(batch.size());
    cache_.AllocateSlotsBatch(batch, tables);
    // Exactly the blocks counted are taken; sliding pages the window has left
    // come back.
    const KvCacheStats after = cache_.Stats();
    if (cache_.groups().has_sliding_window()) {
      ASSERT_GE(after.num_free, before.num_free - num_needed);
    } else {
      ASSERT_EQ(after.num_free, before.num_free - num_needed);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      ASSERT_TRUE(std::ranges::equal(tables[i], cache_.BlockTable(ids[i])));
      SeqModel& seq = seqs_.at(ids[i]);
      const int32_t start = seq.num_computed;
      seq.num_computed += batch[i].num_new_tokens;
      Write(ids[i], start, seq.num_computed);
    }
    ++num_batches_;
  }

  void Finish(int64_t id) {
    cache_.Free(id);
    seqs_.erase(id);
  }

  void Fork() {
    const int64_t parent = PickSeq([](const SeqModel& s) { return s.running; });
    if (parent < 0 || seqs_.size() >= kMaxSeqs) {
      return;
    }
    const int64_t child = next_id_++;
    const SeqModel& from = seqs_.at(parent);
    const ForkedBlocks shared = cache_.Fork(parent, child, from.num_computed);
    SeqModel copy;
    copy.tokens.assign(from.tokens.begin(), from.tokens.begin() + from.num_computed);
    copy.salt = from.salt;
    copy.num_computed = shared.num_computed_tokens;
    EXPECT_TRUE(copy.num_computed == from.num_computed / kBlockSize * kBlockSize ||
                (copy.num_computed == 0 && cache_.groups().has_sliding_window()));
    copy.running = true;
    // The child samples its own next token.
    copy.tokens.push_back(Uniform(0, 3));
    seqs_[child] = std::move(copy);
    ++num_forks_;
  }

  void RunOps(int num_ops) {
    for (int op = 0; op < num_ops; ++op) {
      const int32_t dice = Uniform(0, 199);
      if (dice < 50) {
        Admit();
      } else if (dice < 135) {
        Step();
      } else if (dice < 150) {
        BatchStep();
      } else if (dice < 175) {
        const int64_t id = PickSeq([](const SeqModel&) { return true; });
        if (id >= 0) {
          Finish(id);
        }
      } else {
        Fork();
      }
      if (::testing::Test::HasFatalFailure()) {
        return;
      }
      cache_.CheckInvariants();
      const KvCacheStats stats = cache_.Stats();
      ASSERT_EQ(stats.num_free + stats.num_used, stats.num_blocks);
      ASSERT_EQ(stats.num_used_full + stats.num_used_sliding, stats.num_used);
      ASSERT_LE(stats.num_cached_free, stats.num_free);
      ASSERT_LE(stats.prefix_hit_tokens, stats.prefix_query_tokens);
      CheckContents();
      if (::testing::Test::HasFatalFailure()) {
        return;
      }
      min_free_ = std::min(min_free_, stats.num_free);
    }
  }

  std::mt19937 rng_;
  const int32_t num_blocks_;
  const int32_t stride_;
  KvCacheManager cache_;
  std::vector<std::vector<uint64_t>> slots_;
  std::map<int64_t, SeqModel> seqs_;
  int64_t next_id_ = 1;
  int num_hits_ = 0;
  int num_no_room_ = 0;
  int num_forks_ = 0;
  int num_batches_ = 0;
  int num_evictions_ = 0;
  int num_revivals_ = 0;
  int32_t min_free_;
};

TEST_P(KvCachePropertyTest, RandomOperationsKeepInvariantsAndContents) {
  RunOps(6000);
  if (HasFatalFailure()) {
    return;
  }
  // The run exercised the paths it is meant to check.
  EXPECT_GT(num_no_room_, 50);
  EXPECT_GT(num_forks_, 50);
  EXPECT_GT(num_batches_, 50);
  EXPECT_EQ(min_free_, 0);
  if (std::get<1>(GetParam())) {  // prefix caching on
    EXPECT_GT(num_hits_, 50);
    EXPECT_GT(num_revivals_, 50);
    if (!std::get<2>(GetParam())) {
      EXPECT_GT(num_evictions_, 50);
    }
  } else {
    EXPECT_EQ(num_hits_, 0);
    EXPECT_EQ(num_evictions_, 0);
  }
  while (!seqs_.empty()) {
    Finish(seqs_.begin()->first);
  }
  cache_.CheckInvariants();
  const KvCacheStats stats = cache_.Stats();
  EXPECT_EQ(stats.num_used, 0);
  EXPECT_EQ(stats.num_free, num_blocks_ - 1);
  EXPECT_EQ(cache_.Usage(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvCachePropertyTest,
                         ::testing::Combine(::testing::Values(1U, 2U, 3U, 4U), ::testing::Bool(),
                                            ::testing::Bool()));

}  // namespace
}  // namespace loom
