// Splits text into pre-tokens before BPE: the split regexes of GPT-2, SmolLM
// (digits split one by one first), Llama 3 and Qwen2. The patterns are written
// for Oniguruma; they are translated for RE2, and the one lookahead they use,
// \s+(?!\S), is applied by hand after matching.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace re2 {
class RE2;
}

namespace loom {

inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  // `pattern` in the Oniguruma syntax of tokenizer.json; empty for none.
  // split_digits: every numeric character is a pre-token of its own, before
  // the pattern applies. add_prefix_space: a space is put before the text.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(std::string_view pattern,
                                                              bool split_digits,
                                                              bool add_prefix_space);
  ~PreTokenizer();

  // Appends views into `text`, covering it completely and in order (except
  // for an added prefix space, which is a view of a static string).
  void Split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  PreTokenizer() = default;
  void SplitPattern(std::string_view text, std::vector<std::string_view>& out) const;

  std::unique_ptr<re2::RE2> pattern_;  // null: no splitting
  std::unique_ptr<re2::RE2> digit_;    // null unless split_digits
  bool trailing_space_rule_ = false;   // pattern ended in \s+(?!\S)|\s+
  bool add_prefix_space_ = false;
};

// Oniguruma -> RE2 translation, exposed for tests. Sets trailing_space_rule
// when the \s+(?!\S)|\s+ tail was replaced by a capture group.
absl::StatusOr<std::string> TranslatePattern(std::string_view pattern, bool& trailing_space_rule);

}  // namespace loom
