// Incremental detokenization for streaming: text is released only once it is
// complete UTF-8, so a delta never ends in half a character.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace loom {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text that became complete with this token (possibly empty).
  std::string Append(int32_t id);
  // Whatever is still held back (an incomplete UTF-8 tail, replaced by U+FFFD).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes not yet released
  bool first_ = true;    // SentencePiece drops the leading space of the first piece
};

}  // namespace loom
