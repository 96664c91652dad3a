// KvCacheManager hides the paged KV pool behind the three calls the scheduler
// needs (GetComputedBlocks, AllocateSlots, Free) and owns every sequence's
// block table. Blocks are shared through reference counts: between requests
// with a common prefix (prefix caching) and between the n samples of a request.
//
// The token ranges of one AllocateSlots call, left to right:
//
//   |<- num_computed_tokens ->|<- new_computed ->|<-- num_new_tokens -->|
//   | already computed, in    | prefix hits      | slots for this step: |
//   | blocks the sequence     | (first call      | the last held block's|
//   | holds                   | only): ref_cnt+1,| empty slots, then    |
//   |                         | revived if free  | new blocks taken from|
//   |                         |                  | the free queue front |
//
// Examples with block_size 4 (one letter per slot: h hit, c computed, n new
// token, _ empty). First call after a two-block hit, 7-token prefill chunk:
//
//   block        h0      h1      n0      n1
//   slots       |h h h h|h h h h|n n n n|n n n _|   new blocks {n0, n1}
//
// Later call: 6 tokens computed in b0 and b1, 3 new tokens; b1's two empty
// slots are used before a new block is taken:
//
//   block        b0      b1      n0
//   slots       |c c c c|c c n n|n _ _ _|           new blocks {n0}
//
// Either way the call returns the whole table (h0 h1 n0 n1, b0 b1 n0), which
// is what a step plan carries.
//
// Every block whose slots all lie below min(computed + hits + new,
// token_ids.size()) is full once the step runs, so it is hashed and entered
// into the prefix index right away.
//
// With a layout of several groups or pages (types/kv_cache_layout.h: a
// hybrid model's full-attention and sliding-window layers) "block" above is a
// logical block of layout.stride() table entries, each a pool block of its
// own; tables, hits and the scheduler's block counts are in entries. Pages of
// a sliding-window group that every later query's window has left are
// released at the start of each AllocateSlots call for the sequence (and read
// as the null block from then on), so a long sequence holds about window +
// block_size positions of them. A prefix hit must hold every page a group
// still reads: all of a full-attention group's, the window's of a sliding one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cache/block_hash.h"
#include "cache/block_id.h"
#include "cache/block_pool.h"
#include "cache/kv_cache_groups.h"
#include "types/kv_cache_layout.h"
#include "types/kv_event.h"

namespace loom {

struct KvCacheConfig {
  int32_t num_blocks;  // including the null block; at least 2
  int32_t block_size;  // tokens per block
  bool enable_prefix_caching = true;
  KvCacheLayout layout = {};
};

// What the cache needs to know about a sequence.
struct CacheRequest {
  int64_t seq_id;
  std::span<const int32_t> token_ids;  // every known token (prompt + generated so far)
  std::string_view cache_salt;         // requests with different salts share no prefix
  // The most tokens the sequence may reach, when known (0 if not): the cache
  // then sizes the sequence's tables once instead of growing them.
  int32_t max_num_tokens = 0;
};

// One call of AllocateSlotsBatch.
struct SlotRequest {
  CacheRequest req;
  int32_t num_computed_tokens = 0;
  int32_t num_new_tokens = 0;
};

// What AllocateSlots did to a sequence's blocks.
struct SlotAllocation {
  // The sequence's whole block table. Valid until the next call that changes
  // this sequence's blocks (AllocateSlots, AllocateSlotsBatch, Fork into it,
  // Free); calls for other sequences leave it valid.
  std::span<const BlockId> block_table;
  // Blocks this call appended (prefix hits excluded): the table's tail.
  int32_t num_new_blocks = 0;

  [[nodiscard]] std::span<const BlockId> new_blocks() const {
    return block_table.last(static_cast<size_t>(num_new_blocks));
  }
};

// A cached prefix of full blocks found by GetComputedBlocks.
struct ComputedBlocks {
  std::vector<BlockId> blocks;
  int32_t num_computed_tokens = 0;  // blocks.size() * block_size
};

struct KvCacheStats {
  int32_t num_blocks;           // usable blocks: the null block is not counted
  int32_t num_free;             // includes num_cached_free
  int32_t num_used;             // held by at least one sequence
  int32_t num_cached_free;      // free but still holding a cached prefix
  int64_t prefix_query_tokens;  // cumulative, over GetComputedBlocks calls
  int64_t prefix_hit_tokens;    // cumulative
  // num_used split by the kind of group holding them.
  int32_t num_used_full;
  int32_t num_used_sliding;
};

// What Fork shared with the child.
struct ForkedBlocks {
  std::span<const BlockId> block_table;  // valid as SlotAllocation::block_table is
  int32_t num_computed_tokens = 0;       // the child's: a whole number of blocks
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  // The longest cached prefix of full blocks for a sequence that holds no
  // blocks yet. It never covers the whole sequence: at least one token is left
  // to compute so that the last position produces logits. Counts queried and
  // hit tokens; takes no references (AllocateSlots does). Empty when prefix
  // caching is off.
  [[nodiscard]] ComputedBlocks GetComputedBlocks(const CacheRequest& req);

  // Makes room for num_new_tokens more tokens after the num_computed_tokens
  // that req's sequence already holds (0 on the first call). On the first call
  // pass GetComputedBlocks' result as new_computed, from the same scheduling
  // step: its blocks are appended to the table with a reference each, and
  // their tokens count as computed. Returns the updated block table and how
  // many blocks were appended to it; or std::nullopt when the pool has too
  // few free blocks: then nothing changes and the caller preempts a sequence
  // and retries.
  [[nodiscard]] std::optional<SlotAllocation> AllocateSlots(
      const CacheRequest& req, int32_t num_computed_tokens, int32_t num_new_tokens,
      const ComputedBlocks* new_computed = nullptr);

  // A new sequence (a further sample, n > 1) that shares the parent's first
  // num_tokens / block_size full blocks through reference counts, whether or
  // not prefix caching is on, unless the parent has released pages of them
  // that the child still reads (then it shares none). The child computes the
  // rest itself. The child must hold no blocks.
  ForkedBlocks Fork(int64_t parent_seq_id, int64_t child_seq_id, int32_t num_tokens);

  // AllocateSlots(b.req, b.num_computed_tokens, b.num_new_tokens) for every b
  // of batch, in order and with the same effects, when the caller knows that
  // they all succeed: each sequence appears at most once and has been given
  // blocks before (by AllocateSlots or Fork), so no prefix hits are involved,
  // and together the calls need at most NumFreeBlocks() new blocks. Writes
  // each sequence's whole block table to tables[i]. A caller walking thousands
  // of sequences batches their calls because the cache can then load the
  // records, table and hash-chain tails, tokens and index slots of the calls
  // ahead while it serves the current one, so that the chains of dependent
  // cache misses behind consecutive calls overlap.
  void AllocateSlotsBatch(std::span<const SlotRequest> batch,
                          std::span<std::span<const BlockId>> tables);

  // Drops the sequence's references, tail block first, so that its tail is
  // evicted before its (more shareable) head. Unknown ids are a no-op.
  void Free(int64_t seq_id);

  // Empty for unknown ids; valid as SlotAllocation::block_table is. The
  // scheduler keeps the tables that its calls return; this is for tests and
  // inspection.
  [[nodiscard]] std::span<const BlockId> BlockTable(int64_t seq_id) const;

  // Free blocks, including free blocks that still hold a cached prefix.
  [[nodiscard]] int32_t NumFreeBlocks() const { return pool_.NumFreeBlocks(); }
  // Pool blocks the sequence holds (null entries of its table excluded).
  [[nodiscard]] int32_t NumBlocksHeld(int64_t seq_id) const;
  // The layout's arithmetic (entries per logical block, the most blocks a
  // sequence holds at once, ...).
  [[nodiscard]] const KvCacheGroups& groups() const { return groups_; }
  [[nodiscard]] KvCacheStats Stats() const;
  // Blocks held by sequences / usable blocks (num_blocks - 1).
  [[nodiscard]] double Usage() const;

  // KV-cache events (types/kv_event.h), off until EnableEvents(): from then on
  // every block entering the prefix index is recorded as BlockStored, in runs
  // of consecutive blocks of one sequence, and every cached block evicted as
  // BlockRemoved, in the order they happen. With prefix caching off there are
  // none.
  void EnableEvents();
  // The events recorded since the last call, oldest first.
  [[nodiscard]] std::vector<KvEvent> TakeEvents();
  // The hash of every block in the prefix index: what the events so far add
  // up to.
  [[nodiscard]] std::vector<BlockHash> CachedBlockHashes() const { return pool_.CachedHashes(); }

  // Aborts unless the pool is consistent and every block's reference count
  // equals its occurrences in block tables. For tests.
  void CheckInvariants() const;

  [[nodiscard]] int32_t block_size() const { return block_size_; }
  // For tests and inspection.
  [[nodiscard]] const BlockPool& pool() const { return pool_; }

 private:
  struct Sequence {
    // layout.stride() entries per logical block; released sliding pages are
    // the null block.
    std::vector<BlockId> block_table;
    // Logical blocks whose sliding pages are released: a prefix of the table.
    int64_t num_released = 0;
    // Chained hashes of the leading full blocks, kept even for blocks that are
    // not in the prefix index so the chain can continue. Empty when prefix
    // caching is off.
    std::vector<BlockHash> block_hashes;
    // Leading blocks already offered to the prefix index; block_hashes may
    // run ahead of it (a batch hashes a block before the call that fills it).
    size_t num_offered = 0;
  };

  // The hash of block `index` of req, given the hash of the block before it.
  [[nodiscard]] BlockHash HashBlock(const CacheRequest& req, const BlockHash& parent,
                                    size_t index) const;
  // Extends seq's hash chain over the full blocks among the first num_tokens
  // tokens (at most the blocks held).
  void HashFullBlocks(const CacheRequest& req, size_t num_tokens, Sequence& seq) const;
  // Hashes the full blocks among the first num_tokens tokens and offers them
  // to the prefix index.
  void CacheFullBlocks(const CacheRequest& req, int32_t num_tokens, Sequence& seq);
  // Logical blocks covering num_tokens tokens, and the pool blocks the ones
  // past num_held logical blocks take.
  [[nodiscard]] int64_t BlocksFor(int64_t num_tokens) const;
  [[nodiscard]] int32_t NumNewBlocks(int32_t num_tokens, size_t num_held) const;
  [[nodiscard]] size_t NumLogical(const Sequence& seq) const {
    return seq.block_table.size() / static_cast<size_t>(stride_);
  }
  // Takes and drops a reference to the block at table entry `entry`, keeping
  // the per-group counts.
  void Hold(BlockId id, size_t entry);
  void Drop(BlockId id, size_t entry);
  // Releases the sliding pages no query at `position` or later reads.
  void ReleaseOutOfWindow(int64_t position, Sequence& seq);
  // GetComputedBlocks for a layout of several groups or pages.
  [[nodiscard]] ComputedBlocks FindHitByGroup(const CacheRequest& req, size_t max_blocks);
  // Records block i of seq, just entered into the index, as stored: appended
  // to run, the event of the block before it, or to a new event when run is
  // null. Returns the event it went to.
  KvEvent* RecordStored(const CacheRequest& req, const Sequence& seq, size_t i, KvEvent* run);
  // Appends num_new_blocks blocks to seq's table, which then covers
  // num_tokens tokens, and caches the blocks that are full.
  void Grow(const CacheRequest& req, int32_t num_tokens, int32_t num_new_blocks, Sequence& seq);
  // The stages of AllocateSlotsBatch that load what a call will touch.
  void PrefetchTails(const Sequence& seq) const;
  void PrepareCall(const SlotRequest& call, Sequence& seq);

  const int32_t block_size_;
  const bool enable_prefix_caching_;
  const KvCacheGroups groups_;
  const int32_t stride_;
  BlockPool pool_;
  int32_t num_used_full_ = 0;
  int32_t num_used_sliding_ = 0;
  absl::flat_hash_map<int64_t, Sequence> seqs_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  bool record_events_ = false;
  std::vector<KvEvent> events_;
  std::vector<BlockHash> evicted_;  // the pool's eviction log, while events are on
};

}  // namespace loom
