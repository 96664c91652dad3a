// Server-sent events as OpenAI-compatible servers stream them: events are
// separated by a blank line and carry their payload on `data:` lines. The
// reader takes the body in whatever pieces the socket delivers.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace loom::bench {

class SseReader {
 public:
  // Appends a piece of the body; returns the data of every event it completed,
  // in order (the lines of a multi-line event joined with '\n').
  std::vector<std::string> Feed(absl::string_view piece);

 private:
  std::string pending_;
};

}  // namespace loom::bench
