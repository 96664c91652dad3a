// RoPE + KV write and paged attention (decode split-K, prefill over a cached
// prefix, mixed steps; v1 and the decode kernel v2) against the CPU
// references, in float and bf16.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention_v2.h"
#include "kernels/cuda/ops.h"
#include "kernels/rope.h"
#include "tests/kernels/cuda/gpu_test_util.h"

namespace loom::testing {
namespace {

namespace kc = kernels::cuda;
using bf16 = __nv_bfloat16;

struct Shape {
  int kv_heads, group, head_dim;
  std::vector<std::pair<int, int>> seqs;  // (num_computed, num_scheduled)
};

// Host-side paged step: random block tables over a shared pool, positions and
// slots of the scheduled tokens, packed sequence after sequence.
struct Step {
  int block_size = 16;
  int num_blocks = 0, max_blocks = 0, num_tokens = 0;
  std::vector<int32_t> block_tables, context_lens, query_start, positions, slots;

  Step(const Shape& s, uint32_t seed, int block_size_in = 16) : block_size(block_size_in) {
    std::mt19937 rng(seed);
    for (auto [computed, scheduled] : s.seqs) {
      max_blocks = std::max(max_blocks, (computed + scheduled + block_size - 1) / block_size);
    }
    num_blocks = 1 + max_blocks * static_cast<int>(s.seqs.size()) + 3;
    std::vector<int32_t> pool(num_blocks - 1);
    std::iota(pool.begin(), pool.end(), 1);
    std::shuffle(pool.begin(), pool.end(), rng);
    block_tables.assign(s.seqs.size() * max_blocks, 0);
    query_start.push_back(0);
    size_t next = 0;
    for (size_t i = 0; i < s.seqs.size(); ++i) {
      auto [computed, scheduled] = s.seqs[i];
      const int len = computed + scheduled;
      for (int b = 0; b < (len + block_size - 1) / block_size; ++b) {
        block_tables[i * max_blocks + b] = pool[next++];
      }
      context_lens.push_back(len);
      for (int p = computed; p < len; ++p) {
        positions.push_back(p);
        slots.push_back(block_tables[i * max_blocks + p / block_size] * block_size +
                        p % block_size);
      }
      query_start.push_back(static_cast<int32_t>(positions.size()));
    }
    num_tokens = static_cast<int>(positions.size());
  }
};

template <typename T>
kernels::PagedKv<T> View(const Shape& s, const Step& st, T* k, T* v) {
  kernels::PagedKv<T> kv;
  kv.k_cache = k;
  kv.v_cache = v;
  kv.num_blocks = st.num_blocks;
  kv.num_kv_heads = s.kv_heads;
  kv.block_size = st.block_size;
  kv.head_dim = s.head_dim;
  kv.max_blocks_per_seq = st.max_blocks;
  kv.num_seqs = static_cast<int32_t>(s.seqs.size());
  kv.num_tokens = st.num_tokens;
  return kv;
}

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {1, 1, 64, {{0, 1}}},
      {2, 2, 16, {{0, 9}, {30, 1}, {70, 20}}},  // tiny-model heads
      {1, 4, 32, {{200, 1}, {5, 1}}},
      {2, 4, 128, {{0, 5}, {17, 1}, {100, 30}}},               // mixed
      {8, 4, 128, {{1023, 1}, {300, 1}, {4000, 1}, {16, 1}}},  // decodes
      {4, 8, 64, {{0, 40}, {64, 33}}},                         // prefill over a prefix
      {2, 2, 128, {{2047, 1}, {0, 1}, {5000, 1}}},             // long decode
      // More partitions than the grid's 8192 tokens' worth: blocks loop over them.
      {1, 2, 64, {{10000, 1}, {9000, 1}}},
  };
  return shapes;
}

template <typename T>
class AttentionGpuTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(AttentionGpuTest, StorageTypes);

TYPED_TEST(AttentionGpuTest, RopeKvWriteMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  uint32_t seed = 10;
  for (const Shape& s : Shapes()) {
    const Step st(s, seed++);
    const int heads = s.kv_heads * s.group, d = s.head_dim;
    const int width = (heads + 2 * s.kv_heads) * d;
    const size_t pool = size_t(st.num_blocks) * s.kv_heads * st.block_size * d;
    std::vector<float> qkv = RandomValues<T>(size_t(st.num_tokens) * width, seed++);
    std::vector<float> k_cache = RandomValues<T>(pool, seed++),
                       v_cache = RandomValues<T>(pool, seed++);
    std::vector<float> inv_freq(d / 2);
    kernels::ComputeRopeInvFreq(500000.0f, d, kernels::RopeScaling{}, inv_freq.data());

    GuardedBuffer<T> d_qkv(qkv), d_k(k_cache), d_v(v_cache);
    GuardedBuffer<float> d_freq(inv_freq);
    IntBuffer d_pos(st.positions), d_slots(st.slots), d_tables(st.block_tables);

    kernels::RopeKvWriteParams<float> ref;
    ref.q = qkv.data();
    ref.k = qkv.data() + heads * d;
    ref.v = qkv.data() + (heads + s.kv_heads) * d;
    ref.q_stride = ref.k_stride = ref.v_stride = width;
    ref.num_heads = heads;
    ref.inv_freq = inv_freq.data();
    ref.kv = View<float>(s, st, k_cache.data(), v_cache.data());
    ref.kv.positions = st.positions.data();
    ref.kv.slot_mapping = st.slots.data();
    kernels::cpu::RopeKvWriteRef(ref);

    kernels::RopeKvWriteParams<T> p;
    p.q = d_qkv.get();
    p.k = d_qkv.get() + heads * d;
    p.v = d_qkv.get() + (heads + s.kv_heads) * d;
    p.q_stride = p.k_stride = p.v_stride = width;
    p.num_heads = heads;
    p.inv_freq = d_freq.get();
    p.kv = View<T>(s, st, d_k.get(), d_v.get());
    p.kv.positions = d_pos.get();
    p.kv.slot_mapping = d_slots.get();
    LOOM_CUDA_CHECK_OK(kc::RopeKvWrite(p, nullptr));

    // q is rotated in place; k/v outside the written slots stay untouched.
    std::vector<float> got_q = d_qkv.Download(), want_q = qkv;
    ExpectNear<T>(got_q, want_q);
    ExpectNear<T>(d_k.Download(), k_cache);
    ExpectNear<T>(d_v.Download(), v_cache);
    EXPECT_TRUE(d_qkv.GuardsIntact() && d_k.GuardsIntact() && d_v.GuardsIntact());
  }
}

// One paged attention case: random q/K/V (keys scaled up so that the softmax is
// far from uniform), the CPU reference, and `launch` on poisoned device output
// and workspace; the output must match and its guards stay intact.
template <typename T, typename Launch>
void CheckAttention(const Shape& s, const Step& st, int partition, uint32_t seed, Launch launch,
                    int window = 0) {
  const int heads = s.kv_heads * s.group, d = s.head_dim;
  const size_t pool = size_t(st.num_blocks) * s.kv_heads * st.block_size * d;
  std::vector<float> q = RandomValues<T>(size_t(st.num_tokens) * heads * d, seed);
  std::vector<float> k = RandomValues<T>(pool, seed + 1, -3.0f, 3.0f);
  std::vector<float> v = RandomValues<T>(pool, seed + 2);
  std::vector<float> ref(q.size());
  int max_ctx = 0;
  for (int c : st.context_lens) max_ctx = std::max(max_ctx, c);
  const int max_parts = partition > 0 ? (max_ctx + partition - 1) / partition : 0;

  kernels::PagedAttentionParams<float> rp;
  rp.q = q.data();
  rp.out = ref.data();
  rp.q_stride = rp.out_stride = heads * d;
  rp.num_heads = heads;
  rp.scale = 1.0f / std::sqrt(float(d));
  rp.kv = View<float>(s, st, k.data(), v.data());
  rp.kv.block_tables = st.block_tables.data();
  rp.kv.context_lens = st.context_lens.data();
  rp.kv.query_start = st.query_start.data();
  rp.kv.positions = st.positions.data();
  rp.kv.slot_mapping = st.slots.data();
  rp.kv.sliding_window = window;
  kernels::cpu::PagedAttentionRef(rp);

  GuardedBuffer<T> d_q(q), d_k(k), d_v(v), d_out(ref.size());
  const size_t rows = size_t(st.num_tokens) * heads * std::max(1, max_parts);
  GuardedBuffer<float> d_po(rows * d), d_pm(rows), d_ps(rows);
  IntBuffer d_tables(st.block_tables), d_lens(st.context_lens), d_qs(st.query_start);
  IntBuffer d_pos(st.positions), d_slots(st.slots);
  kernels::PagedAttentionParams<T> p;
  p.q = d_q.get();
  p.out = d_out.get();
  p.q_stride = p.out_stride = heads * d;
  p.num_heads = heads;
  p.scale = rp.scale;
  p.kv = View<T>(s, st, d_k.get(), d_v.get());
  p.kv.block_tables = d_tables.get();
  p.kv.context_lens = d_lens.get();
  p.kv.query_start = d_qs.get();
  p.kv.positions = d_pos.get();
  p.kv.slot_mapping = d_slots.get();
  p.kv.sliding_window = window;
  p.partition_size = partition;
  p.max_partitions = max_parts;
  p.partial_out = d_po.get();
  p.partial_max = d_pm.get();
  p.partial_sum = d_ps.get();
  launch(p);
  SCOPED_TRACE(::testing::Message()
               << "head_dim " << d << " group " << s.group << " block_size " << st.block_size
               << " partition " << partition << " seqs " << s.seqs.size() << " max context "
               << max_ctx << " window " << window);
  ExpectNear<T>(d_out.Download(), ref);
  EXPECT_TRUE(d_out.GuardsIntact());
  EXPECT_TRUE(d_po.GuardsIntact() && d_pm.GuardsIntact() && d_ps.GuardsIntact());
}

TYPED_TEST(AttentionGpuTest, PagedAttentionMatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  uint32_t seed = 100;
  for (const Shape& s : Shapes()) {
    for (int partition : {0, 64, 512}) {
      const Step st(s, seed++);
      CheckAttention<T>(s, st, partition, seed, [](const kernels::PagedAttentionParams<T>& p) {
        LOOM_CUDA_CHECK_OK(kc::PagedAttention(p, nullptr));
      });
      seed += 3;
    }
  }
}

// Decode steps for v2: batch 1 to 33, contexts on both sides of tile,
// block, partition and staged-table-window edges, GQA ratios 1 to 8.
const std::vector<Shape>& DecodeShapes() {
  static const std::vector<Shape> shapes = [] {
    std::vector<Shape> v = {
        {1, 1, 64, {{0, 1}}},
        {8, 4, 128, {{1023, 1}}},  // Llama-3-8B heads, 1k context
        {2, 3, 128, {{14, 1}, {15, 1}, {63, 1}, {64, 1}, {511, 1}, {512, 1}, {999, 1}, {2600, 1}}},
        {1, 8, 128, {{4095, 1}, {70, 1}}},
        {2, 2, 16, {{0, 1}, {255, 1}, {256, 1}, {3000, 1}}},
        {1, 2, 32, {}},
    };
    std::mt19937 rng(7);
    for (int i = 0; i < 33; ++i) v.back().seqs.push_back({int(rng() % 700), 1});
    return v;
  }();
  return shapes;
}

TYPED_TEST(AttentionGpuTest, PagedAttentionV2MatchesReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  using T = TypeParam;
  uint32_t seed = 500;
  for (const Shape& s : DecodeShapes()) {
    for (int block_size : {8, 16, 32, 256}) {
      for (int partition : {0, 48, 64, 512}) {
        if (partition % block_size != 0) continue;
        const Step st(s, seed++, block_size);
        CheckAttention<T>(s, st, partition, seed, [](const kernels::PagedAttentionParams<T>& p) {
          ASSERT_TRUE(kc::AttentionV2Applies(p));
          ASSERT_EQ(kc::PagedAttentionV2(p, nullptr), cudaSuccess);
        });
        seed += 3;
      }
    }
  }
}

// Sliding-window layers (Gemma 3: 512, Mistral) and Gemma's head_dim 256
// (bf16, four query heads per kv head): windows that start mid-block and
// mid-partition, decodes split and not, prefills across the window's edge.
TEST(AttentionGpuTest, SlidingWindowAndHeadDim256MatchReference) {
  LOOM_REQUIRE_GPU_OR_SKIP();
  const std::vector<Shape> shapes = {
      {1, 4, 256, {{0, 30}, {600, 1}, {1300, 1}}},
      {1, 4, 256, {{500, 40}, {2000, 1}}},
      {2, 2, 128, {{700, 1}, {10, 1}, {512, 1}}},
  };
  uint32_t seed = 900;
  for (const Shape& s : shapes) {
    for (int window : {0, 1, 100, 512}) {
      for (int partition : {0, 64, 512}) {
        const Step st(s, seed++);
        CheckAttention<bf16>(
            s, st, partition, seed,
            [](const kernels::PagedAttentionParams<bf16>& p) {
              if (p.kv.sliding_window > 0) {
                EXPECT_FALSE(kc::AttentionV2Applies(p));
              }
              LOOM_CUDA_CHECK_OK(kc::PagedAttention(p, nullptr));
            },
            window);
        seed += 3;
      }
    }
  }
}

}  // namespace
}  // namespace loom::testing
