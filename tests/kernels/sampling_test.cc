#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

struct Draw {
  int32_t token;
  float logprob;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

Draw SampleOne(std::vector<float> logits, const SamplingRowParams& row) {
  static ThreadPool pool(1);
  Draw d{};
  d.top_ids.resize(8);
  d.top_logprobs.resize(8);
  SamplingBatchParams p;
  p.logits = logits.data();
  p.num_rows = 1;
  p.vocab_size = static_cast<int32_t>(logits.size());
  p.rows = &row;
  p.out_token_ids = &d.token;
  p.out_logprobs = &d.logprob;
  p.max_top_logprobs = 8;
  p.out_top_ids = d.top_ids.data();
  p.out_top_logprobs = d.top_logprobs.data();
  Sample(p, pool);
  return d;
}

std::vector<float> LogProbs(const std::vector<float>& probs) {
  std::vector<float> l;
  for (float p : probs) l.push_back(std::log(p));
  return l;
}

TEST(SamplingTest, GreedyPicksArgmaxLowerIdOnTies) {
  SamplingRowParams row;
  row.temperature = 0.0f;
  EXPECT_EQ(SampleOne({0.5f, 2.0f, -1.0f, 2.0f}, row).token, 1);
}

TEST(SamplingTest, RepetitionPenaltyFollowsHuggingFace) {
  SamplingRowParams row;
  row.temperature = 0.0f;
  row.repetition_penalty = 4.0f;
  row.num_logprobs = 0;
  const std::vector<int32_t> tokens = {0, 1, 0};
  row.token_ids = tokens.data();
  row.num_prompt_tokens = 3;
  row.num_tokens = 3;
  // Penalised: {3 / 4, -1 * 4, 1}: token 2 wins; each token is penalised once.
  const Draw d = SampleOne({3.0f, -1.0f, 1.0f}, row);
  EXPECT_EQ(d.token, 2);
  const double lse = std::log(std::exp(0.75) + std::exp(-4.0) + std::exp(1.0));
  EXPECT_NEAR(d.logprob, 1.0 - lse, 1e-5);
}

TEST(SamplingTest, FrequencyAndPresencePenaltiesCountOnlyOutputTokens) {
  SamplingRowParams row;
  row.temperature = 0.0f;
  row.frequency_penalty = 0.5f;
  row.presence_penalty = 1.0f;
  // Prompt {2, 2, 2}; output {0, 0}: token 0 loses 2 * 0.5 + 1 = 2, token 2 nothing.
  const std::vector<int32_t> tokens = {2, 2, 2, 0, 0};
  row.token_ids = tokens.data();
  row.num_prompt_tokens = 3;
  row.num_tokens = 5;
  EXPECT_EQ(SampleOne({3.0f, 0.0f, 1.5f}, row).token, 2);
  row.frequency_penalty = 0.0f;
  row.presence_penalty = 1.0f;
  EXPECT_EQ(SampleOne({3.0f, 0.0f, 1.5f}, row).token, 0);
}

TEST(SamplingTest, LogitBiasAndLogprobsAfterIt) {
  SamplingRowParams row;
  row.temperature = 0.0f;
  row.num_logprobs = 2;
  const std::vector<int32_t> ids = {3};
  const std::vector<float> bias = {100.0f};
  row.bias_token_ids = ids.data();
  row.bias_values = bias.data();
  row.num_bias = 1;
  const Draw d = SampleOne({5.0f, 1.0f, 4.0f, 0.0f}, row);
  EXPECT_EQ(d.token, 3);
  EXPECT_NEAR(d.logprob, 0.0f, 1e-6);
  EXPECT_EQ(d.top_ids[0], 3);
  EXPECT_EQ(d.top_ids[1], 0);
  EXPECT_NEAR(d.top_logprobs[1], -95.0f, 1e-3);
}

TEST(SamplingTest, SeededDrawsFollowTheDistributionAndRepeat) {
  const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f};
  SamplingRowParams row;
  row.seed = 1234;
  std::vector<int> counts(4, 0);
  const int n = 20000;
  for (int step = 0; step < n; ++step) {
    row.step = step;
    const int32_t token = SampleOne(LogProbs(probs), row).token;
    ++counts[token];
    if (step < 50) {
      EXPECT_EQ(SampleOne(LogProbs(probs), row).token, token);
    }
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(counts[i] / static_cast<double>(n), probs[i], 0.015);
}

TEST(SamplingTest, TopKTopPAndMinPKeepTheExpectedSets) {
  const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f};
  auto seen = [&](SamplingRowParams row) {
    std::set<int32_t> tokens;
    for (int step = 0; step < 400; ++step) {
      row.step = step;
      tokens.insert(SampleOne(LogProbs(probs), row).token);
    }
    return tokens;
  };
  SamplingRowParams top_k;
  top_k.top_k = 1;
  EXPECT_EQ(seen(top_k), (std::set<int32_t>{3}));
  top_k.top_k = 2;
  EXPECT_EQ(seen(top_k), (std::set<int32_t>{2, 3}));
  SamplingRowParams top_p;
  top_p.top_p = 0.5f;  // 0.4 alone falls short; 0.4 + 0.3 reaches it
  EXPECT_EQ(seen(top_p), (std::set<int32_t>{2, 3}));
  SamplingRowParams min_p;
  min_p.min_p = 0.6f;  // threshold 0.24
  EXPECT_EQ(seen(min_p), (std::set<int32_t>{2, 3}));
  SamplingRowParams cold;
  cold.temperature = 0.05f;  // sharpens 0.4 vs 0.3 to certainty
  EXPECT_EQ(seen(cold), (std::set<int32_t>{3}));
}

TEST(SamplingTest, TopPOnALargeVocabStaysInsideTheNucleus) {
  const int32_t vocab = 5000;
  const std::vector<float> logits = RandomVector(vocab, 77, -2, 2);
  SamplingRowParams row;
  row.top_p = 0.9f;
  row.seed = 9;
  // Brute-force nucleus.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  double total = 0;
  for (float l : logits) total += std::exp(l);
  std::set<int32_t> nucleus;
  double run = 0;
  for (int32_t id : order) {
    if (run >= 0.9 * total) break;
    run += std::exp(logits[id]);
    nucleus.insert(id);
  }
  EXPECT_GT(nucleus.size(), 1000u);
  for (int step = 0; step < 200; ++step) {
    row.step = step;
    EXPECT_TRUE(nucleus.count(SampleOne(logits, row).token));
  }
}

// A denormal or tiny temperature would make 1 / T overflow: it is greedy, so
// the tied best tokens give the lower id for every seed.
TEST(SamplingTest, TinyTemperatureIsGreedy) {
  for (float t : {1e-40f, 1e-30f, 1e-6f}) {
    for (uint64_t seed = 0; seed < 32; ++seed) {
      SamplingRowParams row;
      row.temperature = t;
      row.seed = seed;
      EXPECT_EQ(SampleOne({1.0f, 3.0f, 3.0f, 0.0f}, row).token, 1) << t << " " << seed;
    }
  }
  EXPECT_TRUE(IsGreedyTemperature(0.0f));
  EXPECT_TRUE(IsGreedyTemperature(std::nanf("")));
  EXPECT_FALSE(IsGreedyTemperature(kGreedyTemperature));
}

// Drawn tokens over many seeds.
std::set<int32_t> DrawnTokens(const std::vector<float>& logits, SamplingRowParams row) {
  std::set<int32_t> drawn;
  for (uint64_t seed = 0; seed < 256; ++seed) {
    row.seed = seed;
    drawn.insert(SampleOne(logits, row).token);
  }
  return drawn;
}

// top_k keeps every token tied with the k-th best, as the GPU kernel does.
TEST(SamplingTest, TopKKeepsTokensTiedAtTheCutoff) {
  SamplingRowParams row;
  row.top_k = 2;
  EXPECT_EQ(DrawnTokens({1.0f, 1.0f, 1.0f, 0.0f}, row), (std::set<int32_t>{0, 1, 2}));
  row.top_k = 1;
  EXPECT_EQ(DrawnTokens({0.0f, 2.0f, 1.0f, 2.0f}, row), (std::set<int32_t>{1, 3}));
}

// top_p keeps every token tied with the last of its prefix.
TEST(SamplingTest, TopPKeepsTokensTiedAtTheCutoff) {
  SamplingRowParams row;
  row.top_p = 0.7f;  // p = 0.576, 0.212, 0.212, ~0: the prefix ends inside the tie
  EXPECT_EQ(DrawnTokens({2.0f, 1.0f, 1.0f, -10.0f}, row), (std::set<int32_t>{0, 1, 2}));
}

// A mask allowing tokens 1, 4 and 6 of 8 (bits of one word).
constexpr uint32_t kMask146 = (1u << 1) | (1u << 4) | (1u << 6);

TEST(SamplingTest, MaskKeepsGreedyAmongTheAllowedTokens) {
  SamplingRowParams row;
  row.temperature = 0.0f;
  row.num_logprobs = 5;
  row.allowed_tokens = &kMask146;
  row.allowed_words = 1;
  // Token 0 is best, but only 1, 4 and 6 are allowed: 4 wins.
  const Draw d = SampleOne({9.0f, 1.0f, 8.0f, 7.0f, 3.0f, 6.0f, 2.0f, 5.0f}, row);
  EXPECT_EQ(d.token, 4);
  // The logprobs are over the allowed tokens only.
  const double lse = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(d.logprob, 3.0 - lse, 1e-5);
  EXPECT_EQ(std::vector<int32_t>(d.top_ids.begin(), d.top_ids.begin() + 3),
            (std::vector<int32_t>{4, 6, 1}));
  EXPECT_TRUE(std::isinf(d.top_logprobs[3]) && d.top_logprobs[3] < 0);
}

TEST(SamplingTest, MaskedDrawsStayInsideTheMaskForEverySeed) {
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplingRowParams row;
    row.temperature = 1.5f;
    row.top_k = 6;
    row.top_p = 0.95f;
    row.seed = seed;
    row.allowed_tokens = &kMask146;
    row.allowed_words = 1;
    seen.insert(SampleOne({9.0f, 1.0f, 8.0f, 7.0f, 3.0f, 6.0f, 2.0f, 5.0f}, row).token);
  }
  EXPECT_EQ(seen, (std::set<int32_t>{1, 4, 6}));
}

TEST(SamplingTest, TokensPastTheMaskAreNotAllowed) {
  // 40 tokens, a one-word mask allowing all of its 32: tokens 32..39 are out.
  const uint32_t all = ~0u;
  SamplingRowParams row;
  row.temperature = 0.0f;
  row.allowed_tokens = &all;
  row.allowed_words = 1;
  std::vector<float> logits(40, 0.0f);
  logits[35] = 5.0f;
  logits[20] = 1.0f;
  EXPECT_EQ(SampleOne(logits, row).token, 20);
}

TEST(SamplingTest, AMaskWithNothingLeftYieldsItsLowestAllowedToken) {
  const float inf = std::numeric_limits<float>::infinity();
  SamplingRowParams row;
  row.temperature = 0.7f;
  row.num_logprobs = 2;
  row.allowed_tokens = &kMask146;
  row.allowed_words = 1;
  const Draw d = SampleOne({1.0f, -inf, 1.0f, 1.0f, -inf, 1.0f, -inf, 1.0f}, row);
  EXPECT_EQ(d.token, 1);
  EXPECT_TRUE(std::isinf(d.logprob) && d.logprob < 0);
  const uint32_t none = 0;
  row.allowed_tokens = &none;
  EXPECT_EQ(SampleOne({1.0f, 2.0f, 3.0f}, row).token, 0);
}

}  // namespace
}  // namespace loom::kernels::cpu
