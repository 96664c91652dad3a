// The stop-string matcher behind the incremental detokenizer, over arbitrary
// token streams of a byte-level vocabulary (so UTF-8 characters split across
// tokens, and invalid bytes, occur). Input: byte 0 = stop string count (low 2
// bits) and include_stop_str_in_output (bit 2); then per stop string a length
// byte (mod 8) and its bytes; the rest is one token per byte (0xfe = BOS,
// 0xff = EOS, both special and textless).
// Invariants: the detokenizer and the matcher only emit whole UTF-8
// characters (when the stop strings are valid UTF-8), the emitted text
// never contains a stop string that should have ended it, and it is the
// detokenized text cut where the first stop string ends.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/stop_string_matcher.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_detokenizer.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80         ? 1
                       : (c >> 5) == 6  ? 2
                       : (c >> 4) == 14 ? 3
                       : (c >> 3) == 30 ? 4
                                        : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

bool ContainsAny(const std::string& text, const std::vector<std::string>& stops) {
  for (const std::string& s : stops) {
    if (absl::StrContains(text, s)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const auto detokenizer = std::make_unique<loom::TokenizerDetokenizer>(
      std::shared_ptr<const loom::Tokenizer>(loom::Tokenizer::ByteFallback(258)));
  const size_t count = data[0] & 3;
  const bool include = (data[0] & 4) != 0;
  size_t pos = 1;
  std::vector<std::string> stops;
  bool stops_utf8 = true;
  for (size_t i = 0; i < count && pos < size; ++i) {
    const size_t want = data[pos++] % 8;
    const size_t len = std::min(want, size - pos);
    std::string stop(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
    if (stop.empty()) continue;
    stops_utf8 = stops_utf8 && ValidUtf8(stop);
    stops.push_back(std::move(stop));
  }
  std::unique_ptr<loom::StreamDecoder> stream = detokenizer->NewStream();
  loom::StopStringMatcher matcher(stops, include);
  std::string decoded;
  std::string emitted;
  std::optional<std::string> matched;
  for (; pos < size && !matched; ++pos) {
    const int32_t id = data[pos] == 0xfe ? 256 : data[pos] == 0xff ? 257 : data[pos];
    const std::string piece = stream->Append(id);
    Check(ValidUtf8(piece));
    decoded += piece;
    loom::StopStringMatcher::Result r = matcher.Append(piece, true);
    if (stops_utf8) Check(ValidUtf8(r.text));
    emitted += r.text;
    matched = r.stop_string;
  }
  if (!matched) {
    const std::string tail = matcher.Flush();
    if (stops_utf8) Check(ValidUtf8(tail));
    emitted += tail;
    Check(emitted == decoded);
    Check(!ContainsAny(emitted, stops));
    return 0;
  }
  Check(absl::StartsWith(decoded, emitted));
  std::string before = emitted;
  if (include) {
    Check(absl::EndsWith(emitted, *matched));
    before.resize(emitted.size() - matched->size());
  } else {
    Check(decoded.compare(emitted.size(), matched->size(), *matched) == 0);
  }
  Check(!ContainsAny(before, stops));
  return 0;
}
