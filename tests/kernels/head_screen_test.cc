#include "kernels/cpu/head_screen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/matmul_quant.h"
#include "kernels/cpu/matmul_quant_blocks.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/random_blocks.h"

namespace loom::kernels::cpu {
namespace {

constexpr int32_t kK = 640;
constexpr int64_t kRowBytes = kK / 32 * sizeof(BlockQ8_0);

// A Q8_0 head and its screen.
struct Head {
  int32_t n;
  std::vector<std::byte> w;
  HeadScreen screen;

  void Rebuild(ThreadPool& pool) {
    screen = HeadScreen::Build(
        n, kK,
        [this](int64_t begin, int64_t count, float* out) {
          DequantizeBlocks(QuantType::kQ8_0, w.data() + begin * kRowBytes, count * kK, out);
        },
        pool);
  }
};

Head RandomHead(int32_t n, uint32_t seed, ThreadPool& pool) {
  Head h{n, RandomBlocks(QuantType::kQ8_0, static_cast<int64_t>(n) * kK / 32, seed), {}};
  h.Rebuild(pool);
  return h;
}

// Rows of x like a final norm's output: mostly small, a few large values.
std::vector<float> RandomX(int32_t m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m) * kK);
  for (float& v : x) v = normal(rng);
  for (int32_t i = 0; i < m; ++i) x[static_cast<size_t>(i) * kK + rng() % kK] *= 40.0f;
  return x;
}

std::vector<float> Logits(const Head& h, const std::vector<float>& x, int32_t m, ThreadPool& pool) {
  std::vector<float> logits(static_cast<size_t>(m) * h.n);
  MatmulQuant({.x = x.data(),
               .w = h.w.data(),
               .type = QuantType::kQ8_0,
               .y = logits.data(),
               .m = m,
               .n = h.n,
               .k = kK,
               .ldx = kK,
               .ldy = h.n},
              pool);
  return logits;
}

std::vector<std::vector<int32_t>> Candidates(const Head& h, const std::vector<float>& x, int32_t m,
                                             ThreadPool& pool) {
  std::vector<std::vector<int32_t>> out;
  EXPECT_TRUE(h.screen.Candidates(x.data(), m, kK, pool, out));
  EXPECT_EQ(out.size(), static_cast<size_t>(m));
  return out;
}

// Every row of W holding row i's largest float32 logit is a candidate, and
// the candidates are ascending.
void ExpectHoldsTheMaximum(const std::vector<float>& logits, int32_t n,
                           const std::vector<std::vector<int32_t>>& candidates) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    const float* row = logits.data() + i * n;
    const float best = *std::max_element(row, row + n);
    const std::vector<int32_t>& c = candidates[i];
    ASSERT_FALSE(c.empty()) << "row " << i;
    EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
    for (int32_t j = 0; j < n; ++j) {
      if (row[j] == best) {
        EXPECT_TRUE(std::binary_search(c.begin(), c.end(), j)) << "row " << i << " id " << j;
      }
    }
  }
}

TEST(HeadScreen, CandidatesHoldTheMaximumAndAreFew) {
  ThreadPool pool(3);
  const Head h = RandomHead(5003, 1, pool);
  ASSERT_TRUE(h.screen.Ready());
  for (int32_t m : {1, 3, 8, 9, 16, 17}) {
    const std::vector<float> x = RandomX(m, 100 + m);
    const auto candidates = Candidates(h, x, m, pool);
    ExpectHoldsTheMaximum(Logits(h, x, m, pool), h.n, candidates);
    for (const auto& c : candidates) EXPECT_LE(c.size(), 64u) << "m=" << m;
  }
}

TEST(HeadScreen, TiedRowsAreAllCandidates) {
  ThreadPool pool(2);
  Head h = RandomHead(3001, 2, pool);
  const std::vector<float> x = RandomX(4, 7);
  std::vector<float> logits = Logits(h, x, 4, pool);
  const int32_t winner =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + h.n) - logits.begin());
  for (int32_t copy : {3, 2999}) {
    if (copy != winner) {
      std::memcpy(h.w.data() + copy * kRowBytes, h.w.data() + winner * kRowBytes, kRowBytes);
    }
  }
  h.Rebuild(pool);
  const auto candidates = Candidates(h, x, 4, pool);
  ExpectHoldsTheMaximum(Logits(h, x, 4, pool), h.n, candidates);
  EXPECT_TRUE(std::binary_search(candidates[0].begin(), candidates[0].end(), 3));
}

TEST(HeadScreen, NearTiesAndZeroRows) {
  ThreadPool pool(2);
  Head h = RandomHead(2048, 3, pool);
  std::vector<float> x = RandomX(3, 9);
  // Row 1 of x is all zeros: every logit ties, so the screen cannot help.
  std::fill(x.begin() + kK, x.begin() + 2 * kK, 0.0f);
  // Row 2's winner gets a neighbour that differs in one quant of one block.
  std::vector<float> logits = Logits(h, x, 3, pool);
  const float* row2 = logits.data() + 2 * h.n;
  const auto winner = static_cast<int32_t>(std::max_element(row2, row2 + h.n) - row2);
  const int32_t other = winner == 0 ? 1 : 0;
  std::memcpy(h.w.data() + other * kRowBytes, h.w.data() + winner * kRowBytes, kRowBytes);
  auto* block = reinterpret_cast<BlockQ8_0*>(h.w.data() + other * kRowBytes);
  block->qs[5] = static_cast<int8_t>(block->qs[5] == 127 ? 126 : block->qs[5] + 1);
  h.Rebuild(pool);
  std::vector<std::vector<int32_t>> candidates = Candidates(h, x, 3, pool);
  EXPECT_TRUE(candidates[1].empty());
  EXPECT_TRUE(std::binary_search(candidates[2].begin(), candidates[2].end(), winner));
  EXPECT_TRUE(std::binary_search(candidates[2].begin(), candidates[2].end(), other));
  candidates.erase(candidates.begin() + 1);
  x.erase(x.begin() + kK, x.begin() + 2 * kK);
  ExpectHoldsTheMaximum(Logits(h, x, 2, pool), h.n, candidates);
}

TEST(HeadScreen, NonFiniteValuesAndShapesItCannotScreen) {
  ThreadPool pool(2);
  Head h = RandomHead(256, 4, pool);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = RandomX(2, 5);
    x[kK + 17] = bad;
    std::vector<std::vector<int32_t>> out = {{42}};
    EXPECT_FALSE(h.screen.Candidates(x.data(), 2, kK, pool, out));
    EXPECT_EQ(out, std::vector<std::vector<int32_t>>{{42}});
  }
  // A scale of +inf (fp16 0x7c00) in W.
  const uint16_t inf = 0x7c00;
  std::memcpy(h.w.data() + 7 * kRowBytes, &inf, sizeof(inf));
  h.Rebuild(pool);
  EXPECT_FALSE(h.screen.Ready());
  const auto zeros = [](int64_t, int64_t count, float* out) { std::fill_n(out, count * 48, 0.f); };
  EXPECT_FALSE(HeadScreen::Build(4, 48, zeros, pool).Ready());  // k not a multiple of 32
  EXPECT_FALSE(HeadScreen::Build(4, HeadScreen::kMaxK + 32, zeros, pool).Ready());
  EXPECT_TRUE(HeadScreen::Build(4, 64, zeros, pool).Ready());
}

}  // namespace
}  // namespace loom::kernels::cpu
