// Decode step time and prefill throughput of a Llama-3-8B-shaped dummy model
// (bf16, random weights made on the device) through CudaExecutor::Execute,
// against the roofline of BENCHMARKS.md with this run's measured copy
// bandwidth and bf16 GEMM rate, at 1k context (batch 1, 8, 64, 256) and 4k
// (batch 1, 8, 64). Prints "RESULT ..." lines.
//
//   decode roofline = (weight bytes read + batch * context * KV bytes/token) / copy bandwidth
//   prefill FLOPs   = 2 * params * tokens + causal attention (4 * layers * heads * head_dim * sum
//   ctx)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/gpu_timing.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/random_fill.h"
#include "model/config.h"
#include "model/cuda_executor.h"
#include "types/sampling_params.h"
#include "types/step.h"

namespace {

using Clock = std::chrono::steady_clock;

loom::ModelConfig Llama3_8B() {
  loom::ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.name = "llama-3-8b-dummy";
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.max_position_embeddings = 8192;
  return c;
}

struct Ceilings {
  double copy_bw = 0, gemm_flops = 0;
};

Ceilings MeasureCeilings() {
  cudaStream_t s;
  LOOM_CUDA_CHECK(cudaStreamCreate(&s));
  Ceilings c;
  const size_t bytes = size_t{2} << 30;
  void *a, *b;
  LOOM_CUDA_CHECK(cudaMalloc(&a, bytes));
  LOOM_CUDA_CHECK(cudaMalloc(&b, bytes));
  LOOM_CUDA_CHECK_OK(
      loom::cuda::RandomFillBFloat16(s, static_cast<__nv_bfloat16*>(a), bytes / 2, 1.0f, 5));
  double ms = loom::bench::MedianMs(s, 3, 15, [&](cudaStream_t st) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
  });
  c.copy_bw = 2.0 * bytes / (ms * 1e-3);
  const int64_t n = 8192;
  {
    loom::cuda::Gemm gemm;
    auto* x = static_cast<__nv_bfloat16*>(a);
    auto* w = static_cast<__nv_bfloat16*>(b);
    LOOM_CUDA_CHECK_OK(loom::cuda::RandomFillBFloat16(s, w, n * n, 1.0f, 6));
    __nv_bfloat16* y = x + n * n;
    ms = loom::bench::MedianMs(
        s, 3, 10, [&](cudaStream_t st) { LOOM_CUDA_CHECK_OK(gemm.Run(st, x, w, y, n, n, n)); });
    c.gemm_flops = 2.0 * n * n * n / (ms * 1e-3);
  }
  LOOM_CUDA_CHECK(cudaFree(a));
  LOOM_CUDA_CHECK(cudaFree(b));
  LOOM_CUDA_CHECK(cudaStreamDestroy(s));
  return c;
}

// Sequences of `prompt_len` random tokens, each on its own run of blocks.
struct Workload {
  int32_t block_size, blocks_per_seq;
  std::vector<std::vector<int32_t>> tokens, tables;
  Workload(int num_seqs, int prompt_len, int block_size_in) : block_size(block_size_in) {
    blocks_per_seq = (prompt_len + 1 + block_size - 1) / block_size;
    uint32_t x = 12345;
    for (int s = 0; s < num_seqs; ++s) {
      std::vector<int32_t> t(prompt_len + 1);
      for (int32_t& id : t)
        id = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 15) % 128000;
      tokens.push_back(t);
      std::vector<int32_t> table(blocks_per_seq);
      for (int b = 0; b < blocks_per_seq; ++b) table[b] = 1 + s * blocks_per_seq + b;
      tables.push_back(table);
    }
  }
};

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int kContext = 1024, kLongContext = 4096, kMaxBatch = 256, kMaxLongBatch = 64;
constexpr int kPrefillSeqs = 8;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The executor over one KV pool sized for both workloads; null (reported) on
// failure. The 4k decodes time attention over blocks the 1k prefills filled
// (their contents do not change the time), so one pool serves both.
std::unique_ptr<loom::CudaExecutor> CreateExecutor(const loom::ModelConfig& config,
                                                   loom::CudaExecutorOptions opts,
                                                   const Workload& work,
                                                   const Workload& long_work) {
  opts.max_num_blocks =
      1 + std::max(kMaxBatch * work.blocks_per_seq, kMaxLongBatch * long_work.blocks_per_seq);
  const auto t0 = Clock::now();
  auto created = loom::CudaExecutor::Create(config, nullptr, opts.max_model_len, opts);
  if (!created.ok()) {
    std::fprintf(stderr, "create: %s\n", created.status().ToString().c_str());
    return nullptr;
  }
  std::printf("executor ready in %.1f s (dummy weights, graphs captured)\n", Seconds(t0));
  return *std::move(created);
}

// Sequences [first, first + kPrefillSeqs) of the workload, whole prompts.
loom::StepPlan PrefillPlan(const Workload& work, int first, const loom::SamplingParams& greedy) {
  loom::StepPlan plan;
  for (int s = first; s < first + kPrefillSeqs; ++s) {
    loom::ScheduledSeq q;
    q.seq_id = s;
    q.all_token_ids = std::span<const int32_t>(work.tokens[s].data(), kContext);
    q.num_prompt_tokens = kContext;
    q.num_scheduled_tokens = kContext;
    q.block_table = work.tables[s];
    q.sample = true;
    q.sampling = &greedy;
    plan.seqs.push_back(q);
    plan.num_scheduled_tokens += kContext;
  }
  return plan;
}

// Prefill: every sequence's 1k prompt, kPrefillSeqs prompts per step. Returns
// false (reported) on failure.
bool RunPrefill(loom::CudaExecutor& exec, const Workload& work, const loom::SamplingParams& greedy,
                const Ceilings& ceil) {
  std::vector<double> prefill_s;
  for (int first = 0; first < kMaxBatch; first += kPrefillSeqs) {
    const loom::StepPlan plan = PrefillPlan(work, first, greedy);
    const auto t = Clock::now();
    auto r = exec.Execute(plan);
    if (!r.ok()) {
      std::fprintf(stderr, "prefill: %s\n", r.status().ToString().c_str());
      return false;
    }
    prefill_s.push_back(Seconds(t));
  }
  prefill_s.erase(prefill_s.begin());  // the first step pays cuBLASLt's planning
  const double tokens = double{kPrefillSeqs} * kContext;
  const double params = 4096.0 * (4096 + 1024 + 1024 + 4096) + 3.0 * 4096 * 14336;  // per layer
  const double layer_flops = 2.0 * params * tokens;
  const double attn_flops = 4.0 * 32 * 128 * (kContext * (kContext + 1) / 2.0) * kPrefillSeqs;
  const double prefill_flops = 32 * (layer_flops + attn_flops) +
                               2.0 * tokens * 4096 * 128256 / kContext;  // LM head on last rows
  const double pre = MedianOf(prefill_s);
  std::printf(
      "RESULT prefill seqs=%d prompt=%d step_ms=%.2f tokens_per_s=%.0f flops=%.4e of_gemm=%.3f\n",
      kPrefillSeqs, kContext, pre * 1e3, tokens / pre, prefill_flops / pre,
      prefill_flops / pre / ceil.gemm_flops);
  return true;
}

// Decode times against the roofline, batch by batch.
class DecodeBench {
 public:
  DecodeBench(loom::CudaExecutor& exec, const loom::SamplingParams& greedy, const Ceilings& ceil)
      : exec_(exec),
        greedy_(greedy),
        ceil_(ceil),
        weight_bytes_(static_cast<double>(exec.weight_bytes()) - 128256.0 * 4096 * 2) {}

  // Median step time of batch b of the workload's sequences, each at context
  // len + 1.
  double Time(const Workload& w, int len, int batch, bool graphs) {
    exec_.set_use_graphs(graphs);
    const loom::StepPlan plan = Plan(w, len, batch);
    std::vector<double> times;
    for (int i = 0; i < 30; ++i) {
      const auto t = Clock::now();
      auto r = exec_.Execute(plan);
      if (!r.ok()) {
        std::fprintf(stderr, "decode: %s\n", r.status().ToString().c_str());
        std::exit(1);
      }
      if (i >= 5) times.push_back(Seconds(t));
    }
    return MedianOf(times);
  }

  void Report(const Workload& w, int len, int batch) {
    const double graph_s = Time(w, len, batch, true);
    const double eager_s = Time(w, len, batch, false);
    if (batch == 1 && len == kContext) eager_b1_ = eager_s;
    const double roof = (weight_bytes_ + batch * (len + 1.0) * kKvPerToken) / ceil_.copy_bw;
    std::printf(
        "RESULT decode_b%d ctx=%d graph_ms=%.3f eager_ms=%.3f roofline_ms=%.3f of_roofline=%.3f "
        "graph_speedup=%.2f tokens_per_s=%.0f\n",
        batch, len + 1, graph_s * 1e3, eager_s * 1e3, roof * 1e3, roof / graph_s, eager_s / graph_s,
        batch / graph_s);
  }

  double eager_b1() const { return eager_b1_; }

 private:
  static constexpr double kKvPerToken = 2.0 * 32 * 8 * 128 * 2;

  loom::StepPlan Plan(const Workload& w, int len, int batch) const {
    loom::StepPlan plan;
    for (int s = 0; s < batch; ++s) {
      loom::ScheduledSeq q;
      q.seq_id = s;
      q.all_token_ids = w.tokens[s];
      q.num_prompt_tokens = len;
      q.num_computed_tokens = len;
      q.num_scheduled_tokens = 1;
      q.block_table = w.tables[s];
      q.sample = true;
      q.sampling = &greedy_;
      plan.seqs.push_back(q);
    }
    plan.num_scheduled_tokens = batch;
    return plan;
  }

  loom::CudaExecutor& exec_;
  const loom::SamplingParams& greedy_;
  const Ceilings& ceil_;
  const double weight_bytes_;
  double eager_b1_ = 0;
};

}  // namespace

int main() {
  if (!loom::bench::DeviceAvailable()) {
    const char* require = std::getenv("LOOM_REQUIRE_GPU");
    return require != nullptr && std::strcmp(require, "1") == 0 ? 1 : 0;
  }
  const Ceilings ceil = MeasureCeilings();
  std::printf("RESULT decode_ceilings copy_bytes_per_s=%.4e gemm_bf16_flops=%.4e\n", ceil.copy_bw,
              ceil.gemm_flops);

  loom::CudaExecutorOptions opts;
  opts.max_model_len = 2 * kLongContext;
  opts.max_num_seqs = kMaxBatch;
  opts.max_num_batched_tokens = kPrefillSeqs * kContext;
  const Workload work(kMaxBatch, kContext, opts.block_size);
  const Workload long_work(kMaxLongBatch, kLongContext, opts.block_size);
  std::unique_ptr<loom::CudaExecutor> exec = CreateExecutor(Llama3_8B(), opts, work, long_work);
  if (exec == nullptr) return 1;

  loom::SamplingParams greedy;
  greedy.temperature = 0.0f;
  if (!RunPrefill(*exec, work, greedy, ceil)) return 1;

  DecodeBench decode(*exec, greedy, ceil);
  for (int batch : {1, 8, 64, 256}) decode.Report(work, kContext, batch);
  for (int batch : {1, 8, 64}) decode.Report(long_work, kLongContext, batch);
  std::printf("RESULT graph_speedup b1=%.2f\n",
              decode.eager_b1() / decode.Time(work, kContext, 1, true));
  return 0;
}
