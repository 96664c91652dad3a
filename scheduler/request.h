// The scheduler's own record of a request and of its sequences (one per
// sample): the token lists that grow as samples are produced, how far each
// sequence's KV cache has caught up, and the key that orders it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "cache/kv_cache_manager.h"
#include "scheduler/seq_arena.h"
#include "scheduler/stop_checker.h"
#include "types/constraint.h"
#include "types/request_params.h"
#include "types/sampling_params.h"

namespace loom {

// Sequence ids are handle * kMaxSamplesPerRequest + sample index.
inline constexpr int32_t kMaxSamplesPerRequest = 32;

// The seed of sample `index`: sample 0 keeps the request's seed (so n = 1
// behaves like a plain request), the others get a SplitMix64 mix of (seed,
// index) so that siblings are independent yet reproducible.
uint64_t DeriveSampleSeed(uint64_t seed, uint32_t index);

// The total order of sequences. Waiting sequences are admitted in ascending
// order, running ones are preempted in descending order. `rank` is the same
// for every request under FCFS and arrival + priority * aging under the
// priority policy; ties go to the earlier request, then the lower sample.
struct SeqKey {
  absl::Time rank;
  RequestHandle handle = 0;
  uint32_t index = 0;

  friend bool operator<(const SeqKey& a, const SeqKey& b) {
    if (a.rank != b.rank) {
      return a.rank < b.rank;
    }
    if (a.handle != b.handle) {
      return a.handle < b.handle;
    }
    return a.index < b.index;
  }
};

enum class SeqState : uint8_t {
  kPending,   // a further sample waiting for the first one to compute the prompt
  kWaiting,   // in the waiting queue, holding no blocks
  kRunning,   // holds blocks; scheduled every step the budget allows
  kFinished,  // ended; its blocks are freed
};

struct Request;

// A step walks thousands of these, so the record is cache-line aligned and its
// first line holds everything a step reads for a running sequence: planning
// (progress, tokens, block table) and, in the common case, stopping (the
// bounds below and the EOS flag; the stop token ids live in the second line
// and are read only when the request has some).
struct alignas(64) Sequence {
  int64_t seq_id = 0;
  int32_t num_computed_tokens = 0;
  int32_t num_prompt_tokens = 0;
  // The prompt followed by this sample's generated tokens.
  TokenList token_ids;
  // The sequence's block table, as the cache call that last changed it
  // returned it, so that a plan needs no table lookups; empty while it holds
  // no blocks.
  std::span<const BlockId> block_table;
  SeqState state = SeqState::kPending;
  uint8_t index = 0;  // sample index, < kMaxSamplesPerRequest
  // The request's StopBounds, flattened to fit this line.
  bool ignore_eos = false;
  bool has_stop_token_ids = false;  // stop_token_ids is not empty
  bool has_constraint = false;      // matcher is set
  int32_t min_stop_len = 0;
  int32_t max_len = 0;

  std::span<const int32_t> stop_token_ids;  // the request's
  std::string_view cache_salt;              // the request's
  // Under reserve admission: blocks it may still take (its reservation minus
  // what it holds).
  int32_t num_blocks_reserved = 0;
  Request* request = nullptr;
  SeqKey key;
  SamplingParams sampling;  // with this sample's seed
  // Where this sample is in the request's structured-output constraint,
  // after its generated tokens; null when unconstrained.
  std::unique_ptr<ConstraintMatcher> matcher;

  [[nodiscard]] RequestHandle handle() const {
    return static_cast<RequestHandle>(seq_id / kMaxSamplesPerRequest);
  }
  [[nodiscard]] int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  [[nodiscard]] int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  // Block table entries: pool blocks, or null ones a sliding window has left.
  [[nodiscard]] int32_t num_table_entries() const {
    return static_cast<int32_t>(block_table.size());
  }
  [[nodiscard]] StopBounds stop_bounds() const {
    return StopBounds{.min_stop_len = min_stop_len, .max_len = max_len, .ignore_eos = ignore_eos};
  }
  [[nodiscard]] CacheRequest cache_request() const {
    return CacheRequest{.seq_id = seq_id,
                        .token_ids = token_ids,
                        .cache_salt = cache_salt,
                        .max_num_tokens = max_len};
  }
};
static_assert(offsetof(Sequence, max_len) + sizeof(int32_t) <= 64,
              "a step's fields must stay in the first cache line");

// Sequence records live in their scheduler's arena, on huge pages like the
// token lists; the deleter gives both back.
struct SeqDeleter {
  SeqArena* arena = nullptr;
  void operator()(Sequence* seq) const {
    seq->token_ids.Release(*arena);
    seq->~Sequence();
    arena->Deallocate(seq, sizeof(Sequence));
  }
};
using SeqPtr = std::unique_ptr<Sequence, SeqDeleter>;
[[nodiscard]] inline SeqPtr NewSequence(SeqArena& arena) {
  return SeqPtr(new (arena.Allocate(sizeof(Sequence))) Sequence(), SeqDeleter{&arena});
}

struct Request {
  RequestHandle handle = 0;
  int32_t num_prompt_tokens = 0;
  StoppingParams stopping;
  std::string cache_salt;
  // RequestParams::prompt_logprobs: when >= 0 every prompt position is
  // computed (no prefix-cache hit) and scored by the executor.
  int32_t num_prompt_logprobs = -1;
  std::shared_ptr<const TokenConstraint> constraint;  // null: unconstrained
  absl::Time deadline = absl::InfiniteFuture();
  // Longest the sequences may grow: min(prompt + max_tokens, max_model_len).
  int32_t max_seq_len = 0;
  std::vector<SeqPtr> seqs;  // seqs[i] is sample i
  int32_t num_unfinished = 0;
  // Samples 1..n-1 not yet forked from sample 0, and whether their batch slots
  // (and reserved blocks) are held on their behalf while sample 0 runs.
  int32_t num_pending = 0;
  bool pending_slots_held = false;
  bool started = false;  // scheduled at least once
};

}  // namespace loom
