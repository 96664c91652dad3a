// Paged decode attention, v2 (kernels/cuda/attention_v2.h). One block of four
// warps per (sequence, kv head, partition) serves the kv head's query-head
// group. A tile is kTileBytes of K and as much of V; lanes own 16-byte slices
// of a row (kTpr lanes per row) and each warp owns kIters row groups of every
// tile. While a tile is computed from shared memory the next one is in flight
// (cp.async, two stages).
#include <algorithm>
#include <climits>

#include "kernels/cuda/attention_v2.h"
#include "kernels/cuda/device_math.cuh"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxGroup = 8;
constexpr int kTileBytes = 8192;  // K bytes per tile; V the same
constexpr int kMaxTable = 256;    // block-table entries staged at a time
constexpr int kMaxGridZ = 65535;

template <typename T, int kHeadDim>
struct Geometry {
  static constexpr int kVec = Vec16<T>::kVec;
  static constexpr int kTpr = kHeadDim / kVec;  // lanes per row
  static constexpr int kRowsPerWarp = 32 / kTpr;
  static constexpr int kTile = kTileBytes / (kHeadDim * static_cast<int>(sizeof(T)));
  static constexpr int kIters = kTile / (kWarps * kRowsPerWarp);
  static constexpr int kRowVecs = kTile * kTpr;  // 16-byte copies per tile and cache
  static_assert(kIters >= 1 && kTile % (kWarps * kRowsPerWarp) == 0);
  static_assert(kTile <= kMaxTable);
};

__device__ __forceinline__ int Log2(int x) { return 31 - __clz(x); }
__host__ __device__ constexpr int StaticLog2(int x) { return x <= 1 ? 0 : 1 + StaticLog2(x / 2); }

// 16 bytes global -> shared, bypassing L1; src_bytes 0 fills zeros.
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
#else
  *reinterpret_cast<uint4*>(dst) =
      valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void CopyCommit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int kPending>
__device__ __forceinline__ void CopyWait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// What a block needs to address its rows: the paged view reduced to shifts.
struct Rows {
  int log_bs, bs_mask, kv_heads, kv_head, win;
  const int* table;  // staged entries; table[0] is the block of position win
};

// Issues the copies of tile [start, start + kTile) clipped to `limit`.
template <typename T, int kHeadDim>
__device__ __forceinline__ void IssueTile(const PagedKv<T>& kv, const Rows& r, int start, int limit,
                                          T* k_dst, T* v_dst) {
  using G = Geometry<T, kHeadDim>;
  constexpr int kLogTpr = StaticLog2(G::kTpr);
  for (int i = threadIdx.x; i < G::kRowVecs; i += kThreads) {
    const int row = i >> kLogTpr, vec = i & (G::kTpr - 1);
    const int pos = start + row;
    const bool valid = pos < limit;
    size_t off = 0;
    if (valid) {
      const int block = r.table[(pos - r.win) >> r.log_bs];
      const size_t line =
          ((static_cast<size_t>(block) * r.kv_heads + r.kv_head) << r.log_bs) | (pos & r.bs_mask);
      off = line * kHeadDim + vec * G::kVec;
    }
    const int dst = row * kHeadDim + vec * G::kVec;
    CopyAsync16(k_dst + dst, kv.k_cache + off, valid);
    CopyAsync16(v_dst + dst, kv.v_cache + off, valid);
  }
}

// Per-warp online-softmax state over the warp's rows of the partition.
template <int kGroup, int kVec>
struct WarpState {
  float m[kGroup], l[kGroup], acc[kGroup][kVec];
  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      m[g] = -FLT_MAX;
      l[g] = 0.0f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[g][e] = 0.0f;
    }
  }
};

// One tile from shared memory into the warp's state. Rows past `n` (the tile's
// valid rows) are masked out; their zero-filled V contributes nothing.
template <typename T, int kHeadDim, int kGroup>
__device__ __forceinline__ void ComputeTile(const T* k_s, const T* v_s, int n,
                                            const float (&q)[kGroup][Vec16<T>::kVec],
                                            WarpState<kGroup, Vec16<T>::kVec>& st) {
  using G = Geometry<T, kHeadDim>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int sub = lane / G::kTpr, d0 = (lane % G::kTpr) * G::kVec;
  const int row0 = warp * G::kRowsPerWarp * G::kIters + sub;
  float s[G::kIters][kGroup];
#pragma unroll
  for (int it = 0; it < G::kIters; ++it) {
    const int row = row0 + it * G::kRowsPerWarp;
    Vec16<T> k;
    k.Load(k_s + row * kHeadDim + d0);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < G::kVec; ++e) dot += q[g][e] * k.Get(e);
#pragma unroll
      for (int o = G::kTpr / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      s[it][g] = row < n ? dot : -FLT_MAX;
    }
  }
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    float mx = s[0][g];
#pragma unroll
    for (int it = 1; it < G::kIters; ++it) mx = fmaxf(mx, s[it][g]);
#pragma unroll
    for (int o = G::kTpr; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_new = fmaxf(st.m[g], mx);
    const float alpha = __expf(st.m[g] - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int it = 0; it < G::kIters; ++it) {
      const int row = row0 + it * G::kRowsPerWarp;
      s[it][g] = row < n ? __expf(s[it][g] - m_new) : 0.0f;
      sum += s[it][g];
    }
#pragma unroll
    for (int o = G::kTpr; o < 32; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    st.l[g] = st.l[g] * alpha + sum;
    st.m[g] = m_new;
#pragma unroll
    for (int e = 0; e < G::kVec; ++e) st.acc[g][e] *= alpha;
  }
#pragma unroll
  for (int it = 0; it < G::kIters; ++it) {
    Vec16<T> v;
    v.Load(v_s + (row0 + it * G::kRowsPerWarp) * kHeadDim + d0);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
#pragma unroll
      for (int e = 0; e < G::kVec; ++e) st.acc[g][e] += s[it][g] * v.Get(e);
    }
  }
}

// Shared memory of a block: two K/V stages, reused by the final combine.
template <typename T, int kHeadDim, int kGroup>
struct Smem {
  static constexpr int kStageElems = kTileBytes / sizeof(T);
  static_assert(kWarps * kGroup * kHeadDim * sizeof(float) <= 4 * kTileBytes);
  alignas(16) float buf[4 * kTileBytes / sizeof(float)];
  float m[kWarps][kGroup], l[kWarps][kGroup];
  int table[kMaxTable];
  // Stage s of K (kv 0) or V (kv 1).
  __device__ __forceinline__ T* Stage(int s, int kv) {
    return reinterpret_cast<T*>(buf) + (2 * s + kv) * kStageElems;
  }
  __device__ __forceinline__ float& Red(int w, int g, int d) {
    return buf[(w * kGroup + g) * kHeadDim + d];
  }
};

// Combines the warps and writes the output row or the partition's partials.
template <typename T, int kHeadDim, int kGroup>
__device__ void CombineWarps(const PagedAttentionParams<T>& p, Smem<T, kHeadDim, kGroup>& sm,
                             WarpState<kGroup, Vec16<T>::kVec>& st, int t, int kv_head, int group,
                             int part, bool write_partial) {
  using G = Geometry<T, kHeadDim>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int sub = lane / G::kTpr, d0 = (lane % G::kTpr) * G::kVec;
  __syncthreads();  // the stages become the reduction buffer
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
#pragma unroll
    for (int e = 0; e < G::kVec; ++e) {
      float a = st.acc[g][e];
#pragma unroll
      for (int o = G::kTpr; o < 32; o <<= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
      if (sub == 0) sm.Red(warp, g, d0 + e) = a;
    }
    if (lane == 0) {
      sm.m[warp][g] = st.m[g];
      sm.l[warp][g] = st.l[g];
    }
  }
  __syncthreads();
  constexpr int kLogDim = StaticLog2(kHeadDim);
  for (int i = threadIdx.x; i < group * kHeadDim; i += kThreads) {
    const int g = i >> kLogDim, d = i & (kHeadDim - 1);
    float mx = -FLT_MAX;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm.m[w][g]);
    float o = 0.0f, l = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float scale = __expf(sm.m[w][g] - mx);
      o += scale * sm.Red(w, g, d);
      l += scale * sm.l[w][g];
    }
    const int head = kv_head * group + g;
    if (write_partial) {
      const int64_t row = (static_cast<int64_t>(t) * p.num_heads + head) * p.max_partitions + part;
      p.partial_out[(row << kLogDim) + d] = o;
      if (d == 0) {
        p.partial_max[row] = mx;
        p.partial_sum[row] = l;
      }
    } else {
      p.out[static_cast<int64_t>(t) * p.out_stride + (head << kLogDim) + d] = FromFloat<T>(o / l);
    }
  }
  __syncthreads();  // before a next partition restages shared memory
}

// Positions [begin, end) of sequence t into the warp states, one staged
// window of block-table entries at a time.
template <typename T, int kHeadDim, int kGroup>
__device__ void AttendPartition(const PagedAttentionParams<T>& p, Smem<T, kHeadDim, kGroup>& sm,
                                const float (&q)[kGroup][Vec16<T>::kVec],
                                WarpState<kGroup, Vec16<T>::kVec>& st, int t, Rows r, int begin,
                                int end) {
  using G = Geometry<T, kHeadDim>;
  const int window = kMaxTable << r.log_bs;
  const int64_t table_row = static_cast<int64_t>(t) * p.kv.max_blocks_per_seq;
  for (r.win = begin; r.win < end; r.win += window) {
    const int limit = min(end, r.win + window);
    const int entries = ((limit - 1) >> r.log_bs) - (r.win >> r.log_bs) + 1;
    for (int i = threadIdx.x; i < entries; i += kThreads) {
      sm.table[i] = p.kv.block_tables[table_row + (r.win >> r.log_bs) + i];
    }
    __syncthreads();
    const int tiles = (limit - r.win + G::kTile - 1) / G::kTile;
    IssueTile<T, kHeadDim>(p.kv, r, r.win, limit, sm.Stage(0, 0), sm.Stage(0, 1));
    CopyCommit();
    for (int i = 0; i < tiles; ++i) {
      const int next = i + 1, stage = i & 1;
      if (next < tiles) {
        IssueTile<T, kHeadDim>(p.kv, r, r.win + next * G::kTile, limit, sm.Stage(next & 1, 0),
                               sm.Stage(next & 1, 1));
      }
      CopyCommit();
      CopyWait<1>();
      __syncthreads();
      const int n = min(G::kTile, limit - (r.win + i * G::kTile));
      ComputeTile<T, kHeadDim, kGroup>(sm.Stage(stage, 0), sm.Stage(stage, 1), n, q, st);
      __syncthreads();
    }
  }
}

template <typename T, int kHeadDim, int kGroup>
__global__ void __launch_bounds__(kThreads)
    AttentionV2Kernel(PagedAttentionParams<T> p, int part_size, bool split) {
  using G = Geometry<T, kHeadDim>;
  __shared__ Smem<T, kHeadDim, kGroup> sm;
  const int t = blockIdx.x, kv_head = blockIdx.y;
  const int group = p.num_heads / p.kv.num_kv_heads;
  const int ctx = p.kv.positions[t] + 1;
  const int parts = split ? (ctx + part_size - 1) / part_size : 1;
  // Rows past max_partitions have no workspace: never write them.
  const int last = split && parts > 1 ? min(parts, p.max_partitions) : 1;
  const int lane = threadIdx.x & 31, d0 = (lane % G::kTpr) * G::kVec;

  float q[kGroup][G::kVec];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    Vec16<T> v;
    v.raw = make_uint4(0, 0, 0, 0);
    if (g < group) {
      v.Load(p.q + static_cast<int64_t>(t) * p.q_stride + (kv_head * group + g) * kHeadDim + d0);
    }
#pragma unroll
    for (int e = 0; e < G::kVec; ++e) q[g][e] = v.Get(e) * p.scale;
  }
  Rows r;
  r.log_bs = Log2(p.kv.block_size);
  r.bs_mask = p.kv.block_size - 1;
  r.kv_heads = p.kv.num_kv_heads;
  r.kv_head = kv_head;
  r.table = sm.table;
  for (int part = blockIdx.z; part < last; part += gridDim.z) {
    WarpState<kGroup, G::kVec> st;
    st.Init();
    const int begin = part * part_size;
    const int end = parts > 1 ? min(ctx, begin + part_size) : ctx;
    AttendPartition<T, kHeadDim, kGroup>(p, sm, q, st, t, r, begin, end);
    CombineWarps<T, kHeadDim, kGroup>(p, sm, st, t, kv_head, group, part, parts > 1);
  }
}

// Combines the partitions of each (token, head) whose context was split.
template <typename T, int kHeadDim>
__global__ void ReduceV2Kernel(PagedAttentionParams<T> p) {
  const int t = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
  const int ctx = p.kv.positions[t] + 1;
  const int parts = min((ctx + p.partition_size - 1) / p.partition_size, p.max_partitions);
  if (parts <= 1) return;
  const int64_t row = (static_cast<int64_t>(t) * p.num_heads + head) * p.max_partitions;
  float m = -FLT_MAX;
  for (int i = 0; i < parts; ++i) m = fmaxf(m, p.partial_max[row + i]);
  float sum = 0.0f, o = 0.0f;
  for (int i = 0; i < parts; ++i) {
    const float w = __expf(p.partial_max[row + i] - m);
    sum += w * p.partial_sum[row + i];
    o += w * p.partial_out[(row + i) * kHeadDim + d];
  }
  p.out[static_cast<int64_t>(t) * p.out_stride + head * kHeadDim + d] = FromFloat<T>(o / sum);
}

template <typename T, int kHeadDim, int kGroup>
cudaError_t Launch(const PagedAttentionParams<T>& p, cudaStream_t stream) {
  const bool split = p.partition_size > 0;
  const dim3 grid =
      AttentionV2Grid(p.kv.num_tokens, p.kv.num_kv_heads, p.partition_size, p.max_partitions);
  AttentionV2Kernel<T, kHeadDim, kGroup>
      <<<grid, kThreads, 0, stream>>>(p, split ? p.partition_size : INT_MAX, split);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (split && p.max_partitions > 1) {
    ReduceV2Kernel<T, kHeadDim><<<dim3(p.kv.num_tokens, p.num_heads), kHeadDim, 0, stream>>>(p);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

template <typename T, int kHeadDim>
cudaError_t LaunchGroup(const PagedAttentionParams<T>& p, int group, cudaStream_t stream) {
  if (group == 1) return Launch<T, kHeadDim, 1>(p, stream);
  if (group == 2) return Launch<T, kHeadDim, 2>(p, stream);
  if (group <= 4) return Launch<T, kHeadDim, 4>(p, stream);
  return Launch<T, kHeadDim, 8>(p, stream);
}

template <typename T>
bool Supported(const PagedAttentionParams<T>& p) {
  const int kv_heads = p.kv.num_kv_heads, d = p.kv.head_dim;
  if (!AttentionV2Applies(p) || kv_heads <= 0 || p.num_heads % kv_heads != 0) return false;
  if (p.num_heads / kv_heads > kMaxGroup || p.q_stride % Vec16<T>::kVec != 0) return false;
  if (reinterpret_cast<uintptr_t>(p.q) % 16 != 0) return false;
  if (d != 16 && d != 32 && d != 64 && d != 128) return false;
  if (p.partition_size > 0) {
    return p.partition_size % p.kv.block_size == 0 && p.max_partitions > 0 && p.partial_out &&
           p.partial_max && p.partial_sum;
  }
  return true;
}

}  // namespace

dim3 AttentionV2Grid(int32_t num_tokens, int32_t num_kv_heads, int32_t partition_size,
                     int32_t max_partitions) {
  const int32_t z = partition_size > 0 ? std::clamp(max_partitions, 1, kMaxGridZ) : 1;
  return dim3(static_cast<unsigned>(num_tokens), static_cast<unsigned>(num_kv_heads),
              static_cast<unsigned>(z));
}

template <typename T>
cudaError_t PagedAttentionV2(const PagedAttentionParams<T>& p, cudaStream_t stream) {
  if (!Supported(p)) return cudaErrorInvalidValue;
  const int group = p.num_heads / p.kv.num_kv_heads;
  switch (p.kv.head_dim) {
    case 16:
      return LaunchGroup<T, 16>(p, group, stream);
    case 32:
      return LaunchGroup<T, 32>(p, group, stream);
    case 64:
      return LaunchGroup<T, 64>(p, group, stream);
    default:
      return LaunchGroup<T, 128>(p, group, stream);
  }
}

template cudaError_t PagedAttentionV2<float>(const PagedAttentionParams<float>&, cudaStream_t);
template cudaError_t PagedAttentionV2<__nv_bfloat16>(const PagedAttentionParams<__nv_bfloat16>&,
                                                     cudaStream_t);

}  // namespace loom::kernels::cuda
