// Paged decode attention against the device's copy bandwidth: Llama-3-8B
// attention shape (32 query heads, 8 kv heads, head_dim 128, bf16), block size
// 16, batch 1/8/64/256 at 1k and 4k context. Bytes counted: K and V of every
// context position read once, q read and the output written once. Small cases
// rotate over disjoint block sets so that repeated runs do not read the L2.
// Prints "RESULT attn_b<batch>_c<ctx> ..." lines.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "bench/gpu_timing.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/random_fill.h"

namespace {

using bf16 = __nv_bfloat16;
constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlock = 16;

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

  const int64_t block_elems = int64_t{kKvHeads} * kBlock * kHeadDim;
  const int64_t min_bytes = int64_t{512} << 20;  // per rotation set: far beyond the L2
  for (int ctx : {1024, 4096}) {
    for (int batch : {1, 8, 64, 256}) {
      const int blocks_per_seq = ctx / kBlock;
      const int64_t kv_bytes = int64_t{batch} * ctx * kKvHeads * kHeadDim * 2 * 2;
      const int sets = static_cast<int>(std::max<int64_t>(1, min_bytes / kv_bytes));
      const int num_blocks = 1 + sets * batch * blocks_per_seq;
      bf16 *k, *v, *q, *out;
      LOOM_CUDA_CHECK(cudaMalloc(&k, num_blocks * block_elems * 2));
      LOOM_CUDA_CHECK(cudaMalloc(&v, num_blocks * block_elems * 2));
      LOOM_CUDA_CHECK(cudaMalloc(&q, int64_t{batch} * kHeads * kHeadDim * 2));
      LOOM_CUDA_CHECK(cudaMalloc(&out, int64_t{batch} * kHeads * kHeadDim * 2));
      LOOM_CUDA_CHECK_OK(
          loom::cuda::RandomFillBFloat16(stream, k, num_blocks * block_elems, 2.0f, 1));
      LOOM_CUDA_CHECK_OK(
          loom::cuda::RandomFillBFloat16(stream, v, num_blocks * block_elems, 1.0f, 2));
      LOOM_CUDA_CHECK_OK(
          loom::cuda::RandomFillBFloat16(stream, q, int64_t{batch} * kHeads * kHeadDim, 1.0f, 3));

      // Shuffled block ids, as a long-running pool hands them out.
      std::vector<int32_t> ids(num_blocks - 1);
      std::iota(ids.begin(), ids.end(), 1);
      std::shuffle(ids.begin(), ids.end(), std::mt19937(batch * 7 + ctx));
      const int32_t part = loom::kernels::cuda::DecodePartitionSize(batch);
      const int32_t max_parts = (ctx + part - 1) / part;
      int32_t *tables, *positions, *query_start, *slots;
      LOOM_CUDA_CHECK(cudaMalloc(&tables, int64_t{sets} * batch * blocks_per_seq * 4));
      LOOM_CUDA_CHECK(cudaMemcpy(tables, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
      std::vector<int32_t> pos(batch, ctx - 1), qs(batch + 1);
      std::iota(qs.begin(), qs.end(), 0);
      LOOM_CUDA_CHECK(cudaMalloc(&positions, batch * 4));
      LOOM_CUDA_CHECK(cudaMalloc(&slots, batch * 4));
      LOOM_CUDA_CHECK(cudaMalloc(&query_start, (batch + 1) * 4));
      LOOM_CUDA_CHECK(cudaMemcpy(positions, pos.data(), batch * 4, cudaMemcpyHostToDevice));
      LOOM_CUDA_CHECK(cudaMemcpy(query_start, qs.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
      float *po, *pm, *ps;
      const int64_t rows = int64_t{batch} * kHeads * max_parts;
      LOOM_CUDA_CHECK(cudaMalloc(&po, rows * kHeadDim * 4));
      LOOM_CUDA_CHECK(cudaMalloc(&pm, rows * 4));
      LOOM_CUDA_CHECK(cudaMalloc(&ps, rows * 4));

      loom::kernels::PagedAttentionParams<bf16> p;
      p.q = q;
      p.out = out;
      p.q_stride = p.out_stride = kHeads * kHeadDim;
      p.num_heads = kHeads;
      p.scale = 1.0f / std::sqrt(float(kHeadDim));
      p.kv.num_blocks = num_blocks;
      p.kv.num_kv_heads = kKvHeads;
      p.kv.block_size = kBlock;
      p.kv.head_dim = kHeadDim;
      p.kv.k_cache = k;
      p.kv.v_cache = v;
      p.kv.max_blocks_per_seq = blocks_per_seq;
      p.kv.query_start = query_start;
      p.kv.num_seqs = batch;
      p.kv.positions = positions;
      p.kv.slot_mapping = slots;
      p.kv.num_tokens = batch;
      p.partition_size = part;
      p.max_partitions = max_parts;
      p.partial_out = po;
      p.partial_max = pm;
      p.partial_sum = ps;
      int set = 0;
      const double ms = loom::bench::MedianMs(stream, 5, 50, [&](cudaStream_t s) {
        p.kv.block_tables = tables + int64_t{set} * batch * blocks_per_seq;
        set = (set + 1) % sets;
        LOOM_CUDA_CHECK_OK(loom::kernels::cuda::PagedAttention(p, s));
      });
      const double bytes = kv_bytes + 2.0 * batch * kHeads * kHeadDim * 2;
      const double bw = bytes / (ms * 1e-3);
      std::printf("RESULT attn_b%d_c%d us=%.2f bytes_per_s=%.4e of_copy=%.3f partition=%d\n", batch,
                  ctx, ms * 1e3, bw, bw / copy_bw, part);
      for (void* ptr : {(void*)k, (void*)v, (void*)q, (void*)out, (void*)tables, (void*)positions,
                        (void*)slots, (void*)query_start, (void*)po, (void*)pm, (void*)ps}) {
        LOOM_CUDA_CHECK(cudaFree(ptr));
      }
    }
  }
  LOOM_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
