#include "kernels/cpu/matmul_quant_int8.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/matmul_quant_blocks.h"
#include "kernels/cpu/simd_reduce.h"

namespace loom::kernels::cpu::int8 {
namespace {

#define LOOM_INT8_AVX2 __attribute__((target("avx2,fma,f16c")))

constexpr int kRows = 8;                  // rows of W per panel: one float lane each
constexpr int kMr = 4;                    // rows of x per block of outputs
constexpr int kGroups = kQuantBlock / 4;  // groups of 4 values per block

// x in blocks of 32 int8 values: x ~ scale * q.
struct Activations {
  std::vector<int8_t> q;          // [m, k]
  std::vector<float> scale;       // [m, blocks]
  std::vector<int32_t> sum;       // [m, blocks]: the sum of the block's q
  std::vector<float> scaled_sum;  // [m, blocks]: scale * sum
  int blocks = 0;
};

// One panel of W: block b's group g holds the 4 values of each row r at
// bytes [(b * kGroups + g) * 32 + 4 r, + 4), unsigned 0..15.
struct Panel {
  std::vector<uint8_t> q;  // [blocks, kGroups, kRows, 4]
  std::vector<float> d;    // [blocks, kRows]
  std::vector<float> m;    // [blocks, kRows]: Q4_1's offsets
};

// One row of x: scale = max |x| / 127 per block, q = x / scale rounded to
// nearest (even), so |q| <= 127.
LOOM_INT8_AVX2 void QuantizeRow(const float* x, int blocks, int8_t* q, float* scale, int32_t* sum,
                                float* scaled_sum) {
  for (int b = 0; b < blocks; ++b) {
    __m256 v[4];
    const float max = LoadBlock32(x + b * kQuantBlock, v);
    const float d = max / 127.0f;
    const __m256 inv = _mm256_set1_ps(max > 0.0f ? 127.0f / max : 0.0f);
    __m256i qi[4];
    for (int g = 0; g < 4; ++g) qi[g] = _mm256_cvtps_epi32(_mm256_mul_ps(v[g], inv));
    // packs work per 128-bit lane: the permute restores the order.
    const __m256i q16 =
        _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    const __m256i q8 = _mm256_permutevar8x32_epi32(q16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQuantBlock), q8);
    const int32_t s =
        SumI32(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
    scale[b] = d;
    sum[b] = s;
    scaled_sum[b] = d * static_cast<float>(s);
  }
}

void Quantize(const MatmulQuantParams& p, ParallelFor& pool, Activations& a) {
  a.blocks = p.k / kQuantBlock;
  a.q.resize(static_cast<size_t>(p.m) * p.k);
  a.scale.resize(static_cast<size_t>(p.m) * a.blocks);
  a.sum.resize(a.scale.size());
  a.scaled_sum.resize(a.scale.size());
  pool.Run(p.m, 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const size_t at = static_cast<size_t>(i) * a.blocks;
      QuantizeRow(p.x + i * p.ldx, a.blocks, a.q.data() + i * p.k, a.scale.data() + at,
                  a.sum.data() + at, a.scaled_sum.data() + at);
    }
  });
}

// r[i] holds dword g of row i at index g; afterwards r[g] holds dword g of
// every row, row i at index i.
LOOM_INT8_AVX2 inline void Transpose8x8(__m256i (&r)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
    u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int g = 0; g < 4; ++g) {
    r[g] = _mm256_permute2x128_si256(u[g], u[g + 4], 0x20);
    r[g + 4] = _mm256_permute2x128_si256(u[g], u[g + 4], 0x31);
  }
}

// The formats of the int8 path: the block's bytes, whether it has an offset
// m (x = d q + m), and the bias its unsigned values carry (x = d (q - bias)).
// Q8_0's values are signed.
struct Format {
  int64_t bytes;
  bool has_min;
  int32_t bias;
};

constexpr Format FormatOf(QuantType t) {
  switch (t) {
    case QuantType::kQ4_0:
      return {sizeof(BlockQ4_0), false, 8};
    case QuantType::kQ4_1:
      return {sizeof(BlockQ4_1), true, 0};
    case QuantType::kQ5_0:
      return {sizeof(BlockQ5_0), false, 16};
    case QuantType::kQ5_1:
      return {sizeof(BlockQ5_1), true, 0};
    default:
      return {sizeof(BlockQ8_0), false, 0};
  }
}

constexpr bool IsFive(QuantType t) { return t == QuantType::kQ5_0 || t == QuantType::kQ5_1; }

// The 32 low nibbles then high nibbles of 16 bytes: values 0..15, 16..31.
LOOM_INT8_AVX2 inline __m256i Nibbles(const std::byte* qs) {
  const __m128i low = _mm_set1_epi8(0x0f);
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low), _mm_and_si128(q, low));
}

// 0x10 in byte j where bit j of the little-endian word qh is set.
LOOM_INT8_AVX2 inline __m256i FifthBits(const std::byte* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  // Byte j takes byte j / 8 of the word (every 32-bit lane holds all four).
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// One block's 32 values in order: unsigned q for the 4- and 5-bit formats,
// signed q for Q8_0; its scale d and offset m.
template <QuantType T>
LOOM_INT8_AVX2 inline __m256i BlockValues(const std::byte* block, float& d, float& m) {
  uint16_t dm[2];
  std::memcpy(dm, block, sizeof(dm));
  d = _cvtsh_ss(dm[0]);
  m = FormatOf(T).has_min ? _cvtsh_ss(dm[1]) : 0.0f;
  if constexpr (T == QuantType::kQ8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  } else if constexpr (IsFive(T)) {
    constexpr int kQh = FormatOf(T).has_min ? 4 : 2;
    return _mm256_or_si256(Nibbles(block + kQh + 4), FifthBits(block + kQh));
  } else {
    return Nibbles(block + (FormatOf(T).has_min ? 4 : 2));
  }
}

// Rows [0, rows) of W (rows <= kRows; the panel's others are zero).
template <QuantType T>
LOOM_INT8_AVX2 void PackPanel(const std::byte* w, int64_t row_bytes, int rows, int blocks,
                              Panel& panel) {
  panel.q.resize(static_cast<size_t>(blocks) * kGroups * kRows * 4);
  panel.d.assign(static_cast<size_t>(blocks) * kRows, 0.0f);
  panel.m.assign(panel.d.size(), 0.0f);
  for (int b = 0; b < blocks; ++b) {
    __m256i r[kRows];
    for (int row = 0; row < kRows; ++row) {
      if (row >= rows) {
        r[row] = _mm256_setzero_si256();
        continue;
      }
      r[row] = BlockValues<T>(w + row * row_bytes + b * FormatOf(T).bytes, panel.d[b * kRows + row],
                              panel.m[b * kRows + row]);
    }
    Transpose8x8(r);
    for (int g = 0; g < kGroups; ++g) {
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(panel.q.data() + (static_cast<size_t>(b) * kGroups + g) * 32),
          r[g]);
    }
  }
}

// Outputs of MR rows of x (from row i) by the panel's columns.
struct Outputs {
  float* y;  // first output of row i
  int64_t ldy;
  int columns;        // 1..kRows real columns
  const float* bias;  // [columns] or null
};

template <QuantType T, int MR>
LOOM_INT8_AVX2 void Block(const Activations& a, int64_t i, int64_t k, const Panel& panel,
                          const Outputs& out) {
  const __m256i ones = _mm256_set1_epi16(1);
  // Groups whose 16-bit pair sums add up before widening: 8 for 4-bit values
  // (8 * 2 * 15 * 127 = 30480), 4 for 5-bit (4 * 2 * 31 * 127 = 31496), 1 for
  // Q8_0 (2 * 128 * 127 = 32512: |w| times x with w's sign).
  constexpr int kRun = T == QuantType::kQ8_0 ? 1 : IsFive(T) ? 4 : kGroups;
  __m256 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  for (int b = 0; b < a.blocks; ++b) {
    const uint8_t* wq = panel.q.data() + static_cast<size_t>(b) * kGroups * 32;
    __m256i dot[MR];
    __m256i dot16[MR];
    for (int r = 0; r < MR; ++r) dot[r] = dot16[r] = _mm256_setzero_si256();
    for (int g = 0; g < kGroups; ++g) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + 32 * g));
      const __m256i wu = T == QuantType::kQ8_0 ? _mm256_abs_epi8(w) : w;
      for (int r = 0; r < MR; ++r) {
        int32_t x4;
        std::memcpy(&x4, a.q.data() + (i + r) * k + b * kQuantBlock + 4 * g, sizeof(x4));
        __m256i xv = _mm256_set1_epi32(x4);
        if constexpr (T == QuantType::kQ8_0) xv = _mm256_sign_epi8(xv, w);
        const __m256i prod = _mm256_maddubs_epi16(wu, xv);
        dot16[r] = _mm256_add_epi16(dot16[r], prod);
        if (g % kRun == kRun - 1) {
          dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(dot16[r], ones));
          dot16[r] = _mm256_setzero_si256();
        }
      }
    }
    const __m256 d = _mm256_loadu_ps(panel.d.data() + b * kRows);
    for (int r = 0; r < MR; ++r) {
      const size_t xb = static_cast<size_t>(i + r) * a.blocks + b;
      if constexpr (FormatOf(T).bias != 0) {  // q - 8 or q - 16
        dot[r] = _mm256_sub_epi32(dot[r], _mm256_set1_epi32(FormatOf(T).bias * a.sum[xb]));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]),
                               _mm256_mul_ps(d, _mm256_set1_ps(a.scale[xb])), acc[r]);
      if constexpr (FormatOf(T).has_min) {
        acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(panel.m.data() + b * kRows),
                                 _mm256_set1_ps(a.scaled_sum[xb]), acc[r]);
      }
    }
  }
  float row[kRows];
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(row, acc[r]);
    float* y = out.y + r * out.ldy;
    for (int j = 0; j < out.columns; ++j) y[j] = row[j] + (out.bias ? out.bias[j] : 0.0f);
  }
}

template <QuantType T>
void RunPanels(const MatmulQuantParams& p, const Activations& a, ParallelFor& pool,
               int64_t rows_per_task) {
  using BlockFn = void (*)(const Activations&, int64_t, int64_t, const Panel&, const Outputs&);
  static constexpr BlockFn kBlocks[kMr] = {Block<T, 1>, Block<T, 2>, Block<T, 3>, Block<T, 4>};
  const int64_t row_bytes = static_cast<int64_t>(a.blocks) * QuantBlockBytes(T);
  const int64_t task_rows = (rows_per_task + kRows - 1) / kRows * kRows;
  pool.Run(p.n, task_rows, [&](int64_t n_begin, int64_t n_end) {
    thread_local Panel panel;
    for (int64_t j = n_begin; j < n_end; j += kRows) {
      const int columns = static_cast<int>(std::min<int64_t>(kRows, n_end - j));
      PackPanel<T>(static_cast<const std::byte*>(p.w) + j * row_bytes, row_bytes, columns, a.blocks,
                   panel);
      for (int64_t i = 0; i < p.m; i += kMr) {
        const int mr = static_cast<int>(std::min<int64_t>(kMr, p.m - i));
        kBlocks[mr - 1](a, i, p.k, panel,
                        {p.y + i * p.ldy + j, p.ldy, columns, p.bias ? p.bias + j : nullptr});
      }
    }
  });
}

}  // namespace

bool Supported(QuantType type, SimdLevel level) {
  switch (type) {
    case QuantType::kQ8_0:
    case QuantType::kQ4_0:
    case QuantType::kQ4_1:
    case QuantType::kQ5_0:
    case QuantType::kQ5_1:
      return level >= SimdLevel::kAvx2;
    default:
      return false;
  }
}

void MatmulInt8(const MatmulQuantParams& p, ParallelFor& pool, int64_t rows_per_task) {
  LOOM_CHECK(Supported(p.type, SimdLevel::kAvx2));
  LOOM_CHECK_EQ(p.k % kQuantBlock, 0);
  thread_local Activations a;
  Quantize(p, pool, a);
  switch (p.type) {
    case QuantType::kQ8_0:
      return RunPanels<QuantType::kQ8_0>(p, a, pool, rows_per_task);
    case QuantType::kQ4_0:
      return RunPanels<QuantType::kQ4_0>(p, a, pool, rows_per_task);
    case QuantType::kQ4_1:
      return RunPanels<QuantType::kQ4_1>(p, a, pool, rows_per_task);
    case QuantType::kQ5_0:
      return RunPanels<QuantType::kQ5_0>(p, a, pool, rows_per_task);
    default:
      return RunPanels<QuantType::kQ5_1>(p, a, pool, rows_per_task);
  }
}

}  // namespace loom::kernels::cpu::int8
