#include "tools/bench/sse.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace loom::bench {
namespace {

// The data of one event's text (its lines, without the blank one after it).
std::string EventData(absl::string_view event) {
  std::string data;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(event, '\n')) {
    line = absl::StripSuffix(line, "\r");
    if (!absl::ConsumePrefix(&line, "data:")) continue;  // comments, event:, id:
    absl::ConsumePrefix(&line, " ");
    if (!first) data += '\n';
    data.append(line.data(), line.size());
    first = false;
  }
  return data;
}

}  // namespace

std::vector<std::string> SseReader::Feed(absl::string_view piece) {
  pending_.append(piece.data(), piece.size());
  std::vector<std::string> events;
  size_t start = 0;
  while (true) {
    // An event ends at the first empty line: "\n\n" or "\r\n\r\n".
    const size_t lf = pending_.find("\n\n", start);
    const size_t crlf = pending_.find("\r\n\r\n", start);
    const size_t end = std::min(lf, crlf);
    if (end == std::string::npos) break;
    const absl::string_view event(pending_.data() + start, end - start);
    if (absl::StrContains(event, "data:")) events.push_back(EventData(event));
    start = end + (end == crlf ? 4 : 2);
  }
  pending_.erase(0, start);
  return events;
}

}  // namespace loom::bench
