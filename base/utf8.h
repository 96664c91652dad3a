// Small UTF-8 helpers for the tokenizers, the incremental detokenizer and the
// chat templates' string filters.
// Invalid input never reads out of bounds: a bad byte counts as one character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace loom {

// Length of the character starting at s[pos] (1 for an invalid lead byte,
// clipped to the end of s).
size_t Utf8CharLength(std::string_view s, size_t pos);
// The code point of a single encoded character (U+FFFD when invalid).
char32_t DecodeUtf8(std::string_view ch);
std::string EncodeUtf8(char32_t c);
// Length of the longest prefix of s that does not end inside a character
// whose remaining bytes may still arrive.
size_t Utf8CompletePrefix(std::string_view s);
// s with every invalid sequence replaced by U+FFFD (as String::from_utf8_lossy).
std::string SanitizeUtf8(std::string_view s);

}  // namespace loom
