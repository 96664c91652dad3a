#include "engine/stop_string_matcher.h"

#include <algorithm>
#include <utility>

namespace loom {
namespace {

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings,
                                     bool include_stop_str_in_output)
    : stop_strings_(std::move(stop_strings)),
      include_stop_str_in_output_(include_stop_str_in_output) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

StopStringMatcher::Result StopStringMatcher::Append(std::string_view text, bool match) {
  Result result;
  pending_.append(text);
  if (stop_strings_.empty()) {
    result.text = std::exchange(pending_, {});
    return result;
  }
  if (match) {
    // The earliest match wins: text must never run past any stop string.
    size_t best_pos = std::string::npos;
    const std::string* best = nullptr;
    for (const std::string& stop : stop_strings_) {
      const size_t pos = pending_.find(stop);
      if (pos < best_pos) {
        best_pos = pos;
        best = &stop;
      }
    }
    if (best != nullptr) {
      const size_t end = include_stop_str_in_output_ ? best_pos + best->size() : best_pos;
      pending_.resize(end);
      result.text = std::exchange(pending_, {});
      result.stop_string = *best;
      return result;
    }
  }
  size_t emit = pending_.size() - HeldBackLength();
  // Stop strings are valid UTF-8, so a held-back tail starts on a character
  // boundary already; this keeps the promise even for odd input.
  while (emit > 0 && emit < pending_.size() && IsUtf8Continuation(pending_[emit])) --emit;
  result.text = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return result;
}

std::string StopStringMatcher::Flush() { return std::exchange(pending_, {}); }

size_t StopStringMatcher::HeldBackLength() const {
  size_t max_len = 0;
  for (const std::string& stop : stop_strings_) max_len = std::max(max_len, stop.size());
  const size_t size = pending_.size();
  // The earliest start that is a proper prefix of a stop string gives the
  // longest tail to hold.
  for (size_t start = size - std::min(size, max_len - 1); start < size; ++start) {
    const std::string_view tail = std::string_view(pending_).substr(start);
    for (const std::string& stop : stop_strings_) {
      if (stop.size() > tail.size() && stop.front() == tail.front() && stop.starts_with(tail)) {
        return size - start;
      }
    }
  }
  return 0;
}

}  // namespace loom
