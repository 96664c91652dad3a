// KV cache costs per block (allocate, free, prefix lookup, admission with a
// prefix hit) and per decoded token, plus the slot utilisation of a
// mixed-length continuous-batching workload (counter slot_utilisation).
//
//   loom_cache_bench --benchmark_filter=SlotUtilisation
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cache/kv_cache_manager.h"
#include "tests/cache/mixed_workload.h"

namespace loom {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumSeqs = 256;
constexpr int32_t kTokensPerSeq = 1024;
constexpr int32_t kBlocksPerSeq = kTokensPerSeq / kBlockSize;

std::vector<std::vector<int32_t>> RandomPrompts(int32_t num_prompts, int32_t num_tokens) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, 127999);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(num_prompts));
  for (auto& prompt : prompts) {
    prompt.resize(static_cast<size_t>(num_tokens));
    for (int32_t& t : prompt) {
      t = token(rng);
    }
  }
  return prompts;
}

CacheRequest Req(int64_t seq_id, const std::vector<int32_t>& tokens) {
  return CacheRequest{.seq_id = seq_id, .token_ids = tokens, .cache_salt = ""};
}

KvCacheManager FullSizePool(bool caching) {
  return KvCacheManager(KvCacheConfig{.num_blocks = kNumSeqs * kBlocksPerSeq + 1,
                                      .block_size = kBlockSize,
                                      .enable_prefix_caching = caching});
}

void AllocateAll(KvCacheManager& cache, const std::vector<std::vector<int32_t>>& prompts) {
  for (int32_t s = 0; s < kNumSeqs; ++s) {
    auto blocks = cache.AllocateSlots(Req(s, prompts[s]), 0, kTokensPerSeq);
    benchmark::DoNotOptimize(blocks);
  }
}

void FreeAll(KvCacheManager& cache) {
  for (int32_t s = 0; s < kNumSeqs; ++s) {
    cache.Free(s);
  }
}

void SetPerBlock(benchmark::State& state, int64_t blocks_per_iteration) {
  state.SetItemsProcessed(state.iterations() * blocks_per_iteration);
  state.counters["time_per_block"] =
      benchmark::Counter(static_cast<double>(state.iterations() * blocks_per_iteration),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Whole prompts into a pool sized to fit them exactly; with caching on, every
// block is also hashed and indexed (and the previous round's evicted).
void BM_Allocate(benchmark::State& state) {
  const auto prompts = RandomPrompts(kNumSeqs, kTokensPerSeq);
  KvCacheManager cache = FullSizePool(state.range(0) != 0);
  for (auto _ : state) {
    AllocateAll(cache, prompts);
    state.PauseTiming();
    FreeAll(cache);
    state.ResumeTiming();
  }
  SetPerBlock(state, int64_t{kNumSeqs} * kBlocksPerSeq);
}
BENCHMARK(BM_Allocate)->ArgName("caching")->Arg(0)->Arg(1);

void BM_Free(benchmark::State& state) {
  const auto prompts = RandomPrompts(kNumSeqs, kTokensPerSeq);
  KvCacheManager cache = FullSizePool(state.range(0) != 0);
  for (auto _ : state) {
    state.PauseTiming();
    AllocateAll(cache, prompts);
    state.ResumeTiming();
    FreeAll(cache);
  }
  SetPerBlock(state, int64_t{kNumSeqs} * kBlocksPerSeq);
}
BENCHMARK(BM_Free)->ArgName("caching")->Arg(0)->Arg(1);

// Looking up a cached prompt of range(0) tokens: every full block but the
// last hits, and each hit costs one hash and one index probe.
void BM_PrefixLookup(benchmark::State& state) {
  const auto num_tokens = static_cast<int32_t>(state.range(0));
  const auto prompts = RandomPrompts(1, num_tokens);
  KvCacheManager cache = FullSizePool(true);
  (void)cache.AllocateSlots(Req(0, prompts[0]), 0, num_tokens);
  const CacheRequest probe = Req(1, prompts[0]);
  int64_t hit_blocks = 0;
  for (auto _ : state) {
    ComputedBlocks hits = cache.GetComputedBlocks(probe);
    hit_blocks = static_cast<int64_t>(hits.blocks.size());
    benchmark::DoNotOptimize(hits);
  }
  SetPerBlock(state, hit_blocks);
}
BENCHMARK(BM_PrefixLookup)->ArgName("tokens")->Arg(256)->Arg(2048)->Arg(16384);

// A request whose prompt is all cached but the last block: lookup, taking the
// hit blocks (reviving them from the free queue) and freeing them again.
void BM_AdmitWithPrefixHit(benchmark::State& state) {
  const auto prompts = RandomPrompts(1, 2048);
  KvCacheManager cache = FullSizePool(true);
  (void)cache.AllocateSlots(Req(0, prompts[0]), 0, 2048);
  cache.Free(0);
  const CacheRequest req = Req(1, prompts[0]);
  int64_t blocks = 0;
  for (auto _ : state) {
    const ComputedBlocks hits = cache.GetComputedBlocks(req);
    auto added = cache.AllocateSlots(req, 0, 2048 - hits.num_computed_tokens, &hits);
    benchmark::DoNotOptimize(added);
    blocks = static_cast<int64_t>(cache.BlockTable(1).size());
    cache.Free(1);
  }
  SetPerBlock(state, blocks);
}
BENCHMARK(BM_AdmitWithPrefixHit);

// One decode step's cache work for one sequence: slots for one more token,
// a new block every block_size tokens.
void BM_DecodeAppend(benchmark::State& state) {
  const bool caching = state.range(0) != 0;
  const auto tokens = RandomPrompts(1, kTokensPerSeq);
  KvCacheManager cache = FullSizePool(caching);
  const CacheRequest req = Req(0, tokens[0]);
  for (auto _ : state) {
    for (int32_t computed = 0; computed < kTokensPerSeq; ++computed) {
      auto added = cache.AllocateSlots(req, computed, 1);
      benchmark::DoNotOptimize(added);
    }
    state.PauseTiming();
    cache.Free(0);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kTokensPerSeq);
  state.counters["time_per_token"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kTokensPerSeq),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DecodeAppend)->ArgName("caching")->Arg(0)->Arg(1);

// Tokens stored / token slots held at peak occupancy, for 2000 mixed-length
// requests on a 4096-block pool of 16-token blocks. A property of the
// allocator, not a timing: run once.
void BM_SlotUtilisation(benchmark::State& state) {
  SlotUtilisation result;
  for (auto _ : state) {
    result = RunMixedWorkload(MixedWorkloadOptions{});
  }
  state.counters["slot_utilisation"] = result.ratio();
  state.counters["tokens_stored"] = static_cast<double>(result.tokens_stored);
  state.counters["slots_allocated"] = static_cast<double>(result.slots_allocated);
  state.counters["preemptions"] = static_cast<double>(result.num_preemptions);
}
BENCHMARK(BM_SlotUtilisation)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
