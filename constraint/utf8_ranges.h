// Code-point classes as byte automata need them: every UTF-8 encoding of the
// code points in a range, as a few sequences of byte ranges (surrogates, which
// UTF-8 cannot encode, left out).
#pragma once

#include <cstdint>
#include <vector>

#include "constraint/grammar.h"

namespace loom::constraint {

struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;
};

// A sequence of byte ranges: the encodings whose k-th byte lies in ranges[k].
using Utf8Sequence = std::vector<ByteRange>;

// The sequences that together encode exactly the code points of `ranges`
// (sorted, disjoint), each code point once.
std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodepointRange>& ranges);

// The code points outside `ranges` (sorted, disjoint), surrogates included.
std::vector<CodepointRange> ComplementRanges(const std::vector<CodepointRange>& ranges);

}  // namespace loom::constraint
