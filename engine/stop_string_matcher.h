// Stop strings for one sample: matched on the detokenized text across token
// boundaries, with the text that may still begin a stop string held back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// Feed it each token's text in order; it returns what may be streamed now.
//
//   emitted text        | held back             | new text
//   ....................|"</st"                 |"op>..."
//   a stop string "</stop>" can only start in the held-back tail, so nothing
//   already emitted ever has to be taken back.
class StopStringMatcher {
 public:
  StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_str_in_output);

  struct Result {
    std::string text;                        // safe to emit now
    std::optional<std::string> stop_string;  // set when a stop string matched
  };

  // Appends one token's text. While `match` is false (min_tokens not reached
  // yet) stop strings are not looked for, but a tail that may begin one is
  // still held back so that a match completed by a later token is found. On a
  // match, the text is cut before it (or after it when include_stop_str_in_output)
  // and everything after the match is dropped.
  Result Append(std::string_view text, bool match);

  // Releases the held-back text when the sample ends for another reason
  // (EOS, stop token, length).
  std::string Flush();

 private:
  // Bytes at the end of pending_ that are a proper prefix of some stop string.
  size_t HeldBackLength() const;

  std::vector<std::string> stop_strings_;
  bool include_stop_str_in_output_;
  std::string pending_;  // text not emitted yet; no stop string ends inside it
};

}  // namespace loom
