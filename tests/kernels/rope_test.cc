#include "kernels/rope.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace loom::kernels::cpu {
namespace {

TEST(RopeInvFreqTest, PlainThetaAndLlama3Scaling) {
  std::vector<float> plain(64);
  ComputeRopeInvFreq(500000.0f, 128, RopeScaling{}, plain.data());
  EXPECT_FLOAT_EQ(plain[0], 1.0f);
  EXPECT_NEAR(plain[10], std::pow(500000.0, -20.0 / 128), 1e-7);

  RopeScaling llama3{RopeScalingType::kLlama3, 8.0f, 1.0f, 4.0f, 8192};
  std::vector<float> scaled(64);
  ComputeRopeInvFreq(500000.0f, 128, llama3, scaled.data());
  // Wavelengths shorter than 8192 / 4 keep their frequency, longer than 8192
  // are slowed by the factor, and those between are interpolated.
  for (int i = 0; i < 64; ++i) {
    const double wavelen = 2 * M_PI / plain[i];
    if (wavelen < 2048) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i]) << i;
    }
    if (wavelen > 8192) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i] / 8) << i;
    }
    if (wavelen > 2048 && wavelen < 8192) {
      EXPECT_LT(scaled[i], plain[i]);
      EXPECT_GT(scaled[i], plain[i] / 8);
    }
  }
  RopeScaling linear{RopeScalingType::kLinear, 4.0f};
  std::vector<float> lin(64);
  ComputeRopeInvFreq(10000.0f, 128, linear, lin.data());
  EXPECT_FLOAT_EQ(lin[0], 0.25f);
}

TEST(RopeKvWriteTest, RotatesHalvesAndWritesTheSlots) {
  ThreadPool pool(2);
  const int32_t heads = 4;
  const int32_t kv_heads = 2;
  const int32_t head_dim = 8;
  const int32_t block_size = 4;
  const int32_t num_blocks = 6;
  const int32_t tokens = 5;
  const int32_t stride = (heads + 2 * kv_heads) * head_dim;
  std::vector<float> inv_freq(head_dim / 2);
  ComputeRopeInvFreq(10000.0f, head_dim, RopeScaling{}, inv_freq.data());
  const std::vector<float> qkv0 = RandomVector(static_cast<size_t>(tokens) * stride, 9);
  const std::vector<int32_t> positions = {0, 1, 7, 12, 3};
  const std::vector<int32_t> slots = {4, 5, 23, 8, 17};
  const size_t cache_size = static_cast<size_t>(num_blocks) * kv_heads * block_size * head_dim;

  std::vector<float> qkv_ref = qkv0;
  std::vector<float> qkv_fast = qkv0;
  std::vector<float> k_ref(cache_size, 0.0f), v_ref(cache_size, 0.0f);
  std::vector<float> k_fast(cache_size, 0.0f), v_fast(cache_size, 0.0f);
  auto params = [&](std::vector<float>& qkv, std::vector<float>& k, std::vector<float>& v) {
    RopeKvWriteParams<float> p;
    p.q = qkv.data();
    p.k = qkv.data() + heads * head_dim;
    p.v = qkv.data() + (heads + kv_heads) * head_dim;
    p.q_stride = p.k_stride = p.v_stride = stride;
    p.num_heads = heads;
    p.inv_freq = inv_freq.data();
    p.kv.k_cache = k.data();
    p.kv.v_cache = v.data();
    p.kv.num_blocks = num_blocks;
    p.kv.num_kv_heads = kv_heads;
    p.kv.block_size = block_size;
    p.kv.head_dim = head_dim;
    p.kv.positions = positions.data();
    p.kv.slot_mapping = slots.data();
    p.kv.num_tokens = tokens;
    return p;
  };
  RopeKvWriteRef(params(qkv_ref, k_ref, v_ref));
  RopeKvWrite(params(qkv_fast, k_fast, v_fast), pool);
  EXPECT_EQ(qkv_fast, qkv_ref);
  EXPECT_EQ(k_fast, k_ref);
  EXPECT_EQ(v_fast, v_ref);

  // Independent check of token 2, query head 1 and kv head 1, as complex
  // rotations of the pairs (i, i + d/2).
  const int32_t t = 2;
  const int32_t half = head_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    const double angle = positions[t] * std::pow(10000.0, -2.0 * i / head_dim);
    const float* q0 = qkv0.data() + t * stride + 1 * head_dim;
    const double re = q0[i] * std::cos(angle) - q0[i + half] * std::sin(angle);
    const double im = q0[i + half] * std::cos(angle) + q0[i] * std::sin(angle);
    EXPECT_NEAR(qkv_ref[t * stride + head_dim + i], re, 1e-5);
    EXPECT_NEAR(qkv_ref[t * stride + head_dim + i + half], im, 1e-5);
    const float* k0 = qkv0.data() + t * stride + (heads + 1) * head_dim;
    const size_t k_at = ((static_cast<size_t>(slots[t] / block_size) * kv_heads + 1) * block_size +
                         slots[t] % block_size) *
                        head_dim;
    EXPECT_NEAR(k_ref[k_at + i], k0[i] * std::cos(angle) - k0[i + half] * std::sin(angle), 1e-5);
    const float* v0 = qkv0.data() + t * stride + (heads + kv_heads + 1) * head_dim;
    EXPECT_EQ(v_ref[k_at + i], v0[i]);
  }
  // The query rows of K/V were left alone: V is only copied.
  EXPECT_EQ(qkv_ref[t * stride + (heads + kv_heads) * head_dim],
            qkv0[t * stride + (heads + kv_heads) * head_dim]);
}

}  // namespace
}  // namespace loom::kernels::cpu
