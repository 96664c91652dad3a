// The engine's Detokenizer backed by the model's tokenizer: one
// IncrementalDetokenizer per sample. Special tokens (BOS, EOS, chat markers)
// produce no text, as with vLLM's default skip_special_tokens.
#pragma once

#include <memory>

#include "tokenizer/tokenizer.h"
#include "types/detokenizer.h"

namespace loom {

class TokenizerDetokenizer final : public Detokenizer {
 public:
  explicit TokenizerDetokenizer(std::shared_ptr<const Tokenizer> tokenizer);

  std::unique_ptr<StreamDecoder> NewStream() const override;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace loom
