#include "tests/scheduler/fake_executor.h"

#include <utility>

#include "gtest/gtest.h"

namespace loom::testing {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 31);
}

// Fingerprint of tokens[0..p] for every p; never 0.
std::vector<uint64_t> PrefixFingerprints(std::span<const int32_t> tokens, size_t count) {
  std::vector<uint64_t> out(count);
  uint64_t h = 1;
  for (size_t p = 0; p < count; ++p) {
    h = Mix(h, static_cast<uint64_t>(tokens[p]));
    out[p] = h | 1;
  }
  return out;
}

uint64_t HashAll(std::span<const int32_t> tokens, uint64_t seed) {
  uint64_t h = Mix(0x1234, seed);
  for (int32_t t : tokens) {
    h = Mix(h, static_cast<uint64_t>(t));
  }
  return h;
}

// The first token the mask allows at or after `token`, counting around the
// mask; `token` itself when the mask allows nothing.
int32_t FirstAllowedFrom(const uint32_t* mask, int32_t words, int32_t token) {
  const int32_t n = words * 32;
  for (int32_t k = 0; k < n; ++k) {
    const int32_t t = (token + k) % n;
    if ((mask[t >> 5] >> (t & 31)) & 1u) {
      return t;
    }
  }
  return token;
}

}  // namespace

int32_t HashToken(std::span<const int32_t> tokens, const SamplingParams& sampling) {
  return 3 + static_cast<int32_t>(HashAll(tokens, sampling.seed) % (kFakeVocabSize - 3));
}

TokenFn HashTokenWithEos(int32_t eos_one_in) {
  return [eos_one_in](std::span<const int32_t> tokens, const SamplingParams& sampling) {
    const uint64_t h = HashAll(tokens, sampling.seed ^ 0xE05);
    if (h % static_cast<uint64_t>(eos_one_in) == 0) {
      return kFakeEosToken;
    }
    return HashToken(tokens, sampling);
  };
}

FakeExecutor::FakeExecutor(int32_t num_blocks, int32_t block_size, TokenFn token_fn)
    : block_size_(block_size),
      token_fn_(std::move(token_fn)),
      kv_(static_cast<size_t>(num_blocks) * block_size, 0) {}

void FakeExecutor::CheckAndWriteKv(const ScheduledSeq& seq, int32_t end) {
  const std::vector<uint64_t> fingerprints =
      PrefixFingerprints(seq.all_token_ids, static_cast<size_t>(end));
  for (int32_t p = 0; p < end; ++p) {
    const int32_t block = seq.block_table[p / block_size_];
    ASSERT_GT(block, 0) << "seq " << seq.seq_id << " uses the null block at " << p;
    const size_t slot = static_cast<size_t>(block) * block_size_ + p % block_size_;
    ASSERT_LT(slot, kv_.size());
    if (p < seq.num_computed_tokens) {
      ASSERT_EQ(kv_[slot], fingerprints[p])
          << "seq " << seq.seq_id << " position " << p << " block " << block
          << " does not hold the computed prefix";
    } else {
      kv_[slot] = fingerprints[p];
    }
  }
}

StepResult FakeExecutor::Execute(const StepPlan& plan) {
  ++num_steps_;
  StepResult result;
  int32_t total = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& seq = plan.seqs[i];
    const int32_t end = seq.num_computed_tokens + seq.num_scheduled_tokens;
    total += seq.num_scheduled_tokens;
    EXPECT_GT(seq.num_scheduled_tokens, 0) << "seq " << seq.seq_id;
    EXPECT_LE(end, static_cast<int32_t>(seq.all_token_ids.size())) << "seq " << seq.seq_id;
    EXPECT_GE(static_cast<int64_t>(seq.block_table.size()) * block_size_, end)
        << "seq " << seq.seq_id << " has too few blocks";
    if (end > static_cast<int32_t>(seq.all_token_ids.size()) ||
        static_cast<int64_t>(seq.block_table.size()) * block_size_ < end) {
      continue;
    }
    CheckAndWriteKv(seq, end);
    const bool reaches_end = end == static_cast<int32_t>(seq.all_token_ids.size());
    EXPECT_EQ(seq.sample, reaches_end) << "seq " << seq.seq_id;
    if (!seq.sample) {
      continue;
    }
    EXPECT_NE(seq.sampling, nullptr);
    if (seq.sampling == nullptr) {
      continue;
    }
    SampledToken& sampled = result.sampled.emplace_back();
    sampled.seq_id = seq.seq_id;
    sampled.token_id = token_fn_(seq.all_token_ids, *seq.sampling);
    if (const uint32_t* mask = plan.token_masks.RowOf(i)) {
      sampled.token_id = FirstAllowedFrom(mask, plan.token_masks.words_per_row, sampled.token_id);
    }
    sampled.logprob = -static_cast<float>(sampled.token_id % 8) / 4;
    for (int32_t k = 0; k < seq.sampling->num_logprobs; ++k) {
      sampled.top.push_back(TopLogprob{.token_id = k, .logprob = -static_cast<float>(k)});
    }
  }
  EXPECT_EQ(total, plan.num_scheduled_tokens);
  return result;
}

}  // namespace loom::testing
