// A deterministic stand-in for a model executor in scheduler tests. Its
// sampled token depends only on the sequence's tokens and seed, so every
// schedule of the same requests yields the same tokens. It also keeps a fake
// KV cache (one fingerprint of the prefix per slot) and fails the test when a
// plan reads a slot that does not hold what the sequence computed there.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "types/sampling_params.h"
#include "types/step.h"

namespace loom::testing {

inline constexpr int32_t kFakeEosToken = 2;
inline constexpr int32_t kFakeVocabSize = 1000;

// Picks the next token of a sequence from all its tokens.
using TokenFn = std::function<int32_t(std::span<const int32_t> tokens, const SamplingParams&)>;

// A hash of (seed, tokens) into [3, kFakeVocabSize): never EOS.
int32_t HashToken(std::span<const int32_t> tokens, const SamplingParams& sampling);

// HashToken, except that EOS comes out with probability about 1/eos_one_in.
TokenFn HashTokenWithEos(int32_t eos_one_in);

class FakeExecutor {
 public:
  FakeExecutor(int32_t num_blocks, int32_t block_size, TokenFn token_fn = HashToken);

  // Checks the plan against the fake KV cache (with gtest assertions), writes
  // the scheduled positions and samples one token per `sample` sequence (under
  // a token mask, the first allowed token at or after token_fn's, counting
  // around the mask). The logprob of a token is -(token % 8) / 4; with
  // num_logprobs = k the top list holds k entries.
  StepResult Execute(const StepPlan& plan);

  [[nodiscard]] int64_t num_steps() const { return num_steps_; }

 private:
  void CheckAndWriteKv(const ScheduledSeq& seq, int32_t end);

  int32_t block_size_;
  TokenFn token_fn_;
  std::vector<uint64_t> kv_;  // per slot: fingerprint of the prefix ending there; 0 = unwritten
  int64_t num_steps_ = 0;
};

}  // namespace loom::testing
