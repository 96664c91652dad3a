#include "kernels/rope.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/parallel.h"

namespace loom::kernels {
namespace {

void Rotate(float* x, const float* cos_t, const float* sin_t, int32_t half) {
  for (int32_t i = 0; i < half; ++i) {
    const float a = x[i];
    const float b = x[i + half];
    x[i] = a * cos_t[i] - b * sin_t[i];
    x[i + half] = b * cos_t[i] + a * sin_t[i];
  }
}

// Rotates and stores token t's heads; cos_t / sin_t are scratch of head_dim / 2.
void RopeToken(const RopeKvWriteParams<float>& p, int64_t t, float* cos_t, float* sin_t) {
  const PagedKv<float>& kv = p.kv;
  const int32_t half = kv.head_dim / 2;
  const float pos = static_cast<float>(kv.positions[t]);
  for (int32_t i = 0; i < half; ++i) {
    const float angle = pos * p.inv_freq[i];
    cos_t[i] = std::cos(angle);
    sin_t[i] = std::sin(angle);
  }
  for (int32_t h = 0; h < p.num_heads; ++h) {
    Rotate(p.q + t * p.q_stride + static_cast<int64_t>(h) * kv.head_dim, cos_t, sin_t, half);
  }
  const int32_t slot = kv.slot_mapping[t];
  LOOM_CHECK(slot >= kv.block_size && slot < kv.num_blocks * kv.block_size) << "slot " << slot;
  for (int32_t h = 0; h < kv.num_kv_heads; ++h) {
    float* k_dst = kv.k_cache + kv.SlotOffset(slot, h);
    float* v_dst = kv.v_cache + kv.SlotOffset(slot, h);
    const float* k_src = p.k + t * p.k_stride + static_cast<int64_t>(h) * kv.head_dim;
    const float* v_src = p.v + t * p.v_stride + static_cast<int64_t>(h) * kv.head_dim;
    for (int32_t d = 0; d < kv.head_dim; ++d) {
      k_dst[d] = k_src[d];
      v_dst[d] = v_src[d];
    }
    Rotate(k_dst, cos_t, sin_t, half);
  }
}

}  // namespace

void ComputeRopeInvFreq(float theta, int32_t head_dim, const RopeScaling& scaling,
                        float* inv_freq) {
  constexpr float kPi = 3.14159265358979323846f;
  const int32_t half = head_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    float f = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    switch (scaling.type) {
      case RopeScalingType::kNone:
        break;
      case RopeScalingType::kLinear:
        f /= scaling.factor;
        break;
      case RopeScalingType::kLlama3: {
        const float old_len = static_cast<float>(scaling.original_max_position);
        const float low_freq_wavelen = old_len / scaling.low_freq_factor;
        const float high_freq_wavelen = old_len / scaling.high_freq_factor;
        const float wavelen = 2.0f * kPi / f;
        if (wavelen > low_freq_wavelen) {
          f /= scaling.factor;
        } else if (wavelen >= high_freq_wavelen) {
          const float smooth = (old_len / wavelen - scaling.low_freq_factor) /
                               (scaling.high_freq_factor - scaling.low_freq_factor);
          f = (1.0f - smooth) * f / scaling.factor + smooth * f;
        }
        break;
      }
    }
    inv_freq[i] = f;
  }
}

namespace cpu {

void RopeKvWriteRef(const RopeKvWriteParams<float>& p) {
  std::vector<float> cos_t(p.kv.head_dim / 2);
  std::vector<float> sin_t(p.kv.head_dim / 2);
  for (int32_t t = 0; t < p.kv.num_tokens; ++t) RopeToken(p, t, cos_t.data(), sin_t.data());
}

void RopeKvWrite(const RopeKvWriteParams<float>& p, ParallelFor& pool) {
  LOOM_CHECK_EQ(p.kv.head_dim % 2, 0);
  pool.Run(p.kv.num_tokens, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(p.kv.head_dim);
    for (int64_t t = begin; t < end; ++t) {
      RopeToken(p, t, scratch.data(), scratch.data() + p.kv.head_dim / 2);
    }
  });
}

}  // namespace cpu
}  // namespace loom::kernels
