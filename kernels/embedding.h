// Token embedding lookup: out[t] = table[token_ids[t]] * scale (Gemma scales
// its embeddings by sqrt(hidden); the product is rounded as float32).
#pragma once

#include <cstdint>

namespace loom::kernels {

class ParallelFor;

template <typename T>
struct EmbeddingParams {
  const int32_t* token_ids = nullptr;  // [num_tokens], each in [0, vocab_size)
  const T* table = nullptr;            // [vocab_size, hidden]
  T* out = nullptr;                    // [num_tokens, hidden]
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  int32_t vocab_size = 0;
  float scale = 1.0f;
};

namespace cpu {
void EmbeddingRef(const EmbeddingParams<float>& p);
void Embedding(const EmbeddingParams<float>& p, ParallelFor& pool);
}  // namespace cpu

}  // namespace loom::kernels
