// hermes: <tool_call>{"name": ..., "arguments": ...}</tool_call> blocks (with
// any whitespace around the JSON) in otherwise free text.
//
//   "Let me check.\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>"
//    '--- content ---''-- call 0: name "f", then arguments {"x": 1} as it grows
//
// Content before the first call streams as it comes, minus any tail that may
// be the start of "<tool_call>". After a call, whitespace between and after
// blocks is held back and dropped unless more text follows it. A block whose
// JSON has no name (or is not JSON) is content after all, tags included.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "tool_calls/call_builder.h"
#include "tool_calls/parsers.h"

namespace loom {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

// How many of text's last bytes may begin `marker` (a partial match held back).
size_t PartialMarkerLength(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

class HermesParser final : public ToolCallParser {
 public:
  ToolCallUpdate Feed(std::string_view text) override {
    ToolCallUpdate update;
    buffer_.append(text);
    while (call_.has_value() ? ReadCall(update, /*final=*/false)
           : in_bad_block_   ? ReadBadBlock(update)
                             : ReadContent(update)) {
    }
    return update;
  }

  ToolCallUpdate Finish() override {
    ToolCallUpdate update;
    if (call_.has_value()) ReadCall(update, /*final=*/true);
    // A partial tag that never completed, or the rest of a bad block.
    EmitContent(buffer_, update);
    buffer_.clear();
    return update;
  }

  int num_calls() const override { return num_calls_; }

 private:
  // Content up to the next "<tool_call>"; true when one opened.
  bool ReadContent(ToolCallUpdate& update) {
    const size_t open = buffer_.find(kOpen);
    if (open == std::string::npos) {
      const size_t keep = PartialMarkerLength(buffer_, kOpen);
      EmitContent(std::string_view(buffer_).substr(0, buffer_.size() - keep), update);
      buffer_.erase(0, buffer_.size() - keep);
      return false;
    }
    EmitContent(std::string_view(buffer_).substr(0, open), update);
    buffer_.erase(0, open + kOpen.size());
    call_.emplace(num_calls_);
    json_begin_ = std::string::npos;
    close_search_ = 0;
    return true;
  }

  // The open block's text; true when its "</tool_call>" closed it. `final`:
  // the sample ended inside the block.
  bool ReadCall(ToolCallUpdate& update, bool final) {
    const size_t close = buffer_.find(kClose, close_search_);
    const bool closed = close != std::string::npos;
    const size_t block_end = closed ? close : buffer_.size();
    // Resume the search where a close tag could still start.
    close_search_ = buffer_.size() >= kClose.size() ? buffer_.size() - kClose.size() + 1 : 0;
    const std::string_view block = std::string_view(buffer_).substr(0, block_end);
    if (json_begin_ == std::string::npos) json_begin_ = block.find_first_not_of(" \t\r\n");
    bool is_call = true;
    if (json_begin_ != std::string::npos) {
      is_call = call_->Update(block.substr(json_begin_), update) || call_->named();
    }
    if (!closed && !final && is_call) return false;
    if (!is_call || !call_->named()) {
      // Not a call after all: the block is content, tags included.
      call_.reset();
      EmitContent(kOpen, update);
      in_bad_block_ = true;
      return true;
    }
    call_->Finish(update);
    call_.reset();
    ++num_calls_;
    held_whitespace_.clear();
    buffer_.erase(0, closed ? close + kClose.size() : block_end);
    return closed;
  }

  // The rest of a block that is not a call, as content through its
  // "</tool_call>"; true when that came.
  bool ReadBadBlock(ToolCallUpdate& update) {
    const size_t close = buffer_.find(kClose);
    if (close == std::string::npos) {
      const size_t keep = PartialMarkerLength(buffer_, kClose);
      EmitContent(std::string_view(buffer_).substr(0, buffer_.size() - keep), update);
      buffer_.erase(0, buffer_.size() - keep);
      return false;
    }
    EmitContent(std::string_view(buffer_).substr(0, close + kClose.size()), update);
    buffer_.erase(0, close + kClose.size());
    in_bad_block_ = false;
    return true;
  }

  void EmitContent(std::string_view text, ToolCallUpdate& update) {
    if (text.empty()) return;
    if (num_calls_ == 0) {
      update.content.append(text);
      return;
    }
    held_whitespace_.append(text);
    if (!absl::StripAsciiWhitespace(held_whitespace_).empty()) {
      update.content.append(held_whitespace_);
      held_whitespace_.clear();
    }
  }

  std::string buffer_;  // text not yet consumed
  std::optional<CallBuilder> call_;
  size_t json_begin_ = std::string::npos;  // the open block's '{' in buffer_
  size_t close_search_ = 0;                // where to look for "</tool_call>" next
  bool in_bad_block_ = false;              // inside a block that is not a call
  int num_calls_ = 0;
  std::string held_whitespace_;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeHermesParser() { return std::make_unique<HermesParser>(); }

}  // namespace loom
