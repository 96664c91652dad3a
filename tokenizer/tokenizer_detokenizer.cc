#include "tokenizer/tokenizer_detokenizer.h"

#include <string>
#include <utility>

#include "tokenizer/incremental_detokenizer.h"

namespace loom {
namespace {

class TokenizerStream final : public StreamDecoder {
 public:
  explicit TokenizerStream(std::shared_ptr<const Tokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)), detokenizer_(*tokenizer_) {}

  std::string Append(int32_t token_id) override {
    if (tokenizer_->IsSpecial(token_id)) return {};
    return detokenizer_.Append(token_id);
  }

  std::string Flush() override { return detokenizer_.Flush(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;  // outlives detokenizer_, which refers to it
  IncrementalDetokenizer detokenizer_;
};

}  // namespace

TokenizerDetokenizer::TokenizerDetokenizer(std::shared_ptr<const Tokenizer> tokenizer)
    : tokenizer_(std::move(tokenizer)) {}

std::unique_ptr<StreamDecoder> TokenizerDetokenizer::NewStream() const {
  return std::make_unique<TokenizerStream>(tokenizer_);
}

}  // namespace loom
