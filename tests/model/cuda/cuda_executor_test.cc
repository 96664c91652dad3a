// The whole forward pass on the GPU (bf16) against the CPU executor (float32)
// on the tiny golden models of tests/fixtures/tiny: the same plans go to both
// executors — one prefill of every golden prompt, chunked prefill mixed with
// decodes, then pure-decode steps that replay CUDA graphs — and the top-5
// logprobs and greedy tokens must agree within bf16 tolerance.
#include "model/cuda_executor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_executor.h"
#include "model/executor_factory.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/kernels/cuda/gpu_test_util.h"
#include "tests/model/hand_plan.h"
#include "types/constraint.h"

namespace loom {
namespace {

// Logprobs of bf16 activations against float32: ~1e-2 per logit on these models.
constexpr float kLogprobAtol = 0.08f;
// Greedy tokens must agree where the CPU's top-2 gap exceeds this.
constexpr float kMargin = 0.25f;
constexpr int32_t kBlockSize = 16;

using Seq = testing::HandSeq;

std::vector<std::vector<int32_t>> GoldenPrompts(const std::string& dir) {
  std::ifstream in(dir + "/golden.json");
  EXPECT_TRUE(in.good()) << dir;
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& r : j.at("runs"))
    prompts.push_back(r.at("prompt_ids").get<std::vector<int32_t>>());
  return prompts;
}

class Pair {
 public:
  Pair(Executor& cpu, Executor& gpu) : cpu_(cpu), gpu_(gpu) {}

  // Schedules up to n tokens of each seq (all remaining when n = 0) on both
  // executors, compares, and appends the CPU's token.
  void Step(const std::vector<Seq*>& seqs, int32_t n = 0) {
    const StepPlan plan = testing::PlanTokens(seqs, n, kBlockSize, next_block_);
    absl::StatusOr<StepResult> want = cpu_.Execute(plan);
    absl::StatusOr<StepResult> got = gpu_.Execute(plan);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->sampled.size(), want->sampled.size());
    for (size_t i = 0; i < want->sampled.size(); ++i) {
      const SampledToken& w = want->sampled[i];
      const SampledToken& g = got->sampled[i];
      ASSERT_EQ(g.seq_id, w.seq_id);
      ASSERT_EQ(g.top.size(), w.top.size());
      ASSERT_GE(w.top.size(), 2u);
      if (w.top[0].logprob - w.top[1].logprob > kMargin) {
        EXPECT_EQ(g.token_id, w.token_id) << "seq " << w.seq_id;
      }
      EXPECT_TRUE(std::isfinite(g.logprob));
      // The CPU's best tokens have nearly the same logprobs on the GPU: look
      // each up in the GPU's list when it is there.
      for (const TopLogprob& t : w.top) {
        for (const TopLogprob& u : g.top) {
          if (u.token_id == t.token_id) {
            EXPECT_NEAR(u.logprob, t.logprob, kLogprobAtol);
          }
        }
      }
      EXPECT_NEAR(g.top[0].logprob, w.top[0].logprob, kLogprobAtol);
      ++compared_;
    }
    testing::ApplyStep(seqs, plan, *want);  // both continue with the CPU's tokens
  }
  int compared() const { return compared_; }

 private:
  Executor& cpu_;
  Executor& gpu_;
  int32_t next_block_ = 1;
  int compared_ = 0;
};

using Kernel = kernels::cuda::AttentionKernel;
// (tiny model, decode attention kernel)
class CudaExecutorGoldenTest : public ::testing::TestWithParam<std::tuple<std::string, Kernel>> {
 protected:
  // The parameter's tiny golden model. The GPU bundle runs from another
  // checkout: LOOM_FIXTURES_DIR overrides the build's path.
  static std::string ModelDir() {
    const char* fixtures = std::getenv("LOOM_FIXTURES_DIR");
    return std::string(fixtures != nullptr ? fixtures : LOOM_FIXTURES_DIR) + "/tiny/" +
           std::get<0>(GetParam());
  }
};

TEST_P(CudaExecutorGoldenTest, MatchesCpuExecutor) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  const std::string dir = ModelDir();
  absl::StatusOr<ModelConfig> config = ConfigFromJson(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<WeightStore>> weights = LoadSafetensorsDir(dir);
  ASSERT_TRUE(weights.ok()) << weights.status();
  auto model = std::make_unique<LoadedModel>();
  model->config = *config;
  model->weights = *std::move(weights);
  model->max_model_len = config->max_position_embeddings;

  ExecutorOptions cpu_options;
  cpu_options.device = "cpu";
  cpu_options.block_size = kBlockSize;
  cpu_options.kv_cache_bytes = 64 << 20;
  cpu_options.threads = 2;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> cpu = CpuExecutor::Create(*model, cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  CudaExecutorOptions gpu_options;
  gpu_options.block_size = kBlockSize;
  gpu_options.max_num_seqs = 16;
  gpu_options.max_num_batched_tokens = 512;
  gpu_options.kv_cache_bytes = 64 << 20;
  gpu_options.attention_kernel = std::get<1>(GetParam());
  absl::StatusOr<std::unique_ptr<Executor>> gpu = CreateCudaExecutor(*model, gpu_options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->Geometry().device, "cuda");

  Pair pair(**cpu, **gpu);
  std::vector<Seq> seqs;
  int64_t id = 0;
  for (const std::vector<int32_t>& prompt : GoldenPrompts(dir)) {
    Seq s;
    s.id = id++;
    s.tokens = prompt;
    s.num_prompt = static_cast<int32_t>(prompt.size());
    s.sampling.temperature = 0.0f;
    s.sampling.num_logprobs = 5;
    seqs.push_back(s);
  }
  ASSERT_GE(seqs.size(), 2u);
  std::vector<Seq*> all;
  for (Seq& s : seqs) all.push_back(&s);
  // The first prompt prefilled in chunks of 3 tokens in the same steps as the
  // others' decodes (a decode has one token left, so it takes min(3, 1)).
  std::vector<Seq*> rest(all.begin() + 1, all.end());
  pair.Step(rest);
  while (seqs[0].computed < static_cast<int32_t>(seqs[0].tokens.size())) pair.Step(all, 3);
  // Pure decodes (CUDA graphs, padded batch), long enough to cross blocks.
  for (int i = 0; i < 40; ++i) pair.Step(all, 1);
  EXPECT_GT(pair.compared(), 40);
}

// Every row of a full step at its request limits: max_num_seqs rows, each with
// a logit_bias over the whole vocabulary and penalties over its history. The
// executor reports the limits it was sized for and runs the step.
TEST_P(CudaExecutorGoldenTest, WorstCaseSamplingStepRuns) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  const std::string dir = ModelDir();
  absl::StatusOr<ModelConfig> config = ConfigFromJson(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  LoadedModel model;
  model.config = *config;
  model.max_model_len = std::min(config->max_position_embeddings, 256);
  ExecutorOptions options;
  options.attention_kernel = std::get<1>(GetParam()) == Kernel::kV2 ? "v2" : "v1";
  options.block_size = kBlockSize;
  options.kv_cache_bytes = 64 << 20;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 64;
  options.max_logit_bias = config->vocab_size;
  absl::StatusOr<std::unique_ptr<Executor>> gpu = CreateCudaExecutor(model, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->Geometry().max_num_seqs, 16);
  EXPECT_EQ((*gpu)->Geometry().max_num_batched_tokens, 64);
  std::vector<Seq> seqs(16);
  std::vector<Seq*> all;
  for (int32_t i = 0; i < 16; ++i) {
    seqs[i].id = i;
    seqs[i].tokens = {1 + i, 2, 3, 4};
    seqs[i].num_prompt = 4;
    seqs[i].sampling.repetition_penalty = 1.3f;
    seqs[i].sampling.seed = static_cast<uint64_t>(i);
    for (int32_t id = 0; id < config->vocab_size; ++id) {
      seqs[i].sampling.logit_bias.emplace_back(id, id == 7 ? 100.0f : -1.0f);
    }
    all.push_back(&seqs[i]);
  }
  int32_t next_block = 1;
  const StepPlan plan = testing::PlanTokens(all, 0, kBlockSize, next_block);
  absl::StatusOr<StepResult> result = (*gpu)->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->sampled.size(), 16u);
  for (const SampledToken& t : result->sampled) EXPECT_EQ(t.token_id, 7);  // the +100 bias
}

// A full step at the limits again, half of its rows constrained: a token
// mask over the whole vocabulary beside the logit_bias. A constrained row
// draws only what its mask allows, even against a +100 bias; the others
// follow the bias.
TEST_P(CudaExecutorGoldenTest, TokenMasksBindTheirRowsAtTheLimits) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  const std::string dir = ModelDir();
  absl::StatusOr<ModelConfig> config = ConfigFromJson(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  LoadedModel model;
  model.config = *config;
  model.max_model_len = std::min(config->max_position_embeddings, 256);
  ExecutorOptions options;
  options.attention_kernel = std::get<1>(GetParam()) == Kernel::kV2 ? "v2" : "v1";
  options.block_size = kBlockSize;
  options.kv_cache_bytes = 64 << 20;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 64;
  options.max_logit_bias = config->vocab_size;
  absl::StatusOr<std::unique_ptr<Executor>> gpu = CreateCudaExecutor(model, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ((*gpu)->Geometry().vocab_size, config->vocab_size);
  std::vector<Seq> seqs(16);
  std::vector<Seq*> all;
  for (int32_t i = 0; i < 16; ++i) {
    seqs[i].id = i;
    seqs[i].tokens = {1 + i, 2, 3, 4};
    seqs[i].num_prompt = 4;
    seqs[i].sampling.temperature = i % 4 == 0 ? 0.0f : 0.9f;
    seqs[i].sampling.seed = static_cast<uint64_t>(i);
    seqs[i].sampling.num_logprobs = 5;
    for (int32_t id = 0; id < config->vocab_size; ++id) {
      seqs[i].sampling.logit_bias.emplace_back(id, id == 7 ? 100.0f : -1.0f);
    }
    all.push_back(&seqs[i]);
  }
  int32_t next_block = 1;
  StepPlan plan = testing::PlanTokens(all, 0, kBlockSize, next_block);
  const int32_t words = TokenBitmaskWords(config->vocab_size);
  plan.token_masks.words_per_row = words;
  plan.token_masks.row_of_seq.assign(16, -1);
  plan.token_masks.bits.assign(static_cast<size_t>(8) * words, 0u);
  for (int32_t row = 0; row < 8; ++row) {
    plan.token_masks.row_of_seq[2 * row] = row;
    for (int32_t t : {11, 12}) plan.token_masks.bits[row * words + (t >> 5)] |= 1u << (t & 31);
  }
  absl::StatusOr<StepResult> result = (*gpu)->Execute(plan);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->sampled.size(), 16u);
  for (int32_t i = 0; i < 16; ++i) {
    const SampledToken& t = result->sampled[i];
    if (i % 2 == 1) {
      EXPECT_EQ(t.token_id, 7) << i;
      continue;
    }
    EXPECT_TRUE(t.token_id == 11 || t.token_id == 12) << i << ": " << t.token_id;
    EXPECT_TRUE(std::isfinite(t.logprob)) << i;
    ASSERT_EQ(t.top.size(), 2u) << i;  // only the allowed tokens are alternatives
  }
}

INSTANTIATE_TEST_SUITE_P(
    TinyModels, CudaExecutorGoldenTest,
    ::testing::Combine(::testing::Values("llama2", "llama3", "llama32_tied", "mistral", "qwen2",
                                         "qwen3", "mistral_swa"),
                       ::testing::Values(Kernel::kV1, Kernel::kV2)),
    [](const ::testing::TestParamInfo<CudaExecutorGoldenTest::ParamType>& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) == Kernel::kV2 ? "_v2" : "_v1");
    });

// Host-only: runs without a device.
TEST(AttentionKernelFlag, AutoIsV1AndUnknownValuesNameTheFlag) {
  EXPECT_EQ(ParseAttentionKernel("auto").value(), Kernel::kV1);
  EXPECT_EQ(ParseAttentionKernel("v1").value(), Kernel::kV1);
  EXPECT_EQ(ParseAttentionKernel("v2").value(), Kernel::kV2);
  absl::StatusOr<Kernel> bad = ParseAttentionKernel("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "attention_kernel must be one of auto, v1, v2; got \"fast\"");

  LoadedModel model;
  ExecutorOptions options;
  options.device = "cuda";
  options.attention_kernel = "v3";
  absl::StatusOr<std::unique_ptr<Executor>> e = CreateCudaExecutor(model, options);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("attention_kernel"), std::string::npos);
}

}  // namespace
}  // namespace loom
