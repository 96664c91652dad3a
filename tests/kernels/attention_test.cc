#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

// A step over a random paged pool: sequence s has context_lens[s] positions in
// the cache, of which the last query_lens[s] are this step's queries.
struct Shape {
  int32_t heads = 6, kv_heads = 2, head_dim = 16, block_size = 4, num_blocks = 64;
};

struct PagedStep : Shape {
  std::vector<int32_t> context_lens, query_lens;
  std::vector<int32_t> block_tables, query_start, positions, slots;
  int32_t max_blocks = 0;
  std::vector<float> k_cache, v_cache, q;

  PagedStep(std::vector<int32_t> ctx, std::vector<int32_t> qlen, uint32_t seed, Shape shape = {})
      : Shape(shape), context_lens(std::move(ctx)), query_lens(std::move(qlen)) {
    std::mt19937 rng(seed);
    std::vector<int32_t> free_blocks(num_blocks - 1);
    std::iota(free_blocks.begin(), free_blocks.end(), 1);
    std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
    for (int32_t c : context_lens)
      max_blocks = std::max(max_blocks, (c + block_size - 1) / block_size);
    block_tables.assign(context_lens.size() * max_blocks, 0);
    size_t next_free = 0;
    query_start.push_back(0);
    for (size_t s = 0; s < context_lens.size(); ++s) {
      for (int32_t b = 0; b < (context_lens[s] + block_size - 1) / block_size; ++b) {
        block_tables[s * max_blocks + b] = free_blocks.at(next_free++);
      }
      for (int32_t p = context_lens[s] - query_lens[s]; p < context_lens[s]; ++p) {
        positions.push_back(p);
        slots.push_back(block_tables[s * max_blocks + p / block_size] * block_size +
                        p % block_size);
      }
      query_start.push_back(query_start.back() + query_lens[s]);
    }
    const size_t cache = static_cast<size_t>(num_blocks) * kv_heads * block_size * head_dim;
    k_cache = RandomVector(cache, seed + 1);
    v_cache = RandomVector(cache, seed + 2);
    q = RandomVector(positions.size() * heads * head_dim, seed + 3, -3, 3);
  }

  PagedAttentionParams<float> Params(float* out) {
    PagedAttentionParams<float> p;
    p.q = q.data();
    p.out = out;
    p.q_stride = p.out_stride = heads * head_dim;
    p.num_heads = heads;
    p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    p.kv.k_cache = k_cache.data();
    p.kv.v_cache = v_cache.data();
    p.kv.num_blocks = num_blocks;
    p.kv.num_kv_heads = kv_heads;
    p.kv.block_size = block_size;
    p.kv.head_dim = head_dim;
    p.kv.block_tables = block_tables.data();
    p.kv.max_blocks_per_seq = max_blocks;
    p.kv.context_lens = context_lens.data();
    p.kv.query_start = query_start.data();
    p.kv.num_seqs = static_cast<int32_t>(context_lens.size());
    p.kv.positions = positions.data();
    p.kv.slot_mapping = slots.data();
    p.kv.num_tokens = static_cast<int32_t>(positions.size());
    return p;
  }
};

TEST(PagedAttentionRefTest, MatchesDenseCausalAttention) {
  PagedStep step({9, 5}, {3, 5}, 11);
  std::vector<float> out(step.q.size());
  PagedAttentionRef(step.Params(out.data()));
  const int32_t d = step.head_dim;
  // Dense recomputation for token 1 (sequence 0, position 7), head 5 (kv head 1).
  const int32_t t = 1, h = 5, kvh = 1, pos = 7;
  std::vector<double> w(pos + 1);
  double m = -1e30, sum = 0;
  auto k_at = [&](int32_t p) {
    const int32_t block = step.block_tables[p / step.block_size];
    return &step.k_cache[((static_cast<size_t>(block) * step.kv_heads + kvh) * step.block_size +
                          p % step.block_size) *
                         d];
  };
  for (int32_t p = 0; p <= pos; ++p) {
    double dot = 0;
    for (int32_t j = 0; j < d; ++j) dot += step.q[(t * step.heads + h) * d + j] * k_at(p)[j];
    w[p] = dot / std::sqrt(static_cast<double>(d));
    m = std::max(m, w[p]);
  }
  for (double& x : w) sum += (x = std::exp(x - m));
  for (int32_t j = 0; j < d; ++j) {
    double o = 0;
    for (int32_t p = 0; p <= pos; ++p) {
      o += w[p] * step.v_cache[k_at(p) - step.k_cache.data() + j];
    }
    EXPECT_NEAR(out[(t * step.heads + h) * d + j], o / sum, 1e-5);
  }
}

TEST(PagedAttentionTest, FastMatchesReferenceWithAndWithoutPartitions) {
  ThreadPool pool(3);
  // Mixed step: a prefill chunk over a cached prefix, a fresh prompt, decodes.
  PagedStep step({37, 11, 1, 60, 16}, {12, 11, 1, 1, 1}, 21);
  std::vector<float> ref(step.q.size());
  PagedAttentionRef(step.Params(ref.data()));
  for (int32_t partition : {0, 4, 8, 16}) {
    std::vector<float> fast(step.q.size(), 0.0f);
    PagedAttentionParams<float> p = step.Params(fast.data());
    std::vector<float> po, pm, ps;
    if (partition > 0) {
      p.partition_size = partition;
      p.max_partitions = (60 + partition - 1) / partition;
      const size_t slots = step.positions.size() * step.heads * p.max_partitions;
      po.resize(slots * step.head_dim);
      pm.resize(slots);
      ps.resize(slots);
      p.partial_out = po.data();
      p.partial_max = pm.data();
      p.partial_sum = ps.data();
    }
    PagedAttention(p, pool);
    SCOPED_TRACE(testing::Message() << "partition " << partition);
    ExpectClose(fast, ref, 1e-5f, 1e-4f);
  }
}

// Prefill chunks long enough for several query tiles and context chunks,
// head dims that are and are not multiples of 16, block sizes below and above
// the 16-position chunks, decodes beside them.
TEST(PagedAttentionTest, TiledPrefillMatchesReference) {
  ThreadPool pool(3);
  uint32_t seed = 40;
  for (const Shape& shape : {Shape{6, 2, 16, 4, 256}, Shape{9, 3, 64, 16, 64},
                             Shape{4, 4, 24, 32, 32}, Shape{8, 1, 8, 8, 128}}) {
    PagedStep step({75, 130, 19, 40}, {75, 70, 1, 2}, ++seed, shape);
    std::vector<float> ref(step.q.size());
    PagedAttentionRef(step.Params(ref.data()));
    std::vector<float> fast(step.q.size(), 0.0f);
    PagedAttention(step.Params(fast.data()), pool);
    SCOPED_TRACE(testing::Message() << "heads " << shape.heads << " kv heads " << shape.kv_heads
                                    << " dim " << shape.head_dim << " block " << shape.block_size);
    ExpectClose(fast, ref, 1e-5f, 1e-4f);
  }
}

// A prompt token's output is the same whether its prompt is prefilled in one
// chunk or in two (other query tiles, other rows beside it).
TEST(PagedAttentionTest, TiledPrefillTokenDoesNotDependOnTheChunking) {
  ThreadPool pool(2);
  PagedStep whole({90}, {90}, 5, Shape{6, 2, 16, 4, 64});
  std::vector<float> one(whole.q.size(), 0.0f);
  PagedAttention(whole.Params(one.data()), pool);
  // The same cache and queries; the step holds only the last 53 positions.
  PagedStep tail = whole;
  const int32_t skipped = 37;
  tail.query_lens = {90 - skipped};
  tail.query_start = {0, 90 - skipped};
  tail.positions.erase(tail.positions.begin(), tail.positions.begin() + skipped);
  tail.slots.erase(tail.slots.begin(), tail.slots.begin() + skipped);
  const size_t row = static_cast<size_t>(tail.heads) * tail.head_dim;
  tail.q.erase(tail.q.begin(), tail.q.begin() + skipped * row);
  std::vector<float> two(tail.q.size(), 0.0f);
  PagedAttention(tail.Params(two.data()), pool);
  EXPECT_EQ(two, std::vector<float>(one.begin() + skipped * row, one.end()));
}

}  // namespace
}  // namespace loom::kernels::cpu
