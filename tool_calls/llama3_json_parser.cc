// llama3_json: the whole answer is one or more JSON calls, optionally after
// <|python_tag|>, separated by ";":
//
//   <|python_tag|>{"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {}}
//
// The first non-blank text decides: a '{' or the tag starts calls, anything
// else makes the whole answer content. An object without a "name" (an answer
// that happens to be JSON) is content too, from there on; so is text after
// the calls that is not another call.
#include <memory>
#include <optional>
#include <string>

#include "tool_calls/call_builder.h"
#include "tool_calls/parsers.h"

namespace loom {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3JsonParser final : public ToolCallParser {
 public:
  ToolCallUpdate Feed(std::string_view text) override {
    ToolCallUpdate update;
    buffer_.append(text);
    while (Step(update)) {
    }
    return update;
  }

  ToolCallUpdate Finish() override {
    ToolCallUpdate update;
    if (call_.has_value() && call_->named()) {
      EndCall(update, buffer_.size());
    }
    update.content.append(buffer_);
    buffer_.clear();
    return update;
  }

  int num_calls() const override { return num_calls_; }

 private:
  enum class Mode { kUndecided, kCalls, kContent };

  // One step of the current mode; true when another may follow at once.
  bool Step(ToolCallUpdate& update) {
    switch (mode_) {
      case Mode::kUndecided:
        return Decide();
      case Mode::kContent:
        update.content.append(buffer_);
        buffer_.clear();
        return false;
      case Mode::kCalls:
        return ReadCall(update);
    }
    return false;
  }

  bool Decide() {
    const size_t start = buffer_.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return false;
    const std::string_view rest = std::string_view(buffer_).substr(start);
    if (rest.starts_with(kPythonTag)) {
      buffer_.erase(0, start + kPythonTag.size());
      mode_ = Mode::kCalls;
    } else if (kPythonTag.starts_with(rest)) {
      return false;  // maybe the tag: wait for more
    } else if (rest.front() == '{') {
      buffer_.erase(0, start);
      mode_ = Mode::kCalls;
    } else {
      mode_ = Mode::kContent;
    }
    return true;
  }

  // The next call; true when it ended and more text may follow.
  bool ReadCall(ToolCallUpdate& update) {
    if (!call_.has_value()) {
      const size_t start = buffer_.find_first_not_of(" \t\r\n;");
      if (start == std::string::npos) return false;
      if (buffer_[start] != '{') {
        buffer_.erase(0, num_calls_ > 0 ? start : 0);
        mode_ = Mode::kContent;
        return true;
      }
      buffer_.erase(0, start);
      call_.emplace(num_calls_);
    }
    const bool ok = call_->Update(buffer_, update);
    if (ok && !call_->closed()) return false;
    if (!call_->named()) {
      // Not a call: this object and what follows are content.
      call_.reset();
      mode_ = Mode::kContent;
      return true;
    }
    // A call whose JSON breaks after its name ends there; the text after the
    // offending byte is content.
    EndCall(update, call_->closed() ? call_->end() : call_->scanned());
    if (!ok) mode_ = Mode::kContent;
    return true;
  }

  void EndCall(ToolCallUpdate& update, size_t end) {
    call_->Finish(update);
    call_.reset();
    ++num_calls_;
    buffer_.erase(0, end);
  }

  Mode mode_ = Mode::kUndecided;
  std::string buffer_;  // text not yet consumed
  std::optional<CallBuilder> call_;
  int num_calls_ = 0;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeLlama3JsonParser() {
  return std::make_unique<Llama3JsonParser>();
}

}  // namespace loom
