#include "constraint/grammar.h"

#include <algorithm>

namespace loom::constraint {

std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace loom::constraint
