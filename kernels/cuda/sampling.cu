// One block per row. Candidate order is descending logit, lower id first; the
// top-k and top-p cut-offs are found by bisection over the order-preserving
// integer image of the float logits (32 counting passes over the row each), so
// nothing is sorted; tokens with a logit equal to a cut-off are kept together,
// as on the CPU.
// The draw walks the kept tokens in id order, as the CPU recipe does.
#include <cfloat>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/sampling.h"
#include "kernels/philox.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ uint32_t OrderedKey(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// True when (va, ia) comes before (vb, ib) in candidate order.
__device__ __forceinline__ bool Before(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

struct Best {
  float v;
  int i;
};

__device__ Best BlockBest(Best b, Best* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, b.v, o);
    const int i = __shfl_xor_sync(0xffffffffu, b.i, o);
    if (Before(v, i, b.v, b.i)) b = {v, i};
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  b = lane < kThreads / 32 ? scratch[lane] : Best{-INFINITY, INT_MAX};
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, b.v, o);
    const int i = __shfl_xor_sync(0xffffffffu, b.i, o);
    if (Before(v, i, b.v, b.i)) b = {v, i};
  }
  return b;
}

// The best candidate strictly after (prev_v, prev_i) in candidate order.
__device__ Best NextBest(const float* row, int vocab, float prev_v, int prev_i, Best* scratch) {
  Best b{-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    if (Before(prev_v, prev_i, v, i) && Before(v, i, b.v, b.i)) b = {v, i};
  }
  return BlockBest(b, scratch);
}

// Sum over the row of f(score) for scores with key >= min_key.
template <typename F>
__device__ float MassFrom(const float* row, int vocab, uint32_t min_key, F f, float* scratch) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    if (OrderedKey(v) >= min_key) s += f(v);
  }
  return BlockSum(s, scratch);
}

// Largest key K with MassFrom(K) >= target (`strict`: > target); lo must satisfy it.
template <typename F>
__device__ uint32_t Bisect(const float* row, int vocab, uint32_t lo, float target, bool strict, F f,
                           float* scratch) {
  uint32_t hi = 0xffffffffu;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2 + 1;
    const float m = MassFrom(row, vocab, mid, f, scratch);
    if (strict ? m > target : m >= target) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Walks the kept tokens (key >= threshold) in ascending id order and returns
// the first whose running weight sum exceeds u * total. Each thread owns a
// contiguous id range; one block scan over the range sums finds the owner.
template <typename F>
__device__ int DrawInIdOrder(const float* row, int vocab, uint32_t threshold, F weight,
                             float uniform, float* scratch) {
  using Scan = cub::BlockScan<float, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int picked;
  const int per = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * per);
  const int end = min(vocab, begin + per);
  float local = 0.0f;
  int last_kept = -1;
  for (int i = begin; i < end; ++i) {
    if (OrderedKey(row[i]) >= threshold) {
      local += weight(row[i]);
      last_kept = i;
    }
  }
  float before = 0.0f, total = 0.0f;
  Scan(scan_storage).ExclusiveSum(local, before, total);
  if (threadIdx.x == 0) picked = INT_MAX;
  __syncthreads();
  const float u = uniform * total;
  if (before <= u && u < before + local) {
    float run = before;
    for (int i = begin; i < end; ++i) {
      if (OrderedKey(row[i]) < threshold) continue;
      run += weight(row[i]);
      if (run > u) {
        atomicMin(&picked, i);
        break;
      }
    }
  }
  // Rounding can leave no crossing: then the last kept token.
  const int last = static_cast<int>(BlockMax(static_cast<float>(last_kept), scratch));
  __syncthreads();
  return picked != INT_MAX ? picked : last;
}

// The lowest id the mask allows, or 0 when it allows none.
__device__ int LowestAllowed(const uint32_t* mask, int words, int vocab, float* scratch) {
  float lowest = static_cast<float>(vocab);
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    if (TokenAllowed(mask, words, i)) {
      lowest = static_cast<float>(i);
      break;
    }
  }
  const float best = -BlockMax(-lowest, scratch);
  return best < static_cast<float>(vocab) ? static_cast<int>(best) : 0;
}

__global__ void __launch_bounds__(kThreads) SampleKernel(SamplingGpuParams p) {
  __shared__ float scratch[32];
  __shared__ Best best_scratch[32];
  const int r = blockIdx.x, vocab = p.vocab_size;
  const SamplingRowGpu row = p.rows[r];
  float* logits = p.logits + static_cast<int64_t>(r) * vocab;

  // 1-2. Penalties on distinct tokens, then the bias.
  for (int i = threadIdx.x; i < row.penalty_count; i += kThreads) {
    const PenaltyEntry e = p.penalties[row.penalty_begin + i];
    float l = logits[e.token_id];
    if (row.repetition_penalty != 1.0f) {
      l = l > 0.0f ? l / row.repetition_penalty : l * row.repetition_penalty;
    }
    l -=
        row.frequency_penalty * e.output_count + (e.output_count > 0 ? row.presence_penalty : 0.0f);
    logits[e.token_id] = l;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < row.bias_count; i += kThreads) {
    atomicAdd(&logits[p.bias_ids[row.bias_begin + i]], p.bias_values[row.bias_begin + i]);
  }
  __syncthreads();
  // The token mask (structured outputs): -inf for every token not allowed.
  const bool masked = row.mask_begin >= 0;
  if (masked) {
    const uint32_t* mask = p.masks + row.mask_begin;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      if (!TokenAllowed(mask, row.mask_words, i)) logits[i] = -INFINITY;
    }
    __syncthreads();
  }

  // 3. log_softmax statistics and the top logprobs.
  const Best top = NextBest(logits, vocab, INFINITY, -1, best_scratch);
  float z = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) z += expf(logits[i] - top.v);
  const float log_z = logf(BlockSum(z, scratch)) + top.v;
  if (row.num_logprobs > 0) {
    Best b = top;
    for (int k = 0; k < row.num_logprobs && k < p.max_top_logprobs; ++k) {
      if (k > 0) b = NextBest(logits, vocab, b.v, b.i, best_scratch);
      if (threadIdx.x == 0) {
        p.out_top_ids[r * p.max_top_logprobs + k] = b.i;
        p.out_top_logprobs[r * p.max_top_logprobs + k] = b.v - log_z;
      }
    }
  }

  // 4-5. Greedy, or the filtered seeded draw. A masked row whose allowed
  // tokens all have logit -inf (or that allows none) takes its lowest
  // allowed id, as on the CPU.
  int token = top.i;
  if (masked && !(top.v > -INFINITY)) {
    token = LowestAllowed(p.masks + row.mask_begin, row.mask_words, vocab, scratch);
  } else if (!IsGreedyTemperature(row.temperature)) {
    const float inv_t = 1.0f / row.temperature;
    const float m = top.v;
    auto weight = [=](float v) { return expf((v - m) * inv_t); };
    auto one = [](float) { return 1.0f; };
    uint32_t threshold = 0;
    if (row.top_k > 0 && row.top_k < vocab) {
      threshold = Bisect(logits, vocab, 0, static_cast<float>(row.top_k), false, one, scratch);
    }
    // Masked tokens (-inf) are never kept, even when top-k reaches them.
    if (masked) threshold = max(threshold, OrderedKey(-FLT_MAX));
    if (row.min_p > 0.0f) {
      // p >= min_p * p_max  <=>  (v - m) / T >= log(min_p).
      const uint32_t k = OrderedKey(m + logf(row.min_p) * row.temperature);
      threshold = max(threshold, min(k, OrderedKey(m)));
    }
    if (row.top_p < 1.0f) {
      const float total = MassFrom(logits, vocab, threshold, weight, scratch);
      threshold = Bisect(logits, vocab, threshold, row.top_p * total, false, weight, scratch);
    }
    token = DrawInIdOrder(logits, vocab, threshold, weight,
                          kernels::PhiloxUniform(row.seed, row.step, 0), scratch);
  }
  if (threadIdx.x == 0) {
    p.out_token_ids[r] = token;
    p.out_logprobs[r] = logits[token] - log_z;
  }
}

}  // namespace

absl::Status Sample(const SamplingGpuParams& p, cudaStream_t stream) {
  LOOM_KERNEL_CHECK(p.vocab_size > 0 && p.num_rows >= 0);
  if (p.num_rows == 0) return absl::OkStatus();
  SampleKernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  return absl::OkStatus();
}

}  // namespace loom::kernels::cuda
