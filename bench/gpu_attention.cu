// Paged decode attention, v1 and v2 side by side, against the device's copy
// bandwidth: Llama-3-8B attention shape (32 query heads, 8 kv heads, head_dim
// 128, bf16), block size 16, batch 1/8/64/256 at 1k context and 1/8/64 at 4k.
// Bytes counted: K and V of every context position read once, q read and the
// output written once. Small cases rotate over disjoint block sets so that
// repeated runs do not read the L2.
//
// Every v1 case is measured first; v2 runs afterwards, so that a v2 fault
// cannot cost the v1 numbers. Each v2 output is checked against v1's on the
// same data (both poisoned beforehand) before v2 is timed; the first v2
// failure is reported and ends the v2 phase.
// Prints "RESULT attn_b<batch>_c<ctx> ..." (v1), "RESULT attn_v2_b<batch>_c<ctx>
// ..." and "RESULT attn_v2 ok=<0|1> ..."; exits 1 when v2 failed.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu_timing.h"
#include "kernels/cuda/attention_v2.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/random_fill.h"

namespace {

using bf16 = __nv_bfloat16;
namespace kc = loom::kernels::cuda;
constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlock = 16;
constexpr float kTol = 2e-2f;  // bf16 outputs: |v2 - v1| <= kTol + kTol * |v1|

struct Case {
  int batch, ctx;
};
constexpr Case kCases[] = {{1, 1024}, {8, 1024}, {64, 1024}, {256, 1024},
                           {1, 4096}, {8, 4096}, {64, 4096}};

double CopyBandwidth(cudaStream_t stream) {
  const size_t bytes = size_t{2} << 30;
  void *a, *b;
  LOOM_CUDA_CHECK(cudaMalloc(&a, bytes));
  LOOM_CUDA_CHECK(cudaMalloc(&b, bytes));
  LOOM_CUDA_CHECK_OK(
      loom::cuda::RandomFillBFloat16(stream, static_cast<bf16*>(a), bytes / 2, 1.0f, 9));
  const double ms = loom::bench::MedianMs(stream, 3, 15, [&](cudaStream_t s) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  });
  LOOM_CUDA_CHECK(cudaFree(a));
  LOOM_CUDA_CHECK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3);
}

// One case's device data, the same for both kernels (fixed seeds).
class DecodeSetup {
 public:
  DecodeSetup(const Case& c, cudaStream_t stream);
  ~DecodeSetup() {
    for (void* p : owned_) cudaFree(p);
  }
  DecodeSetup(const DecodeSetup&) = delete;
  DecodeSetup& operator=(const DecodeSetup&) = delete;

  // Params reading block set `set` (of sets()).
  loom::kernels::PagedAttentionParams<bf16> Params(int set) const {
    loom::kernels::PagedAttentionParams<bf16> p = p_;
    p.kv.block_tables = tables_ + int64_t{set} * c_.batch * (c_.ctx / kBlock);
    return p;
  }
  int sets() const { return sets_; }
  int32_t partition() const { return p_.partition_size; }
  double bytes() const { return kv_bytes_ + 2.0 * c_.batch * kHeads * kHeadDim * 2; }
  // Fills the output with 0xFF (NaN), so that rows a kernel skips show.
  void Poison(cudaStream_t s) const {
    LOOM_CUDA_CHECK(cudaMemsetAsync(p_.out, 0xFF, out_elems() * 2, s));
  }
  std::vector<float> Output() const;

 private:
  template <typename T>
  T* Alloc(int64_t elems) {
    void* p = nullptr;
    LOOM_CUDA_CHECK(cudaMalloc(&p, std::max<int64_t>(elems, 1) * sizeof(T)));
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  int64_t out_elems() const { return int64_t{c_.batch} * kHeads * kHeadDim; }

  Case c_;
  int sets_ = 1;
  double kv_bytes_ = 0;
  int32_t* tables_ = nullptr;
  loom::kernels::PagedAttentionParams<bf16> p_;
  std::vector<void*> owned_;
};

DecodeSetup::DecodeSetup(const Case& c, cudaStream_t stream) : c_(c) {
  const int64_t block_elems = int64_t{kKvHeads} * kBlock * kHeadDim;
  const int64_t min_bytes = int64_t{512} << 20;  // per rotation set: far beyond the L2
  const int blocks_per_seq = c.ctx / kBlock;
  kv_bytes_ = double(c.batch) * c.ctx * kKvHeads * kHeadDim * 2 * 2;
  sets_ = static_cast<int>(std::max<int64_t>(1, min_bytes / int64_t(kv_bytes_)));
  const int num_blocks = 1 + sets_ * c.batch * blocks_per_seq;
  bf16* k = Alloc<bf16>(num_blocks * block_elems);
  bf16* v = Alloc<bf16>(num_blocks * block_elems);
  bf16* q = Alloc<bf16>(out_elems());
  LOOM_CUDA_CHECK_OK(loom::cuda::RandomFillBFloat16(stream, k, num_blocks * block_elems, 2.0f, 1));
  LOOM_CUDA_CHECK_OK(loom::cuda::RandomFillBFloat16(stream, v, num_blocks * block_elems, 1.0f, 2));
  LOOM_CUDA_CHECK_OK(loom::cuda::RandomFillBFloat16(stream, q, out_elems(), 1.0f, 3));
  // Shuffled block ids, as a long-running pool hands them out.
  std::vector<int32_t> ids(num_blocks - 1);
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(c.batch * 7 + c.ctx));
  tables_ = Alloc<int32_t>(static_cast<int64_t>(ids.size()));
  LOOM_CUDA_CHECK(cudaMemcpy(tables_, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  std::vector<int32_t> pos(c.batch, c.ctx - 1), qs(c.batch + 1);
  std::iota(qs.begin(), qs.end(), 0);
  auto* positions = Alloc<int32_t>(c.batch);
  auto* query_start = Alloc<int32_t>(c.batch + 1);
  LOOM_CUDA_CHECK(cudaMemcpy(positions, pos.data(), c.batch * 4, cudaMemcpyHostToDevice));
  LOOM_CUDA_CHECK(cudaMemcpy(query_start, qs.data(), (c.batch + 1) * 4, cudaMemcpyHostToDevice));
  const int32_t part = kc::DecodePartitionSize(c.batch);
  const int32_t max_parts = (c.ctx + part - 1) / part;
  const int64_t rows = int64_t{c.batch} * kHeads * max_parts;

  p_.q = q;
  p_.out = Alloc<bf16>(out_elems());
  p_.q_stride = p_.out_stride = kHeads * kHeadDim;
  p_.num_heads = kHeads;
  p_.scale = 1.0f / std::sqrt(float(kHeadDim));
  p_.kv.num_blocks = num_blocks;
  p_.kv.num_kv_heads = kKvHeads;
  p_.kv.block_size = kBlock;
  p_.kv.head_dim = kHeadDim;
  p_.kv.k_cache = k;
  p_.kv.v_cache = v;
  p_.kv.max_blocks_per_seq = blocks_per_seq;
  p_.kv.query_start = query_start;
  p_.kv.num_seqs = p_.kv.num_tokens = c.batch;
  p_.kv.positions = positions;
  p_.kv.slot_mapping = Alloc<int32_t>(c.batch);
  p_.partition_size = part;
  p_.max_partitions = max_parts;
  p_.partial_out = Alloc<float>(rows * kHeadDim);
  p_.partial_max = Alloc<float>(rows);
  p_.partial_sum = Alloc<float>(rows);
}

std::vector<float> DecodeSetup::Output() const {
  std::vector<bf16> raw(out_elems());
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  LOOM_CUDA_CHECK(cudaMemcpy(raw.data(), p_.out, raw.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i] = __bfloat162float(raw[i]);
  return out;
}

void PrintResult(const char* kernel, const Case& c, double ms, double bytes, double copy_bw,
                 int32_t partition, const std::string& extra) {
  const double bw = bytes / (ms * 1e-3);
  std::printf("RESULT attn_%sb%d_c%d us=%.2f bytes_per_s=%.4e of_copy=%.3f partition=%d%s\n",
              kernel, c.batch, c.ctx, ms * 1e3, bw, bw / copy_bw, partition, extra.c_str());
  std::fflush(stdout);
}

// v1 over every case; returns each case's output on block set 0 and its time.
std::vector<std::vector<float>> MeasureV1(cudaStream_t stream, double copy_bw,
                                          std::vector<double>& v1_ms) {
  std::vector<std::vector<float>> outputs;
  for (const Case& c : kCases) {
    DecodeSetup setup(c, stream);
    setup.Poison(stream);
    LOOM_CUDA_CHECK_OK(kc::PagedAttention(setup.Params(0), stream));
    outputs.push_back(setup.Output());
    int set = 0;
    const double ms = loom::bench::MedianMs(stream, 5, 50, [&](cudaStream_t s) {
      LOOM_CUDA_CHECK_OK(kc::PagedAttention(setup.Params(set), s));
      set = (set + 1) % setup.sets();
    });
    v1_ms.push_back(ms);
    PrintResult("", c, ms, setup.bytes(), copy_bw, setup.partition(), "");
  }
  return outputs;
}

// Largest |a - b| over the output, or a description of the first bad element.
std::string Compare(const std::vector<float>& v2, const std::vector<float>& v1, float& max_diff) {
  max_diff = 0.0f;
  for (size_t i = 0; i < v2.size(); ++i) {
    const float d = std::fabs(v2[i] - v1[i]);
    if (!std::isfinite(v2[i]) || !std::isfinite(v1[i]) || !(d <= kTol + kTol * std::fabs(v1[i]))) {
      return "element " + std::to_string(i) + ": v2 " + std::to_string(v2[i]) + " v1 " +
             std::to_string(v1[i]);
    }
    max_diff = std::max(max_diff, d);
  }
  return "";
}

// One v2 case: check against v1's output, then time. Empty on success.
std::string MeasureV2Case(const Case& c, const std::vector<float>& v1_out, double v1_ms,
                          cudaStream_t stream, double copy_bw) {
  DecodeSetup setup(c, stream);
  setup.Poison(stream);
  if (cudaError_t e = kc::PagedAttentionV2(setup.Params(0), stream); e != cudaSuccess) {
    return std::string("launch: ") + cudaGetErrorString(e);
  }
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("run: ") + cudaGetErrorString(e);
  }
  float max_diff = 0.0f;
  if (std::string bad = Compare(setup.Output(), v1_out, max_diff); !bad.empty()) {
    return "mismatch against v1 at " + bad;
  }
  int set = 0;
  cudaError_t launch = cudaSuccess;
  const double ms = loom::bench::MedianMs(stream, 5, 50, [&](cudaStream_t s) {
    const cudaError_t e = kc::PagedAttentionV2(setup.Params(set), s);
    if (launch == cudaSuccess) launch = e;
    set = (set + 1) % setup.sets();
  });
  if (launch != cudaSuccess) return std::string("timed launch: ") + cudaGetErrorString(launch);
  char extra[96];
  std::snprintf(extra, sizeof(extra), " max_abs_diff_vs_v1=%.3e speedup_vs_v1=%.3f", max_diff,
                v1_ms / ms);
  PrintResult("v2_", c, ms, setup.bytes(), copy_bw, setup.partition(), extra);
  return "";
}

}  // namespace

int main() {
  if (!loom::bench::DeviceAvailable()) {
    const char* require = std::getenv("LOOM_REQUIRE_GPU");
    return require != nullptr && std::strcmp(require, "1") == 0 ? 1 : 0;
  }
  cudaStream_t stream;
  LOOM_CUDA_CHECK(cudaStreamCreate(&stream));
  const double copy_bw = CopyBandwidth(stream);
  std::printf("RESULT attn_copy copy_bytes_per_s=%.4e\n", copy_bw);
  std::printf("v1: every case; then v2 on the same data, checked against v1 before timing\n");
  std::vector<double> v1_ms;
  const std::vector<std::vector<float>> v1_out = MeasureV1(stream, copy_bw, v1_ms);

  int passed = 0;
  std::string failure;
  for (size_t i = 0; i < std::size(kCases) && failure.empty(); ++i) {
    failure = MeasureV2Case(kCases[i], v1_out[i], v1_ms[i], stream, copy_bw);
    if (!failure.empty()) {
      std::printf("v2 FAILED at batch %d context %d: %s (remaining v2 cases not run)\n",
                  kCases[i].batch, kCases[i].ctx, failure.c_str());
    } else {
      ++passed;
    }
  }
  std::printf("RESULT attn_v2 ok=%d passed=%d of=%zu\n", failure.empty() ? 1 : 0, passed,
              std::size(kCases));
  std::fflush(stdout);
  if (!failure.empty()) return 1;  // the device may be unusable now: no further CUDA calls
  LOOM_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
