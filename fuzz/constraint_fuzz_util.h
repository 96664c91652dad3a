// What the constraint fuzz targets share: a small vocabulary of bytes and
// multi-byte pieces (JSON punctuation, keywords, UTF-8), tight compile limits,
// and a walk that checks every mask against AcceptToken token by token.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "constraint/constraint_compiler.h"
#include "types/constraint.h"

namespace loom::fuzz {

inline void Check(bool condition) {
  if (!condition) std::abort();
}

inline ConstraintVocabulary FuzzVocabulary() {
  ConstraintVocabulary v;
  for (int c = 0x20; c < 0x7f; ++c) v.token_bytes.push_back(std::string(1, static_cast<char>(c)));
  for (const char* piece : {"\n", "\t", "\":", "\",", "{\"", "\"}", "true", "false", "null", "12",
                            "  ", "\xc3\xa9", "\xc3", "\xa9", "\xe4\xb8\xad", "ab", "\\n", "]}"}) {
    v.token_bytes.push_back(piece);
  }
  v.eos_token_ids = {static_cast<int32_t>(v.token_bytes.size())};
  v.token_bytes.push_back("");
  v.vocab_size = static_cast<int32_t>(v.token_bytes.size());
  return v;
}

inline std::unique_ptr<ConstraintCompiler> FuzzCompiler() {
  return *ConstraintCompiler::Create(FuzzVocabulary(),
                                     ConstraintLimits{.max_text_bytes = 8192,
                                                      .max_states = 4000,
                                                      .max_compile_time = absl::Seconds(2),
                                                      .cache_capacity = 0});
}

// Up to `steps` tokens chosen by `choices` among the allowed ones; at every
// step the mask must say exactly what AcceptToken on a copy says, and
// rolling back everything must restore the first mask.
inline void CheckWalk(const TokenConstraint& constraint, const uint8_t* choices, size_t size,
                      int steps) {
  const int32_t vocab = constraint.vocab_size();
  std::unique_ptr<ConstraintMatcher> m = constraint.NewMatcher();
  std::vector<uint32_t> mask(TokenBitmaskWords(vocab)), first;
  for (int step = 0; step < steps && !m->IsTerminated(); ++step) {
    const bool any = m->FillNextTokenBitmask(mask);
    if (step == 0) first = mask;
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < vocab; ++t) {
      const bool bit = (mask[t >> 5] >> (t & 31)) & 1u;
      Check(bit == m->Clone()->AcceptToken(t));
      if (bit) allowed.push_back(t);
    }
    Check(any == !allowed.empty());
    if (allowed.empty()) break;
    const uint8_t pick = size > 0 ? choices[step % size] : 0;
    Check(m->AcceptToken(allowed[pick % allowed.size()]));
  }
  m->Rollback(m->num_accepted_tokens());
  if (!first.empty()) {
    m->FillNextTokenBitmask(mask);
    Check(mask == first);
  }
}

}  // namespace loom::fuzz
