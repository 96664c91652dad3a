// y = x W^T with W in ggml blocks: the policy of the shared register tiles
// (matmul_tiles.h) decodes W one block (32 values) at a time, and every value
// is decoded with the same
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
#include "kernels/cpu/matmul_kquant.h"
#include "kernels/cpu/matmul_quant_dot.h"
#include "kernels/cpu/matmul_quant_int16.h"
#include "kernels/cpu/matmul_quant_int8.h"
#include "kernels/cpu/matmul_tiles.h"

namespace loom::kernels::cpu {
namespace {

// Rows of W a task widens to float32 at once (kept in L1/L2 while every row of
// x passes over them).
constexpr int64_t kRowsPerSlice = 16;
// Rows of W per parallel task: about n / threads, so that each thread streams
// one long contiguous run of W (runs of 16 rows taken by the threads in turn
// leave the hardware prefetchers behind: batch-1 decode of SmolLM2 measured
// 2x slower), at most this many so that a thread the OS delays holds up little.
constexpr int64_t kMaxRowsPerTask = 256;
// From this many rows of x on, a task decodes its rows of W to float32 once
// per slice and runs the float32 tiles (or the panels); below it the tiles
// decode W in registers, once per 4 rows of x. Both give the same bits. With
// AVX2 the register path is faster up to 16 rows at least (SmolLM2, 16
// sequences: 31 ms a step against 36 ms widening; from 64 rows on, widening
// wins by about 10%).
constexpr int32_t kWidenMinRows = 32;
// With AVX-512 the float32 tiles run at about 180 GFLOP/s at 16 rows and the
// register tiles on Q4_1 at 135 (2 threads, BM_Matmul against
// BM_MatmulQuant), and widening wins from 8 rows on for every type whose
// decoding costs more than Q8_0's (BM_MatmulQuant at 8 rows: Q4_1 1536 x 576
// 98-113 against 109-151 us, Q5_0 4096 x 640 315-319 against 465-469, Q4_K
// 193-205 against 251-275, Q6_K 211-222 against 306-320; at 4 rows about
// equal). Whole steps, alternating runs on a 2-core VM: BM_Decode/16/2 (16
// sequences of SmolLM2) 37.5-49.7 ms, best 37.5, against 40.7-46.1, best
// 40.7; Gemma 3 270M at 16 streams (loom bench) 164 against 153 tok/s. Q8_0
// decodes in two instructions, and its large matrices (the output heads:
// 49152 x 576 at 8 rows 5.2-6.1 against 4.3-4.8 ms) keep the register path.
constexpr int32_t kWidenMinRowsAvx512 = 8;

// With int16_x: the int16 tiles (AVX-512 VNNI) from this many rows of x, the
// dot path (matmul_quant_dot.h) below them and, without VNNI, up to
// Dot16MaxRows; float32 past that.
constexpr int32_t kInt16TileMinRows = 8;

// The dot path reads a K-quant super-block's 8 blocks with two conversions
// and FMAs and is at least as fast as the float32 register tiles up to 16
// rows and more (BM_MatmulQuant 32768 x 2048 Q4_K with AVX2: 2.5 against 5.4
// ms at 1 row, 11.4 against 18.3 at 8, 26.3 against 29.6 at 16); the 32-value
// blocks (Q8_0, Q4_0/1, Q5_0/1) take one of each per block and row, and
// from 4 rows the float32 tiles, which decode W once per 4 rows, win.
int32_t Dot16MaxRows(QuantType type) { return QuantBlockValues(type) == kSuperBlock ? 32 : 3; }

// With quantize_x, the K-quants' int8 dots (the int8 panels take the 32-value
// blocks) up to this many rows; float32 past it.
constexpr int32_t kDot8MaxRows = 32;

int32_t WidenMinRows(QuantType type, SimdLevel level) {
  return level == SimdLevel::kAvx512 && type != QuantType::kQ8_0 ? kWidenMinRowsAvx512
                                                                 : kWidenMinRows;
}

// The decoders' SIMD levels (F16C widens the fp16 scales): the tiles' ones.
#define LOOM_AVX2 LOOM_TILES_AVX2
#define LOOM_AVX512 LOOM_TILES_AVX512

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

// The tiles' rows of W are one contiguous run of NR * row_bytes, and the next
// tiles' rows follow: while a tile reads its block b, the same share of the
// tile after next is fetched, which the hardware prefetchers, seeing NR
// interleaved streams of 20-34 byte steps, do too late (decode is bound by
// these reads).
template <QuantType T, int NR>
inline void PrefetchNextTile(const tiles::Tile<std::byte>& t, int b) {
  constexpr int64_t kStep = NR * kBlockBytes<T>;
  const char* next = reinterpret_cast<const char*>(t.w + 2 * NR * t.ldw) + b * kStep;
  for (int64_t off = 0; off < kStep; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
}

// One block per step; k is a whole number of blocks, so there is no tail.
template <QuantType T>
struct BlockWeights {
  using W = std::byte;
  static constexpr int kScalarStep = kQuantBlock;
  static constexpr int kAvx2Vectors = 4;
  static constexpr int kAvx512Vectors = 2;
  static constexpr bool kHasTail = false;

  static void LoadScalar(const std::byte* row, int kk, float* out) {
    DecodeScalar<T>(row + kk / kQuantBlock * kBlockBytes<T>, out);
  }
  LOOM_AVX2 static void LoadAvx2(const std::byte* row, int b, __m256 (&v)[4]) {
    DecodeAvx2<T>(row + b * kBlockBytes<T>, v);
  }
  LOOM_AVX512 static void LoadAvx512(const std::byte* row, int b, __m512 (&v)[2]) {
    DecodeAvx512<T>(row + b * kBlockBytes<T>, v[0], v[1]);
  }
  template <int NR>
  static void Prefetch(const tiles::Tile<std::byte>& t, int b) {
    PrefetchNextTile<T, NR>(t, b);
  }
};

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

using Kernels = QuantKernels;

template <QuantType T>
Kernels KernelsOfLevel(SimdLevel level) {
  const auto* tiles = &tiles::TilesFor<BlockWeights<T>>(level);
  switch (level) {
    case SimdLevel::kAvx512:
      return {tiles, DequantAvx512<T>};
    case SimdLevel::kAvx2:
      return {tiles, DequantAvx2<T>};
    case SimdLevel::kScalar:
      break;
  }
  return {tiles, DequantScalar<T>};
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

// Null tiles for the types decoded only by widening (Q2_K, Q3_K).
Kernels KernelsFor(QuantType type, SimdLevel level) {
  switch (type) {
    case QuantType::kQ8_0:
      return KernelsOfLevel<QuantType::kQ8_0>(level);
    case QuantType::kQ4_0:
      return KernelsOfLevel<QuantType::kQ4_0>(level);
    case QuantType::kQ4_1:
      return KernelsOfLevel<QuantType::kQ4_1>(level);
    default:
      break;
  }
  return RegisterDecodedKernels(type, level).value_or(Kernels{nullptr, nullptr});
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

bool HasInt8Dots(QuantType type, SimdLevel level) {
  return dot::Supported(type, WithF16c(level), dot::XBits::k8);
}

void MatmulQuant(const MatmulQuantParams& p, ParallelFor& pool, SimdLevel level) {
  LOOM_CHECK_EQ(p.k % QuantBlockValues(p.type), 0);
  LOOM_CHECK_GE(p.ldx, p.k);
  LOOM_CHECK_GE(p.ldy, p.n);
  level = WithF16c(level);
  const Kernels kernels = KernelsFor(p.type, level);
  const int blocks = p.k / QuantBlockValues(p.type);
  const int64_t row_bytes = blocks * QuantBlockBytes(p.type);
  const tiles::Operands<std::byte> ops{
      p.x, static_cast<const std::byte*>(p.w), row_bytes, p.bias, p.y, p.m, p.n, p.k, p.ldx, p.ldy};
  // A whole number of tasks per thread, each at most kMaxRowsPerTask rows:
  // 576 rows on 2 threads are 4 tasks of 144, not 256 + 256 + 64 (one thread
  // doing 320 while the other waits after 256).
  const int64_t threads = pool.NumThreads();
  const int64_t tasks =
      threads * ((p.n + threads * kMaxRowsPerTask - 1) / (threads * kMaxRowsPerTask));
  const int64_t even = (p.n + tasks - 1) / tasks;
  const int64_t rows_per_task = std::clamp<int64_t>(
      (even + tiles::kNr - 1) / tiles::kNr * tiles::kNr, kRowsPerSlice, kMaxRowsPerTask);
  if (p.quantize_x && int8::Supported(p.type, level)) {
    int8::MatmulInt8(p, pool, rows_per_task);
    return;
  }
  if (p.quantize_x && dot::Supported(p.type, level, dot::XBits::k8) && p.m <= kDot8MaxRows) {
    dot::MatmulDot(p, pool, rows_per_task, level, dot::XBits::k8);
    return;
  }
  if (p.int16_x && int16::Supported(p.type, level) && p.m >= kInt16TileMinRows) {
    int16::MatmulInt16(p, pool, rows_per_task);
    return;
  }
  if (p.int16_x && dot::Supported(p.type, level, dot::XBits::k16) && p.m <= Dot16MaxRows(p.type)) {
    dot::MatmulDot(p, pool, rows_per_task, level, dot::XBits::k16);
    return;
  }
  if (p.m >= WidenMinRows(p.type, level) || kernels.tiles == nullptr) {
    tiles::RunWidened(ops, pool, level, rows_per_task, kRowsPerSlice,
                      [&](const std::byte* rows, int64_t count, float* out) {
                        if (kernels.dequant != nullptr) {
                          kernels.dequant(rows, count * blocks, out);
                        } else {
                          DequantizeBlocks(p.type, rows, count * p.k, out);
                        }
                      });
    return;
  }
  tiles::RunTiles(ops, *kernels.tiles, pool, rows_per_task);
}

}  // namespace loom::kernels::cpu
