#include "kernels/softmax.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

TEST(SoftmaxTest, RowsSumToOneAndMatchReference) {
  ThreadPool pool(2);
  const int32_t rows = 5;
  const int32_t cols = 1001;
  const int32_t ld = 1003;
  const std::vector<float> x = RandomVector(static_cast<size_t>(rows) * ld, 5, -30, 30);
  std::vector<float> ref(x.size(), 0.0f);
  std::vector<float> fast(x.size(), 0.0f);
  SoftmaxRef({x.data(), ref.data(), rows, cols, ld});
  Softmax({x.data(), fast.data(), rows, cols, ld}, pool);
  ExpectClose(fast, ref, 1e-7f, 1e-5f);
  for (int32_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int32_t c = 0; c < cols; ++c) sum += fast[static_cast<size_t>(r) * ld + c];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(SoftmaxTest, LogSoftmaxIsLogOfSoftmaxAndStableForLargeLogits) {
  const std::vector<float> x = {1000.0f, 1001.0f, 999.0f};
  std::vector<float> sm(3);
  std::vector<float> lsm(3);
  SoftmaxRef({x.data(), sm.data(), 1, 3, 3});
  LogSoftmaxRef({x.data(), lsm.data(), 1, 3, 3});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(lsm[i], std::log(sm[i]), 1e-5f);
  EXPECT_GT(sm[1], sm[0]);
}

}  // namespace
}  // namespace loom::kernels::cpu
