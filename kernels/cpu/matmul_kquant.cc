// Register decoders of the 5-bit and K-quant blocks for the shared tiles. A
// step is 32 values of a row of W: a whole Q5_0 / Q5_1 block, or sub-block s
// of a K-quant super-block, whose scale (and min) the step derives with the
// scalar decoder's float products. Every value is then produced by the same
// operations as dequant_blocks.cc (this file is built with -ffp-contract=off,
// so d * q - m stays a multiply and a subtract): the 4-bit and 5-bit types
// compute their 16 or 32 possible values once per step and look them up with
// a permute on AVX-512, the others convert and scale each value.
#include "kernels/cpu/matmul_kquant.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dequant_blocks.h"
#include "kernels/cpu/matmul_quant_blocks.h"

namespace loom::kernels::cpu {
namespace {

#define LOOM_AVX2 LOOM_TILES_AVX2
#define LOOM_AVX512 LOOM_TILES_AVX512
// Scale helpers that both SIMD levels inline (F16C is in both).
#define LOOM_F16C __attribute__((target("f16c")))

uint16_t LoadU16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint32_t LoadU32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The 6-bit scale and min of sub-block s of a Q4_K / Q5_K block, times d and
// dmin, as DecodeQ4_KSub computes them.
LOOM_F16C inline void ScaleMinK(const std::byte* b, int s, float& d1, float& m1) {
  int sc, mn;
  ScaleMinK4(s, reinterpret_cast<const uint8_t*>(b + 4), sc, mn);
  d1 = _cvtsh_ss(LoadU16(b)) * static_cast<float>(sc);
  m1 = _cvtsh_ss(LoadU16(b + 2)) * static_cast<float>(mn);
}

// GCC 12 warns (-Wuninitialized) inside the AVX-512 conversion intrinsics
// (see matmul_quant.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

LOOM_AVX2 inline __m256i Bytes8(const std::byte* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
LOOM_AVX512 inline __m512i Bytes16(const std::byte* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Lanes j of the result: bit (first + j) of the word qh, as 16 or 0.
LOOM_AVX2 inline __m256i HighBit8(uint32_t qh, int first) {
  const __m256i shifts =
      _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(first));
  const __m256i bits = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(qh)), shifts);
  return _mm256_and_si256(_mm256_slli_epi32(bits, 4), _mm256_set1_epi32(16));
}
LOOM_AVX512 inline __m512i HighBit16(uint32_t qh, int first) {
  const __m512i shifts =
      _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       _mm512_set1_epi32(first));
  const __m512i bits = _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(qh)), shifts);
  return _mm512_and_si512(_mm512_slli_epi32(bits, 4), _mm512_set1_epi32(16));
}

LOOM_AVX512 inline __m512 Iota16(float first) {
  return _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       _mm512_set1_ps(first));
}

// Q5_0 (x = d * (q - 16)) and Q5_1 (x = d * q + m): value j < 16 is the low
// nibble of qs[j], value 16 + j its high nibble, bit j of qh the fifth bit.
template <bool kOffset>
struct Q5 {
  static constexpr int kValues = kQuantBlock;
  static constexpr int64_t kBytes = kOffset ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
  static constexpr int kQh = kOffset ? 4 : 2;  // offset of qh; qs follows

  static void Scalar(const std::byte* b, int /*s*/, float* out) {
    if constexpr (kOffset) {
      DecodeQ5_1(b, out);
    } else {
      DecodeQ5_0(b, out);
    }
  }

  LOOM_AVX2 static void Avx2(const std::byte* b, int /*s*/, __m256 (&v)[4]) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(b)));
    const uint32_t qh = LoadU32(b + kQh);
    const __m256i lo = Bytes8(b + kQh + 4), hi = Bytes8(b + kQh + 12);
    const __m256i nibble = _mm256_set1_epi32(0x0f);
    __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(lo, nibble), HighBit8(qh, 0)),
                    _mm256_or_si256(_mm256_and_si256(hi, nibble), HighBit8(qh, 8)),
                    _mm256_or_si256(_mm256_srli_epi32(lo, 4), HighBit8(qh, 16)),
                    _mm256_or_si256(_mm256_srli_epi32(hi, 4), HighBit8(qh, 24))};
    for (int g = 0; g < 4; ++g) {
      if constexpr (kOffset) {
        v[g] = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q[g]), d),
                             _mm256_set1_ps(_cvtsh_ss(LoadU16(b + 2))));
      } else {
        q[g] = _mm256_sub_epi32(q[g], _mm256_set1_epi32(16));
        v[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(q[g]), d);
      }
    }
  }

  LOOM_AVX512 static void Avx512(const std::byte* b, int /*s*/, __m512 (&v)[2]) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(LoadU16(b)));
    __m512 low, high;  // the values of q in [0, 16) and [16, 32)
    if constexpr (kOffset) {
      const __m512 m = _mm512_set1_ps(_cvtsh_ss(LoadU16(b + 2)));
      low = _mm512_add_ps(_mm512_mul_ps(Iota16(0), d), m);
      high = _mm512_add_ps(_mm512_mul_ps(Iota16(16), d), m);
    } else {
      low = _mm512_mul_ps(Iota16(-16), d);
      high = _mm512_mul_ps(Iota16(0), d);
    }
    const uint32_t qh = LoadU32(b + kQh);
    const __m512i qs = Bytes16(b + kQh + 4);
    const __m512i first =
        _mm512_or_si512(_mm512_and_si512(qs, _mm512_set1_epi32(0x0f)), HighBit16(qh, 0));
    const __m512i second = _mm512_or_si512(_mm512_srli_epi32(qs, 4), HighBit16(qh, 16));
    v[0] = _mm512_permutex2var_ps(low, first, high);
    v[1] = _mm512_permutex2var_ps(low, second, high);
  }
};

// Q4_K and Q5_K sub-block s: x = d1 * q - m1 with d1 = d * sc, m1 = dmin * mn;
// q is the low (even s) or high (odd s) nibble of qs[32 (s / 2) + l], plus,
// for Q5_K, 16 times bit s of qh[l].
template <bool kFifthBit>
struct QK {
  static constexpr int kValues = kSuperBlock;
  static constexpr int64_t kBytes = kFifthBit ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr int kQs = kFifthBit ? 48 : 16;
  static constexpr int kQh = 16;

  static void Scalar(const std::byte* b, int s, float* out) {
    if constexpr (kFifthBit) {
      DecodeQ5_KSub(b, s, out);
    } else {
      DecodeQ4_KSub(b, s, out);
    }
  }

  LOOM_AVX2 static void Avx2(const std::byte* b, int s, __m256 (&v)[4]) {
    float d1, m1;
    ScaleMinK(b, s, d1, m1);
    const __m256 dv = _mm256_set1_ps(d1), mv = _mm256_set1_ps(m1);
    const std::byte* qs = b + kQs + 32 * (s / 2);
    const __m128i shift = _mm_cvtsi32_si128(4 * (s % 2));
    for (int g = 0; g < 4; ++g) {
      __m256i q =
          _mm256_and_si256(_mm256_srl_epi32(Bytes8(qs + 8 * g), shift), _mm256_set1_epi32(0x0f));
      if constexpr (kFifthBit) {
        const __m256i bit = _mm256_srl_epi32(Bytes8(b + kQh + 8 * g), _mm_cvtsi32_si128(s));
        q = _mm256_or_si256(q, _mm256_slli_epi32(_mm256_and_si256(bit, _mm256_set1_epi32(1)), 4));
      }
      v[g] = _mm256_sub_ps(_mm256_mul_ps(dv, _mm256_cvtepi32_ps(q)), mv);
    }
  }

  LOOM_AVX512 static void Avx512(const std::byte* b, int s, __m512 (&v)[2]) {
    float d1, m1;
    ScaleMinK(b, s, d1, m1);
    const __m512 dv = _mm512_set1_ps(d1), mv = _mm512_set1_ps(m1);
    const __m512 low = _mm512_sub_ps(_mm512_mul_ps(dv, Iota16(0)), mv);
    const __m512 high = _mm512_sub_ps(_mm512_mul_ps(dv, Iota16(16)), mv);
    const std::byte* qs = b + kQs + 32 * (s / 2);
    const __m128i shift = _mm_cvtsi32_si128(4 * (s % 2));
    for (int g = 0; g < 2; ++g) {
      const __m512i q =
          _mm512_and_si512(_mm512_srl_epi32(Bytes16(qs + 16 * g), shift), _mm512_set1_epi32(0x0f));
      if constexpr (kFifthBit) {
        const __m512i bit = _mm512_srl_epi32(Bytes16(b + kQh + 16 * g), _mm_cvtsi32_si128(s));
        const __m512i idx =
            _mm512_or_si512(q, _mm512_slli_epi32(_mm512_and_si512(bit, _mm512_set1_epi32(1)), 4));
        v[g] = _mm512_permutex2var_ps(low, idx, high);
      } else {
        v[g] = _mm512_permutexvar_ps(q, low);
      }
    }
  }
};

// Q6_K sub-block s = 4 half + quarter: x = (d * sc) * (q - 32), q the low
// (quarter < 2) or high nibble of ql[64 half + 32 (quarter % 2) + l] with bits
// 2 quarter and up of qh[32 half + l] above it; sc is scales[8 half + 2
// quarter] for l < 16, the next one above.
struct Q6K {
  static constexpr int kValues = kSuperBlock;
  static constexpr int64_t kBytes = sizeof(BlockQ6_K);

  static void Scalar(const std::byte* b, int s, float* out) { DecodeQ6_KSub(b, s, out); }

  struct Sub {
    const std::byte* ql;
    const std::byte* qh;
    int low_shift, high_shift;
    float dsc[2];
  };
  LOOM_F16C static Sub Locate(const std::byte* b, int s) {
    const int half = s / 4, quarter = s % 4;
    const float d = _cvtsh_ss(LoadU16(b + 208));
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * half + 2 * quarter);
    return {b + 64 * half + 32 * (quarter % 2),
            b + 128 + 32 * half,
            4 * (quarter / 2),
            2 * quarter,
            {d * sc[0], d * sc[1]}};
  }

  LOOM_AVX2 static void Avx2(const std::byte* b, int s, __m256 (&v)[4]) {
    const Sub sub = Locate(b, s);
    const __m128i low_shift = _mm_cvtsi32_si128(sub.low_shift);
    const __m128i high_shift = _mm_cvtsi32_si128(sub.high_shift);
    for (int g = 0; g < 4; ++g) {
      const __m256i low = _mm256_and_si256(_mm256_srl_epi32(Bytes8(sub.ql + 8 * g), low_shift),
                                           _mm256_set1_epi32(0x0f));
      const __m256i high = _mm256_and_si256(_mm256_srl_epi32(Bytes8(sub.qh + 8 * g), high_shift),
                                            _mm256_set1_epi32(3));
      const __m256i q =
          _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
      v[g] = _mm256_mul_ps(_mm256_set1_ps(sub.dsc[g / 2]), _mm256_cvtepi32_ps(q));
    }
  }

  LOOM_AVX512 static void Avx512(const std::byte* b, int s, __m512 (&v)[2]) {
    const Sub sub = Locate(b, s);
    const __m128i low_shift = _mm_cvtsi32_si128(sub.low_shift);
    const __m128i high_shift = _mm_cvtsi32_si128(sub.high_shift);
    for (int g = 0; g < 2; ++g) {
      const __m512i low = _mm512_and_si512(_mm512_srl_epi32(Bytes16(sub.ql + 16 * g), low_shift),
                                           _mm512_set1_epi32(0x0f));
      const __m512i high = _mm512_and_si512(_mm512_srl_epi32(Bytes16(sub.qh + 16 * g), high_shift),
                                            _mm512_set1_epi32(3));
      const __m512i q =
          _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32));
      v[g] = _mm512_mul_ps(_mm512_set1_ps(sub.dsc[g]), _mm512_cvtepi32_ps(q));
    }
  }
};

// The tiles' policy: step s is sub-block s % kSubs of block s / kSubs.
template <class F>
struct SubBlockWeights {
  using W = std::byte;
  static constexpr int kSubs = F::kValues / 32;
  static constexpr int kScalarStep = 32;
  static constexpr int kAvx2Vectors = 4;
  static constexpr int kAvx512Vectors = 2;
  static constexpr bool kHasTail = false;

  static const std::byte* Block(const std::byte* row, int s) {
    return row + static_cast<int64_t>(s / kSubs) * F::kBytes;
  }
  static void LoadScalar(const std::byte* row, int kk, float* out) {
    F::Scalar(Block(row, kk / 32), kk / 32 % kSubs, out);
  }
  LOOM_AVX2 static void LoadAvx2(const std::byte* row, int s, __m256 (&v)[4]) {
    F::Avx2(Block(row, s), s % kSubs, v);
  }
  LOOM_AVX512 static void LoadAvx512(const std::byte* row, int s, __m512 (&v)[2]) {
    F::Avx512(Block(row, s), s % kSubs, v);
  }
  // The rows of the tile after next, NR rows of W one contiguous run, fetched
  // at the pace the tile reads its own (as matmul_quant.cc's blocks do).
  template <int NR>
  static void Prefetch(const tiles::Tile<std::byte>& t, int s) {
    const char* next = reinterpret_cast<const char*>(t.w + 2 * NR * t.ldw);
    const int64_t begin = s * NR * F::kBytes / kSubs;
    const int64_t end = (s + 1) * NR * F::kBytes / kSubs;
    for (int64_t off = begin; off < end; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
  }
};

template <class F>
void DequantScalar(const std::byte* w, int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    for (int s = 0; s < F::kValues / 32; ++s) F::Scalar(w + b * F::kBytes, s, out + 32 * s);
    out += F::kValues;
  }
}
template <class F>
LOOM_AVX2 void DequantAvx2(const std::byte* w, int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    for (int s = 0; s < F::kValues / 32; ++s) {
      __m256 v[4];
      F::Avx2(w + b * F::kBytes, s, v);
      for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + 32 * s + 8 * g, v[g]);
    }
    out += F::kValues;
  }
}
template <class F>
LOOM_AVX512 void DequantAvx512(const std::byte* w, int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    for (int s = 0; s < F::kValues / 32; ++s) {
      __m512 v[2];
      F::Avx512(w + b * F::kBytes, s, v);
      _mm512_storeu_ps(out + 32 * s, v[0]);
      _mm512_storeu_ps(out + 32 * s + 16, v[1]);
    }
    out += F::kValues;
  }
}

#pragma GCC diagnostic pop
#undef LOOM_AVX2
#undef LOOM_AVX512
#undef LOOM_F16C

template <class F>
QuantKernels KernelsOfLevel(SimdLevel level) {
  const auto* table = &tiles::TilesFor<SubBlockWeights<F>>(level);
  switch (level) {
    case SimdLevel::kAvx512:
      return {table, DequantAvx512<F>};
    case SimdLevel::kAvx2:
      return {table, DequantAvx2<F>};
    case SimdLevel::kScalar:
      break;
  }
  return {table, DequantScalar<F>};
}

}  // namespace

std::optional<QuantKernels> RegisterDecodedKernels(QuantType type, SimdLevel level) {
  switch (type) {
    case QuantType::kQ5_0:
      return KernelsOfLevel<Q5<false>>(level);
    case QuantType::kQ5_1:
      return KernelsOfLevel<Q5<true>>(level);
    case QuantType::kQ4_K:
      return KernelsOfLevel<QK<false>>(level);
    case QuantType::kQ5_K:
      return KernelsOfLevel<QK<true>>(level);
    case QuantType::kQ6_K:
      return KernelsOfLevel<Q6K>(level);
    default:
      break;
  }
  return std::nullopt;
}

}  // namespace loom::kernels::cpu
