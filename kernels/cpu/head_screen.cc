#include "kernels/cpu/head_screen.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <utility>

#include "base/check.h"
#include "kernels/cpu/cpu_features.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kChunk = 32;
constexpr float kWMax = 127.0f;
constexpr float kXMax = 32767.0f;
// Rows of x scored together (their sums stay in registers).
constexpr int kRowsPerPass = 8;
constexpr int64_t kBuildRowsPerTask = 256;
constexpr int64_t kScanRowsPerTask = 512;
// Rounding of the float32 sum and of the score (header, c_i), per product.
const double kUnit = std::ldexp(1.0, -24);
// Slack for evaluating the bound itself in float.
constexpr double kBoundSlack = 1.001;

// A double as the smallest float at or above it.
float Up(double v) {
  const auto f = static_cast<float>(v);
  return static_cast<double>(f) >= v ? f : std::nextafter(f, std::numeric_limits<float>::max());
}

// Rounds v[0, k) to q = round(v / s), s = max|v| / qmax; returns s and sets
// err to max|v - s q| (exact, in double). False for a non-finite value.
template <class Q>
bool RoundRow(const float* v, int32_t k, float qmax, Q* q, float& scale, double& err,
              double& abs_sum) {
  float amax = 0.0f;
  abs_sum = 0.0;
  for (int32_t c = 0; c < k; ++c) {
    if (!std::isfinite(v[c])) return false;
    amax = std::max(amax, std::fabs(v[c]));
    abs_sum += std::fabs(static_cast<double>(v[c]));
  }
  scale = amax / qmax;
  err = 0.0;
  for (int32_t c = 0; c < k; ++c) {
    const float r = scale > 0.0f ? std::nearbyint(v[c] / scale) : 0.0f;
    q[c] = static_cast<Q>(std::clamp(r, -qmax, qmax));
    err = std::max(err, std::fabs(static_cast<double>(v[c]) -
                                  static_cast<double>(scale) * static_cast<double>(q[c])));
  }
  return true;
}

void DotsScalar(const int8_t* w, int32_t k, const int16_t* p, int64_t ldp, int rows, int32_t* out) {
  for (int i = 0; i < rows; ++i) {
    int64_t sum = 0;
    for (int32_t c = 0; c < k; ++c) sum += w[c] * p[i * ldp + c];
    out[i] = static_cast<int32_t>(sum);
  }
}

#define LOOM_SCREEN_AVX2 __attribute__((target("avx2")))

// Lane i: the sum of the lanes of v[i].
LOOM_SCREEN_AVX2 inline __m256i LaneSums(const __m256i (&v)[kRowsPerPass]) {
  // Lane i of s0123's low half: the sum of v[i]'s lanes 0-3, high half
  // lanes 4-7 (i < 4); the same for s4567.
  const __m256i s0123 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i s4567 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                          _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

// Each vpmaddwd lane adds two products of at most 127 * 32767, and a lane
// sums k / 8 products: below 2^31 for k <= kMaxK. Lane i of the result is
// row i's sum (rows from R on are zero).
template <int R>
LOOM_SCREEN_AVX2 __m256i DotsAvx2(const int8_t* w, int32_t k, const int16_t* p, int64_t ldp) {
  __m256i acc[kRowsPerPass];
#pragma GCC unroll 8
  for (int i = 0; i < kRowsPerPass; ++i) acc[i] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int32_t c = 0; c < k; c += kChunk) {
    const __m256i lo =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c)));
    const __m256i hi =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c + 16)));
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const int16_t* pi = p + i * ldp + c;
      acc[i] = _mm256_add_epi32(
          acc[i],
          _mm256_add_epi32(
              _mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pi))),
              _mm256_madd_epi16(hi,
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pi + 16)))));
    }
  }
  return LaneSums(acc);
}

// GCC 12 warns (-Wuninitialized) inside the AVX-512 extract and cast
// intrinsics, which are built on _mm512_undefined_*; the warning is about the
// header (as in matmul_quant.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define LOOM_SCREEN_VNNI __attribute__((target("avx2,avx512f,avx512bw,avx512vnni")))

// DotsAvx2 with AVX-512 VNNI: one vpdpwssd multiplies a row's 32 int16
// values by a chunk of W and adds the pairs into its 16 int32 sums, where
// AVX2 needs two vpmaddwd and two vpaddd. A lane sums k / 16 products, each at
// most 127 * 32767: below 2^31 for k <= kMaxK. The same exact sums.
template <int R>
LOOM_SCREEN_VNNI __m256i DotsVnni(const int8_t* w, int32_t k, const int16_t* p, int64_t ldp) {
  __m512i acc[kRowsPerPass];
#pragma GCC unroll 8
  for (int i = 0; i < kRowsPerPass; ++i) acc[i] = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int32_t c = 0; c < k; c += kChunk) {
    const __m512i wc =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c)));
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      acc[i] = _mm512_dpwssd_epi32(acc[i], wc, _mm512_loadu_si512(p + i * ldp + c));
    }
  }
  __m256i half[kRowsPerPass];
#pragma GCC unroll 8
  for (int i = 0; i < kRowsPerPass; ++i) {
    half[i] =
        _mm256_add_epi32(_mm512_castsi512_si256(acc[i]), _mm512_extracti64x4_epi64(acc[i], 1));
  }
  return LaneSums(half);
}

#pragma GCC diagnostic pop

using DotsFn = __m256i (*)(const int8_t*, int32_t, const int16_t*, int64_t);

constexpr DotsFn kAvx2Dots[kRowsPerPass] = {&DotsAvx2<1>, &DotsAvx2<2>, &DotsAvx2<3>, &DotsAvx2<4>,
                                            &DotsAvx2<5>, &DotsAvx2<6>, &DotsAvx2<7>, &DotsAvx2<8>};
constexpr DotsFn kVnniDots[kRowsPerPass] = {&DotsVnni<1>, &DotsVnni<2>, &DotsVnni<3>, &DotsVnni<4>,
                                            &DotsVnni<5>, &DotsVnni<6>, &DotsVnni<7>, &DotsVnni<8>};

// The VNNI dots where the AVX-512 level is in use (LOOM_SIMD=avx2 keeps AVX2)
// and the CPU has AVX-512 VNNI.
const DotsFn* ScreenDots() {
#if defined(__x86_64__)
  static const bool vnni =
      DetectedSimd() == SimdLevel::kAvx512 && __builtin_cpu_supports("avx512vnni");
  if (vnni) return kVnniDots;
#endif
  return kAvx2Dots;
}

}  // namespace

// What a task (or all of them, merged) keeps per row of x: the largest lower
// bound seen and the rows of W whose upper bound reached it.
struct HeadScreen::RowCandidates {
  float lower = -std::numeric_limits<float>::infinity();
  std::vector<std::pair<int32_t, float>> rows;  // (row of W, upper bound)

  void Offer(int32_t j, float score, float bound) {
    lower = std::max(lower, score - bound);
    if (score + bound >= lower) Keep(j, score + bound);
  }
  void Keep(int32_t j, float upper) {
    rows.emplace_back(j, upper);
    // Drop the rows a higher lower bound has since ruled out.
    if (rows.size() % 64 == 0) Prune();
  }
  void Prune() {
    std::erase_if(rows, [this](const auto& r) { return r.second < lower; });
  }
};

LOOM_SCREEN_AVX2 void HeadScreen::ScanAvx2(const int16_t* p, const float* t, const float* coef_w,
                                           const float* coef_e, int32_t m, int64_t begin,
                                           int64_t end, std::vector<RowCandidates>& local) const {
  const int32_t k = k_;
  const int32_t passes = (m + kRowsPerPass - 1) / kRowsPerPass;
  std::vector<float> lower(static_cast<size_t>(passes) * kRowsPerPass,
                           -std::numeric_limits<float>::infinity());
  alignas(32) float upper[kRowsPerPass];
  const DotsFn* const dots_of = ScreenDots();
  for (int64_t j = begin; j < end; ++j) {
    const int8_t* w = &q_[static_cast<size_t>(j) * k];
    const __m256 sj = _mm256_set1_ps(scale_[j]);
    const __m256 wj = _mm256_set1_ps(weight_[j]);
    const __m256 ej = _mm256_set1_ps(err_[j]);
    for (int32_t pass = 0; pass < passes; ++pass) {
      const int32_t i0 = pass * kRowsPerPass;
      const int rows = std::min(kRowsPerPass, m - i0);
      const __m256i dots = dots_of[rows - 1](w, k, p + static_cast<size_t>(i0) * k, k);
      const __m256 score =
          _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dots), sj), _mm256_loadu_ps(t + i0));
      const __m256 bound = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(coef_w + i0), wj),
                                         _mm256_mul_ps(_mm256_loadu_ps(coef_e + i0), ej));
      const __m256 lo = _mm256_max_ps(_mm256_loadu_ps(&lower[i0]), _mm256_sub_ps(score, bound));
      _mm256_storeu_ps(&lower[i0], lo);
      const __m256 hi = _mm256_add_ps(score, bound);
      int mask = _mm256_movemask_ps(_mm256_cmp_ps(hi, lo, _CMP_GE_OQ)) & ((1 << rows) - 1);
      if (mask == 0) continue;
      _mm256_store_ps(upper, hi);
      for (; mask != 0; mask &= mask - 1) {
        const int r = __builtin_ctz(static_cast<unsigned>(mask));
        RowCandidates& c = local[i0 + r];
        c.lower = lower[i0 + r];
        c.Keep(static_cast<int32_t>(j), upper[r]);
      }
    }
  }
  for (int32_t i = 0; i < m; ++i) local[i].lower = lower[i];
}

HeadScreen HeadScreen::Build(int32_t n, int32_t k, const RowSource& rows, ParallelFor& pool) {
  HeadScreen s;
  if (n <= 0 || k <= 0 || k % kChunk != 0 || k > kMaxK) return s;
  s.q_.resize(static_cast<size_t>(n) * k);
  s.scale_.resize(n);
  s.err_.resize(n);
  s.weight_.resize(n);
  std::atomic<bool> finite{true};
  pool.Run(n, kBuildRowsPerTask, [&](int64_t begin, int64_t end) {
    std::vector<float> values(static_cast<size_t>(end - begin) * k);
    rows(begin, end - begin, values.data());
    for (int64_t j = begin; j < end; ++j) {
      double err = 0.0, abs_sum = 0.0;
      if (!RoundRow(&values[static_cast<size_t>(j - begin) * k], k, kWMax,
                    &s.q_[static_cast<size_t>(j) * k], s.scale_[j], err, abs_sum)) {
        finite = false;
        return;
      }
      s.err_[j] = Up(err);
      s.weight_[j] = Up(abs_sum + static_cast<double>(k) * s.err_[j]);
    }
  });
  if (!finite) return HeadScreen();
  s.n_ = n;
  s.k_ = k;
  return s;
}

int64_t HeadScreen::NumBytes() const {
  return static_cast<int64_t>(q_.size()) + 12 * static_cast<int64_t>(scale_.size());
}

bool HeadScreen::Candidates(const float* x, int32_t m, int32_t ldx, ParallelFor& pool,
                            std::vector<std::vector<int32_t>>& out) const {
  LOOM_CHECK(Ready());
  const int32_t k = k_;
  // x rounded to int16 per row, and each row's two bound coefficients:
  // B_ij = coef_w[i] * weight_[j] + coef_e[i] * err_[j].
  std::vector<int16_t> p(static_cast<size_t>(m) * k);
  // Padded to whole passes for the vector loads (the rows past m are zero).
  const int32_t padded = (m + kRowsPerPass - 1) / kRowsPerPass * kRowsPerPass;
  std::vector<float> t(padded, 0.0f), coef_w(padded, 0.0f), coef_e(padded, 0.0f);
  for (int32_t i = 0; i < m; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * ldx;
    double r = 0.0, abs_sum = 0.0;
    if (!RoundRow(xi, k, kXMax, &p[static_cast<size_t>(i) * k], t[i], r, abs_sum)) return false;
    const double amax = static_cast<double>(t[i]) * kXMax;
    const double c = (k + 64) * kUnit * (amax * (1.0 + kUnit) + r);
    coef_w[i] = Up((r + c) * kBoundSlack);
    coef_e[i] = Up(abs_sum * kBoundSlack);
  }

  std::vector<RowCandidates> merged(m);
  std::mutex mu;
  const bool avx2 = DetectedSimd() != SimdLevel::kScalar;
  pool.Run(n_, kScanRowsPerTask, [&](int64_t begin, int64_t end) {
    std::vector<RowCandidates> local(m);
    if (avx2) {
      ScanAvx2(p.data(), t.data(), coef_w.data(), coef_e.data(), m, begin, end, local);
    } else {
      int32_t dots[kRowsPerPass];
      for (int64_t j = begin; j < end; ++j) {
        const int8_t* w = &q_[static_cast<size_t>(j) * k];
        for (int32_t i0 = 0; i0 < m; i0 += kRowsPerPass) {
          const int rows = std::min(kRowsPerPass, m - i0);
          DotsScalar(w, k, &p[static_cast<size_t>(i0) * k], k, rows, dots);
          for (int r = 0; r < rows; ++r) {
            const int32_t i = i0 + r;
            const float score = static_cast<float>(dots[r]) * scale_[j] * t[i];
            local[i].Offer(static_cast<int32_t>(j), score,
                           coef_w[i] * weight_[j] + coef_e[i] * err_[j]);
          }
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (int32_t i = 0; i < m; ++i) {
      merged[i].lower = std::max(merged[i].lower, local[i].lower);
      merged[i].rows.insert(merged[i].rows.end(), local[i].rows.begin(), local[i].rows.end());
    }
  });

  out.assign(m, {});
  for (int32_t i = 0; i < m; ++i) {
    merged[i].Prune();
    if (merged[i].rows.size() > static_cast<size_t>(n_) / 8) continue;
    for (const auto& row : merged[i].rows) out[i].push_back(row.first);
    std::sort(out[i].begin(), out[i].end());
  }
  return true;
}

}  // namespace loom::kernels::cpu
