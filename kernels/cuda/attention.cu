// Paged attention over the KV pool. One block per (query token, kv head,
// partition) serves the kv head's whole query-head group, so each K/V row is
// read once per group. Keys are walked in chunks of kChunk positions: a K pass
// writes the chunk's scores to shared memory, an online-softmax update rescales,
// and a V pass accumulates. Rows are read as 16-byte vectors, kTpr lanes per
// row, kUnroll rows in flight per lane.
//
// Decodes with partition_size > 0 split each context into partitions
// (flash-decoding) whose unnormalised outputs, maxima and exp-sums a reduce
// kernel combines; a context that fits in one partition is written directly.
// With a sliding window a token's positions start at its window: partitions
// wholly before it are neither computed nor reduced.
#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/ops.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
// Query heads per kv head a block serves: 8, or 4 for head_dim 256 so that
// the block's shared memory stays within 48 KiB.
template <int kHeadDim>
inline constexpr int kMaxGroupOf = kHeadDim > 128 ? 4 : 8;
constexpr int kChunk = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ int FindSeq(const int32_t* query_start, int num_seqs, int t) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Where one thread stands in a partition: the block's token, kv head and
// sequence, and the thread's warp, lane, K/V row slot (sub) and first column.
struct PartitionLane {
  int t;
  int kv_head;
  int seq;
  int group;
  int warp;
  int lane;
  int sub;
  int d0;
};

// A K/V row is kTpr lanes of kVec values; a warp covers kRowsPerWarp rows and
// the block kRowsPerIter.
template <typename T, int kHeadDim>
struct RowLayout {
  static constexpr int kVec = Vec16<T>::kVec;
  static constexpr int kTpr = kHeadDim / kVec;  // lanes per K/V row
  static constexpr int kRowsPerWarp = 32 / kTpr;
  static constexpr int kRowsPerIter = kWarps * kRowsPerWarp;
};

// q_s = the group's query heads times the scale; the running max and exp-sum
// start empty.
template <typename T, int kHeadDim, int kMaxGroup = kMaxGroupOf<kHeadDim>>
__device__ __forceinline__ void LoadQuery(const PagedAttentionParams<T>& p, const PartitionLane& pl,
                                          float (&q_s)[kMaxGroup][kHeadDim],
                                          float (&m_s)[kMaxGroup], float (&l_s)[kMaxGroup]) {
  for (int i = threadIdx.x; i < pl.group * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    q_s[g][d] = ToFloat(p.q[static_cast<int64_t>(pl.t) * p.q_stride +
                            (pl.kv_head * pl.group + g) * kHeadDim + d]) *
                p.scale;
  }
  if (threadIdx.x < kMaxGroup) {
    m_s[threadIdx.x] = -FLT_MAX;
    l_s[threadIdx.x] = 0.0f;
  }
}

// K pass: scores[g][r] = q_g . k_r for the n rows of the chunk.
template <typename T, int kHeadDim, int kMaxGroup = kMaxGroupOf<kHeadDim>>
__device__ __forceinline__ void ScoreChunk(const PagedAttentionParams<T>& p,
                                           const PartitionLane& pl, int chunk, int n,
                                           const float (&q_s)[kMaxGroup][kHeadDim],
                                           float (&scores)[kMaxGroup][kChunk]) {
  using L = RowLayout<T, kHeadDim>;
  // The loop bound is warp-uniform (base, not the lane's row) so that whole
  // warps reach the shuffles below.
  for (int base = pl.warp * L::kRowsPerWarp; base < n; base += L::kRowsPerIter * kUnroll) {
    const int r0 = base + pl.sub;
    Vec16<T> k[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int r = r0 + u * L::kRowsPerIter;
      if (r < n) {
        k[u].Load(p.kv.k_cache + p.kv.PositionOffset(pl.seq, pl.kv_head, chunk + r) + pl.d0);
      } else {
        k[u].raw = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int r = r0 + u * L::kRowsPerIter;
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= pl.group) break;
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < L::kVec; ++e) dot += q_s[g][pl.d0 + e] * k[u].Get(e);
#pragma unroll
        for (int o = L::kTpr / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (pl.lane % L::kTpr == 0 && r < n) scores[g][r] = dot;
      }
    }
  }
}

// Online softmax: one warp per query head of the group turns the chunk's
// scores into exp(score - new max), and rescales the running exp-sum by
// alpha = exp(old max - new max).
template <int kMaxGroup>
__device__ __forceinline__ void OnlineSoftmax(const PartitionLane& pl, int n,
                                              float (&scores)[kMaxGroup][kChunk],
                                              float (&m_s)[kMaxGroup], float (&l_s)[kMaxGroup],
                                              float (&alpha_s)[kMaxGroup]) {
  for (int g = pl.warp; g < pl.group; g += kWarps) {
    float mx = -FLT_MAX;
    for (int r = pl.lane; r < n; r += 32) mx = fmaxf(mx, scores[g][r]);
    mx = WarpMax(mx);
    const float m_old = m_s[g], m_new = fmaxf(m_old, mx);
    float sum = 0.0f;
    for (int r = pl.lane; r < n; r += 32) {
      const float e = __expf(scores[g][r] - m_new);
      scores[g][r] = e;
      sum += e;
    }
    sum = WarpSum(sum);
    if (pl.lane == 0) {
      const float alpha = __expf(m_old - m_new);
      alpha_s[g] = alpha;
      l_s[g] = l_s[g] * alpha + sum;
      m_s[g] = m_new;
    }
  }
}

// Sums the rows of each warp, then the warps, and writes the partition: a
// partial (unnormalised output, max, exp-sum) for the reduce, or the output.
template <typename T, int kHeadDim, int kMaxGroup = kMaxGroupOf<kHeadDim>>
__device__ __forceinline__ void WritePartition(
    const PagedAttentionParams<T>& p, const PartitionLane& pl, int part, bool write_partial,
    const float (&acc)[kMaxGroup][Vec16<T>::kVec], float (&red)[kWarps][kMaxGroup][kHeadDim],
    const float (&m_s)[kMaxGroup], const float (&l_s)[kMaxGroup]) {
  using L = RowLayout<T, kHeadDim>;
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= pl.group) break;
#pragma unroll
    for (int e = 0; e < L::kVec; ++e) {
      float a = acc[g][e];
#pragma unroll
      for (int o = L::kTpr; o < 32; o <<= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
      if (pl.sub == 0) red[pl.warp][g][pl.d0 + e] = a;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < pl.group * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    const int head = pl.kv_head * pl.group + g;
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += red[w][g][d];
    if (write_partial) {
      const int64_t row =
          (static_cast<int64_t>(pl.t) * p.num_heads + head) * p.max_partitions + part;
      p.partial_out[row * kHeadDim + d] = o;
      if (d == 0) {
        p.partial_max[row] = m_s[g];
        p.partial_sum[row] = l_s[g];
      }
    } else {
      p.out[static_cast<int64_t>(pl.t) * p.out_stride + head * kHeadDim + d] =
          FromFloat<T>(o / l_s[g]);
    }
  }
}

// One (token, kv head, partition) of the attention.
template <typename T, int kHeadDim>
__device__ void AttendPartition(const PagedAttentionParams<T>& p, int t, int kv_head, int part,
                                int part_size, bool split) {
  using L = RowLayout<T, kHeadDim>;
  constexpr int kMaxGroup = kMaxGroupOf<kHeadDim>;
  __shared__ __align__(16) float q_s[kMaxGroup][kHeadDim];
  __shared__ float scores[kMaxGroup][kChunk];
  __shared__ float m_s[kMaxGroup], l_s[kMaxGroup], alpha_s[kMaxGroup];
  __shared__ float red[kWarps][kMaxGroup][kHeadDim];

  const int group = p.num_heads / p.kv.num_kv_heads;
  const int ctx = p.kv.positions[t] + 1;
  const int first = p.kv.WindowStart(p.kv.positions[t]);
  const int begin = max(first, part * part_size);
  const int end = min(ctx, part * part_size + part_size);
  // A partial unless the window lies in this one partition.
  const bool write_partial = split && first / part_size != (ctx - 1) / part_size;
  const int seq = FindSeq(p.kv.query_start, p.kv.num_seqs, t);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane / L::kTpr, d0 = (lane % L::kTpr) * L::kVec;
  const PartitionLane pl{t, kv_head, seq, group, warp, lane, sub, d0};

  LoadQuery<T, kHeadDim>(p, pl, q_s, m_s, l_s);
  float acc[kMaxGroup][L::kVec];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
    for (int e = 0; e < L::kVec; ++e) acc[g][e] = 0.0f;
  }
  __syncthreads();

  for (int chunk = begin; chunk < end; chunk += kChunk) {
    const int n = min(kChunk, end - chunk);
    ScoreChunk<T, kHeadDim>(p, pl, chunk, n, q_s, scores);
    __syncthreads();
    OnlineSoftmax<kMaxGroup>(pl, n, scores, m_s, l_s, alpha_s);
    __syncthreads();
    // V pass: acc_g = alpha_g * acc_g + sum_r p_gr v_r.
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= group) break;
      const float alpha = alpha_s[g];
#pragma unroll
      for (int e = 0; e < L::kVec; ++e) acc[g][e] *= alpha;
    }
    for (int base = warp * L::kRowsPerWarp; base < n; base += L::kRowsPerIter * kUnroll) {
      const int r0 = base + sub;
      Vec16<T> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int r = r0 + u * L::kRowsPerIter;
        if (r < n) {
          v[u].Load(p.kv.v_cache + p.kv.PositionOffset(seq, kv_head, chunk + r) + d0);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int r = r0 + u * L::kRowsPerIter;
        if (r >= n) break;
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g >= group) break;
          const float w = scores[g][r];
#pragma unroll
          for (int e = 0; e < L::kVec; ++e) acc[g][e] += w * v[u].Get(e);
        }
      }
    }
    __syncthreads();
  }
  WritePartition<T, kHeadDim>(p, pl, part, write_partial, acc, red, m_s, l_s);
}

// Partitions walked with a grid-stride loop over grid.z; split-K writes stay
// inside the workspace's max_partitions columns.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    AttentionKernel(PagedAttentionParams<T> p, int part_size, bool split) {
  const int t = blockIdx.x, kv_head = blockIdx.y;
  const int ctx = p.kv.positions[t] + 1;
  const int parts = split ? min((ctx + part_size - 1) / part_size, p.max_partitions) : 1;
  const int first_part = split ? p.kv.WindowStart(p.kv.positions[t]) / part_size : 0;
  for (int part = first_part + blockIdx.z; part < parts; part += gridDim.z) {
    AttendPartition<T, kHeadDim>(p, t, kv_head, part, part_size, split);
    __syncthreads();
  }
}

// Combines the partitions of each (token, head) whose context was split.
template <typename T, int kHeadDim>
__global__ void ReduceKernel(PagedAttentionParams<T> p) {
  const int t = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
  const int ctx = p.kv.positions[t] + 1;
  const int parts = min((ctx + p.partition_size - 1) / p.partition_size, p.max_partitions);
  const int first_part = p.kv.WindowStart(p.kv.positions[t]) / p.partition_size;
  if (parts - first_part <= 1) return;
  const int64_t row = (static_cast<int64_t>(t) * p.num_heads + head) * p.max_partitions;
  float m = -FLT_MAX;
  for (int i = first_part; i < parts; ++i) m = fmaxf(m, p.partial_max[row + i]);
  float sum = 0.0f, o = 0.0f;
  for (int i = first_part; i < parts; ++i) {
    const float w = __expf(p.partial_max[row + i] - m);
    sum += w * p.partial_sum[row + i];
    o += w * p.partial_out[(row + i) * kHeadDim + d];
  }
  p.out[static_cast<int64_t>(t) * p.out_stride + head * kHeadDim + d] = FromFloat<T>(o / sum);
}

template <typename T, int kHeadDim>
absl::Status Launch(const PagedAttentionParams<T>& p, cudaStream_t stream) {
  const bool split = p.partition_size > 0 && p.kv.num_tokens == p.kv.num_seqs;
  const int grid_z = split ? SplitKGridZ(p.max_partitions, p.partition_size) : 1;
  const dim3 grid(p.kv.num_tokens, p.kv.num_kv_heads, grid_z);
  AttentionKernel<T, kHeadDim>
      <<<grid, kThreads, 0, stream>>>(p, split ? p.partition_size : INT_MAX, split);
  LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  if (split && p.max_partitions > 1) {
    ReduceKernel<T, kHeadDim><<<dim3(p.kv.num_tokens, p.num_heads), kHeadDim, 0, stream>>>(p);
    LOOM_CUDA_RETURN_IF_LAUNCH_ERROR();
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::Status PagedAttention(const PagedAttentionParams<T>& p, cudaStream_t stream) {
  const int kv_heads = p.kv.num_kv_heads;
  LOOM_KERNEL_CHECK(kv_heads > 0 && p.num_heads % kv_heads == 0);
  LOOM_KERNEL_CHECK(p.num_heads / kv_heads <= (p.kv.head_dim > 128 ? kMaxGroupOf<256> : 8));
  LOOM_KERNEL_CHECK(p.q_stride % Vec16<T>::kVec == 0);
  if (p.partition_size > 0) {
    LOOM_KERNEL_CHECK(p.partition_size % p.kv.block_size == 0 && p.max_partitions > 0);
    LOOM_KERNEL_CHECK(p.partial_out && p.partial_max && p.partial_sum);
  }
  if (p.kv.num_tokens == 0) return absl::OkStatus();
  switch (p.kv.head_dim) {
    case 16:
      return Launch<T, 16>(p, stream);
    case 32:
      return Launch<T, 32>(p, stream);
    case 64:
      return Launch<T, 64>(p, stream);
    case 128:
      return Launch<T, 128>(p, stream);
    case 256:
      // A float row of 256 is more than a warp's 16-byte loads.
      if constexpr (sizeof(T) == 2) return Launch<T, 256>(p, stream);
      [[fallthrough]];
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "attention head_dim ", p.kv.head_dim, " unsupported (16, 32, 64, 128; 256 in bf16)"));
  }
}

template absl::Status PagedAttention<float>(const PagedAttentionParams<float>&, cudaStream_t);
template absl::Status PagedAttention<__nv_bfloat16>(const PagedAttentionParams<__nv_bfloat16>&,
                                                    cudaStream_t);

}  // namespace loom::kernels::cuda
