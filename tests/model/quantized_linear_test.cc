// Linear weights kept in ggml blocks (dtype auto on the CPU): which weights
// stay quantized, and that the forward pass then gives exactly the float32
// executor's results on the dequantized weights.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/gguf_quant.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "model/cpu_executor.h"
#include "model/dummy_weights.h"
#include "model/llama_forward_weights.h"
#include "model/model.h"
#include "tests/fixtures/fixture_util.h"
#include "tests/kernels/random_blocks.h"

namespace loom {
namespace {

ModelConfig TinyConfig() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 97;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = false;
  return c;
}

// Every 2-D tensor whose name `type_of` maps to a quantized type is stored
// quantized (as a GGUF would hold it): Q8_0, Q4_0 and Q4_1 quantize the
// tensor's values, the other types get random blocks with sane scales. The
// rest is copied as is.
std::unique_ptr<WeightStore> Quantized(const WeightStore& src,
                                       const std::function<DType(const std::string&)>& type_of) {
  auto out = std::make_unique<WeightStore>();
  for (const std::string& name : src.Names()) {
    Tensor t = *src.Find(name);
    const DType type = t.shape.size() == 2 ? type_of(name) : DType::kF32;
    std::vector<float> values(t.num_elements());
    std::memcpy(values.data(), t.data.data(), values.size() * sizeof(float));
    std::span<std::byte> data = out->Allocate(
        type == DType::kF32 ? t.data.size()
                            : t.num_elements() / DTypeBlockValues(type) * DTypeBlockBytes(type));
    switch (type) {
      case DType::kQ8_0:
        QuantizeQ8_0(values, data);
        break;
      case DType::kQ4_0:
        QuantizeQ4_0(values, data);
        break;
      case DType::kQ4_1:
        QuantizeQ4_1(values, data);
        break;
      case DType::kF32:
        std::memcpy(data.data(), t.data.data(), data.size());
        break;
      default: {
        const kernels::cpu::QuantType q = *QuantTypeOf(type);
        const std::vector<std::byte> blocks =
            kernels::RandomBlocks(q, t.num_elements() / kernels::cpu::QuantBlockValues(q),
                                  static_cast<uint32_t>(std::hash<std::string>()(name)), -10, -8);
        std::memcpy(data.data(), blocks.data(), data.size());
        break;
      }
    }
    t.dtype = type;
    t.data = data;
    EXPECT_TRUE(out->Add(std::move(t)).ok()) << name;
  }
  return out;
}

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Mixed on purpose: layer 1's q/k/v parts differ, so its fused qkv keeps
// three runs of rows of two block types.
DType MixedType(const std::string& name) {
  if (Contains(name, "layers.1.self_attn.k_proj")) return DType::kQ8_0;
  if (Contains(name, "self_attn.q_proj") || Contains(name, "self_attn.k_proj") ||
      Contains(name, "self_attn.v_proj")) {
    return Contains(name, "layers.0.") ? DType::kQ4_0 : DType::kQ4_1;
  }
  if (Contains(name, "o_proj")) return DType::kQ4_0;
  if (Contains(name, "gate_proj") || Contains(name, "up_proj")) return DType::kQ4_1;
  return DType::kQ8_0;  // down_proj, lm_head, embed_tokens
}

// One block type per fused weight: every linear weight stays quantized.
DType UniformType(const std::string& name) {
  if (Contains(name, "self_attn")) return Contains(name, "o_proj") ? DType::kQ4_0 : DType::kQ4_1;
  if (Contains(name, "gate_proj") || Contains(name, "up_proj")) return DType::kQ4_1;
  return DType::kQ8_0;
}

void ExpectParts(const LinearWeight& w,
                 std::vector<std::pair<kernels::cpu::QuantType, int32_t>> want) {
  EXPECT_EQ(w.dtype, LinearDType::kQuantized);
  ASSERT_EQ(w.parts.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(w.parts[i].type, want[i].first) << i;
    EXPECT_EQ(w.parts[i].rows, want[i].second) << i;
  }
}

TEST(QuantizedLinearTest, KeepsBlocksOfQuantizedWeights) {
  const ModelConfig c = TinyConfig();
  const std::unique_ptr<WeightStore> f32 = MakeDummyWeights(c, DType::kF32, 5);
  const std::unique_ptr<WeightStore> store = Quantized(*f32, MixedType);
  kernels::cpu::ThreadPool pool(2);

  absl::StatusOr<LlamaWeights> w = LoadLlamaWeights(c, *store, LinearDType::kBFloat16, pool, true);
  ASSERT_TRUE(w.ok()) << w.status();
  using kernels::cpu::QuantType;
  ExpectParts(w->layers[0].qkv, {{QuantType::kQ4_0, 128}});
  ExpectParts(w->layers[1].qkv,
              {{QuantType::kQ4_1, 64}, {QuantType::kQ8_0, 32}, {QuantType::kQ4_1, 32}});
  EXPECT_EQ(w->layers[1].qkv.quant.size(),
            96u * 64 / 32 * sizeof(BlockQ4_1) + 32u * 64 / 32 * sizeof(BlockQ8_0));
  for (const LlamaLayerWeights& l : w->layers) {
    ExpectParts(l.o_proj, {{QuantType::kQ4_0, 64}});
    ExpectParts(l.gate_up, {{QuantType::kQ4_1, 2 * 96}});
    EXPECT_EQ(l.gate_up.n, 2 * 96);
    EXPECT_EQ(l.gate_up.quant.size(), 2u * 96 * 64 / 32 * sizeof(BlockQ4_1));
    EXPECT_TRUE(l.gate_up.bf16.empty());
    ExpectParts(l.down, {{QuantType::kQ8_0, 64}});
    EXPECT_EQ(l.down.quant.size(), 64u * 96 / 32 * sizeof(BlockQ8_0));
  }
  ExpectParts(w->lm_head, {{QuantType::kQ8_0, 97}});
  // The embedding table keeps its blocks too (rows are decoded on lookup).
  ExpectParts(w->embed, {{QuantType::kQ8_0, 97}});
  EXPECT_EQ(&w->head(), &w->lm_head);

  absl::StatusOr<LlamaWeights> exact = LoadLlamaWeights(c, *store, LinearDType::kFloat32, pool);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->layers[0].qkv.dtype, LinearDType::kFloat32);
  EXPECT_EQ(exact->lm_head.dtype, LinearDType::kFloat32);
  std::vector<float> embed(static_cast<size_t>(c.vocab_size) * c.hidden_size);
  store->ToFloat32(**store->Get("model.embed_tokens.weight"), embed);
  EXPECT_EQ(exact->embed.f32, embed);
  EXPECT_LT(w->NumBytes(), exact->NumBytes() / 3);

  // Float weights are not affected by keep_quantized.
  absl::StatusOr<LlamaWeights> plain =
      LoadLlamaWeights(c, *f32, LinearDType::kBFloat16, pool, true);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->layers[0].qkv.dtype, LinearDType::kBFloat16);
  EXPECT_EQ(plain->lm_head.dtype, LinearDType::kBFloat16);
}

// precision: the CPU matmuls' activations (float32, or int16 per block).
std::unique_ptr<CpuExecutor> MakeExecutor(const LoadedModel& model, const char* dtype,
                                          const char* precision = "float32") {
  ExecutorOptions options;
  options.device = "cpu";
  options.dtype = dtype;
  options.cpu_prefill_precision = precision;
  options.cpu_decode_precision = precision;
  options.block_size = 4;
  options.kv_cache_bytes = 8 << 20;
  options.threads = 2;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> e = CpuExecutor::Create(model, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

// Prefill of two prompts together (the matmul's widening path), decodes of
// both (a few rows: the in-register path), then decodes of one alone.
std::vector<StepResult> RunSteps(Executor& e) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.num_logprobs = 5;
  std::vector<std::vector<int32_t>> tokens = {{3, 14, 15, 92, 65, 35, 89},
                                              {2, 71, 82, 81, 82, 84, 59, 4, 52, 35, 36, 2}};
  std::vector<std::vector<int32_t>> blocks(2);
  std::vector<int32_t> computed(2, 0);
  std::vector<StepResult> results;
  int32_t next_block = 1;
  auto step = [&](std::vector<int> which) {
    StepPlan plan;
    for (int s : which) {
      while (static_cast<int32_t>(blocks[s].size()) * 4 < static_cast<int32_t>(tokens[s].size())) {
        blocks[s].push_back(next_block++);
      }
      ScheduledSeq seq;
      seq.seq_id = s;
      seq.all_token_ids = tokens[s];
      seq.num_prompt_tokens = 1;
      seq.num_computed_tokens = computed[s];
      seq.num_scheduled_tokens = static_cast<int32_t>(tokens[s].size()) - computed[s];
      seq.block_table = blocks[s];
      seq.sample = true;
      seq.sampling = &greedy;
      plan.num_scheduled_tokens += seq.num_scheduled_tokens;
      plan.seqs.push_back(seq);
    }
    absl::StatusOr<StepResult> r = e.Execute(plan);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return;
    for (size_t i = 0; i < which.size(); ++i) {
      computed[which[i]] = static_cast<int32_t>(tokens[which[i]].size());
      tokens[which[i]].push_back(r->sampled[i].token_id);
    }
    results.push_back(*std::move(r));
  };
  step({0, 1});
  for (int i = 0; i < 6; ++i) step({0, 1});
  for (int i = 0; i < 4; ++i) step({0});
  return results;
}

TEST(QuantizedLinearTest, ExecutorEqualsFloat32OnDequantizedWeights) {
  LoadedModel model;
  model.config = TinyConfig();
  model.weights = Quantized(*MakeDummyWeights(model.config, DType::kF32, 6), UniformType);
  model.max_model_len = 256;
  const std::unique_ptr<CpuExecutor> quantized = MakeExecutor(model, "auto");
  const std::unique_ptr<CpuExecutor> exact = MakeExecutor(model, "float32");
  ASSERT_NE(quantized, nullptr);
  ASSERT_NE(exact, nullptr);
  using kernels::cpu::QuantType;
  ExpectParts(quantized->weights().layers[1].qkv, {{QuantType::kQ4_1, 128}});
  ExpectParts(quantized->weights().layers[1].o_proj, {{QuantType::kQ4_0, 64}});
  ExpectParts(quantized->weights().lm_head, {{QuantType::kQ8_0, 97}});
  EXPECT_EQ(quantized->Geometry().dtype, "bfloat16");
  EXPECT_EQ(exact->Geometry().dtype, "float32");

  const std::vector<StepResult> got = RunSteps(*quantized);
  const std::vector<StepResult> want = RunSteps(*exact);
  ASSERT_EQ(got.size(), want.size());
  for (size_t step = 0; step < got.size(); ++step) {
    ASSERT_EQ(got[step].sampled.size(), want[step].sampled.size());
    for (size_t i = 0; i < got[step].sampled.size(); ++i) {
      const SampledToken& g = got[step].sampled[i];
      const SampledToken& w = want[step].sampled[i];
      SCOPED_TRACE(::testing::Message() << "step " << step << " seq " << g.seq_id);
      EXPECT_EQ(g.token_id, w.token_id);
      EXPECT_EQ(g.logprob, w.logprob);
      ASSERT_EQ(g.top.size(), w.top.size());
      for (size_t t = 0; t < g.top.size(); ++t) {
        EXPECT_EQ(g.top[t].token_id, w.top[t].token_id);
        EXPECT_EQ(g.top[t].logprob, w.top[t].logprob);
      }
    }
  }
  // With int16 activations (the default on CPUs with AVX-512 VNNI): the same
  // tokens, log-probabilities within the rounding of x to 16 bits.
  const std::unique_ptr<CpuExecutor> rounded = MakeExecutor(model, "auto", "int16");
  ASSERT_NE(rounded, nullptr);
  const std::vector<StepResult> near = RunSteps(*rounded);
  ASSERT_EQ(near.size(), want.size());
  for (size_t step = 0; step < near.size(); ++step) {
    ASSERT_EQ(near[step].sampled.size(), want[step].sampled.size());
    for (size_t i = 0; i < near[step].sampled.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "int16, step " << step << " seq " << i);
      EXPECT_EQ(near[step].sampled[i].token_id, want[step].sampled[i].token_id);
      EXPECT_NEAR(near[step].sampled[i].logprob, want[step].sampled[i].logprob, 1e-3);
    }
  }
}

// Every block type of a Q4_K_M / Q5_K_M / Q6_K file, mixed as such files mix
// them (q/k/v of three types, so one fused weight runs three products).
DType KQuantType(const std::string& name) {
  if (Contains(name, "q_proj")) return DType::kQ5_0;
  if (Contains(name, "k_proj")) return DType::kQ5_1;
  if (Contains(name, "v_proj")) return DType::kQ6_K;
  if (Contains(name, "o_proj")) return Contains(name, "layers.0.") ? DType::kQ4_K : DType::kQ3_K;
  if (Contains(name, "gate_proj")) return DType::kQ5_K;
  if (Contains(name, "up_proj")) return DType::kQ4_K;
  if (Contains(name, "down_proj")) return Contains(name, "layers.0.") ? DType::kQ6_K : DType::kQ2_K;
  return DType::kQ8_0;  // lm_head, embed_tokens
}

TEST(QuantizedLinearTest, KQuantExecutorEqualsFloat32OnDequantizedWeights) {
  LoadedModel model;
  model.config = TinyConfig();
  model.config.hidden_size = 256;  // K-quant rows are whole super-blocks
  model.config.intermediate_size = 512;
  model.config.head_dim = 64;
  model.config.tie_word_embeddings = true;  // the head multiplies by the table's blocks
  model.weights = Quantized(*MakeDummyWeights(model.config, DType::kF32, 7), KQuantType);
  model.max_model_len = 256;
  const std::unique_ptr<CpuExecutor> quantized = MakeExecutor(model, "auto");
  const std::unique_ptr<CpuExecutor> exact = MakeExecutor(model, "float32");
  ASSERT_NE(quantized, nullptr);
  ASSERT_NE(exact, nullptr);
  using kernels::cpu::QuantType;
  const LlamaLayerWeights& l0 = quantized->weights().layers[0];
  ExpectParts(l0.qkv, {{QuantType::kQ5_0, 256}, {QuantType::kQ5_1, 128}, {QuantType::kQ6_K, 128}});
  ExpectParts(l0.gate_up, {{QuantType::kQ5_K, 512}, {QuantType::kQ4_K, 512}});
  ExpectParts(quantized->weights().layers[1].down, {{QuantType::kQ2_K, 256}});
  ExpectParts(quantized->weights().layers[1].o_proj, {{QuantType::kQ3_K, 256}});
  ExpectParts(quantized->weights().embed, {{QuantType::kQ8_0, 97}});
  EXPECT_EQ(&quantized->weights().head(), &quantized->weights().embed);
  EXPECT_EQ(quantized->weights().lm_head.n, 0);

  const std::vector<StepResult> got = RunSteps(*quantized);
  const std::vector<StepResult> want = RunSteps(*exact);
  ASSERT_EQ(got.size(), want.size());
  for (size_t step = 0; step < got.size(); ++step) {
    ASSERT_EQ(got[step].sampled.size(), want[step].sampled.size());
    for (size_t i = 0; i < got[step].sampled.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "step " << step << " seq " << i);
      EXPECT_EQ(got[step].sampled[i].token_id, want[step].sampled[i].token_id);
      EXPECT_EQ(got[step].sampled[i].logprob, want[step].sampled[i].logprob);
    }
  }
}

// The default GGUF (Q4_1 layers, Q8_0 tied embedding) keeps every linear
// weight in its blocks with dtype auto: 4x fewer bytes than bfloat16.
TEST(QuantizedLinearTest, DefaultGgufKeepsItsBlocks) {
  const std::string path = testing::DefaultGgufIfPresent();
  if (path.empty()) GTEST_SKIP() << "default model missing: run scripts/setup";
  ModelLoadOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::unique_ptr<CpuExecutor> e = MakeExecutor(**model, "auto");
  ASSERT_NE(e, nullptr);
  const LlamaWeights& w = e->weights();
  using kernels::cpu::QuantType;
  for (const LlamaLayerWeights& l : w.layers) {
    ExpectParts(l.qkv, {{QuantType::kQ4_1, l.qkv.n}});
    ExpectParts(l.o_proj, {{QuantType::kQ4_1, l.o_proj.n}});
    ExpectParts(l.gate_up, {{QuantType::kQ4_1, l.gate_up.n}});
    ExpectParts(l.down, {{QuantType::kQ4_1, l.down.n}});
  }
  // Tied: the head multiplies by the table's own blocks.
  ExpectParts(w.head(), {{QuantType::kQ8_0, w.embed.n}});
  EXPECT_EQ(&w.head(), &w.embed);
  // The start-up log names the block types beside the conversion dtype.
  EXPECT_EQ(e->Geometry().dtype, "bfloat16");
  EXPECT_EQ(e->Geometry().weight_formats, "linear weights in q4_1, q8_0 blocks");
}

}  // namespace
}  // namespace loom
