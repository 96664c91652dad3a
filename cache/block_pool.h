// Bookkeeping for the KV pool's blocks: reference counts, the free queue in
// eviction order, and the prefix index from a full block's hash to the block
// that holds that prefix. It knows nothing of sequences; KvCacheManager does.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cache/block_hash.h"
#include "cache/block_id.h"
#include "cache/free_block_queue.h"
#include "cache/huge_page_allocator.h"
#include "cache/prefix_index.h"

namespace loom {

class BlockPool {
 public:
  // num_blocks includes the null block, so num_blocks - 1 blocks are usable.
  BlockPool(int32_t num_blocks, bool enable_caching);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  [[nodiscard]] int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  [[nodiscard]] int32_t NumFreeBlocks() const { return free_queue_.size(); }
  [[nodiscard]] int32_t NumUsedBlocks() const { return num_used_; }
  [[nodiscard]] int32_t NumCachedFreeBlocks() const { return num_cached_free_; }

  // Takes n blocks from the front of the free queue and appends them to out,
  // each with one reference. A taken block's cached prefix is evicted, so the
  // least recently freed prefixes go first. n must not exceed NumFreeBlocks().
  void Allocate(int32_t n, std::vector<BlockId>* out);

  // The block that holds the prefix with this hash, held or free.
  [[nodiscard]] std::optional<BlockId> Lookup(const BlockHash& hash) const;

  // Takes a reference. A free block leaves the free queue, which is how a
  // prefix hit revives a free block without losing its contents.
  void Touch(BlockId id);

  // Drops a reference. At zero the block becomes free: a cached block goes to
  // the back of the queue (evicted last), an uncached one to the front, since
  // nothing is lost by reusing it first.
  void Release(BlockId id);

  // Enters a held, full block into the prefix index under hash; true when it
  // did. Does nothing when caching is off, when the block is already cached,
  // or when another block already holds this prefix (block tables are
  // append-only, so the duplicate cannot replace it and simply stays out of
  // the index). An unreported block (a page other than a logical block's
  // first, see types/kv_cache_layout.h) is left out of the eviction log and
  // of CachedHashes: routers know blocks by their first page.
  bool CacheFullBlock(BlockId id, const BlockHash& hash, bool reported = true);

  // From now on, the hash of every reported cached block that Allocate evicts
  // is appended to *log (nullptr stops it). The log must outlive its use.
  void set_eviction_log(std::vector<BlockHash>* log) { eviction_log_ = log; }

  // The hashes of every reported block in the prefix index, held or free, in
  // block order.
  [[nodiscard]] std::vector<BlockHash> CachedHashes() const;

  // Starts loading a block's record; a hint for callers about to touch it.
  void PrefetchBlock(BlockId id) const { __builtin_prefetch(&blocks_[Checked(id)]); }
  // Starts loading what CacheFullBlock(id, hash) touches.
  void PrefetchCacheFullBlock(BlockId id, const BlockHash& hash) const {
    PrefetchBlock(id);
    if (enable_caching_) {
      index_.Prefetch(hash);
    }
  }

  // Starts loading what Release(id) touches: the record and, since the block
  // may become free, its place in the free queue.
  void PrefetchRelease(BlockId id) const {
    PrefetchBlock(id);
    free_queue_.PrefetchPosition(id);
  }

  [[nodiscard]] int32_t ref_cnt(BlockId id) const { return blocks_[Checked(id)].ref_cnt; }
  // The hash under which the block is in the prefix index, if it is.
  [[nodiscard]] std::optional<BlockHash> cached_hash(BlockId id) const;

  // For tests: the free blocks, next to be taken first.
  [[nodiscard]] std::vector<BlockId> FreeBlocksInEvictionOrder() const {
    return free_queue_.ToVector();
  }

  // Free queue holds exactly the unreferenced blocks, the counters match, and
  // the prefix index and the per-block hashes agree both ways.
  void CheckInvariants() const;

 private:
  struct Block {
    int32_t ref_cnt = 0;
    bool cached = false;
    bool reported = true;  // meaningful only when cached
    BlockHash hash;        // meaningful only when cached
  };

  // How far behind the free queue's head Allocate starts loading what taking
  // a block touches: its record and queue position kRecordAhead ring entries
  // ahead, and, once that record has arrived, its prefix index slot
  // kIndexAhead entries ahead. Each taken block then costs no serial cache
  // misses, where reading record, then hash, then index slot costs three.
  static constexpr uint32_t kRecordAhead = 16;
  static constexpr uint32_t kIndexAhead = 4;

  // Start loading the record and queue position, or the prefix index slot, of
  // the free queue's entry k places behind its head, if there is one. The
  // entry may have been removed; then the load is merely wasted.
  void PrefetchRecordAt(uint32_t k) const;
  void PrefetchIndexSlotAt(uint32_t k) const;

  // Gives a block just taken from the free queue its first reference,
  // evicting its cached prefix.
  void TakeFree(BlockId id);

  // The full hash of a block entered in the index, for its probes.
  [[nodiscard]] auto HashOf() const {
    return [this](BlockId id) -> const BlockHash& { return blocks_[static_cast<size_t>(id)].hash; };
  }

  // Bounds-checks a usable (non-null) block id.
  [[nodiscard]] size_t Checked(BlockId id) const;

  const bool enable_caching_;
  std::vector<Block, HugePageAllocator<Block>> blocks_;
  FreeBlockQueue free_queue_;
  PrefixIndex index_;
  int32_t num_used_ = 0;
  int32_t num_cached_free_ = 0;
  std::vector<BlockHash>* eviction_log_ = nullptr;
};

}  // namespace loom
