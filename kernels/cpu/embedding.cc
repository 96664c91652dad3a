#include "kernels/embedding.h"

#include <cstring>

#include "base/check.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {
namespace {

void EmbedRows(const EmbeddingParams<float>& p, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const int32_t id = p.token_ids[t];
    LOOM_CHECK(id >= 0 && id < p.vocab_size) << "token id " << id;
    const float* row = p.table + static_cast<int64_t>(id) * p.hidden;
    float* out = p.out + t * p.hidden;
    if (p.scale == 1.0f) {
      std::memcpy(out, row, sizeof(float) * p.hidden);
    } else {
      for (int32_t i = 0; i < p.hidden; ++i) out[i] = row[i] * p.scale;
    }
  }
}

}  // namespace

void EmbeddingRef(const EmbeddingParams<float>& p) { EmbedRows(p, 0, p.num_tokens); }

void Embedding(const EmbeddingParams<float>& p, ParallelFor& pool) {
  pool.Run(p.num_tokens, 16, [&](int64_t begin, int64_t end) { EmbedRows(p, begin, end); });
}

}  // namespace loom::kernels::cpu
