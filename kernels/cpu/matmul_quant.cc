// The register tiling and float32 accumulation order of matmul.cc (4 rows of x
// by 4 rows of W, lanes summed by the same tree), with W decoded from ggml
// blocks one block (32 values) at a time: every value is decoded with the same
// float operations as the scalar dequantizer (this file is built with
// -ffp-contract=off so that d * q + m is never fused), so each output has the
// bits Matmul gives on the dequantized weights, whatever the number of rows.
#include "kernels/cpu/matmul_quant.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/float16.h"
#include "kernels/cpu/dequant_blocks.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd_reduce.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 4;
// Rows of W a task widens to float32 at once (kept in L1/L2 while every row of
// x passes over them).
constexpr int64_t kRowsPerSlice = 16;
// Rows of W per parallel task: about n / threads, so that each thread streams
// one long contiguous run of W (runs of 16 rows taken by the threads in turn
// leave the hardware prefetchers behind: batch-1 decode of SmolLM2 measured
// 2x slower), at most this many so that a thread the OS delays holds up little.
constexpr int64_t kMaxRowsPerTask = 256;
// From this many rows of x on (prefill), a task decodes its rows of W to
// float32 once per slice and runs the float32 tiles; below it the tiles decode
// W in registers, once per 4 rows of x. Decode batches are bound by reading W,
// and there the register path is faster up to 16 rows at least (SmolLM2, 16
// sequences: 31 ms a step against 36 ms widening); from 64 rows on, widening
// wins by about 10%.
constexpr int32_t kWidenMinRows = 32;

// The decoders' SIMD levels (F16C widens the fp16 scales).
#define LOOM_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LOOM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

uint16_t LoadU16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <QuantType T>
constexpr int64_t kBlockBytes = T == QuantType::kQ8_0   ? sizeof(BlockQ8_0)
                                : T == QuantType::kQ4_0 ? sizeof(BlockQ4_0)
                                                        : sizeof(BlockQ4_1);

// Offset of the quants in a block: after d (and m for Q4_1).
template <QuantType T>
constexpr int kQsOffset = T == QuantType::kQ4_1 ? 4 : 2;

template <QuantType T>
void DecodeScalar(const std::byte* b, float* out) {
  const float d = HalfToFloat(LoadU16(b));
  const auto* qs = reinterpret_cast<const unsigned char*>(b + kQsOffset<T>);
  if constexpr (T == QuantType::kQ8_0) {
    for (int j = 0; j < kQuantBlock; ++j) out[j] = d * static_cast<signed char>(qs[j]);
  } else if constexpr (T == QuantType::kQ4_0) {
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      out[j] = d * ((qs[j] & 0x0f) - 8);
      out[j + kQuantBlock / 2] = d * ((qs[j] >> 4) - 8);
    }
  } else {
    const float m = HalfToFloat(LoadU16(b + 2));
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      out[j] = d * (qs[j] & 0x0f) + m;
      out[j + kQuantBlock / 2] = d * (qs[j] >> 4) + m;
    }
  }
}

// GCC 12 warns (-Wuninitialized) inside the AVX-512 conversion intrinsics,
// which are built on _mm512_undefined_*; the warning is about the header, and
// it fires where the decoders are inlined, so it is off for all the SIMD code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Block -> values [0, 16) in lo and [16, 32) in hi. A 4-bit block has only 16
// distinct values: they are computed once into a table (with the operations of
// the scalar decoder, so the same bits) and looked up with vpermps, which reads
// only the low 4 bits of each index, so the nibbles need no masking.
template <QuantType T>
LOOM_AVX512 inline void DecodeAvx512(const std::byte* b, __m512& lo, __m512& hi) {
  const std::byte* qs = b + kQsOffset<T>;
  if constexpr (T == QuantType::kQ8_0) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(LoadU16(b)));
    const __m512i qlo = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m512i qhi =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
    lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(qlo));
    hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(qhi));
  } else {
    __m512 table;
    if constexpr (T == QuantType::kQ4_0) {
      const __m512 d = _mm512_set1_ps(_cvtsh_ss(LoadU16(b)));
      table =
          _mm512_mul_ps(d, _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7));
    } else {
      uint32_t dm_bits;
      std::memcpy(&dm_bits, b, sizeof(dm_bits));
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm_bits)));
      const __m512 d = _mm512_broadcastss_ps(dm);
      const __m512 m = _mm512_broadcastss_ps(_mm_movehdup_ps(dm));
      table = _mm512_add_ps(
          _mm512_mul_ps(d, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)),
          m);
    }
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    lo = _mm512_permutexvar_ps(v, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table);
  }
}

// Block -> values [8 g, 8 g + 8) in w[g].
template <QuantType T>
LOOM_AVX2 inline void DecodeAvx2(const std::byte* b, __m256 (&w)[4]) {
  const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(b)));
  const std::byte* qs = b + kQsOffset<T>;
  __m256i q[4];
  if constexpr (T == QuantType::kQ8_0) {
    for (int g = 0; g < 4; ++g) {
      q[g] = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * g)));
    }
  } else {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i a = _mm256_cvtepu8_epi32(raw);
    const __m256i c = _mm256_cvtepu8_epi32(_mm_srli_si128(raw, 8));
    const __m256i mask = _mm256_set1_epi32(0x0f);
    q[0] = _mm256_and_si256(a, mask);
    q[1] = _mm256_and_si256(c, mask);
    q[2] = _mm256_srli_epi32(a, 4);
    q[3] = _mm256_srli_epi32(c, 4);
    if constexpr (T == QuantType::kQ4_0) {
      for (int g = 0; g < 4; ++g) q[g] = _mm256_sub_epi32(q[g], _mm256_set1_epi32(8));
    }
  }
  for (int g = 0; g < 4; ++g) w[g] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(q[g]));
  if constexpr (T == QuantType::kQ4_1) {
    const __m256 m = _mm256_set1_ps(_cvtsh_ss(LoadU16(b + 2)));
    for (int g = 0; g < 4; ++g) w[g] = _mm256_add_ps(w[g], m);
  }
}

struct Tile {
  const float* x;
  int ldx;
  const std::byte* w;  // the tile's first row of W
  int64_t row_bytes;
  int blocks;  // per row of W
  const float* bias;
  float* y;
  int ldy;
};

inline void Store(const Tile& t, int i, int j, float sum) {
  t.y[static_cast<int64_t>(i) * t.ldy + j] = sum + (t.bias ? t.bias[j] : 0.0f);
}

// The tiles' rows of W are one contiguous run of NR * row_bytes, and the next
// tiles' rows follow: while a tile reads its block b, the same share of the
// tile after next is fetched, which the hardware prefetchers, seeing NR
// interleaved streams of 20-34 byte steps, do too late (decode is bound by
// these reads).
template <QuantType T, int NR>
inline void PrefetchNextTile(const Tile& t, int b) {
  constexpr int64_t kStep = NR * kBlockBytes<T>;
  const char* next = reinterpret_cast<const char*>(t.w + 2 * NR * t.row_bytes) + b * kStep;
  for (int64_t off = 0; off < kStep; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
}

template <QuantType T, int MR, int NR>
void TileScalar(const Tile& t) {
  float w[kQuantBlock];
  for (int i = 0; i < MR; ++i) {
    const float* x = t.x + static_cast<int64_t>(i) * t.ldx;
    for (int j = 0; j < NR; ++j) {
      float acc = 0.0f;
      for (int b = 0; b < t.blocks; ++b) {
        DecodeScalar<T>(t.w + j * t.row_bytes + b * kBlockBytes<T>, w);
        for (int l = 0; l < kQuantBlock; ++l) acc += x[b * kQuantBlock + l] * w[l];
      }
      Store(t, i, j, acc);
    }
  }
}

LOOM_AVX2 inline float Sum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

template <QuantType T, int MR, int NR>
LOOM_AVX2 void TileAvx2(const Tile& t) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int b = 0; b < t.blocks; ++b) {
    const int64_t kk = static_cast<int64_t>(b) * kQuantBlock;
    PrefetchNextTile<T, NR>(t, b);
    for (int j = 0; j < NR; ++j) {
      __m256 w[4];
      DecodeAvx2<T>(t.w + j * t.row_bytes + b * kBlockBytes<T>, w);
      for (int i = 0; i < MR; ++i) {
        const float* x = t.x + static_cast<int64_t>(i) * t.ldx + kk;
        for (int g = 0; g < 4; ++g) {
          acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8 * g), w[g], acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) Store(t, i, j, Sum256(acc[i][j]));
}

template <QuantType T, int MR, int NR>
LOOM_AVX512 void TileAvx512(const Tile& t) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int b = 0; b < t.blocks; ++b) {
    const int64_t kk = static_cast<int64_t>(b) * kQuantBlock;
    PrefetchNextTile<T, NR>(t, b);
    __m512 xlo[MR], xhi[MR];
    for (int i = 0; i < MR; ++i) {
      xlo[i] = _mm512_loadu_ps(t.x + static_cast<int64_t>(i) * t.ldx + kk);
      xhi[i] = _mm512_loadu_ps(t.x + static_cast<int64_t>(i) * t.ldx + kk + 16);
    }
    for (int j = 0; j < NR; ++j) {
      __m512 lo, hi;
      DecodeAvx512<T>(t.w + j * t.row_bytes + b * kBlockBytes<T>, lo, hi);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xlo[i], lo, acc[i][j]);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xhi[i], hi, acc[i][j]);
    }
  }
  float sums[16];
  TileSums<MR, NR>(acc, sums);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) Store(t, i, j, sums[4 * i + j]);
}

template <QuantType T>
void DequantScalar(const std::byte* w, int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) DecodeScalar<T>(w + b * kBlockBytes<T>, out + b * 32);
}
template <QuantType T>
LOOM_AVX2 void DequantAvx2(const std::byte* w, int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 v[4];
    DecodeAvx2<T>(w + b * kBlockBytes<T>, v);
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + b * kQuantBlock + 8 * g, v[g]);
  }
}
template <QuantType T>
LOOM_AVX512 void DequantAvx512(const std::byte* w, int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    __m512 lo, hi;
    DecodeAvx512<T>(w + b * kBlockBytes<T>, lo, hi);
    _mm512_storeu_ps(out + b * kQuantBlock, lo);
    _mm512_storeu_ps(out + b * kQuantBlock + 16, hi);
  }
}

#pragma GCC diagnostic pop
#undef LOOM_AVX2
#undef LOOM_AVX512

using TileFn = void (*)(const Tile&);
using DequantFn = void (*)(const std::byte*, int64_t, float*);

// One SIMD level's kernels for one block type: tiles[mr - 1][nr - 1] and the
// slice dequantizer of the widening path.
struct Kernels {
  TileFn tiles[kMr][kNr];
  DequantFn dequant;
};

template <QuantType T, int MR, int NR>
struct ScalarK {
  static void Run(const Tile& t) { TileScalar<T, MR, NR>(t); }
  static constexpr DequantFn kDequant = DequantScalar<T>;
};
template <QuantType T, int MR, int NR>
struct Avx2K {
  static void Run(const Tile& t) { TileAvx2<T, MR, NR>(t); }
  static constexpr DequantFn kDequant = DequantAvx2<T>;
};
template <QuantType T, int MR, int NR>
struct Avx512K {
  static void Run(const Tile& t) { TileAvx512<T, MR, NR>(t); }
  static constexpr DequantFn kDequant = DequantAvx512<T>;
};

template <template <QuantType, int, int> class K, QuantType T>
constexpr Kernels kKernels = {
    {
        {K<T, 1, 1>::Run, K<T, 1, 2>::Run, K<T, 1, 3>::Run, K<T, 1, 4>::Run},
        {K<T, 2, 1>::Run, K<T, 2, 2>::Run, K<T, 2, 3>::Run, K<T, 2, 4>::Run},
        {K<T, 3, 1>::Run, K<T, 3, 2>::Run, K<T, 3, 3>::Run, K<T, 3, 4>::Run},
        {K<T, 4, 1>::Run, K<T, 4, 2>::Run, K<T, 4, 3>::Run, K<T, 4, 4>::Run},
    },
    K<T, 1, 1>::kDequant};

template <QuantType T>
const Kernels& KernelsOfLevel(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return kKernels<Avx512K, T>;
    case SimdLevel::kAvx2:
      return kKernels<Avx2K, T>;
    case SimdLevel::kScalar:
      break;
  }
  return kKernels<ScalarK, T>;
}

// The decoders convert scales with F16C, which every AVX2 CPU has but the
// level detection does not check.
SimdLevel WithF16c(SimdLevel level) {
  // CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports lacks "f16c").
  static const bool has_f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has_f16c ? level : SimdLevel::kScalar;
}

const Kernels& KernelsFor(QuantType type, SimdLevel level) {
  switch (type) {
    case QuantType::kQ8_0:
      return KernelsOfLevel<QuantType::kQ8_0>(level);
    case QuantType::kQ4_0:
      return KernelsOfLevel<QuantType::kQ4_0>(level);
    default:
      break;
  }
  return KernelsOfLevel<QuantType::kQ4_1>(level);
}

}  // namespace

const char* QuantTypeName(QuantType type) {
  static constexpr const char* kNames[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                           "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};
  return kNames[static_cast<int>(type)];
}

int QuantBlockValues(QuantType type) {
  const WideFormat* wide = WideFormatOf(type);
  return wide != nullptr ? wide->values : kQuantBlock;
}

int64_t QuantBlockBytes(QuantType type) {
  if (const WideFormat* wide = WideFormatOf(type)) return wide->bytes;
  switch (type) {
    case QuantType::kQ8_0:
      return kBlockBytes<QuantType::kQ8_0>;
    case QuantType::kQ4_0:
      return kBlockBytes<QuantType::kQ4_0>;
    default:
      break;
  }
  return kBlockBytes<QuantType::kQ4_1>;
}

void DequantizeBlocks(QuantType type, const void* blocks, int64_t count, float* out) {
  LOOM_CHECK_EQ(count % QuantBlockValues(type), 0);
  if (const WideFormat* wide = WideFormatOf(type)) {
    const auto* b = static_cast<const std::byte*>(blocks);
    for (int64_t i = 0; i < count / wide->values; ++i) {
      wide->decode(b + i * wide->bytes, out + i * wide->values);
    }
    return;
  }
  KernelsFor(type, SimdLevel::kScalar)
      .dequant(static_cast<const std::byte*>(blocks), count / kQuantBlock, out);
}

void MatmulQuantRef(const MatmulQuantParams& p) {
  LOOM_CHECK_EQ(p.k % QuantBlockValues(p.type), 0);
  const int64_t row_bytes = p.k / QuantBlockValues(p.type) * QuantBlockBytes(p.type);
  std::vector<float> w(p.k);
  for (int32_t j = 0; j < p.n; ++j) {
    DequantizeBlocks(p.type, static_cast<const std::byte*>(p.w) + j * row_bytes, p.k, w.data());
    for (int32_t i = 0; i < p.m; ++i) {
      double acc = 0.0;
      for (int32_t kk = 0; kk < p.k; ++kk) {
        acc += static_cast<double>(p.x[static_cast<int64_t>(i) * p.ldx + kk]) * w[kk];
      }
      if (p.bias != nullptr) acc += p.bias[j];
      p.y[static_cast<int64_t>(i) * p.ldy + j] = static_cast<float>(acc);
    }
  }
}

void MatmulQuant(const MatmulQuantParams& p, ParallelFor& pool, SimdLevel level) {
  LOOM_CHECK_EQ(p.k % QuantBlockValues(p.type), 0);
  LOOM_CHECK_GE(p.ldx, p.k);
  LOOM_CHECK_GE(p.ldy, p.n);
  level = WithF16c(level);
  const WideFormat* wide = WideFormatOf(p.type);
  const Kernels& kernels = KernelsFor(p.type, level);
  const auto* w = static_cast<const std::byte*>(p.w);
  const int blocks = p.k / QuantBlockValues(p.type);
  const int64_t row_bytes = blocks * QuantBlockBytes(p.type);
  const int64_t even = (p.n + pool.NumThreads() - 1) / pool.NumThreads();
  const int64_t rows_per_task =
      std::clamp<int64_t>((even + kNr - 1) / kNr * kNr, kRowsPerSlice, kMaxRowsPerTask);
  if (p.m >= kWidenMinRows || wide != nullptr) {
    pool.Run(p.n, rows_per_task, [&](int64_t n_begin, int64_t n_end) {
      thread_local std::vector<float> w_f32;
      w_f32.resize(static_cast<size_t>(kRowsPerSlice) * p.k);
      for (int64_t begin = n_begin; begin < n_end; begin += kRowsPerSlice) {
        const int64_t rows = std::min(kRowsPerSlice, n_end - begin);
        if (wide != nullptr) {
          DequantizeBlocks(p.type, w + begin * row_bytes, rows * p.k, w_f32.data());
        } else {
          kernels.dequant(w + begin * row_bytes, rows * blocks, w_f32.data());
        }
        MatmulSerial({p.x, w_f32.data(), p.bias ? p.bias + begin : nullptr, p.y + begin, p.m,
                      static_cast<int32_t>(rows), p.k, p.ldx, p.ldy},
                     level);
      }
    });
    return;
  }
  pool.Run(p.n, rows_per_task, [&](int64_t n_begin, int64_t n_end) {
    for (int64_t i = 0; i < p.m; i += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, p.m - i));
      for (int64_t j = n_begin; j < n_end; j += kNr) {
        const int nr = static_cast<int>(std::min<int64_t>(kNr, n_end - j));
        const Tile t{p.x + i * p.ldx,     p.ldx,  w + j * row_bytes,
                     row_bytes,           blocks, p.bias ? p.bias + j : nullptr,
                     p.y + i * p.ldy + j, p.ldy};
        kernels.tiles[mr - 1][nr - 1](t);
      }
    }
  });
}

}  // namespace loom::kernels::cpu
