#include "cache/kv_cache_manager.h"

#include <algorithm>
#include <array>
#include <cstddef>

#include "base/check.h"

namespace loom {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : block_size_(config.block_size),
      enable_prefix_caching_(config.enable_prefix_caching),
      pool_(config.num_blocks, config.enable_prefix_caching) {
  LOOM_CHECK(config.num_blocks >= 2);
  LOOM_CHECK(config.block_size >= 1);
}

BlockHash KvCacheManager::HashBlock(const CacheRequest& req, const BlockHash& parent,
                                    size_t index) const {
  const auto block_size = static_cast<size_t>(block_size_);
  return HashBlockTokens(parent, req.token_ids.subspan(index * block_size, block_size),
                         req.cache_salt);
}

ComputedBlocks KvCacheManager::GetComputedBlocks(const CacheRequest& req) {
  ComputedBlocks computed;
  if (!enable_prefix_caching_) {
    return computed;
  }
  const auto it = seqs_.find(req.seq_id);
  LOOM_CHECK(it == seqs_.end() || it->second.block_table.empty());
  // Leave the last token uncovered even when the prompt fills whole blocks.
  const size_t num_tokens = req.token_ids.size();
  const size_t max_blocks = num_tokens == 0 ? 0 : (num_tokens - 1) / block_size_;
  // Hashing stops at the first miss, so a lookup costs the hit plus one block.
  BlockHash parent;
  for (size_t i = 0; i < max_blocks; ++i) {
    const BlockHash hash = HashBlock(req, parent, i);
    const std::optional<BlockId> block = pool_.Lookup(hash);
    if (!block.has_value()) {
      break;
    }
    computed.blocks.push_back(*block);
    parent = hash;
  }
  computed.num_computed_tokens = static_cast<int32_t>(computed.blocks.size()) * block_size_;
  prefix_query_tokens_ += static_cast<int64_t>(num_tokens);
  prefix_hit_tokens_ += computed.num_computed_tokens;
  return computed;
}

std::optional<SlotAllocation> KvCacheManager::AllocateSlots(const CacheRequest& req,
                                                            int32_t num_computed_tokens,
                                                            int32_t num_new_tokens,
                                                            const ComputedBlocks* new_computed) {
  LOOM_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0);
  // One lookup for a known sequence; a new one is inserted only once the
  // allocation is known to succeed, so a failed call leaves no entry behind.
  auto it = seqs_.find(req.seq_id);
  const size_t num_held = it == seqs_.end() ? 0 : it->second.block_table.size();
  LOOM_CHECK(static_cast<int64_t>(num_computed_tokens) <=
             static_cast<int64_t>(num_held) * block_size_);

  const std::span<const BlockId> hits =
      new_computed == nullptr ? std::span<const BlockId>() : std::span(new_computed->blocks);
  const int32_t num_hit_tokens = static_cast<int32_t>(hits.size()) * block_size_;
  // Hits must come from GetComputedBlocks in this same step: checking each
  // block against the request's own hash chain catches a stale or foreign
  // ComputedBlocks before it could attach someone else's KV.
  std::vector<BlockHash> hit_hashes;
  if (!hits.empty()) {
    LOOM_CHECK(num_held == 0 && num_computed_tokens == 0);
    LOOM_CHECK(new_computed->num_computed_tokens == num_hit_tokens);
    LOOM_CHECK(static_cast<size_t>(num_hit_tokens) < req.token_ids.size());
    hit_hashes.reserve(hits.size());
    BlockHash parent;
    for (size_t i = 0; i < hits.size(); ++i) {
      parent = HashBlock(req, parent, i);
      LOOM_CHECK(pool_.cached_hash(hits[i]) == parent);
      hit_hashes.push_back(parent);
    }
  }

  const int32_t num_tokens = num_computed_tokens + num_hit_tokens + num_new_tokens;
  const int32_t num_new_blocks = NumNewBlocks(num_tokens, num_held + hits.size());
  // Reviving a free hit block takes it out of the free queue just like a new
  // block, so it counts against the free blocks too.
  const auto num_revived = static_cast<int32_t>(
      std::count_if(hits.begin(), hits.end(), [&](BlockId id) { return pool_.ref_cnt(id) == 0; }));
  if (num_new_blocks + num_revived > pool_.NumFreeBlocks()) {
    return std::nullopt;
  }

  if (it == seqs_.end()) {
    it = seqs_.try_emplace(req.seq_id).first;
    // Capped, so that a long max_num_tokens does not reserve much memory for
    // a sequence that may stop early.
    const auto num_blocks =
        static_cast<size_t>(std::min<int64_t>(BlocksFor(req.max_num_tokens), 512));
    it->second.block_table.reserve(num_blocks);
    if (enable_prefix_caching_) {
      it->second.block_hashes.reserve(num_blocks);
    }
  }
  Sequence& seq = it->second;
  for (size_t i = 0; i < hits.size(); ++i) {
    pool_.Touch(hits[i]);
    seq.block_table.push_back(hits[i]);
    seq.block_hashes.push_back(hit_hashes[i]);
  }
  seq.num_offered += hits.size();
  Grow(req, num_tokens, num_new_blocks, seq);
  return SlotAllocation{.block_table = seq.block_table, .num_new_blocks = num_new_blocks};
}

int64_t KvCacheManager::BlocksFor(int64_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

int32_t KvCacheManager::NumNewBlocks(int32_t num_tokens, size_t num_held) const {
  return static_cast<int32_t>(
      std::max<int64_t>(0, BlocksFor(num_tokens) - static_cast<int64_t>(num_held)));
}

void KvCacheManager::Grow(const CacheRequest& req, int32_t num_tokens, int32_t num_new_blocks,
                          Sequence& seq) {
  pool_.Allocate(num_new_blocks, &seq.block_table);
  if (!evicted_.empty()) {
    if (events_.empty() || events_.back().kind != KvEvent::Kind::kBlockRemoved) {
      events_.emplace_back().kind = KvEvent::Kind::kBlockRemoved;
    }
    std::vector<BlockHash>& removed = events_.back().block_hashes;
    removed.insert(removed.end(), evicted_.begin(), evicted_.end());
    evicted_.clear();
  }
  if (enable_prefix_caching_) {
    CacheFullBlocks(req, num_tokens, seq);
  }
}

// Inlined by force: GCC counts a prefetch as no side effect, so it may deem a
// function that only prefetches pure and drop every call to it.
__attribute__((always_inline)) inline void KvCacheManager::PrefetchTails(
    const Sequence& seq) const {
  if (!seq.block_table.empty()) {
    __builtin_prefetch(&seq.block_table.back());
  }
  if (!seq.block_hashes.empty()) {
    __builtin_prefetch(&seq.block_hashes.back());
  }
}

void KvCacheManager::AllocateSlotsBatch(std::span<const SlotRequest> batch,
                                        std::span<std::span<const BlockId>> tables) {
  LOOM_CHECK(tables.size() == batch.size());
  // A software pipeline: call i is served while call i + kStage is prepared
  // (hashed, its index slot and block loading), call i + 2 * kStage has its
  // record looked up and its table tails loading, and the record and tokens
  // of call i + 3 * kStage are loading. Each stage reads only what the stage
  // before it started loading.
  constexpr size_t kStage = 4;
  std::array<Sequence*, 4 * kStage> found{};
  const size_t n = batch.size();
  for (size_t t = 0; t < n + 3 * kStage; ++t) {
    if (t < n) {
      const SlotRequest& call = batch[t];
      seqs_.prefetch(call.req.seq_id);
      // The tokens of the last block the call fills, for hashing.
      const size_t end =
          std::min(static_cast<size_t>(call.num_computed_tokens + call.num_new_tokens),
                   call.req.token_ids.size());
      if (enable_prefix_caching_ && end > 0) {
        __builtin_prefetch(&call.req.token_ids[end - 1]);
        __builtin_prefetch(&call.req.token_ids[end - std::min<size_t>(end, block_size_)]);
      }
    }
    if (t >= kStage && t - kStage < n) {
      const size_t i = t - kStage;
      const auto it = seqs_.find(batch[i].req.seq_id);
      LOOM_CHECK(it != seqs_.end()) << "a batched sequence must hold blocks";
      found[i % found.size()] = &it->second;
      PrefetchTails(it->second);
    }
    if (t >= 2 * kStage && t - 2 * kStage < n) {
      const size_t i = t - 2 * kStage;
      PrepareCall(batch[i], *found[i % found.size()]);
    }
    if (t < 3 * kStage || t - 3 * kStage >= n) {
      continue;
    }
    const size_t i = t - 3 * kStage;
    const SlotRequest& call = batch[i];
    Sequence& seq = *found[i % found.size()];
    LOOM_CHECK(call.num_computed_tokens >= 0 && call.num_new_tokens >= 0);
    LOOM_CHECK(static_cast<int64_t>(call.num_computed_tokens) <=
               static_cast<int64_t>(seq.block_table.size()) * block_size_);
    const int32_t num_tokens = call.num_computed_tokens + call.num_new_tokens;
    const int32_t num_new_blocks = NumNewBlocks(num_tokens, seq.block_table.size());
    LOOM_CHECK(num_new_blocks <= pool_.NumFreeBlocks()) << "a batch must fit in the free blocks";
    Grow(call.req, num_tokens, num_new_blocks, seq);
    tables[i] = seq.block_table;
  }
}

void KvCacheManager::PrepareCall(const SlotRequest& call, Sequence& seq) {
  if (seq.block_table.empty()) {
    return;
  }
  if (!enable_prefix_caching_) {
    pool_.PrefetchBlock(seq.block_table.back());
    return;
  }
  // Hashing ahead changes nothing observable: the call caches the blocks.
  const size_t num_hashed = seq.block_hashes.size();
  HashFullBlocks(call.req, static_cast<size_t>(call.num_computed_tokens + call.num_new_tokens),
                 seq);
  if (seq.block_hashes.size() == num_hashed) {
    pool_.PrefetchBlock(seq.block_table.back());
    return;
  }
  for (size_t i = num_hashed; i < seq.block_hashes.size(); ++i) {
    pool_.PrefetchCacheFullBlock(seq.block_table[i], seq.block_hashes[i]);
  }
}

void KvCacheManager::HashFullBlocks(const CacheRequest& req, size_t num_tokens,
                                    Sequence& seq) const {
  // Only blocks whose every token is known can be hashed.
  const size_t num_known = std::min(num_tokens, req.token_ids.size());
  const size_t num_full =
      std::min(num_known / static_cast<size_t>(block_size_), seq.block_table.size());
  for (size_t i = seq.block_hashes.size(); i < num_full; ++i) {
    const BlockHash parent = i == 0 ? BlockHash{} : seq.block_hashes[i - 1];
    seq.block_hashes.push_back(HashBlock(req, parent, i));
  }
}

void KvCacheManager::CacheFullBlocks(const CacheRequest& req, int32_t num_tokens, Sequence& seq) {
  const size_t num_full = std::min(static_cast<size_t>(num_tokens), req.token_ids.size()) /
                          static_cast<size_t>(block_size_);
  LOOM_CHECK(num_full <= seq.block_table.size());
  HashFullBlocks(req, static_cast<size_t>(num_tokens), seq);
  // Two passes so that the index slots and block records of several blocks
  // (a prefill chunk's) load at once.
  if (num_full > seq.num_offered + 1) {
    for (size_t i = seq.num_offered; i < num_full; ++i) {
      pool_.PrefetchCacheFullBlock(seq.block_table[i], seq.block_hashes[i]);
    }
  }
  KvEvent* run = nullptr;
  for (; seq.num_offered < num_full; ++seq.num_offered) {
    const size_t i = seq.num_offered;
    const bool stored = pool_.CacheFullBlock(seq.block_table[i], seq.block_hashes[i]);
    if (record_events_) {
      run = stored ? RecordStored(req, seq, i, run) : nullptr;
    }
  }
}

KvEvent* KvCacheManager::RecordStored(const CacheRequest& req, const Sequence& seq, size_t i,
                                      KvEvent* run) {
  if (run == nullptr) {
    KvEvent& event = events_.emplace_back();
    event.kind = KvEvent::Kind::kBlockStored;
    if (i > 0) {
      event.parent_block_hash = seq.block_hashes[i - 1];
    }
    event.block_size = block_size_;
    event.cache_salt = req.cache_salt;
    run = &event;
  }
  run->block_hashes.push_back(seq.block_hashes[i]);
  const auto block_size = static_cast<size_t>(block_size_);
  const std::span<const int32_t> tokens = req.token_ids.subspan(i * block_size, block_size);
  run->token_ids.insert(run->token_ids.end(), tokens.begin(), tokens.end());
  return run;
}

void KvCacheManager::EnableEvents() {
  record_events_ = true;
  pool_.set_eviction_log(&evicted_);
}

std::vector<KvEvent> KvCacheManager::TakeEvents() {
  std::vector<KvEvent> events;
  events.swap(events_);
  return events;
}

std::span<const BlockId> KvCacheManager::Fork(int64_t parent_seq_id, int64_t child_seq_id,
                                              int32_t num_tokens) {
  LOOM_CHECK(parent_seq_id != child_seq_id && num_tokens >= 0);
  const auto parent_it = seqs_.find(parent_seq_id);
  LOOM_CHECK(parent_it != seqs_.end());
  const auto child_it = seqs_.find(child_seq_id);
  LOOM_CHECK(child_it == seqs_.end() || child_it->second.block_table.empty());
  const Sequence& parent = parent_it->second;
  const auto num_shared = static_cast<size_t>(num_tokens / block_size_);
  LOOM_CHECK(num_shared <= parent.block_table.size());

  // Built aside: inserting into seqs_ may move the parent.
  Sequence child;
  child.block_table.assign(parent.block_table.begin(), parent.block_table.begin() + num_shared);
  const size_t num_hashes = std::min(num_shared, parent.block_hashes.size());
  child.block_hashes.assign(parent.block_hashes.begin(), parent.block_hashes.begin() + num_hashes);
  child.num_offered = std::min(num_shared, parent.num_offered);
  for (BlockId id : child.block_table) {
    pool_.Touch(id);
  }
  Sequence& inserted = seqs_[child_seq_id];
  inserted = std::move(child);
  return inserted.block_table;
}

void KvCacheManager::Free(int64_t seq_id) {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    return;
  }
  const std::vector<BlockId>& table = it->second.block_table;
  // Two passes, so that what the releases touch loads at once.
  for (BlockId id : table) {
    pool_.PrefetchRelease(id);
  }
  for (auto id = table.rbegin(); id != table.rend(); ++id) {
    pool_.Release(*id);
  }
  seqs_.erase(it);
}

std::span<const BlockId> KvCacheManager::BlockTable(int64_t seq_id) const {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    return {};
  }
  return it->second.block_table;
}

KvCacheStats KvCacheManager::Stats() const {
  return KvCacheStats{
      .num_blocks = pool_.num_blocks() - 1,
      .num_free = pool_.NumFreeBlocks(),
      .num_used = pool_.NumUsedBlocks(),
      .num_cached_free = pool_.NumCachedFreeBlocks(),
      .prefix_query_tokens = prefix_query_tokens_,
      .prefix_hit_tokens = prefix_hit_tokens_,
  };
}

double KvCacheManager::Usage() const {
  return static_cast<double>(pool_.NumUsedBlocks()) / static_cast<double>(pool_.num_blocks() - 1);
}

void KvCacheManager::CheckInvariants() const {
  pool_.CheckInvariants();
  std::vector<int32_t> occurrences(static_cast<size_t>(pool_.num_blocks()), 0);
  // last_seen[id] == stamp marks a block already met in the current table.
  std::vector<int32_t> last_seen(occurrences.size(), -1);
  int32_t stamp = 0;
  for (const auto& [seq_id, seq] : seqs_) {
    LOOM_CHECK(seq.num_offered <= seq.block_hashes.size());
    LOOM_CHECK(seq.block_hashes.size() <= seq.block_table.size());
    LOOM_CHECK(enable_prefix_caching_ || seq.block_hashes.empty());
    for (size_t i = 0; i < seq.block_table.size(); ++i) {
      const BlockId id = seq.block_table[i];
      LOOM_CHECK(id > kNullBlockId && id < pool_.num_blocks());
      LOOM_CHECK(last_seen[id] != stamp);
      last_seen[id] = stamp;
      ++occurrences[id];
      const std::optional<BlockHash> cached = pool_.cached_hash(id);
      if (!cached.has_value()) {
        continue;
      }
      // A cached block sits where the sequence's own hash chain says it does.
      LOOM_CHECK(i < seq.block_hashes.size() && *cached == seq.block_hashes[i]);
    }
    ++stamp;
  }
  for (BlockId id = 1; id < pool_.num_blocks(); ++id) {
    LOOM_CHECK(occurrences[id] == pool_.ref_cnt(id));
  }
}

}  // namespace loom
