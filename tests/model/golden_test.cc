// The CPU forward pass against transformers (tests/fixtures/*/golden.json,
// docs/golden.md): top logits of each prompt within kLogitTolerance, and the
// greedy continuation token for token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "model/cpu_executor.h"
#include "model/kv_layout.h"
#include "model/llama_forward.h"
#include "model/model.h"
#include "nlohmann/json.hpp"
#include "tests/fixtures/fixture_util.h"

namespace loom {
namespace {

// With float32 weights both sides run float32 on the same dequantized weights
// and what is left is summation order (logits of these models are O(10)).
// bfloat16 weights round every weight to 8 bits of mantissa; activations stay
// float32. dtype auto (the CPU default) keeps a GGUF's quantized linear weights
// in their blocks, and the quantized matmul gives the bits of float32 on the
// dequantized weights: the float32 bounds hold when every linear weight is
// quantized, as in the default GGUF. With --cpu_prefill_precision=int8 the
// prompt's activations are rounded to int8 (prompts of 33 tokens or more):
// the default model's top logits then move by up to 0.53 (1% of relative
// error per matmul over 30 layers), so only near ties of that size may flip.
// --cpu_decode_precision=int8 does the same to steps of 4 to 32 tokens: with
// both, every prompt's logits come from the int8 path. int16 (the default
// where the CPU has AVX-512 VNNI) rounds x to 16 bits per block instead, an
// error about 400 times smaller: the float32 bounds hold.
struct Precision {
  LinearDType dtype;
  const char* name;
  bool keep_quantized;
  float logit_tolerance;    // plus relative_tolerance * |reference|
  size_t min_greedy_match;  // greedy tokens that must match whatever the margins
  float relative_tolerance = 0.0f;
  const char* prefill = "float32";
  const char* decode = "float32";
};
constexpr Precision kFloat32{LinearDType::kFloat32, "float32", false, 1e-3f, 16};
constexpr Precision kBFloat16{LinearDType::kBFloat16, "bfloat16", false, 0.1f, 1};
constexpr Precision kAutoQuantized{LinearDType::kBFloat16, "auto", true, 1e-3f, 16};
constexpr Precision kAutoInt8Prefill{LinearDType::kBFloat16, "auto", true, 1.0f, 0, 0.0f, "int8"};
constexpr Precision kAutoInt8{LinearDType::kBFloat16, "auto", true, 1.0f, 0, 0.0f, "int8", "int8"};
constexpr Precision kAutoInt16{
    LinearDType::kBFloat16, "auto", true, 2e-3f, 16, 2e-3f, "int16", "int16"};

struct GoldenRun {
  std::string text;
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
  std::vector<float> margins;  // reference top-1 minus top-2 logit at each greedy step
  std::vector<std::pair<int32_t, float>> top_logits;
};

std::vector<GoldenRun> ReadRuns(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<GoldenRun> runs;
  for (const auto& r : j.at("runs")) {
    GoldenRun g;
    g.text = r.at("text").get<std::string>();
    g.prompt = r.at("prompt_ids").get<std::vector<int32_t>>();
    g.greedy = r.at("greedy").get<std::vector<int32_t>>();
    g.margins = r.at("margins").get<std::vector<float>>();
    for (const auto& t : r.at("top_logits")) {
      g.top_logits.emplace_back(t.at("id").get<int32_t>(), t.at("logit").get<float>());
    }
    runs.push_back(std::move(g));
  }
  return runs;
}

std::unique_ptr<LoadedModel> Load(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: run scripts/setup to download the default model";
    return nullptr;
  }
  ModelLoadOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(options);
  EXPECT_TRUE(model.ok()) << path << ": " << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// Logits of the last prompt position, straight from the forward pass.
std::vector<float> PromptLogits(const LoadedModel& model, const LlamaWeights& weights,
                                const std::vector<int32_t>& prompt, const Precision& precision,
                                kernels::ParallelFor& pool) {
  LlamaForward forward(model.config, weights, *XPrecisionNamed(precision.prefill),
                       *XPrecisionNamed(precision.decode));
  const ModelKvLayout layout = KvLayoutOf(model.config);
  const int32_t stride = layout.cache.stride();
  const int32_t block_size = 16;
  const auto num_tokens = static_cast<int32_t>(prompt.size());
  const int32_t blocks = (num_tokens + block_size - 1) / block_size;
  KvPool kv;
  kv.num_blocks = blocks * stride + 1;
  kv.block_size = block_size;
  const size_t layer = static_cast<size_t>(kv.num_blocks) * model.config.num_kv_heads * block_size *
                       model.config.head_dim;
  kv.Allocate(layout.layers_per_page, layer);
  ForwardBatch batch;
  batch.Clear();
  batch.token_ids = prompt;
  // Table entries 1, 2, ... in order: entry e of logical block b is pool
  // block b * stride + e + 1.
  batch.num_entries = stride;
  batch.slot_mapping.resize(static_cast<size_t>(stride) * num_tokens);
  for (int32_t p = 0; p < num_tokens; ++p) {
    batch.positions.push_back(p);
    for (int32_t e = 0; e < stride; ++e) {
      batch.slot_mapping[e * num_tokens + p] =
          ((p / block_size) * stride + e + 1) * block_size + p % block_size;
    }
  }
  for (int32_t i = 0; i < blocks * stride; ++i) batch.block_tables.push_back(i + 1);
  batch.max_blocks_per_seq = blocks * stride;
  batch.query_start.push_back(static_cast<int32_t>(prompt.size()));
  batch.context_lens.push_back(static_cast<int32_t>(prompt.size()));
  batch.logit_rows.push_back(static_cast<int32_t>(prompt.size()) - 1);
  std::vector<float> logits;
  forward.Run(batch, kv, pool, logits);
  return logits;
}

std::vector<int32_t> Greedy(Executor& e, const std::vector<int32_t>& prompt, size_t n) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<int32_t> tokens = prompt;
  std::vector<int32_t> blocks;
  const int32_t bs = e.Geometry().block_size;
  const int32_t stride = e.Geometry().kv_layout.stride();
  int32_t computed = 0;
  for (size_t step = 0; step < n; ++step) {
    while (static_cast<int32_t>(blocks.size()) / stride * bs <
           static_cast<int32_t>(tokens.size())) {
      blocks.push_back(static_cast<int32_t>(blocks.size()) + 1);
    }
    StepPlan plan;
    ScheduledSeq seq;
    seq.all_token_ids = tokens;
    seq.num_prompt_tokens = static_cast<int32_t>(prompt.size());
    seq.num_computed_tokens = computed;
    seq.num_scheduled_tokens = static_cast<int32_t>(tokens.size()) - computed;
    seq.block_table = blocks;
    seq.sample = true;
    seq.sampling = &greedy;
    plan.seqs.push_back(seq);
    plan.num_scheduled_tokens = seq.num_scheduled_tokens;
    absl::StatusOr<StepResult> r = e.Execute(plan);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    computed = static_cast<int32_t>(tokens.size());
    tokens.push_back(r->sampled.at(0).token_id);
  }
  return std::vector<int32_t>(tokens.begin() + prompt.size(), tokens.end());
}

// Greedy continuations of several prompts, n tokens each: every prompt
// prefilled alone (a step's bits depend on its number of tokens from the
// panel GEMM's 33 on), then all decoded together: a batch of greedy rows,
// which the CPU executor's head screening serves (kernels/cpu/head_screen.h)
// from 4 rows on.
std::vector<std::vector<int32_t>> BatchedGreedy(Executor& e,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                size_t n) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const int32_t bs = e.Geometry().block_size;
  const int32_t stride = e.Geometry().kv_layout.stride();
  std::vector<std::vector<int32_t>> tokens = prompts;
  std::vector<std::vector<int32_t>> blocks(prompts.size());
  std::vector<int32_t> computed(prompts.size(), 0);
  int32_t next_block = 1;
  for (size_t step = 0; step < n; ++step) {
    // The first step runs one prompt after another, the others all at once.
    for (size_t first = 0; first < prompts.size(); ++first) {
      const size_t last = step == 0 ? first + 1 : prompts.size();
      StepPlan plan;
      for (size_t s = first; s < last; ++s) {
        while (static_cast<int32_t>(blocks[s].size()) / stride * bs <
               static_cast<int32_t>(tokens[s].size())) {
          blocks[s].push_back(next_block++);
        }
        ScheduledSeq seq;
        seq.seq_id = static_cast<int64_t>(s);
        seq.all_token_ids = tokens[s];
        seq.num_prompt_tokens = static_cast<int32_t>(prompts[s].size());
        seq.num_computed_tokens = computed[s];
        seq.num_scheduled_tokens = static_cast<int32_t>(tokens[s].size()) - computed[s];
        seq.block_table = blocks[s];
        seq.sample = true;
        seq.sampling = &greedy;
        plan.num_scheduled_tokens += seq.num_scheduled_tokens;
        plan.seqs.push_back(std::move(seq));
      }
      absl::StatusOr<StepResult> r = e.Execute(plan);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return {};
      for (size_t s = first; s < last; ++s) {
        computed[s] = static_cast<int32_t>(tokens[s].size());
        tokens[s].push_back(r->sampled.at(s - first).token_id);
      }
      if (step > 0) break;
    }
  }
  for (size_t s = 0; s < prompts.size(); ++s)
    tokens[s].erase(tokens[s].begin(), tokens[s].begin() + prompts[s].size());
  return tokens;
}

void CheckModel(const LoadedModel& model, const std::string& fixture, const Precision& precision) {
  const std::vector<GoldenRun> runs = ReadRuns(fixture);
  ASSERT_FALSE(runs.empty());
  ExecutorOptions options;
  options.device = "cpu";
  // Room for every prompt at once (pages are committed as they are used).
  options.kv_cache_bytes = int64_t{512} << 20;
  options.dtype = precision.name;
  options.cpu_prefill_precision = precision.prefill;
  options.cpu_decode_precision = precision.decode;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> e = CpuExecutor::Create(model, options);
  ASSERT_TRUE(e.ok()) << e.status();
  kernels::cpu::ThreadPool pool(2);
  absl::StatusOr<LlamaWeights> weights = LoadLlamaWeights(
      model.config, *model.weights, precision.dtype, pool, precision.keep_quantized);
  ASSERT_TRUE(weights.ok()) << weights.status();
  float max_error = 0.0f;
  std::vector<std::vector<int32_t>> singles, prompts;
  for (const GoldenRun& run : runs) {
    SCOPED_TRACE(run.text);
    const std::vector<float> logits = PromptLogits(model, *weights, run.prompt, precision, pool);
    for (const auto& [id, want] : run.top_logits) {
      EXPECT_NEAR(logits.at(id), want,
                  precision.logit_tolerance + precision.relative_tolerance * std::fabs(want))
          << "token " << id;
      max_error = std::max(max_error, std::fabs(logits.at(id) - want));
    }
    const std::vector<int32_t> got = Greedy(**e, run.prompt, run.greedy.size());
    size_t match = 0;
    while (match < got.size() && got[match] == run.greedy[match]) ++match;
    if (match < got.size()) {
      // A divergence is only acceptable at a near tie of the reference.
      EXPECT_GE(match, precision.min_greedy_match);
      EXPECT_LT(run.margins[match], 2 * precision.logit_tolerance) << "diverged at " << match;
    }
    std::printf("prompt of %zu tokens: greedy tokens matching: %zu of %zu\n", run.prompt.size(),
                match, got.size());
    singles.push_back(got);
    prompts.push_back(run.prompt);
  }
  // The same prompts decoded together (at least 4 rows, so greedy rows are
  // screened): each continuation is the one it had alone (not with int8
  // activations, whose errors are large enough to flip near ties).
  if (precision.prefill == std::string("int8") || precision.decode == std::string("int8")) {
    return;
  }
  size_t n = 0;
  for (const GoldenRun& run : runs) n = std::max(n, run.greedy.size());
  while (prompts.size() < 4) {
    prompts.push_back(prompts[prompts.size() % runs.size()]);
    singles.push_back(singles[singles.size() % runs.size()]);
  }
  const std::vector<std::vector<int32_t>> together = BatchedGreedy(**e, prompts, n);
  ASSERT_EQ(together.size(), prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    const size_t len = singles[s].size();
    EXPECT_EQ(std::vector<int32_t>(together[s].begin(), together[s].begin() + len), singles[s])
        << "prompt " << s << " of " << prompts.size() << " decoded together";
  }
  std::printf("%s, %s prefill, %s decode: largest top-logit error %g (tolerance %g)\n",
              precision.name, precision.prefill, precision.decode, max_error,
              precision.logit_tolerance);
}

TEST(GoldenTest, SmolLm2GgufMatchesTransformers) {
  const std::unique_ptr<LoadedModel> model = Load(DefaultModelPath());
  ASSERT_NE(model, nullptr);
  const std::string fixture = std::string(LOOM_FIXTURES_DIR) + "/smollm2/golden.json";
  CheckModel(*model, fixture, kFloat32);
  CheckModel(*model, fixture, kBFloat16);
  CheckModel(*model, fixture, kAutoQuantized);
  CheckModel(*model, fixture, kAutoInt8Prefill);
  CheckModel(*model, fixture, kAutoInt8);
  CheckModel(*model, fixture, kAutoInt16);
}

// Gemma 3 270M Q4_K_M: every linear weight and the tied embedding keep their
// blocks with dtype auto, so the float32 bounds hold; two prompts run past
// the 512-token window of the sliding layers. Needs the model scripts/setup
// fetches (ctest runs it as gemma3_golden_test, label slow).
TEST(GoldenTest, Gemma3GgufMatchesTransformers) {
  const std::string path = ::loom::testing::Gemma3GgufIfPresent();
  if (path.empty()) GTEST_SKIP() << "Gemma 3 model not fetched (scripts/setup)";
  const std::unique_ptr<LoadedModel> model = Load(path);
  ASSERT_NE(model, nullptr);
  constexpr Precision kGemma{LinearDType::kBFloat16, "auto", true, 2e-3f, 24, 2e-3f};
  constexpr Precision kGemmaInt16{
      LinearDType::kBFloat16, "auto", true, 2e-3f, 24, 2e-3f, "int16", "int16"};
  CheckModel(*model, std::string(LOOM_FIXTURES_DIR) + "/gemma3/golden.json", kGemma);
  CheckModel(*model, std::string(LOOM_FIXTURES_DIR) + "/gemma3/golden.json", kGemmaInt16);
}

// The tiny Qwen3 as a `qwen3` GGUF (tools/golden/tiny_gguf.py): metadata,
// tensor names, q/k norms and the tied head from GGUF give transformers'
// logits and greedy tokens of the safetensors directory.
TEST(GoldenTest, TinyQwen3GgufMatchesTransformers) {
  const std::string dir = std::string(LOOM_FIXTURES_DIR) + "/tiny/qwen3";
  const std::unique_ptr<LoadedModel> model = Load(dir + "/model.gguf");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config.architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(model->config.qk_norm);
  CheckModel(*model, dir + "/golden.json", kFloat32);
}

class TinyGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyGoldenTest, MatchesTransformers) {
  const std::string dir = std::string(LOOM_FIXTURES_DIR) + "/tiny/" + GetParam();
  const std::unique_ptr<LoadedModel> model = Load(dir);
  ASSERT_NE(model, nullptr);
  CheckModel(*model, dir + "/golden.json", kFloat32);
  CheckModel(*model, dir + "/golden.json", kBFloat16);
}

INSTANTIATE_TEST_SUITE_P(Architectures, TinyGoldenTest,
                         ::testing::Values("llama2", "llama3", "llama32_tied", "mistral", "qwen2",
                                           "qwen3", "mistral_swa"));

}  // namespace
}  // namespace loom
