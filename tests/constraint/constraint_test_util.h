// Helpers for the constraint tests: a vocabulary of single bytes (so that
// token-level matching is byte-level matching), small multi-byte
// vocabularies, and the check every mask must pass: it equals, token by
// token, what AcceptToken on a copy of the matcher says.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "constraint/constraint_compiler.h"
#include "gtest/gtest.h"
#include "types/constraint.h"

namespace loom::testing {

// Tokens 0..255 are the bytes; 256 is EOS.
inline constexpr int32_t kByteEos = 256;

inline ConstraintVocabulary ByteVocabulary() {
  ConstraintVocabulary v;
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  v.token_bytes.push_back("");  // EOS spells nothing
  v.eos_token_ids = {kByteEos};
  v.vocab_size = 257;
  return v;
}

// The given tokens, then EOS as the last id.
inline ConstraintVocabulary WordVocabulary(std::vector<std::string> tokens) {
  ConstraintVocabulary v;
  v.token_bytes = std::move(tokens);
  v.eos_token_ids = {static_cast<int32_t>(v.token_bytes.size())};
  v.token_bytes.push_back("");
  v.vocab_size = static_cast<int32_t>(v.token_bytes.size());
  return v;
}

inline bool MaskHas(const std::vector<uint32_t>& mask, int32_t token) {
  return (mask[token >> 5] >> (token & 31)) & 1u;
}

// The matcher's mask, checked against AcceptToken on a clone for every token.
inline std::vector<uint32_t> CheckedMask(ConstraintMatcher& matcher, int32_t vocab_size) {
  std::vector<uint32_t> mask(TokenBitmaskWords(vocab_size));
  const bool any = matcher.FillNextTokenBitmask(mask);
  bool seen = false;
  for (int32_t t = 0; t < vocab_size; ++t) {
    std::unique_ptr<ConstraintMatcher> copy = matcher.Clone();
    const bool accepts = copy->AcceptToken(t);
    EXPECT_EQ(MaskHas(mask, t), accepts) << "token " << t;
    seen = seen || accepts;
  }
  EXPECT_EQ(any, seen);
  return mask;
}

// Feeds `text` one byte token at a time through a byte-vocabulary matcher,
// each byte checked against the mask; true when every byte was allowed and
// the text may end there (EOS allowed).
inline bool ByteMatch(const TokenConstraint& constraint, std::string_view text) {
  std::unique_ptr<ConstraintMatcher> m = constraint.NewMatcher();
  std::vector<uint32_t> mask(TokenBitmaskWords(constraint.vocab_size()));
  for (const char c : text) {
    const auto b = static_cast<int32_t>(static_cast<unsigned char>(c));
    m->FillNextTokenBitmask(mask);
    const bool allowed = MaskHas(mask, b);
    const bool accepted = m->AcceptToken(b);
    EXPECT_EQ(allowed, accepted) << "byte " << b << " of " << text;
    if (!accepted) return false;
  }
  m->FillNextTokenBitmask(mask);
  EXPECT_EQ(MaskHas(mask, kByteEos), m->IsAccepting());
  return m->IsAccepting();
}

}  // namespace loom::testing
