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

// Rows whose large values span more channels than the int8 screen keeps in
// int16, or are so large that the int16 channels set the scale (where AVX-512
// VNNI and VBMI run the int8 screen; elsewhere the int16 one).
TEST(HeadScreen, ManyAndHugeLargeChannels) {
  ThreadPool pool(2);
  const Head h = RandomHead(4099, 5, pool);
  std::mt19937 rng(11);
  for (float factor : {40.0f, 3e4f, 1e7f}) {
    for (int32_t large : {1, 31, 33, 80}) {
      constexpr int32_t kM = 9;
      std::vector<float> x = RandomX(kM, 20 + large);
      for (int32_t i = 0; i < kM; ++i) {
        // Shared channels (as a final norm's are) and a row's own.
        for (int32_t c = 0; c < large; ++c) x[static_cast<size_t>(i) * kK + c * 7] *= factor;
        x[static_cast<size_t>(i) * kK + rng() % kK] *= factor;
      }
      const auto candidates = Candidates(h, x, kM, pool);
      ExpectHoldsTheMaximum(Logits(h, x, kM, pool), h.n, candidates);
    }
  }
  // Every value the same, and one row all zeros but for a channel.
  std::vector<float> x(static_cast<size_t>(2) * kK, 0.5f);
  std::fill(x.begin() + kK, x.end(), 0.0f);
  x[kK + 100] = -3.0f;
  ExpectHoldsTheMaximum(Logits(h, x, 2, pool), h.n, Candidates(h, x, 2, pool));
}

// W exact in int8 (every bound term but x's rounding is about zero), and
// rows of x whose rounding to int8 would reverse the two best rows: row 0's
// score gains 4 where its logit gains 2.06, row 1's 2 where its logit gains
// 2.75. The winner is a candidate only if x's rounding error is bounded.
TEST(HeadScreen, RoundingOfXIsBounded) {
  ThreadPool pool(2);
  constexpr int32_t kN = 64;
  constexpr uint16_t kD = 0x2c00;  // 0.0625 in fp16
  Head h{kN, std::vector<std::byte>(static_cast<size_t>(kN) * kRowBytes), {}};
  auto q = [&h](int32_t row, int32_t c) -> int8_t& {
    auto* b = reinterpret_cast<BlockQ8_0*>(h.w.data() + row * kRowBytes) + c / 32;
    return b->qs[c % 32];
  };
  for (int32_t row = 0; row < kN; ++row) {
    for (int32_t b = 0; b < kK / 32; ++b) {
      reinterpret_cast<BlockQ8_0*>(h.w.data() + row * kRowBytes)[b].d = kD;
    }
    q(row, 0) = 127;
    if (row >= 2) q(row, 1) = -1;
  }
  for (int32_t c : {100, 102, 104, 106}) q(0, c) = 1;
  for (int32_t c : {101, 103}) q(1, c) = 1;
  h.Rebuild(pool);
  // 40 channels at 127 (more than the int16 ones), so x's int8 scale is 1.
  std::vector<float> x(kK, 0.0f);
  std::fill_n(x.begin(), 40, 127.0f);
  for (int32_t c : {100, 102, 104, 106}) x[c] = 0.515625f;
  for (int32_t c : {101, 103}) x[c] = 1.375f;
  const std::vector<float> logits = Logits(h, x, 1, pool);
  ASSERT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), 1);
  ExpectHoldsTheMaximum(logits, h.n, Candidates(h, x, 1, pool));
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
