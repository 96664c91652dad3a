// A continuous-batching run of mixed-length requests against KvCacheManager,
// measuring slot utilisation at peak occupancy: tokens whose KV is stored /
// token slots in the blocks sequences hold. Shared by the slot utilisation
// test and bench/cache_bench.cc, which reports the number.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "cache/kv_cache_manager.h"

namespace loom {

struct MixedWorkloadOptions {
  int32_t num_blocks = 4096;  // 64K token slots at block size 16
  int32_t block_size = 16;
  int32_t num_requests = 2000;
  int32_t max_num_seqs = 256;
  uint32_t seed = 1;
};

struct SlotUtilisation {
  int64_t tokens_stored = 0;    // at the peak
  int64_t slots_allocated = 0;  // at the peak: held blocks x block size
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int32_t num_finished = 0;
  int32_t used_blocks_at_end = 0;

  double ratio() const {
    return slots_allocated == 0
               ? 0.0
               : static_cast<double>(tokens_stored) / static_cast<double>(slots_allocated);
  }
};

// Half chat-like requests (prompt 8..256, output 8..256 tokens), half long
// documents (prompt 512..3072, output 64..768). Each step decodes one token
// for every running sequence (preempting the newest, recompute style, when
// the pool is full), then admits waiting requests with their whole prompt.
// The peak is the step with the most blocks held; among such steps the
// lowest utilisation is reported.
inline SlotUtilisation RunMixedWorkload(const MixedWorkloadOptions& options) {
  struct Seq {
    int64_t id;
    int32_t prompt_len;
    int32_t output_len;
    std::vector<int32_t> tokens = {};  // prompt + generated so far
    int32_t num_computed = 0;
  };
  std::mt19937 rng(options.seed);
  auto uniform = [&rng](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  std::deque<Seq> waiting;
  for (int32_t i = 0; i < options.num_requests; ++i) {
    const bool chat = uniform(0, 1) == 0;
    Seq seq{.id = i,
            .prompt_len = chat ? uniform(8, 256) : uniform(512, 3072),
            .output_len = chat ? uniform(8, 256) : uniform(64, 768)};
    seq.tokens.resize(static_cast<size_t>(seq.prompt_len));
    for (int32_t& token : seq.tokens) token = uniform(0, 32000);
    waiting.push_back(std::move(seq));
  }

  KvCacheManager cache(KvCacheConfig{.num_blocks = options.num_blocks,
                                     .block_size = options.block_size,
                                     .enable_prefix_caching = false});
  auto req = [](const Seq& seq) {
    return CacheRequest{.seq_id = seq.id, .token_ids = seq.tokens, .cache_salt = ""};
  };
  SlotUtilisation result;
  int32_t peak_used = -1;
  std::vector<Seq> running;
  while (!waiting.empty() || !running.empty()) {
    ++result.num_steps;
    // Decode one token per running sequence, oldest first.
    for (size_t i = 0; i < running.size(); ++i) {
      Seq& seq = running[i];
      seq.tokens.push_back(uniform(0, 32000));
      while (!cache.AllocateSlots(req(seq), seq.num_computed, 1).has_value()) {
        Seq& victim = running.back();
        cache.Free(victim.id);
        victim.num_computed = 0;
        ++result.num_preemptions;
        const bool self = &victim == &seq;
        waiting.push_front(std::move(victim));
        running.pop_back();
        if (self) break;
      }
      if (i < running.size() && &running[i] == &seq) ++seq.num_computed;
    }
    // Admit waiting sequences with their whole known context.
    while (!waiting.empty() && running.size() < static_cast<size_t>(options.max_num_seqs)) {
      Seq& seq = waiting.front();
      const int32_t num_new = static_cast<int32_t>(seq.tokens.size());
      if (!cache.AllocateSlots(req(seq), 0, num_new).has_value()) {
        // A context larger than the whole pool would never be admitted.
        if (running.empty()) return result;
        break;
      }
      seq.num_computed = num_new;
      running.push_back(std::move(seq));
      waiting.pop_front();
    }
    const KvCacheStats stats = cache.Stats();
    int64_t stored = 0;
    for (const Seq& seq : running) stored += seq.num_computed;
    const int64_t slots = static_cast<int64_t>(stats.num_used) * options.block_size;
    if (stats.num_used > peak_used ||
        (stats.num_used == peak_used &&
         stored * result.slots_allocated < result.tokens_stored * slots)) {
      peak_used = stats.num_used;
      result.tokens_stored = stored;
      result.slots_allocated = slots;
    }
    // Retire finished sequences.
    for (size_t i = 0; i < running.size();) {
      Seq& seq = running[i];
      if (static_cast<int32_t>(seq.tokens.size()) - seq.prompt_len < seq.output_len) {
        ++i;
        continue;
      }
      cache.Free(seq.id);
      ++result.num_finished;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  result.used_blocks_at_end = cache.Stats().num_used;
  return result;
}

}  // namespace loom
