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

// Dense attention of token t's head h over positions [first, last] of its
// sequence (the first one), K/V looked up through the block table by hand.
std::vector<double> DenseAttention(const PagedStep& step, int32_t t, int32_t h, int32_t first,
                                   int32_t last) {
  const int32_t d = step.head_dim;
  const int32_t kvh = h / (step.heads / step.kv_heads);
  auto row = [&](int32_t p) {
    const int32_t block = step.block_tables[p / step.block_size];
    return ((static_cast<size_t>(block) * step.kv_heads + kvh) * step.block_size +
            p % step.block_size) *
           d;
  };
  std::vector<double> w;
  double m = -1e30, sum = 0;
  for (int32_t p = first; p <= last; ++p) {
    double dot = 0;
    for (int32_t j = 0; j < d; ++j)
      dot += step.q[(t * step.heads + h) * d + j] * step.k_cache[row(p) + j];
    w.push_back(dot / std::sqrt(static_cast<double>(d)));
    m = std::max(m, w.back());
  }
  for (double& x : w) sum += (x = std::exp(x - m));
  std::vector<double> out(d, 0.0);
  for (int32_t j = 0; j < d; ++j) {
    for (int32_t p = first; p <= last; ++p) out[j] += w[p - first] * step.v_cache[row(p) + j];
    out[j] /= sum;
  }
  return out;
}

TEST(PagedAttentionRefTest, MatchesDenseCausalAttention) {
  PagedStep step({9, 5}, {3, 5}, 11);
  std::vector<float> out(step.q.size());
  PagedAttentionRef(step.Params(out.data()));
  // Token 1 (sequence 0, position 7), head 5 (kv head 1).
  const std::vector<double> want = DenseAttention(step, 1, 5, 0, 7);
  for (int32_t j = 0; j < step.head_dim; ++j) {
    EXPECT_NEAR(out[(1 * step.heads + 5) * step.head_dim + j], want[j], 1e-5);
  }
}

// With a window W, each query at position p attends to (p - W, p] alone.
TEST(PagedAttentionRefTest, SlidingWindowAttendsToTheWindowOnly) {
  PagedStep step({30}, {9}, 12);
  for (int32_t window : {1, 4, 7, 25, 40}) {
    std::vector<float> out(step.q.size());
    PagedAttentionParams<float> p = step.Params(out.data());
    p.kv.sliding_window = window;
    PagedAttentionRef(p);
    for (int32_t t = 0; t < p.kv.num_tokens; ++t) {
      const int32_t pos = step.positions[t];
      for (int32_t h = 0; h < step.heads; ++h) {
        SCOPED_TRACE(testing::Message() << "window " << window << " token " << t << " head " << h);
        const std::vector<double> want =
            DenseAttention(step, t, h, std::max(0, pos - window + 1), pos);
        for (int32_t j = 0; j < step.head_dim; ++j) {
          ASSERT_NEAR(out[(t * step.heads + h) * step.head_dim + j], want[j], 1e-5);
        }
      }
    }
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

// Windows that start mid-block and mid-partition, with the blocks before every
// query's window taken away (the null block, poisoned: reading it would show).
TEST(PagedAttentionTest, SlidingWindowFastMatchesReference) {
  ThreadPool pool(3);
  for (int32_t window : {1, 5, 16, 23}) {
    PagedStep step({37, 11, 1, 60, 16}, {12, 11, 1, 1, 1}, 31);
    const size_t block_elems = static_cast<size_t>(step.kv_heads) * step.block_size * step.head_dim;
    std::fill_n(step.k_cache.begin(), block_elems, std::nanf(""));
    std::fill_n(step.v_cache.begin(), block_elems, std::nanf(""));
    for (size_t s = 0; s < step.context_lens.size(); ++s) {
      const int32_t first_query = step.context_lens[s] - step.query_lens[s];
      const int32_t needed = std::max(0, first_query - window + 1);
      for (int32_t b = 0; (b + 1) * step.block_size <= needed; ++b) {
        step.block_tables[s * step.max_blocks + b] = 0;
      }
    }
    std::vector<float> ref(step.q.size());
    PagedAttentionParams<float> r = step.Params(ref.data());
    r.kv.sliding_window = window;
    PagedAttentionRef(r);
    for (int32_t partition : {0, 4, 8, 16}) {
      std::vector<float> fast(step.q.size(), 0.0f);
      PagedAttentionParams<float> p = step.Params(fast.data());
      p.kv.sliding_window = window;
      std::vector<float> po, pm, ps;
      if (partition > 0) {
        p.partition_size = partition;
        p.max_partitions = (60 + partition - 1) / partition;
        const size_t slots = step.positions.size() * step.heads * p.max_partitions;
        po.assign(slots * step.head_dim, std::nanf(""));
        pm.assign(slots, std::nanf(""));
        ps.assign(slots, std::nanf(""));
        p.partial_out = po.data();
        p.partial_max = pm.data();
        p.partial_sum = ps.data();
      }
      PagedAttention(p, pool);
      SCOPED_TRACE(testing::Message() << "window " << window << " partition " << partition);
      ExpectClose(fast, ref, 1e-5f, 1e-4f);
    }
  }
}

// A windowed prompt through the query tiles gives each token what the
// per-token (decode) path gives it alone over the same cache: windows that
// start mid-block, mid-chunk and mid-tile, with Gemma 3's 1/sqrt(256)-style
// scale instead of 1/sqrt(head_dim).
TEST(PagedAttentionTest, SlidingWindowTiledPrefillMatchesPerTokenPath) {
  ThreadPool pool(2);
  for (int32_t window : {3, 16, 23, 50}) {
    PagedStep whole({130}, {75}, 60 + window, Shape{6, 2, 16, 4, 64});
    std::vector<float> tiled(whole.q.size(), 0.0f);
    PagedAttentionParams<float> p = whole.Params(tiled.data());
    p.kv.sliding_window = window;
    p.scale = 0.0625f;
    PagedAttention(p, pool);
    const size_t row = static_cast<size_t>(whole.heads) * whole.head_dim;
    for (size_t t = 0; t < whole.positions.size(); ++t) {
      PagedStep one = whole;
      one.context_lens = {whole.positions[t] + 1};
      one.query_lens = {1};
      one.query_start = {0, 1};
      one.positions = {whole.positions[t]};
      one.slots = {whole.slots[t]};
      one.q.assign(whole.q.begin() + t * row, whole.q.begin() + (t + 1) * row);
      std::vector<float> alone(row, 0.0f);
      PagedAttentionParams<float> d = one.Params(alone.data());
      d.kv.sliding_window = window;
      d.scale = 0.0625f;
      PagedAttention(d, pool);
      SCOPED_TRACE(testing::Message() << "window " << window << " token " << t);
      ExpectClose(std::vector<float>(tiled.begin() + t * row, tiled.begin() + (t + 1) * row), alone,
                  1e-5f, 1e-4f);
    }
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
