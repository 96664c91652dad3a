#include "constraint/utf8_ranges.h"

#include <algorithm>
#include <array>

namespace loom::constraint {
namespace {

// The largest code point of each encoded length.
constexpr std::array<char32_t, 4> kLengthMax = {0x7F, 0x7FF, 0xFFFF, kMaxCodepoint};

int EncodedLength(char32_t c) {
  int n = 0;
  while (c > kLengthMax[n]) ++n;
  return n + 1;
}

void Encode(char32_t c, int n, std::array<uint8_t, 4>& out) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(c);
    return;
  }
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    c >>= 6;
  }
  static constexpr std::array<uint8_t, 5> kLead = {0, 0, 0xC0, 0xE0, 0xF0};
  out[0] = static_cast<uint8_t>(kLead[n] | c);
}

// [lo, hi] with every code point of the same encoded length n: split until
// each piece differs from its ends only in whole trailing byte ranges, which
// is when it is one sequence of byte ranges.
void SplitSameLength(char32_t lo, char32_t hi, int n, std::vector<Utf8Sequence>& out) {
  for (int i = 1; i < n; ++i) {
    const char32_t low_bits = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~low_bits) == (hi & ~low_bits)) continue;
    if ((lo & low_bits) != 0) {
      SplitSameLength(lo, lo | low_bits, n, out);
      SplitSameLength((lo | low_bits) + 1, hi, n, out);
      return;
    }
    if ((hi & low_bits) != low_bits) {
      SplitSameLength(lo, (hi & ~low_bits) - 1, n, out);
      SplitSameLength(hi & ~low_bits, hi, n, out);
      return;
    }
  }
  std::array<uint8_t, 4> a{}, b{};
  Encode(lo, n, a);
  Encode(hi, n, b);
  Utf8Sequence seq(n);
  for (int k = 0; k < n; ++k) seq[k] = {a[k], b[k]};
  out.push_back(std::move(seq));
}

void AddRange(char32_t lo, char32_t hi, std::vector<Utf8Sequence>& out) {
  while (lo <= hi) {
    const int n = EncodedLength(lo);
    const char32_t end = std::min<char32_t>(hi, kLengthMax[n - 1]);
    SplitSameLength(lo, end, n, out);
    if (end == hi) return;
    lo = end + 1;
  }
}

}  // namespace

std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodepointRange>& ranges) {
  constexpr char32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
  std::vector<Utf8Sequence> out;
  for (const CodepointRange& r : ranges) {
    const char32_t hi = std::min<char32_t>(r.hi, kMaxCodepoint);
    if (r.lo > hi) continue;
    if (r.lo < kSurrogateLo) AddRange(r.lo, std::min<char32_t>(hi, kSurrogateLo - 1), out);
    if (hi > kSurrogateHi) AddRange(std::max<char32_t>(r.lo, kSurrogateHi + 1), hi, out);
  }
  return out;
}

std::vector<CodepointRange> ComplementRanges(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  char32_t next = 0;
  for (const CodepointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = std::max<char32_t>(next, r.hi + 1);
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

}  // namespace loom::constraint
