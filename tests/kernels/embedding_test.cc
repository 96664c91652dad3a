#include "kernels/embedding.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

TEST(EmbeddingTest, CopiesTheRowOfEachToken) {
  ThreadPool pool(2);
  const int32_t vocab = 50;
  const int32_t hidden = 24;
  const std::vector<float> table = RandomVector(static_cast<size_t>(vocab) * hidden, 6);
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 17) % vocab);
  std::vector<float> ref(ids.size() * hidden);
  std::vector<float> fast(ref.size());
  EmbeddingParams<float> p{ids.data(), table.data(), ref.data(), static_cast<int32_t>(ids.size()),
                           hidden,     vocab};
  EmbeddingRef(p);
  p.out = fast.data();
  Embedding(p, pool);
  EXPECT_EQ(fast, ref);
  for (int32_t d = 0; d < hidden; ++d) EXPECT_EQ(ref[3 * hidden + d], table[ids[3] * hidden + d]);
}

// Gemma's scaled embedding: each value times the scale, rounded as float32.
TEST(EmbeddingTest, ScalesTheRows) {
  ThreadPool pool(2);
  const int32_t vocab = 20, hidden = 16;
  const std::vector<float> table = RandomVector(static_cast<size_t>(vocab) * hidden, 7);
  const std::vector<int32_t> ids = {3, 19, 0, 3};
  std::vector<float> out(ids.size() * hidden);
  const float scale = std::sqrt(640.0f);
  EmbeddingParams<float> p{ids.data(), table.data(), out.data(), 4, hidden, vocab, scale};
  Embedding(p, pool);
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int32_t d = 0; d < hidden; ++d) {
      EXPECT_EQ(out[t * hidden + d], table[ids[t] * hidden + d] * scale);
    }
  }
}

}  // namespace
}  // namespace loom::kernels::cpu
