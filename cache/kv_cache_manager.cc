#include "cache/kv_cache_manager.h"

#include <algorithm>
#include <array>
#include <cstddef>

#include "base/check.h"

namespace loom {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : block_size_(config.block_size),
      enable_prefix_caching_(config.enable_prefix_caching),
      groups_(config.layout, config.block_size),
      stride_(groups_.stride()),
      pool_(config.num_blocks, config.enable_prefix_caching) {
  LOOM_CHECK(config.num_blocks >= 2);
  LOOM_CHECK(config.block_size >= 1);
}

void KvCacheManager::Hold(BlockId id, size_t entry) {
  if (pool_.ref_cnt(id) == 0) {
    (groups_.is_sliding(static_cast<int32_t>(entry % stride_)) ? num_used_sliding_
                                                               : num_used_full_)++;
  }
  pool_.Touch(id);
}

void KvCacheManager::Drop(BlockId id, size_t entry) {
  pool_.Release(id);
  if (pool_.ref_cnt(id) == 0) {
    (groups_.is_sliding(static_cast<int32_t>(entry % stride_)) ? num_used_sliding_
                                                               : num_used_full_)--;
  }
}

void KvCacheManager::ReleaseOutOfWindow(int64_t position, Sequence& seq) {
  const int64_t first =
      std::min<int64_t>(groups_.FirstNeededBlock(position), static_cast<int64_t>(NumLogical(seq)));
  for (; seq.num_released < first; ++seq.num_released) {
    const size_t base = static_cast<size_t>(seq.num_released) * stride_;
    for (int32_t k = 0; k < stride_; ++k) {
      BlockId& id = seq.block_table[base + k];
      if (groups_.is_sliding(k) && id != kNullBlockId) {
        Drop(id, base + k);
        id = kNullBlockId;
      }
    }
  }
}

int32_t KvCacheManager::NumBlocksHeld(int64_t seq_id) const {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return 0;
  // The null entries are the sliding pages of the released blocks.
  const Sequence& seq = it->second;
  return static_cast<int32_t>(static_cast<int64_t>(seq.block_table.size()) -
                              seq.num_released * groups_.sliding_pages());
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
  if (stride_ > 1 || groups_.has_sliding_window()) {
    computed = FindHitByGroup(req, max_blocks);
    prefix_query_tokens_ += static_cast<int64_t>(num_tokens);
    prefix_hit_tokens_ += computed.num_computed_tokens;
    return computed;
  }
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

ComputedBlocks KvCacheManager::FindHitByGroup(const CacheRequest& req, size_t max_blocks) {
  // Which pages of each logical block are cached, group by group. Hashing
  // stops where a full-attention group misses (no later block can be a hit);
  // a layout of sliding groups only looks at every block, for the window.
  const auto num_groups = static_cast<size_t>(groups_.num_groups());
  std::vector<std::vector<bool>> cached(num_groups);
  std::vector<BlockId> found;
  BlockHash parent;
  for (size_t i = 0; i < max_blocks; ++i) {
    parent = HashBlock(req, parent, i);
    std::vector<bool> group_cached(num_groups, true);
    for (int32_t k = 0; k < stride_; ++k) {
      const std::optional<BlockId> block = pool_.Lookup(groups_.PageHash(parent, k));
      found.push_back(block.value_or(kNullBlockId));
      if (!block.has_value()) group_cached[static_cast<size_t>(groups_.group_of(k))] = false;
    }
    bool full_missed = false;
    for (size_t g = 0; g < num_groups; ++g) {
      cached[g].push_back(group_cached[g]);
      full_missed |= !group_cached[g] && !groups_.group_is_sliding(static_cast<int32_t>(g));
    }
    if (full_missed) break;
  }
  ComputedBlocks computed;
  const int64_t hit = groups_.LongestHit(cached);
  const int64_t first = groups_.FirstNeededBlock(hit * block_size_);
  for (int64_t b = 0; b < hit; ++b) {
    for (int32_t k = 0; k < stride_; ++k) {
      // Pages before the window are not needed: they stay the null block.
      const bool needed = !groups_.is_sliding(k) || b >= first;
      computed.blocks.push_back(needed ? found[static_cast<size_t>(b) * stride_ + k]
                                       : kNullBlockId);
    }
  }
  computed.num_computed_tokens = static_cast<int32_t>(hit) * block_size_;
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
  const size_t num_held = it == seqs_.end() ? 0 : NumLogical(it->second);
  LOOM_CHECK(static_cast<int64_t>(num_computed_tokens) <=
             static_cast<int64_t>(num_held) * block_size_);
  // Pages the window has left go back to the pool first, whether or not the
  // call then finds room: no query reads them again.
  if (it != seqs_.end()) ReleaseOutOfWindow(num_computed_tokens, it->second);

  const std::span<const BlockId> hits =
      new_computed == nullptr ? std::span<const BlockId>() : std::span(new_computed->blocks);
  LOOM_CHECK(hits.size() % static_cast<size_t>(stride_) == 0);
  const size_t num_hit_blocks = hits.size() / stride_;
  const int32_t num_hit_tokens = static_cast<int32_t>(num_hit_blocks) * block_size_;
  // Hits must come from GetComputedBlocks in this same step: checking each
  // page against the request's own hash chain catches a stale or foreign
  // ComputedBlocks before it could attach someone else's KV.
  std::vector<BlockHash> hit_hashes;
  if (!hits.empty()) {
    LOOM_CHECK(num_held == 0 && num_computed_tokens == 0);
    LOOM_CHECK(new_computed->num_computed_tokens == num_hit_tokens);
    LOOM_CHECK(static_cast<size_t>(num_hit_tokens) < req.token_ids.size());
    hit_hashes.reserve(num_hit_blocks);
    BlockHash parent;
    for (size_t i = 0; i < num_hit_blocks; ++i) {
      parent = HashBlock(req, parent, i);
      for (int32_t k = 0; k < stride_; ++k) {
        const BlockId id = hits[i * stride_ + k];
        LOOM_CHECK(id != kNullBlockId ? pool_.cached_hash(id) == groups_.PageHash(parent, k)
                                      : groups_.is_sliding(k));
      }
      hit_hashes.push_back(parent);
    }
  }

  const int32_t num_tokens = num_computed_tokens + num_hit_tokens + num_new_tokens;
  const int32_t num_new_blocks = NumNewBlocks(num_tokens, num_held + num_hit_blocks);
  // Reviving a free hit block takes it out of the free queue just like a new
  // block, so it counts against the free blocks too.
  const auto num_revived =
      static_cast<int32_t>(std::count_if(hits.begin(), hits.end(), [&](BlockId id) {
        return id != kNullBlockId && pool_.ref_cnt(id) == 0;
      }));
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
    if (hits[i] != kNullBlockId) Hold(hits[i], i);
    seq.block_table.push_back(hits[i]);
  }
  seq.block_hashes.insert(seq.block_hashes.end(), hit_hashes.begin(), hit_hashes.end());
  seq.num_offered += num_hit_blocks;
  // The hit's leading blocks hold no sliding pages.
  if (num_hit_blocks > 0) seq.num_released = groups_.FirstNeededBlock(num_hit_tokens);
  Grow(req, num_tokens, num_new_blocks, seq);
  return SlotAllocation{.block_table = seq.block_table, .num_new_blocks = num_new_blocks};
}

int64_t KvCacheManager::BlocksFor(int64_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

int32_t KvCacheManager::NumNewBlocks(int32_t num_tokens, size_t num_held) const {
  return static_cast<int32_t>(
      std::max<int64_t>(0, BlocksFor(num_tokens) - static_cast<int64_t>(num_held)) * stride_);
}

void KvCacheManager::Grow(const CacheRequest& req, int32_t num_tokens, int32_t num_new_blocks,
                          Sequence& seq) {
  const size_t first_new = seq.block_table.size();
  pool_.Allocate(num_new_blocks, &seq.block_table);
  if (stride_ == 1 && !groups_.has_sliding_window()) {
    num_used_full_ += num_new_blocks;
  } else {
    for (size_t i = first_new; i < seq.block_table.size(); ++i) {
      (groups_.is_sliding(static_cast<int32_t>(i % stride_)) ? num_used_sliding_
                                                             : num_used_full_)++;
    }
  }
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
               static_cast<int64_t>(NumLogical(seq)) * block_size_);
    ReleaseOutOfWindow(call.num_computed_tokens, seq);
    const int32_t num_tokens = call.num_computed_tokens + call.num_new_tokens;
    const int32_t num_new_blocks = NumNewBlocks(num_tokens, NumLogical(seq));
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
    pool_.PrefetchCacheFullBlock(seq.block_table[i * stride_], seq.block_hashes[i]);
  }
}

void KvCacheManager::HashFullBlocks(const CacheRequest& req, size_t num_tokens,
                                    Sequence& seq) const {
  // Only blocks whose every token is known can be hashed.
  const size_t num_known = std::min(num_tokens, req.token_ids.size());
  const size_t num_full = std::min(num_known / static_cast<size_t>(block_size_), NumLogical(seq));
  for (size_t i = seq.block_hashes.size(); i < num_full; ++i) {
    const BlockHash parent = i == 0 ? BlockHash{} : seq.block_hashes[i - 1];
    seq.block_hashes.push_back(HashBlock(req, parent, i));
  }
}

void KvCacheManager::CacheFullBlocks(const CacheRequest& req, int32_t num_tokens, Sequence& seq) {
  const size_t num_full = std::min(static_cast<size_t>(num_tokens), req.token_ids.size()) /
                          static_cast<size_t>(block_size_);
  LOOM_CHECK(num_full <= NumLogical(seq));
  HashFullBlocks(req, static_cast<size_t>(num_tokens), seq);
  // Two passes so that the index slots and block records of several blocks
  // (a prefill chunk's) load at once.
  if (num_full > seq.num_offered + 1) {
    for (size_t i = seq.num_offered; i < num_full; ++i) {
      pool_.PrefetchCacheFullBlock(seq.block_table[i * stride_], seq.block_hashes[i]);
    }
  }
  KvEvent* run = nullptr;
  for (; seq.num_offered < num_full; ++seq.num_offered) {
    const size_t i = seq.num_offered;
    // Events speak of logical blocks, by their first page.
    bool stored = false;
    for (int32_t k = 0; k < stride_; ++k) {
      const BlockId id = seq.block_table[i * stride_ + k];
      if (id != kNullBlockId) {
        const bool cached = pool_.CacheFullBlock(id, groups_.PageHash(seq.block_hashes[i], k),
                                                 /*reported=*/k == 0);
        stored |= k == 0 && cached;
      }
    }
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

ForkedBlocks KvCacheManager::Fork(int64_t parent_seq_id, int64_t child_seq_id, int32_t num_tokens) {
  LOOM_CHECK(parent_seq_id != child_seq_id && num_tokens >= 0);
  const auto parent_it = seqs_.find(parent_seq_id);
  LOOM_CHECK(parent_it != seqs_.end());
  const auto child_it = seqs_.find(child_seq_id);
  LOOM_CHECK(child_it == seqs_.end() || child_it->second.block_table.empty());
  const Sequence& parent = parent_it->second;
  auto num_shared = static_cast<size_t>(num_tokens / block_size_);
  LOOM_CHECK(num_shared <= NumLogical(parent));
  // The child's first query reads the window before it: the parent must not
  // have released any of it.
  if (parent.num_released >
      groups_.FirstNeededBlock(static_cast<int64_t>(num_shared) * block_size_)) {
    num_shared = 0;
  }

  // Built aside: inserting into seqs_ may move the parent.
  Sequence child;
  child.block_table.assign(parent.block_table.begin(),
                           parent.block_table.begin() + num_shared * stride_);
  const size_t num_hashes = std::min(num_shared, parent.block_hashes.size());
  child.block_hashes.assign(parent.block_hashes.begin(), parent.block_hashes.begin() + num_hashes);
  child.num_offered = std::min(num_shared, parent.num_offered);
  child.num_released = num_shared > 0 ? parent.num_released : 0;
  for (size_t i = 0; i < child.block_table.size(); ++i) {
    if (child.block_table[i] != kNullBlockId) Hold(child.block_table[i], i);
  }
  Sequence& inserted = seqs_[child_seq_id];
  inserted = std::move(child);
  return ForkedBlocks{.block_table = inserted.block_table,
                      .num_computed_tokens = static_cast<int32_t>(num_shared) * block_size_};
}

void KvCacheManager::Free(int64_t seq_id) {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    return;
  }
  const std::vector<BlockId>& table = it->second.block_table;
  // Two passes, so that what the releases touch loads at once.
  for (BlockId id : table) {
    if (id != kNullBlockId) pool_.PrefetchRelease(id);
  }
  for (size_t i = table.size(); i-- > 0;) {
    if (table[i] != kNullBlockId) Drop(table[i], i);
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
      .num_used_full = num_used_full_,
      .num_used_sliding = num_used_sliding_,
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
  std::vector<int32_t> group_of_block(occurrences.size(), -1);
  for (const auto& [seq_id, seq] : seqs_) {
    LOOM_CHECK(seq.block_table.size() % static_cast<size_t>(stride_) == 0);
    LOOM_CHECK(seq.num_offered <= seq.block_hashes.size());
    LOOM_CHECK(seq.block_hashes.size() <= NumLogical(seq));
    LOOM_CHECK(seq.num_released <= static_cast<int64_t>(NumLogical(seq)));
    LOOM_CHECK(enable_prefix_caching_ || seq.block_hashes.empty());
    for (size_t i = 0; i < seq.block_table.size(); ++i) {
      const BlockId id = seq.block_table[i];
      const auto entry = static_cast<int32_t>(i % stride_);
      // Null exactly where a sliding page was released (or never taken).
      const bool released =
          groups_.is_sliding(entry) && static_cast<int64_t>(i / stride_) < seq.num_released;
      LOOM_CHECK((id == kNullBlockId) == released);
      if (released) {
        continue;
      }
      LOOM_CHECK(id > kNullBlockId && id < pool_.num_blocks());
      LOOM_CHECK(last_seen[id] != stamp);
      last_seen[id] = stamp;
      ++occurrences[id];
      // A block serves one kind of group: page keys differ by entry.
      const int32_t kind = groups_.is_sliding(entry) ? 1 : 0;
      LOOM_CHECK(group_of_block[id] < 0 || group_of_block[id] == kind);
      group_of_block[id] = kind;
      const std::optional<BlockHash> cached = pool_.cached_hash(id);
      if (!cached.has_value()) {
        continue;
      }
      // A cached block sits where the sequence's own hash chain says it does.
      const size_t b = i / stride_;
      LOOM_CHECK(b < seq.block_hashes.size() &&
                 *cached == groups_.PageHash(seq.block_hashes[b], entry));
    }
    ++stamp;
  }
  int32_t used[2] = {0, 0};
  for (BlockId id = 1; id < pool_.num_blocks(); ++id) {
    LOOM_CHECK(occurrences[id] == pool_.ref_cnt(id));
    if (occurrences[id] > 0) ++used[group_of_block[id]];
  }
  LOOM_CHECK(used[0] == num_used_full_ && used[1] == num_used_sliding_);
}

}  // namespace loom
