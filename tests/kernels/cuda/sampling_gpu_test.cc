// GPU sampling against the CPU recipe (kernels/sampling.h): the same token for
// the same seed, logprobs within float tolerance, over greedy, temperature,
// top-k, top-p, min-p, penalties, logit bias and token masks.
#include <cuda_runtime_api.h>

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/sampling.h"
#include "kernels/sampling.h"
#include "tests/kernels/cuda/gpu_test_util.h"

namespace loom::testing {
namespace {

namespace kc = kernels::cuda;

struct Case {
  const char* name;
  kernels::SamplingRowParams row;
};

std::vector<Case> Cases(const std::vector<int32_t>& history, const std::vector<int32_t>& bias_ids,
                        const std::vector<float>& bias_values, const std::vector<uint32_t>& mask) {
  std::vector<Case> cases;
  auto add = [&](const char* name, auto&& edit) {
    kernels::SamplingRowParams r;
    r.token_ids = history.data();
    r.num_prompt_tokens = 20;
    r.num_tokens = static_cast<int32_t>(history.size());
    r.num_logprobs = 5;
    edit(r);
    cases.push_back({name, r});
  };
  add("greedy", [](auto& r) { r.temperature = 0.0f; });
  add("temperature", [](auto& r) { r.temperature = 0.8f; });
  add("top_k", [](auto& r) { r.top_k = 40; });
  add("top_p", [](auto& r) {
    r.top_p = 0.9f;
    r.temperature = 0.7f;
  });
  add("min_p", [](auto& r) { r.min_p = 0.05f; });
  add("all_filters", [](auto& r) {
    r.top_k = 100;
    r.top_p = 0.8f;
    r.min_p = 0.02f;
    r.temperature = 1.3f;
  });
  add("penalties", [](auto& r) {
    r.repetition_penalty = 1.3f;
    r.presence_penalty = 0.5f;
    r.frequency_penalty = 0.25f;
    r.temperature = 0.0f;
  });
  add("bias", [&](auto& r) {
    r.bias_token_ids = bias_ids.data();
    r.bias_values = bias_values.data();
    r.num_bias = static_cast<int32_t>(bias_ids.size());
    r.temperature = 0.5f;
  });
  auto masked = [&](auto& r) {
    r.allowed_tokens = mask.data();
    r.allowed_words = static_cast<int32_t>(mask.size());
  };
  add("mask_greedy", [&](auto& r) {
    masked(r);
    r.temperature = 0.0f;
  });
  add("mask_temperature", [&](auto& r) {
    masked(r);
    r.temperature = 1.2f;
  });
  add("mask_filters", [&](auto& r) {
    masked(r);
    r.top_k = 500;  // more than the mask allows: the cut reaches masked tokens
    r.top_p = 0.9f;
    r.min_p = 0.01f;
  });
  return cases;
}

TEST(SamplingGpuTest, MatchesCpuRecipe) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  kernels::cpu::ThreadPool pool(1);
  constexpr int kTopMax = 8;
  std::mt19937 rng(7);
  std::vector<int32_t> history(60);
  for (int32_t& t : history) t = static_cast<int32_t>(rng() % 64);  // repeats, in range
  const std::vector<int32_t> bias_ids = {3, 17, 5000};
  const std::vector<float> bias_values = {5.0f, -100.0f, 8.0f};
  for (int vocab : {256, 32000, 128256}) {
    // Every seventh token and token 1 allowed, and nothing past the vocabulary.
    std::vector<uint32_t> mask((vocab + 31) / 32, 0u);
    for (int t = 0; t < vocab; t += 7) mask[t >> 5] |= 1u << (t & 31);
    mask[0] |= 2u;
    for (uint64_t seed : {1u, 2u, 3u}) {
      std::vector<Case> cases = Cases(history, bias_ids, bias_values, mask);
      std::vector<kernels::SamplingRowParams> rows;
      for (Case& c : cases) {
        c.row.seed = seed;
        c.row.step = seed * 3;
        if (c.row.num_bias > 0 && vocab <= 5000) c.row.num_bias = 2;
        rows.push_back(c.row);
      }
      const int n = static_cast<int>(rows.size());
      std::vector<float> logits =
          RandomValues<float>(size_t(n) * vocab, uint32_t(seed + vocab), -8, 8);
      GuardedBuffer<float> d_logits(logits);

      std::vector<int32_t> want(n), want_top(n * kTopMax);
      std::vector<float> want_lp(n), want_top_lp(n * kTopMax);
      kernels::cpu::Sample({logits.data(), n, vocab, rows.data(), want.data(), want_lp.data(),
                            kTopMax, want_top.data(), want_top_lp.data()},
                           pool);

      kc::SamplingBatchPack pack;
      for (const auto& r : rows) pack.Add(r);
      auto upload = [](const auto& v) {
        void* p = nullptr;
        LOOM_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, v.size() * sizeof(v[0]))));
        LOOM_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice));
        return p;
      };
      void* d_rows = upload(pack.rows);
      void* d_pen = upload(pack.penalties);
      void* d_bias_ids = upload(pack.bias_ids);
      void* d_bias_values = upload(pack.bias_values);
      void* d_masks = upload(pack.masks);
      GuardedBuffer<float> d_lp(n), d_top_lp(n * kTopMax);
      std::vector<float> zeros(n * kTopMax, 0.0f);
      GuardedBuffer<float> d_ids(n), d_top_ids(n * kTopMax);  // int32 payloads, float-sized
      kc::SamplingGpuParams p;
      p.logits = d_logits.get();
      p.num_rows = n;
      p.vocab_size = vocab;
      p.rows = static_cast<const kc::SamplingRowGpu*>(d_rows);
      p.penalties = static_cast<const kc::PenaltyEntry*>(d_pen);
      p.bias_ids = static_cast<const int32_t*>(d_bias_ids);
      p.bias_values = static_cast<const float*>(d_bias_values);
      p.masks = static_cast<const uint32_t*>(d_masks);
      p.out_token_ids = reinterpret_cast<int32_t*>(d_ids.get());
      p.out_logprobs = d_lp.get();
      p.max_top_logprobs = kTopMax;
      p.out_top_ids = reinterpret_cast<int32_t*>(d_top_ids.get());
      p.out_top_logprobs = d_top_lp.get();
      LOOM_CUDA_CHECK_OK(kc::Sample(p, nullptr));
      std::vector<int32_t> got(n), got_top(n * kTopMax);
      LOOM_CUDA_CHECK(cudaMemcpy(got.data(), p.out_token_ids, n * 4, cudaMemcpyDeviceToHost));
      LOOM_CUDA_CHECK(
          cudaMemcpy(got_top.data(), p.out_top_ids, n * kTopMax * 4, cudaMemcpyDeviceToHost));
      const std::vector<float> got_lp = d_lp.Download(), got_top_lp = d_top_lp.Download();
      for (int i = 0; i < n; ++i) {
        SCOPED_TRACE(::testing::Message()
                     << cases[i].name << " vocab " << vocab << " seed " << seed);
        EXPECT_EQ(got[i], want[i]);
        if (rows[i].allowed_tokens != nullptr) {
          EXPECT_TRUE(kernels::TokenAllowed(mask.data(), rows[i].allowed_words, got[i]));
        }
        EXPECT_NEAR(got_lp[i], want_lp[i], 1e-3f);
        for (int k = 0; k < rows[i].num_logprobs; ++k) {
          EXPECT_EQ(got_top[i * kTopMax + k], want_top[i * kTopMax + k]);
          EXPECT_NEAR(got_top_lp[i * kTopMax + k], want_top_lp[i * kTopMax + k], 1e-3f);
        }
      }
      EXPECT_TRUE(d_lp.GuardsIntact() && d_ids.GuardsIntact() && d_top_ids.GuardsIntact());
      for (void* ptr : {d_rows, d_pen, d_bias_ids, d_bias_values, d_masks}) cudaFree(ptr);
    }
  }
}

// Tokens the GPU draws for rows over the same logits (no penalties, no bias).
std::vector<int32_t> GpuTokens(const std::vector<float>& row_logits,
                               const std::vector<kernels::SamplingRowParams>& rows) {
  const int n = static_cast<int>(rows.size());
  const int vocab = static_cast<int>(row_logits.size());
  std::vector<float> logits;
  for (int i = 0; i < n; ++i) logits.insert(logits.end(), row_logits.begin(), row_logits.end());
  GuardedBuffer<float> d_logits(logits), d_lp(n), d_ids(n);
  kc::SamplingBatchPack pack;
  for (const auto& r : rows) pack.Add(r);
  void* d_rows = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&d_rows, pack.rows.size() * sizeof(pack.rows[0])));
  LOOM_CUDA_CHECK(cudaMemcpy(d_rows, pack.rows.data(), pack.rows.size() * sizeof(pack.rows[0]),
                             cudaMemcpyHostToDevice));
  kc::SamplingGpuParams p;
  p.logits = d_logits.get();
  p.num_rows = n;
  p.vocab_size = vocab;
  p.rows = static_cast<const kc::SamplingRowGpu*>(d_rows);
  p.out_token_ids = reinterpret_cast<int32_t*>(d_ids.get());
  p.out_logprobs = d_lp.get();
  LOOM_CUDA_CHECK_OK(kc::Sample(p, nullptr));
  std::vector<int32_t> got(n);
  LOOM_CUDA_CHECK(cudaMemcpy(got.data(), p.out_token_ids, n * 4, cudaMemcpyDeviceToHost));
  cudaFree(d_rows);
  return got;
}

// Crafted ties at the top-k and top-p cut-offs and tiny temperatures: the GPU
// draws the CPU's token for every seed.
TEST(SamplingGpuTest, TiesAtTheCutoffsMatchCpuForEverySeed) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  kernels::cpu::ThreadPool pool(1);
  struct TieCase {
    std::vector<float> logits;
    int32_t top_k;
    float top_p;
    float temperature;
  };
  const std::vector<TieCase> cases = {{{1, 1, 1, 0}, 2, 1.0f, 1.0f},
                                      {{0, 2, 1, 2, 2}, 1, 1.0f, 0.7f},
                                      {{2, 1, 1, -10}, 0, 0.7f, 1.0f},
                                      {{3, 3, 1, 1, 1, 1}, 3, 0.95f, 1.0f},
                                      {{1, 3, 3, 0}, 0, 1.0f, 1e-40f}};
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<kernels::SamplingRowParams> rows(64);
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].top_k = cases[c].top_k;
      rows[i].top_p = cases[c].top_p;
      rows[i].temperature = cases[c].temperature;
      rows[i].seed = i;
    }
    const int n = static_cast<int>(rows.size());
    const int vocab = static_cast<int>(cases[c].logits.size());
    std::vector<float> logits;
    for (int i = 0; i < n; ++i) {
      logits.insert(logits.end(), cases[c].logits.begin(), cases[c].logits.end());
    }
    std::vector<int32_t> want(n);
    std::vector<float> want_lp(n);
    kernels::cpu::Sample({logits.data(), n, vocab, rows.data(), want.data(), want_lp.data()}, pool);
    EXPECT_EQ(GpuTokens(cases[c].logits, rows), want) << "case " << c;
  }
}

}  // namespace
}  // namespace loom::testing
