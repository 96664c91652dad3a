// Line-oriented logging to stderr for loomd. Lines from concurrent threads
// never interleave; each starts with a UTC timestamp.
#pragma once

#include "absl/strings/string_view.h"

namespace loom {

void LogLine(absl::string_view message);

}  // namespace loom
