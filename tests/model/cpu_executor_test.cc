#include "model/cpu_executor.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/dummy_weights.h"
#include "tests/model/hand_plan.h"
#include "types/constraint.h"

namespace loom {
namespace {

ModelConfig TinyConfig(bool attention_bias) {
  ModelConfig c;
  c.architecture = attention_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  c.vocab_size = 97;
  c.hidden_size = 48;
  c.intermediate_size = 80;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.max_position_embeddings = 1024;
  c.tie_word_embeddings = !attention_bias;
  c.attention_bias = attention_bias;
  return c;
}

std::unique_ptr<LoadedModel> TinyModel(bool attention_bias) {
  auto m = std::make_unique<LoadedModel>();
  m->config = TinyConfig(attention_bias);
  m->weights = MakeDummyWeights(m->config, DType::kF32, 3);
  if (!m->config.tie_word_embeddings) {
    // MakeDummyWeights only writes lm_head for untied configs it knows of;
    // make sure the untied path has one.
    EXPECT_NE(m->weights->Find("lm_head.weight"), nullptr);
  }
  m->max_model_len = 1024;
  return m;
}

std::unique_ptr<CpuExecutor> MakeExecutor(const LoadedModel& model, int threads = 2) {
  ExecutorOptions options;
  options.device = "cpu";
  options.block_size = 4;
  options.kv_cache_bytes = 8 << 20;
  options.threads = threads;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> e = CpuExecutor::Create(model, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

using Seq = testing::HandSeq;

class Driver {
 public:
  explicit Driver(Executor& e) : e_(e), block_size_(e.Geometry().block_size) {}

  // Schedules `n` tokens of each seq (all remaining when n = 0), samples at the end.
  StepResult Step(const std::vector<Seq*>& seqs, int32_t n = 0) {
    const StepPlan plan = testing::PlanTokens(seqs, n, block_size_, next_block_);
    absl::StatusOr<StepResult> r = e_.Execute(plan);
    EXPECT_TRUE(r.ok()) << r.status();
    testing::ApplyStep(seqs, plan, *r);
    return *r;
  }

 private:
  Executor& e_;
  int32_t block_size_;
  int32_t next_block_ = 1;
};

Seq MakeSeq(int64_t id, int32_t len, uint32_t seed, float temperature = 0.0f) {
  std::mt19937 rng(seed);
  Seq s;
  s.id = id;
  s.num_prompt = len;
  for (int32_t i = 0; i < len; ++i) s.tokens.push_back(static_cast<int32_t>(rng() % 97));
  s.sampling.temperature = temperature;
  s.sampling.seed = seed;
  s.sampling.num_logprobs = 3;
  return s;
}

TEST(CpuExecutorTest, GeometryReportsThePool) {
  auto model = TinyModel(false);
  auto e = MakeExecutor(*model);
  const ExecutorGeometry g = e->Geometry();
  EXPECT_EQ(g.device, "cpu");
  EXPECT_EQ(g.block_size, 4);
  EXPECT_EQ(g.max_model_len, 1024);
  // 8 MiB / (2 * 2 layers * 2 kv heads * 8 dims * 4 slots * 4 bytes).
  EXPECT_EQ(g.num_blocks, (8 << 20) / (2 * 2 * 2 * 8 * 4 * 4));
}

TEST(CpuExecutorTest, ChunkedPrefillMatchesOneShotPrefill) {
  for (bool bias : {false, true}) {
    auto model = TinyModel(bias);
    auto one = MakeExecutor(*model);
    auto chunked = MakeExecutor(*model);
    Seq a = MakeSeq(1, 23, 5);
    Seq b = MakeSeq(1, 23, 5);
    Driver da(*one);
    Driver db(*chunked);
    const StepResult ra = da.Step({&a});
    EXPECT_TRUE(db.Step({&b}, 7).sampled.empty());
    EXPECT_TRUE(db.Step({&b}, 7).sampled.empty());
    const StepResult rb = db.Step({&b}, 9);
    ASSERT_EQ(ra.sampled.size(), 1u);
    ASSERT_EQ(rb.sampled.size(), 1u);
    EXPECT_EQ(ra.sampled[0].token_id, rb.sampled[0].token_id);
    ASSERT_EQ(ra.sampled[0].top.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(ra.sampled[0].top[i].token_id, rb.sampled[0].top[i].token_id);
      EXPECT_NEAR(ra.sampled[0].top[i].logprob, rb.sampled[0].top[i].logprob, 1e-4);
    }
  }
}

TEST(CpuExecutorTest, DecodesMatchPrefillOfTheSameTokens) {
  auto model = TinyModel(false);
  auto e = MakeExecutor(*model);
  Driver d(*e);
  Seq s = MakeSeq(1, 11, 8);
  d.Step({&s});
  StepResult last;
  for (int i = 0; i < 6; ++i) last = d.Step({&s});
  // A fresh sequence whose prompt is everything but the last sampled token.
  Seq replay;
  replay.id = 2;
  replay.tokens.assign(s.tokens.begin(), s.tokens.end() - 1);
  replay.sampling = s.sampling;
  replay.num_prompt = static_cast<int32_t>(replay.tokens.size());
  const StepResult r = d.Step({&replay});
  ASSERT_EQ(r.sampled.size(), 1u);
  EXPECT_EQ(r.sampled[0].token_id, s.tokens.back());
  EXPECT_NEAR(r.sampled[0].logprob, last.sampled[0].logprob, 1e-4);
  EXPECT_LE(last.sampled[0].logprob, 0.0f);
  EXPECT_GE(last.sampled[0].logprob, last.sampled[0].top[0].logprob - 1e-6);
}

// The greedy tokens of a decode, with what the sampler said about each.
struct Decoded {
  std::vector<int32_t> tokens;
  std::vector<SampledToken> sampled;
};

Decoded DecodeGreedily(Executor& e, const Seq& prompt, int32_t steps) {
  Driver d(e);
  Seq s = prompt;
  Decoded out;
  for (int32_t i = 0; i < steps; ++i) {
    const StepResult r = d.Step({&s});
    EXPECT_EQ(r.sampled.size(), 1u);
    out.sampled.push_back(r.sampled[0]);
  }
  out.tokens = s.tokens;
  return out;
}

void ExpectSameTop(const std::vector<TopLogprob>& got, const std::vector<TopLogprob>& want,
                   int32_t position) {
  ASSERT_EQ(got.size(), want.size()) << position;
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].token_id, want[k].token_id) << position << " top " << k;
    EXPECT_NEAR(got[k].logprob, want[k].logprob, 1e-4) << position << " top " << k;
  }
}

TEST(CpuExecutorTest, PromptLogprobsAreTheModelsLogprobsAtEveryPosition) {
  auto model = TinyModel(true);
  auto e = MakeExecutor(*model);
  // A prompt whose tail is the greedy continuation of its head: each greedy
  // token's logprob was reported by the sampler when it was generated.
  constexpr int32_t kHead = 6;
  constexpr int32_t kSteps = 8;
  const Decoded decoded = DecodeGreedily(*e, MakeSeq(1, kHead, 9), kSteps);
  Seq full;
  full.id = 2;
  full.tokens = decoded.tokens;
  full.tokens.pop_back();  // the last sampled token was never fed back
  full.num_prompt = static_cast<int32_t>(full.tokens.size());
  full.sampling = MakeSeq(1, kHead, 9).sampling;

  // Chunked prefill: positions arrive over three steps.
  const int32_t block_size = e->Geometry().block_size;
  int32_t next_block = 100;
  std::vector<PromptTokenLogprob> entries;
  for (int32_t chunk = 0; full.computed < full.num_prompt; ++chunk) {
    StepPlan plan = testing::PlanTokens({&full}, 5, block_size, next_block);
    plan.seqs[0].num_prompt_logprobs = 3;
    absl::StatusOr<StepResult> r = e->Execute(plan);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->prompt_logprobs.size(), 1u);
    EXPECT_EQ(r->prompt_logprobs[0].seq_id, 2);
    EXPECT_EQ(r->prompt_logprobs[0].first_position, static_cast<int32_t>(entries.size()) + 1);
    for (const PromptTokenLogprob& entry : r->prompt_logprobs[0].entries) entries.push_back(entry);
    testing::ApplyStep({&full}, plan, *r);
  }
  ASSERT_EQ(entries.size(), static_cast<size_t>(full.num_prompt - 1));
  for (int32_t p = 1; p < full.num_prompt; ++p) {
    const PromptTokenLogprob& entry = entries[p - 1];
    EXPECT_EQ(entry.token_id, full.tokens[p]) << p;
    ASSERT_EQ(entry.top.size(), 3u) << p;
    EXPECT_LE(entry.logprob, entry.top[0].logprob + 1e-6) << p;
    // The rank agrees with the alternatives: the best three rank 1..3.
    for (size_t k = 0; k < entry.top.size(); ++k) {
      if (entry.top[k].token_id == entry.token_id) {
        EXPECT_EQ(entry.rank, static_cast<int32_t>(k + 1)) << p;
      }
    }
    if (entry.logprob < entry.top.back().logprob) {
      EXPECT_GT(entry.rank, 3) << p;
    }
    if (p < kHead) {
      // Not a greedy token: check the alternatives against a prefill of the
      // prefix, whose sampler reports the same distribution.
      Seq prefix = MakeSeq(10 + p, 1, 9);
      prefix.tokens.assign(full.tokens.begin(), full.tokens.begin() + p);
      prefix.num_prompt = p;
      const StepResult r = Driver(*e).Step({&prefix});
      ASSERT_EQ(r.sampled.size(), 1u);
      ExpectSameTop(entry.top, r.sampled[0].top, p);
      continue;
    }
    const SampledToken& sampled = decoded.sampled[p - kHead];
    EXPECT_EQ(sampled.token_id, full.tokens[p]) << p;
    EXPECT_NEAR(entry.logprob, sampled.logprob, 1e-4) << p;
    EXPECT_NEAR(entry.logprob, entry.top[0].logprob, 1e-6) << p;  // greedy: the best
    EXPECT_EQ(entry.rank, 1) << p;
    ExpectSameTop(entry.top, sampled.top, p);
  }
}

TEST(CpuExecutorTest, PromptLogprobsLeaveSamplingAlone) {
  auto model = TinyModel(false);
  auto e = MakeExecutor(*model);
  Seq plain = MakeSeq(1, 9, 4, 0.8f);
  Seq scored = MakeSeq(2, 9, 4, 0.8f);
  Driver d(*e);
  const StepResult ra = d.Step({&plain});
  const int32_t block_size = e->Geometry().block_size;
  int32_t next_block = 200;
  StepPlan plan = testing::PlanTokens({&scored}, 0, block_size, next_block);
  plan.seqs[0].num_prompt_logprobs = 0;
  absl::StatusOr<StepResult> rb = e->Execute(plan);
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_EQ(ra.sampled.size(), 1u);
  ASSERT_EQ(rb->sampled.size(), 1u);
  EXPECT_EQ(ra.sampled[0].token_id, rb->sampled[0].token_id);
  EXPECT_FLOAT_EQ(ra.sampled[0].logprob, rb->sampled[0].logprob);
  ASSERT_EQ(rb->prompt_logprobs.size(), 1u);
  EXPECT_EQ(rb->prompt_logprobs[0].entries.size(), 8u);
  EXPECT_TRUE(rb->prompt_logprobs[0].entries[0].top.empty());
}

TEST(CpuExecutorTest, SeededRequestIsTheSameAloneAndAmong31Others) {
  auto model = TinyModel(true);
  auto alone_exec = MakeExecutor(*model);
  auto batched_exec = MakeExecutor(*model);
  Seq alone = MakeSeq(0, 13, 42, 0.9f);
  std::vector<Seq> crowd;
  for (int i = 0; i < 32; ++i) {
    crowd.push_back(i == 0 ? MakeSeq(0, 13, 42, 0.9f) : MakeSeq(i, 5 + 3 * i, 100 + i, 0.9f));
  }
  std::vector<Seq*> all;
  for (Seq& s : crowd) all.push_back(&s);
  Driver da(*alone_exec);
  Driver db(*batched_exec);
  for (int step = 0; step < 16; ++step) {
    da.Step({&alone});
    db.Step(all, step == 0 ? 6 : 0);  // the crowd's first prompts arrive in chunks
  }
  // Tokens generated in the same step order; the batched copy lags by the
  // chunked prefill, so compare the overlapping generated prefix.
  const size_t n = std::min(alone.tokens.size(), crowd[0].tokens.size());
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(alone.tokens[i], crowd[0].tokens[i]) << i;
  EXPECT_GT(n, 20u);
}

// A model whose hidden size the head screening takes (a multiple of 32), with
// a vocabulary large enough to screen.
std::unique_ptr<LoadedModel> ScreenableModel(DType dtype) {
  auto m = std::make_unique<LoadedModel>();
  m->config = TinyConfig(false);
  m->config.vocab_size = 1999;
  m->config.hidden_size = 64;
  m->config.num_heads = 8;
  m->weights = MakeDummyWeights(m->config, dtype, 5);
  m->max_model_len = 1024;
  return m;
}

std::unique_ptr<CpuExecutor> MakeHeadExecutor(const LoadedModel& model, const char* greedy_head) {
  ExecutorOptions options;
  options.device = "cpu";
  options.block_size = 4;
  options.kv_cache_bytes = 16 << 20;
  options.threads = 2;
  options.cpu_greedy_head = greedy_head;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> e = CpuExecutor::Create(model, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

// Greedy rows found by screening the head get the tokens of the full head, in
// batches that mix them with rows that need every logit (sampled, logprobs, a
// penalty, a logit_bias), and those rows are untouched.
TEST(CpuExecutorTest, ScreenedGreedyRowsGetTheFullHeadsTokens) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    auto model = ScreenableModel(dtype);
    auto screened_exec = MakeHeadExecutor(*model, "screened");
    auto full_exec = MakeHeadExecutor(*model, "full");
    std::vector<Seq> screened, full;
    for (int i = 0; i < 12; ++i) {
      Seq s = MakeSeq(i, 3 + 2 * i, 500 + i, i % 4 == 3 ? 0.8f : 0.0f);
      s.sampling.num_logprobs = i == 5 ? 2 : -1;
      if (i == 6) s.sampling.presence_penalty = 0.5f;
      if (i == 7) s.sampling.logit_bias = {{11, 2.5f}};
      screened.push_back(s);
      full.push_back(s);
    }
    std::vector<Seq*> a, b;
    for (size_t i = 0; i < screened.size(); ++i) {
      a.push_back(&screened[i]);
      b.push_back(&full[i]);
    }
    Driver da(*screened_exec);
    Driver db(*full_exec);
    for (int step = 0; step < 20; ++step) {
      const StepResult ra = da.Step(a);
      const StepResult rb = db.Step(b);
      ASSERT_EQ(ra.sampled.size(), rb.sampled.size());
      for (size_t i = 0; i < ra.sampled.size(); ++i) {
        EXPECT_EQ(ra.sampled[i].token_id, rb.sampled[i].token_id)
            << "step " << step << " row " << i;
        EXPECT_EQ(ra.sampled[i].top.size(), rb.sampled[i].top.size());
        if (screened[i].sampling.num_logprobs >= 0) {
          EXPECT_FLOAT_EQ(ra.sampled[i].logprob, rb.sampled[i].logprob);
        }
      }
    }
    for (size_t i = 0; i < screened.size(); ++i) EXPECT_EQ(screened[i].tokens, full[i].tokens) << i;
    // 7 plain greedy rows (0, 1, 2, 4, 8, 9, 10) a step: screened each time.
    EXPECT_EQ(screened_exec->ScreenedHeadRows(), 7 * 20);
    EXPECT_EQ(full_exec->ScreenedHeadRows(), 0);
  }
}

TEST(CpuExecutorTest, TokenMasksBindOnlyTheirRows) {
  auto model = TinyModel(false);
  auto masked_exec = MakeExecutor(*model);
  auto plain_exec = MakeExecutor(*model);
  Seq constrained = MakeSeq(1, 7, 5, 0.9f);
  Seq free = MakeSeq(2, 6, 6, 0.9f);
  Seq free_alone = MakeSeq(2, 6, 6, 0.9f);
  const int32_t block_size = masked_exec->Geometry().block_size;
  int32_t next_block = 1, other_block = 1;
  StepPlan plan = testing::PlanTokens({&constrained, &free}, 0, block_size, next_block);
  // Row 0 of the masks, for seqs[0] only: tokens 3 and 50.
  const int32_t words = TokenBitmaskWords(masked_exec->Geometry().vocab_size);
  plan.token_masks.words_per_row = words;
  plan.token_masks.row_of_seq = {0, -1};
  plan.token_masks.bits.assign(words, 0u);
  for (int32_t t : {3, 50}) plan.token_masks.bits[t >> 5] |= 1u << (t & 31);
  absl::StatusOr<StepResult> r = masked_exec->Execute(plan);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->sampled.size(), 2u);
  const SampledToken& c = r->sampled[0];
  EXPECT_TRUE(c.token_id == 3 || c.token_id == 50) << c.token_id;
  ASSERT_EQ(c.top.size(), 2u);  // only the allowed tokens are alternatives
  for (const TopLogprob& t : c.top) EXPECT_TRUE(t.token_id == 3 || t.token_id == 50);
  // The unconstrained row draws what it draws without any mask in the plan.
  const StepPlan alone = testing::PlanTokens({&free_alone}, 0, block_size, other_block);
  absl::StatusOr<StepResult> ra = plain_exec->Execute(alone);
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(r->sampled[1].token_id, ra->sampled[0].token_id);
  EXPECT_FLOAT_EQ(r->sampled[1].logprob, ra->sampled[0].logprob);
  EXPECT_EQ(masked_exec->Geometry().vocab_size, model->config.vocab_size);
}

TEST(CpuExecutorTest, RejectsPlansThatBreakTheContract) {
  auto model = TinyModel(false);
  auto e = MakeExecutor(*model);
  Seq s = MakeSeq(1, 5, 1);
  StepPlan plan;
  ScheduledSeq ss;
  ss.seq_id = 1;
  ss.all_token_ids = s.tokens;
  ss.num_prompt_tokens = 5;
  ss.num_scheduled_tokens = 5;
  std::vector<int32_t> blocks = {1};  // 4 slots for 5 tokens
  ss.block_table = blocks;
  plan.seqs.push_back(ss);
  EXPECT_EQ(e->Execute(plan).status().code(), absl::StatusCode::kInternal);
  blocks = {1, e->Geometry().num_blocks};
  plan.seqs[0].block_table = blocks;
  EXPECT_EQ(e->Execute(plan).status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(e->Execute(StepPlan{}).ok());
}

TEST(ExecutorFactoryTest, CpuAndUnknownDevices) {
  auto model = TinyModel(false);
  ExecutorOptions options;
  options.kv_cache_bytes = 1 << 20;
  options.device = "cpu";
  absl::StatusOr<std::unique_ptr<Executor>> e = CreateExecutor(*model, options);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->Geometry().device, "cpu");
#if !defined(LOOM_HAVE_CUDA)
  options.device = "auto";
  absl::StatusOr<std::unique_ptr<Executor>> automatic = CreateExecutor(*model, options);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ((*automatic)->Geometry().device, "cpu");
  EXPECT_EQ((*automatic)->Geometry().dtype, "bfloat16");
  options.device = "cuda";
  EXPECT_EQ(CreateExecutor(*model, options).status().code(), absl::StatusCode::kFailedPrecondition);
#endif
  options.device = "tpu";
  EXPECT_EQ(CreateExecutor(*model, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.device = "cpu";
  options.dtype = "int3";
  EXPECT_EQ(CreateExecutor(*model, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.dtype = "auto";
  options.cpu_prefill_precision = "int4";
  EXPECT_EQ(CreateExecutor(*model, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.cpu_prefill_precision = "int8";
  options.cpu_decode_precision = "bfloat16";
  EXPECT_EQ(CreateExecutor(*model, options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
