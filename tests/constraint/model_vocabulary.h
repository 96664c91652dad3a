// The default model's vocabulary as the constraint compiler takes it, for the
// tests and benchmarks that need a real tokenizer (skipped without the GGUF).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "constraint/constraint_compiler.h"
#include "formats/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace loom::testing {

// Token bytes, with special tokens left empty (never text), and the EOS ids.
inline ConstraintVocabulary VocabularyOf(const Tokenizer& tokenizer) {
  ConstraintVocabulary v;
  v.vocab_size = tokenizer.vocab_size();
  v.token_bytes.resize(static_cast<size_t>(v.vocab_size));
  for (int32_t id = 0; id < v.vocab_size; ++id) {
    if (!tokenizer.IsSpecial(id)) v.token_bytes[id] = tokenizer.TokenBytes(id);
  }
  v.eos_token_ids = tokenizer.eos_ids();
  return v;
}

inline absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  if (!gguf.ok()) return gguf.status();
  return Tokenizer::FromGguf(**gguf);
}

}  // namespace loom::testing
