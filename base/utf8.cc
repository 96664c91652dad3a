#include "base/utf8.h"

#include <algorithm>

namespace loom {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Expected sequence length from a lead byte; 0 for a continuation or invalid byte.
size_t SequenceLength(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid character at s[pos], or 0 when the bytes there are not
// one (overlong, surrogate, out of range and truncated sequences included).
size_t ValidLength(std::string_view s, size_t pos) {
  const unsigned char c = s[pos];
  const size_t n = SequenceLength(c);
  if (n == 0 || pos + n > s.size()) return 0;
  for (size_t i = 1; i < n; ++i) {
    if (!IsContinuation(s[pos + i])) return 0;
  }
  if (n >= 3) {
    const unsigned char c1 = s[pos + 1];
    if (c == 0xE0 && c1 < 0xA0) return 0;   // overlong
    if (c == 0xED && c1 >= 0xA0) return 0;  // surrogate
    if (c == 0xF0 && c1 < 0x90) return 0;   // overlong
    if (c == 0xF4 && c1 >= 0x90) return 0;  // beyond U+10FFFF
  }
  return n;
}

}  // namespace

size_t Utf8CharLength(std::string_view s, size_t pos) {
  const size_t n = ValidLength(s, pos);
  return n == 0 ? 1 : n;
}

char32_t DecodeUtf8(std::string_view ch) {
  if (ch.empty() || ValidLength(ch, 0) != ch.size()) return 0xFFFD;
  const unsigned char c = ch[0];
  if (ch.size() == 1) return c;
  char32_t v = c & (0x7F >> ch.size());
  for (size_t i = 1; i < ch.size(); ++i) v = (v << 6) | (static_cast<unsigned char>(ch[i]) & 0x3F);
  return v;
}

std::string EncodeUtf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return out;
}

size_t Utf8CompletePrefix(std::string_view s) {
  // Only the last three bytes can belong to an unfinished character.
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = s.size(); i > start; --i) {
    const unsigned char c = s[i - 1];
    if (IsContinuation(c)) continue;
    const size_t n = SequenceLength(c);
    if (n > 1 && s.size() - (i - 1) < n) {
      // The bytes so far must be a valid beginning, else waiting cannot help.
      for (size_t j = i; j < s.size(); ++j) {
        if (!IsContinuation(s[j])) return s.size();
      }
      return i - 1;
    }
    return s.size();
  }
  return s.size();
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = ValidLength(s, i);
    if (n == 0) {
      out += kReplacement;
      // A truncated but well-started sequence is one replacement, as Rust does.
      const size_t want = SequenceLength(s[i]);
      size_t j = i + 1;
      while (want > 1 && j < s.size() && j < i + want && IsContinuation(s[j])) ++j;
      i = j;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace loom
