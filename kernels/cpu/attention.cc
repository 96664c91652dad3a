// Paged attention on the CPU. The reference is the textbook two-pass softmax
// per (token, head). The fast path works per (token, kv head, partition): the
// query heads sharing a kv head read each K/V row once (GQA), partitions of
// long contexts run in parallel, and a reduce merges them (flash-decoding);
// each item runs attention_decode.cc's kernel on AVX2. Prefill chunks go to
// attention_prefill.cc, tiled over queries.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/attention_decode.h"
#include "kernels/cpu/attention_prefill.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

std::vector<int32_t> TokenSeqs(const PagedKv<float>& kv) {
  std::vector<int32_t> seq_of(kv.num_tokens);
  for (int32_t s = 0; s < kv.num_seqs; ++s) {
    for (int32_t t = kv.query_start[s]; t < kv.query_start[s + 1]; ++t) seq_of[t] = s;
  }
  LOOM_CHECK_EQ(kv.query_start[kv.num_seqs], kv.num_tokens);
  return seq_of;
}

void CheckToken(const PagedKv<float>& kv, int32_t seq, int32_t t) {
  LOOM_CHECK(kv.positions[t] >= 0 && kv.positions[t] < kv.context_lens[seq])
      << "token " << t << " position " << kv.positions[t] << " context " << kv.context_lens[seq];
  LOOM_CHECK_LE(kv.context_lens[seq], kv.max_blocks_per_seq / kv.block_stride * kv.block_size);
}

// Sixteen independent lanes so the compiler vectorises without reassociation.
inline float Dot(const float* a, const float* b, int32_t n) {
  float lanes[16] = {};
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float l : lanes) sum += l;
  return sum;
}

// Calls fn(i, offset) for positions begin + i in [begin, end) of (seq, kv_head),
// offset being the element offset of its K (and V) row: one block-table lookup
// per block instead of a division per position.
template <typename Fn>
inline void ForEachPosition(const PagedKv<float>& kv, int32_t seq, int32_t kv_head, int32_t begin,
                            int32_t end, Fn fn) {
  const int32_t* table = kv.block_tables + static_cast<size_t>(seq) * kv.max_blocks_per_seq;
  int32_t slot = begin % kv.block_size;
  for (int32_t b = begin / kv.block_size, pos = begin; pos < end; ++b, slot = 0) {
    const size_t base = kv.Offset(table[static_cast<size_t>(b) * kv.block_stride], kv_head, 0);
    for (; slot < kv.block_size && pos < end; ++slot, ++pos) {
      fn(pos - begin, base + static_cast<size_t>(slot) * kv.head_dim);
    }
  }
}

using Item = AttendItem;

// scores[g * len + i] = scale * q_g . k_i for the group's query heads g over
// the item's positions i.
__attribute__((always_inline)) inline void ScoreItem(const PagedAttentionParams<float>& p,
                                                     const Item& it, float* scores) {
  const PagedKv<float>& kv = p.kv;
  const int32_t d = kv.head_dim;
  const int32_t group = p.num_heads / kv.num_kv_heads;
  const int32_t len = it.end - it.begin;
  const float* q = p.q + static_cast<int64_t>(it.token) * p.q_stride +
                   static_cast<int64_t>(it.kv_head) * group * d;
  ForEachPosition(kv, it.seq, it.kv_head, it.begin, it.end, [&](int32_t i, size_t offset) {
    const float* k = kv.k_cache + offset;
    for (int32_t g = 0; g < group; ++g) scores[g * len + i] = Dot(q + g * d, k, d) * p.scale;
  });
}

// Each head's scores to exp(score - max), in place, with the max and exp-sum.
__attribute__((always_inline)) inline void SoftmaxItem(int32_t group, int32_t len, float* scores,
                                                       float* max_out, float* sum_out) {
  for (int32_t g = 0; g < group; ++g) {
    float* s = scores + g * len;
    float m = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < len; ++i) m = std::max(m, s[i]);
    float sum = 0.0f;
    for (int32_t i = 0; i < len; ++i) {
      s[i] = std::exp(s[i] - m);
      sum += s[i];
    }
    max_out[g] = m;
    sum_out[g] = sum;
  }
}

// acc [group, head_dim] = sum over positions of weight * v.
__attribute__((always_inline)) inline void AccumulateValues(const PagedAttentionParams<float>& p,
                                                            const Item& it, const float* scores,
                                                            float* acc) {
  const PagedKv<float>& kv = p.kv;
  const int32_t d = kv.head_dim;
  const int32_t group = p.num_heads / kv.num_kv_heads;
  const int32_t len = it.end - it.begin;
  std::fill(acc, acc + group * d, 0.0f);
  ForEachPosition(kv, it.seq, it.kv_head, it.begin, it.end, [&](int32_t i, size_t offset) {
    const float* v = kv.v_cache + offset;
    for (int32_t g = 0; g < group; ++g) {
      const float w = scores[g * len + i];
      float* a = acc + g * d;
      for (int32_t j = 0; j < d; ++j) a[j] += w * v[j];
    }
  });
}

// Attends the query heads of one kv head over positions [begin, end). Writes
// unnormalised sums to acc [group, head_dim] and each head's max and exp-sum.
__attribute__((always_inline)) inline void AttendItemBody(const PagedAttentionParams<float>& p,
                                                          const Item& it, float* scores, float* acc,
                                                          float* max_out, float* sum_out) {
  ScoreItem(p, it, scores);
  SoftmaxItem(p.num_heads / p.kv.num_kv_heads, it.end - it.begin, scores, max_out, sum_out);
  AccumulateValues(p, it, scores, acc);
}

using AttendFn = void (*)(const PagedAttentionParams<float>&, const Item&, float*, float*, float*,
                          float*);

__attribute__((target("avx2,fma"))) void AttendItemAvx2(const PagedAttentionParams<float>& p,
                                                        const Item& it, float* scores, float* acc,
                                                        float* max_out, float* sum_out) {
  AttendItemBody(p, it, scores, acc, max_out, sum_out);
}
void AttendItemScalar(const PagedAttentionParams<float>& p, const Item& it, float* scores,
                      float* acc, float* max_out, float* sum_out) {
  AttendItemBody(p, it, scores, acc, max_out, sum_out);
}

}  // namespace

void PagedAttentionRef(const PagedAttentionParams<float>& p) {
  const PagedKv<float>& kv = p.kv;
  const int32_t d = kv.head_dim;
  const int32_t group = p.num_heads / kv.num_kv_heads;
  const std::vector<int32_t> seq_of = TokenSeqs(kv);
  std::vector<double> scores;
  for (int32_t t = 0; t < kv.num_tokens; ++t) {
    const int32_t s = seq_of[t];
    CheckToken(kv, s, t);
    const int32_t first = kv.WindowStart(kv.positions[t]);
    const int32_t n = kv.positions[t] + 1 - first;
    scores.assign(n, 0.0);
    for (int32_t h = 0; h < p.num_heads; ++h) {
      const int32_t kvh = h / group;
      const float* q = p.q + static_cast<int64_t>(t) * p.q_stride + static_cast<int64_t>(h) * d;
      double m = -std::numeric_limits<double>::infinity();
      for (int32_t i = 0; i < n; ++i) {
        const float* k = kv.k_cache + kv.PositionOffset(s, kvh, first + i);
        double dot = 0.0;
        for (int32_t j = 0; j < d; ++j) dot += static_cast<double>(q[j]) * k[j];
        scores[i] = dot * p.scale;
        m = std::max(m, scores[i]);
      }
      double sum = 0.0;
      for (double& sc : scores) {
        sc = std::exp(sc - m);
        sum += sc;
      }
      float* out = p.out + static_cast<int64_t>(t) * p.out_stride + static_cast<int64_t>(h) * d;
      for (int32_t j = 0; j < d; ++j) {
        double o = 0.0;
        for (int32_t i = 0; i < n; ++i) {
          o += scores[i] * kv.v_cache[kv.PositionOffset(s, kvh, first + i) + j];
        }
        out[j] = static_cast<float>(o / sum);
      }
    }
  }
}

namespace {

// How PagedAttention splits each token's context: into partitions of
// partition_size positions (flash-decoding), or one partition when it is 0.
// Partition i covers positions [i * partition_size, (i + 1) * partition_size)
// clipped to the token's window, so the partitions before FirstPart are empty.
struct Partitioning {
  bool split;
  int32_t parts;  // partitions per (token, head) in the partial buffers

  int32_t NumParts(const PagedAttentionParams<float>& p, int32_t t) const {
    const int32_t n = p.kv.positions[t] + 1;
    return split ? (n + p.partition_size - 1) / p.partition_size : 1;
  }
  int32_t FirstPart(const PagedAttentionParams<float>& p, int32_t t) const {
    return split ? p.kv.WindowStart(p.kv.positions[t]) / p.partition_size : 0;
  }
};

Partitioning CheckPartitioning(const PagedAttentionParams<float>& p) {
  const PagedKv<float>& kv = p.kv;
  LOOM_CHECK_EQ(p.num_heads % kv.num_kv_heads, 0);
  const Partitioning parts{p.partition_size > 0, p.partition_size > 0 ? p.max_partitions : 1};
  if (parts.split) {
    LOOM_CHECK_EQ(p.partition_size % kv.block_size, 0);
    LOOM_CHECK(p.partial_out && p.partial_max && p.partial_sum);
  }
  return parts;
}

void CheckTokens(const PagedAttentionParams<float>& p, const Partitioning& parts,
                 const std::vector<int32_t>& seq_of) {
  for (int32_t t = 0; t < p.kv.num_tokens; ++t) {
    CheckToken(p.kv, seq_of[t], t);
    LOOM_CHECK_LE(parts.NumParts(p, t), parts.parts);
  }
}

// The vector kernel (attention_decode.h) where it applies, else the
// compiler-vectorised loops.
AttendFn AttendForCpu(int32_t head_dim) {
  if (VectorDecodeSupported(head_dim)) return AttendItemVector;
  return DetectedSimd() >= SimdLevel::kAvx2 ? AttendItemAvx2 : AttendItemScalar;
}

// One kv head's results for its query heads: normalised into out when the
// context is one partition (n_parts counts the non-empty ones), else kept as
// a partial for the reduce.
void StoreItem(const PagedAttentionParams<float>& p, const Partitioning& parts, const Item& it,
               int32_t part, int32_t n_parts, const float* acc, const float* maxes,
               const float* sums) {
  const int32_t d = p.kv.head_dim;
  const int32_t group = p.num_heads / p.kv.num_kv_heads;
  const int32_t t = it.token;
  for (int32_t g = 0; g < group; ++g) {
    const int32_t h = it.kv_head * group + g;
    if (n_parts == 1) {
      float* out = p.out + static_cast<int64_t>(t) * p.out_stride + static_cast<int64_t>(h) * d;
      const float inv = 1.0f / sums[g];
      for (int32_t j = 0; j < d; ++j) out[j] = acc[g * d + j] * inv;
    } else {
      const int64_t slot = (static_cast<int64_t>(t) * p.num_heads + h) * parts.parts + part;
      std::copy(acc + g * d, acc + (g + 1) * d, p.partial_out + slot * d);
      p.partial_max[slot] = maxes[g];
      p.partial_sum[slot] = sums[g];
    }
  }
}

// Every (token, kv head, partition) item of the tokens PrefillAttention does
// not take, in parallel.
void AttendItems(const PagedAttentionParams<float>& p, const Partitioning& parts,
                 const std::vector<int32_t>& seq_of, const std::vector<char>& tiled,
                 ParallelFor& pool) {
  const PagedKv<float>& kv = p.kv;
  const int32_t d = kv.head_dim;
  const int32_t group = p.num_heads / kv.num_kv_heads;
  const AttendFn attend = AttendForCpu(d);
  const int64_t num_items = static_cast<int64_t>(kv.num_tokens) * kv.num_kv_heads * parts.parts;
  pool.Run(num_items, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    for (int64_t idx = begin; idx < end; ++idx) {
      const int32_t part = static_cast<int32_t>(idx % parts.parts);
      const int32_t kvh = static_cast<int32_t>(idx / parts.parts % kv.num_kv_heads);
      const int32_t t = static_cast<int32_t>(idx / parts.parts / kv.num_kv_heads);
      const int32_t n_parts = parts.NumParts(p, t);
      const int32_t first_part = parts.FirstPart(p, t);
      if (part < first_part || part >= n_parts || tiled[t]) continue;
      const int32_t n = kv.positions[t] + 1;
      const int32_t first = kv.WindowStart(kv.positions[t]);
      const Item it{seq_of[t], t, kvh,
                    parts.split ? std::max(first, part * p.partition_size) : first,
                    parts.split ? std::min(n, (part + 1) * p.partition_size) : n};
      const int32_t len = it.end - it.begin;
      scratch.resize(static_cast<size_t>(group) * (len + d + 2));
      float* scores = scratch.data();
      float* acc = scores + group * len;
      float* maxes = acc + group * d;
      float* sums = maxes + group;
      attend(p, it, scores, acc, maxes, sums);
      StoreItem(p, parts, it, part, n_parts - first_part, acc, maxes, sums);
    }
  });
}

// Rescales one (token, head)'s partition sums to the global max and normalises.
void ReduceHead(const PagedAttentionParams<float>& p, const Partitioning& parts, int64_t th) {
  const int32_t d = p.kv.head_dim;
  const int32_t t = static_cast<int32_t>(th / p.num_heads);
  const int32_t h = static_cast<int32_t>(th % p.num_heads);
  const int32_t n_parts = parts.NumParts(p, t);
  const int32_t first_part = parts.FirstPart(p, t);
  if (n_parts - first_part == 1) return;
  const int64_t base = th * parts.parts;
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = first_part; i < n_parts; ++i) m = std::max(m, p.partial_max[base + i]);
  float total = 0.0f;
  float* out = p.out + static_cast<int64_t>(t) * p.out_stride + static_cast<int64_t>(h) * d;
  std::fill(out, out + d, 0.0f);
  for (int32_t i = first_part; i < n_parts; ++i) {
    const float w = std::exp(p.partial_max[base + i] - m);
    total += w * p.partial_sum[base + i];
    const float* po = p.partial_out + (base + i) * d;
    for (int32_t j = 0; j < d; ++j) out[j] += w * po[j];
  }
  const float inv = 1.0f / total;
  for (int32_t j = 0; j < d; ++j) out[j] *= inv;
}

}  // namespace

void PagedAttention(const PagedAttentionParams<float>& p, ParallelFor& pool) {
  const Partitioning parts = CheckPartitioning(p);
  const std::vector<int32_t> seq_of = TokenSeqs(p.kv);
  CheckTokens(p, parts, seq_of);
  std::vector<char> tiled(p.kv.num_tokens);
  bool any_tiled = false;
  for (int32_t t = 0; t < p.kv.num_tokens; ++t) {
    tiled[t] = IsTiledPrefill(p.kv, seq_of[t]);
    any_tiled = any_tiled || tiled[t];
  }
  if (any_tiled) PrefillAttention(p, pool);
  AttendItems(p, parts, seq_of, tiled, pool);
  if (!parts.split) return;
  pool.Run(static_cast<int64_t>(p.kv.num_tokens) * p.num_heads, 8, [&](int64_t begin, int64_t end) {
    for (int64_t th = begin; th < end; ++th) {
      if (!tiled[th / p.num_heads]) ReduceHead(p, parts, th);
    }
  });
}

}  // namespace loom::kernels::cpu
