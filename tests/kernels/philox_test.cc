#include "kernels/philox.h"

#include "gtest/gtest.h"

namespace loom::kernels {
namespace {

// Known-answer vectors of the Random123 distribution (kat_vectors, philox4x32 10).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  const Philox4x32Result zero = Philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  const Philox4x32Result ones = Philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
  const Philox4x32Result pi =
      Philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(PhiloxTest, UniformIsInUnitIntervalAndDependsOnSeedAndStep) {
  double sum = 0.0;
  for (uint64_t step = 0; step < 10000; ++step) {
    const float u = PhiloxUniform(42, step, 0);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_EQ(PhiloxUniform(7, 3, 0), PhiloxUniform(7, 3, 0));
  EXPECT_NE(PhiloxUniform(7, 3, 0), PhiloxUniform(8, 3, 0));
  EXPECT_NE(PhiloxUniform(7, 3, 0), PhiloxUniform(7, 4, 0));
  EXPECT_NE(PhiloxUniform(7ull << 32, 3, 0), PhiloxUniform(7, 3, 0));
}

}  // namespace
}  // namespace loom::kernels
