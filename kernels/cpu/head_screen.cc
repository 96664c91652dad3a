#include "kernels/cpu/head_screen.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include "base/check.h"
#include "kernels/cpu/cpu_features.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kChunk = 32;
// The int8 screen (ScanVnni8): x's channels with the largest values stay int16.
constexpr int kOutliers = 32;
constexpr int kChunk8 = 64;
constexpr float kWMax = 127.0f;
constexpr float kXMax = 32767.0f;
// Rows of x scored together (their sums stay in registers).
constexpr int kRowsPerPass = 8;
// The int8 screen: rows of x in the lanes of a tile, rows of W at a time.
constexpr int kLanes = 16;
constexpr int kLaneRows = 8;
constexpr int kAheadGroups = 2;
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

// Row i's two bound coefficients (header, B_ij = coef_w * weight_j +
// coef_e * e_j) from its largest |x|, its rounding error and sum |x|.
void XBoundCoefficients(int32_t k, double amax, double err, double abs_sum, float& coef_w,
                        float& coef_e) {
  const double c = (k + 64) * kUnit * (amax * (1.0 + kUnit) + err);
  coef_w = Up((err + c) * kBoundSlack);
  coef_e = Up(abs_sum * kBoundSlack);
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

// Lane i: the sum of the lanes of v[i].
LOOM_SCREEN_VNNI __attribute__((always_inline)) inline __m256i LaneSums512(
    const __m512i (&v)[kRowsPerPass]) {
  __m256i half[kRowsPerPass];
#pragma GCC unroll 8
  for (int i = 0; i < kRowsPerPass; ++i) {
    half[i] = _mm256_add_epi32(_mm512_castsi512_si256(v[i]), _mm512_extracti64x4_epi64(v[i], 1));
  }
  return LaneSums(half);
}

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
  return LaneSums512(acc);
}

#define LOOM_SCREEN_VNNI8 \
  __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

// The int8 dots of kLaneRows rows of W with a tile of 16 rows of x, row i of
// the tile in lane i: x rounded to int8 but for its kOutliers largest
// channels U, which are int16 on the same scale. vpdpbusd multiplies unsigned
// by signed bytes: x's bytes are offset by 128 (U's channels and the rows past
// the last are 128) and the caller subtracts 128 * sum_k q_jk; W's groups of
// 4 bytes are broadcast from its rows. up holds x's pairs at U, wu W's values
// there as int16. A lane sums k products of at most 255 * 127 and 32 of at
// most 127 * 32767: far below 2^31 for k <= kMaxK.
LOOM_SCREEN_VNNI8 inline void DotsLanes(const int8_t* const (&w)[kLaneRows], int32_t k,
                                        const int32_t* qp, const int32_t* up,
                                        const int16_t (&wu)[kLaneRows][kOutliers],
                                        __m512i (&acc)[kLaneRows]) {
#pragma GCC unroll 8
  for (int r = 0; r < kLaneRows; ++r) acc[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int32_t g = 0; g < k / 4; ++g) {
    const __m512i x = _mm512_loadu_si512(qp + g * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kLaneRows; ++r) {
      int32_t four;
      std::memcpy(&four, w[r] + 4 * g, sizeof(four));
      acc[r] = _mm512_dpbusd_epi32(acc[r], x, _mm512_set1_epi32(four));
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < kOutliers / 2; ++p) {
    const __m512i x = _mm512_loadu_si512(up + p * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kLaneRows; ++r) {
      int32_t pair;
      std::memcpy(&pair, &wu[r][2 * p], sizeof(pair));
      acc[r] = _mm512_dpwssd_epi32(acc[r], x, _mm512_set1_epi32(pair));
    }
  }
}

// W's values at U, as int16: a masked vpermb per 64-byte chunk of the row.
LOOM_SCREEN_VNNI8 __m512i GatherOutliers(const int8_t* w, int32_t k, const uint64_t* lanes,
                                         const uint8_t* index) {
  __m512i g = _mm512_setzero_si512();
  for (int32_t c = 0; c < k; c += kChunk8) {
    const int32_t chunk = c / kChunk8;
    g = _mm512_mask_permutexvar_epi8(g, lanes[chunk], _mm512_loadu_si512(index + c),
                                     _mm512_loadu_si512(w + c));
  }
  return _mm512_cvtepi8_epi16(_mm512_castsi512_si256(g));
}

#pragma GCC diagnostic pop

// One pass's scores a = s_j t_i dots and bounds B (header) against the rows'
// lower bounds: the rows of x whose upper bound reaches theirs keep row j.
template <class Rows>
LOOM_SCREEN_AVX2 __attribute__((always_inline)) inline void OfferPass(
    __m256i dots, int64_t j, int32_t i0, int rows, const float* sw, const float* t,
    const float* coef_w, const float* coef_e, float* lower, std::vector<Rows>& local) {
  const __m256 score = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dots), _mm256_set1_ps(sw[0])),
                                     _mm256_loadu_ps(t + i0));
  const __m256 bound =
      _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(coef_w + i0), _mm256_set1_ps(sw[1])),
                    _mm256_mul_ps(_mm256_loadu_ps(coef_e + i0), _mm256_set1_ps(sw[2])));
  const __m256 lo = _mm256_max_ps(_mm256_loadu_ps(lower + i0), _mm256_sub_ps(score, bound));
  _mm256_storeu_ps(lower + i0, lo);
  const __m256 hi = _mm256_add_ps(score, bound);
  int mask = _mm256_movemask_ps(_mm256_cmp_ps(hi, lo, _CMP_GE_OQ)) & ((1 << rows) - 1);
  if (mask == 0) return;
  alignas(32) float upper[kRowsPerPass];
  _mm256_store_ps(upper, hi);
  for (; mask != 0; mask &= mask - 1) {
    const int r = __builtin_ctz(static_cast<unsigned>(mask));
    Rows& c = local[i0 + r];
    c.lower = lower[i0 + r];
    c.Keep(static_cast<int32_t>(j), upper[r]);
  }
}

using DotsFn = __m256i (*)(const int8_t*, int32_t, const int16_t*, int64_t);

constexpr DotsFn kAvx2Dots[kRowsPerPass] = {&DotsAvx2<1>, &DotsAvx2<2>, &DotsAvx2<3>, &DotsAvx2<4>,
                                            &DotsAvx2<5>, &DotsAvx2<6>, &DotsAvx2<7>, &DotsAvx2<8>};
constexpr DotsFn kVnniDots[kRowsPerPass] = {&DotsVnni<1>, &DotsVnni<2>, &DotsVnni<3>, &DotsVnni<4>,
                                            &DotsVnni<5>, &DotsVnni<6>, &DotsVnni<7>, &DotsVnni<8>};

// The VNNI dots where the AVX-512 level is in use (LOOM_SIMD=avx2 keeps AVX2)
// and the CPU has AVX-512 VNNI.
const DotsFn* ScreenDots() {
#if defined(__x86_64__)
  static const bool vnni = DetectedSimd() == SimdLevel::kAvx512 && HasAvx512Vnni();
  if (vnni) return kVnniDots;
#endif
  return kAvx2Dots;
}

// The int8 screen where the VNNI dots are in use and the CPU also has VBMI
// (vpermb).
bool Vnni8Screen() {
#if defined(__x86_64__)
  static const bool yes = ScreenDots() == kVnniDots && __builtin_cpu_supports("avx512vbmi");
  return yes;
#else
  return false;
#endif
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

// x for the int8 screen (ScanVnni8): row i is t_i (q_i + u_i), q_i int8
// with U's channels zero and u_i int16 at U; U is the step's kOutliers
// channels with the largest |x| over its rows (a row's largest values are
// what would coarsen its int8 scale, and a final norm's large values sit in
// a few channels shared by every row). Its error r_i and the bound's terms are
// those of the int16 rounding; only r_i is larger.
struct HeadScreen::Int8X {
  int32_t m = 0;
  int32_t tiles = 0;  // of kLanes rows
  // Row i of tile T in lane i: 4 channels of x_i + 128 a word (U's channels
  // 128), and x_i's pairs at U.
  std::vector<int32_t> qp;               // [tiles, k / 4, kLanes]
  std::vector<int32_t> up;               // [tiles, kOutliers / 2, kLanes]
  std::vector<float> t, coef_w, coef_e;  // [tiles * kLanes]
  // Per 64-byte chunk of a row of W: bit l set where U[l] lies in it, and
  // byte l is U[l]'s position there (vpermb's index).
  std::vector<uint64_t> lanes;  // [k / 64]
  std::vector<uint8_t> index;   // [k / 64, 64]

  bool Round(const float* x, int32_t rows, int32_t ldx, int32_t k);
};

bool HeadScreen::Int8X::Round(const float* x, int32_t rows, int32_t ldx, int32_t k) {
  m = rows;
  std::vector<float> top(k, 0.0f);
  for (int32_t i = 0; i < m; ++i) {
    for (int32_t c = 0; c < k; ++c) {
      const float v = x[static_cast<int64_t>(i) * ldx + c];
      if (!std::isfinite(v)) return false;
      top[c] = std::max(top[c], std::fabs(v));
    }
  }
  std::vector<int32_t> order(k);
  for (int32_t c = 0; c < k; ++c) order[c] = c;
  std::nth_element(order.begin(), order.begin() + kOutliers, order.end(),
                   [&top](int32_t a, int32_t b) { return top[a] > top[b]; });
  std::sort(order.begin(), order.begin() + kOutliers);
  std::vector<int32_t> lane_of(k, -1);
  lanes.assign(k / kChunk8, 0);
  index.assign(k, 0);
  for (int32_t l = 0; l < kOutliers; ++l) {
    const int32_t c = order[l];
    lane_of[c] = l;
    lanes[c / kChunk8] |= uint64_t{1} << l;
    index[c / kChunk8 * kChunk8 + l] = static_cast<uint8_t>(c % kChunk8);
  }
  tiles = (m + kLanes - 1) / kLanes;
  const int32_t padded = tiles * kLanes;
  qp.assign(static_cast<size_t>(tiles) * (k / 4) * kLanes, static_cast<int32_t>(0x80808080u));
  up.assign(static_cast<size_t>(tiles) * (kOutliers / 2) * kLanes, 0);
  t.assign(padded, 0.0f);
  coef_w.assign(padded, 0.0f);
  coef_e.assign(padded, 0.0f);
  for (int32_t i = 0; i < m; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * ldx;
    float amax = 0.0f, amax_u = 0.0f;
    double abs_sum = 0.0;
    for (int32_t c = 0; c < k; ++c) {
      float& largest = lane_of[c] < 0 ? amax : amax_u;
      largest = std::max(largest, std::fabs(xi[c]));
      abs_sum += std::fabs(xi[c]);
    }
    // One scale for both parts: the int8 one unless U's values would not fit
    // in int16 on it.
    const float scale = std::max(amax / kWMax, amax_u / kXMax);
    double err = 0.0;
    auto* qb =
        reinterpret_cast<uint8_t*>(qp.data() + static_cast<size_t>(i / kLanes) * (k / 4) * kLanes);
    auto* ub = reinterpret_cast<int16_t*>(up.data() + static_cast<size_t>(i / kLanes) *
                                                          (kOutliers / 2) * kLanes);
    const int32_t lane = i % kLanes;
    for (int32_t c = 0; c < k; ++c) {
      const float r = scale > 0.0f ? std::nearbyint(xi[c] / scale) : 0.0f;
      double value = 0.0;
      if (lane_of[c] < 0) {
        const auto v = static_cast<int8_t>(std::clamp(r, -kWMax, kWMax));
        qb[(static_cast<size_t>(c / 4) * kLanes + lane) * 4 + c % 4] =
            static_cast<uint8_t>(v + 128);
        value = v;
      } else {
        const auto v = static_cast<int16_t>(std::clamp(r, -kXMax, kXMax));
        const int32_t l = lane_of[c];
        ub[(static_cast<size_t>(l / 2) * kLanes + lane) * 2 + l % 2] = v;
        value = v;
      }
      err =
          std::max(err, std::fabs(static_cast<double>(xi[c]) - static_cast<double>(scale) * value));
    }
    t[i] = scale;
    XBoundCoefficients(k, std::max(amax, amax_u), err, abs_sum, coef_w[i], coef_e[i]);
  }
  return true;
}

LOOM_SCREEN_AVX2 void HeadScreen::ScanAvx2(const int16_t* p, const float* t, const float* coef_w,
                                           const float* coef_e, int32_t m, int64_t begin,
                                           int64_t end, std::vector<RowCandidates>& local) const {
  const int32_t k = k_;
  const int32_t passes = (m + kRowsPerPass - 1) / kRowsPerPass;
  std::vector<float> lower(static_cast<size_t>(passes) * kRowsPerPass,
                           -std::numeric_limits<float>::infinity());
  const DotsFn* const dots_of = ScreenDots();
  for (int64_t j = begin; j < end; ++j) {
    const int8_t* w = &q_[static_cast<size_t>(j) * k];
    const float sw[3] = {scale_[j], weight_[j], err_[j]};
    for (int32_t pass = 0; pass < passes; ++pass) {
      const int32_t i0 = pass * kRowsPerPass;
      const int rows = std::min(kRowsPerPass, m - i0);
      const __m256i dots = dots_of[rows - 1](w, k, p + static_cast<size_t>(i0) * k, k);
      OfferPass(dots, j, i0, rows, sw, t, coef_w, coef_e, lower.data(), local);
    }
  }
  for (int32_t i = 0; i < m; ++i) local[i].lower = lower[i];
}

#pragma GCC diagnostic push  // as around the dots above
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
LOOM_SCREEN_VNNI8 void HeadScreen::ScanVnni8(const Int8X& x, int64_t begin, int64_t end,
                                             std::vector<RowCandidates>& local) const {
  const int32_t k = k_;
  const int32_t m = x.m;
  std::vector<float> lower(static_cast<size_t>(x.tiles) * kLanes,
                           -std::numeric_limits<float>::infinity());
  for (int64_t j0 = begin; j0 < end; j0 += kLaneRows) {
    const int rows_w = static_cast<int>(std::min<int64_t>(kLaneRows, end - j0));
    // The next rows of W, read ahead: the copy streams from DRAM (168 MB on
    // Gemma 3), and the first read of a row stalls the gather.
    const auto* ahead =
        reinterpret_cast<const char*>(&q_[static_cast<size_t>(j0 + kAheadGroups * kLaneRows) * k]);
    if (j0 + (kAheadGroups + 1) * kLaneRows <= end) {
      for (int32_t c = 0; c < kLaneRows * k; c += 64) _mm_prefetch(ahead + c, _MM_HINT_T1);
    }
    const int8_t* w[kLaneRows];
    alignas(64) int16_t wu[kLaneRows][kOutliers];
    for (int r = 0; r < kLaneRows; ++r) {  // rows past the range repeat the last
      w[r] = &q_[static_cast<size_t>(j0 + std::min(r, rows_w - 1)) * k];
      _mm512_store_si512(wu[r], GatherOutliers(w[r], k, x.lanes.data(), x.index.data()));
    }
    for (int32_t tile = 0; tile < x.tiles; ++tile) {
      __m512i acc[kLaneRows];
      DotsLanes(w, k, &x.qp[static_cast<size_t>(tile) * (k / 4) * kLanes],
                &x.up[static_cast<size_t>(tile) * (kOutliers / 2) * kLanes], wu, acc);
      for (int r = 0; r < rows_w; ++r) {
        const int64_t j = j0 + r;
        const float sw[3] = {scale_[j], weight_[j], err_[j]};
        const __m512i dots = _mm512_sub_epi32(acc[r], _mm512_set1_epi32(128 * row_sum_[j]));
        for (int half = 0; half < 2; ++half) {
          const int32_t i0 = tile * kLanes + half * kRowsPerPass;
          const int rows = std::min(kRowsPerPass, m - i0);
          if (rows <= 0) break;
          OfferPass(half == 0 ? _mm512_castsi512_si256(dots) : _mm512_extracti64x4_epi64(dots, 1),
                    j, i0, rows, sw, x.t.data(), x.coef_w.data(), x.coef_e.data(), lower.data(),
                    local);
        }
      }
    }
  }
  for (int32_t i = 0; i < m; ++i) local[i].lower = lower[i];
}
#pragma GCC diagnostic pop

bool HeadScreen::ScanInt16(
    const float* x, int32_t m, int32_t ldx, ParallelFor& pool,
    const std::function<void(const std::vector<RowCandidates>&)>& merge) const {
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
    XBoundCoefficients(k, static_cast<double>(t[i]) * kXMax, r, abs_sum, coef_w[i], coef_e[i]);
  }
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
    merge(local);
  });
  return true;
}

HeadScreen HeadScreen::Build(int32_t n, int32_t k, const RowSource& rows, ParallelFor& pool) {
  HeadScreen s;
  if (n <= 0 || k <= 0 || k % kChunk != 0 || k > kMaxK) return s;
  s.q_.resize(static_cast<size_t>(n) * k);
  s.scale_.resize(n);
  s.err_.resize(n);
  s.weight_.resize(n);
  s.row_sum_.resize(n);
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
      int32_t sum = 0;
      for (int32_t c = 0; c < k; ++c) sum += s.q_[static_cast<size_t>(j) * k + c];
      s.row_sum_[j] = sum;
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
  return static_cast<int64_t>(q_.size()) + 16 * static_cast<int64_t>(scale_.size());
}

bool HeadScreen::Candidates(const float* x, int32_t m, int32_t ldx, ParallelFor& pool,
                            std::vector<std::vector<int32_t>>& out) const {
  LOOM_CHECK(Ready());
  std::vector<RowCandidates> merged(m);
  std::mutex mu;
  const auto merge = [&](const std::vector<RowCandidates>& local) {
    std::lock_guard<std::mutex> lock(mu);
    for (int32_t i = 0; i < m; ++i) {
      merged[i].lower = std::max(merged[i].lower, local[i].lower);
      merged[i].rows.insert(merged[i].rows.end(), local[i].rows.begin(), local[i].rows.end());
    }
  };
  if (Vnni8Screen() && k_ % kChunk8 == 0) {
    Int8X r;
    if (!r.Round(x, m, ldx, k_)) return false;
    pool.Run(n_, kScanRowsPerTask, [&](int64_t begin, int64_t end) {
      std::vector<RowCandidates> local(m);
      ScanVnni8(r, begin, end, local);
      merge(local);
    });
  } else if (!ScanInt16(x, m, ldx, pool, merge)) {
    return false;
  }

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
