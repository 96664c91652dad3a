#include "tokenizer/incremental_detokenizer.h"

#include "base/utf8.h"

namespace loom {

std::string IncrementalDetokenizer::Append(int32_t id) {
  std::string bytes = tokenizer_.TokenBytes(id);
  if (first_) {
    first_ = false;
    if (tokenizer_.strips_leading_space() && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  }
  pending_ += bytes;
  const size_t complete = Utf8CompletePrefix(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace loom
