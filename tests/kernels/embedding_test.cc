#include "kernels/embedding.h"

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

}  // namespace
}  // namespace loom::kernels::cpu
