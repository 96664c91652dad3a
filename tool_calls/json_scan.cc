#include "tool_calls/json_scan.h"

namespace loom {
namespace {

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsNumberChar(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

}  // namespace

void JsonObjectScanner::Scan(std::string_view text) {
  while (pos_ < text.size() && state_ != State::kDone && state_ != State::kInvalid) {
    const bool in_value = state_ == State::kValue;
    if (Step(text)) ++pos_;
    // A value broken by a byte ends before it, however the text was split.
    if (state_ == State::kInvalid && in_value) members_.back().value_end = pos_ - 1;
  }
  if (state_ == State::kValue) members_.back().value_end = pos_;
}

const JsonMember* JsonObjectScanner::Find(std::string_view key) const {
  for (const JsonMember& member : members_) {
    if (member.key == key) return &member;
  }
  return nullptr;
}

bool JsonObjectScanner::Step(std::string_view text) {
  const char c = text[pos_];
  if (state_ == State::kValue) return StepValue(c);
  if (state_ == State::kKey) {
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      members_.push_back({std::string(text.substr(key_begin_, pos_ - key_begin_))});
      state_ = State::kAfterKey;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      state_ = State::kInvalid;
    }
    return true;
  }
  return StepStructure(text);
}

// Between keys and values: whitespace, braces, ':' and ','.
bool JsonObjectScanner::StepStructure(std::string_view text) {
  const char c = text[pos_];
  if (IsWhitespace(c) && state_ != State::kStart) return true;
  switch (state_) {
    case State::kStart:
      state_ = c == '{' ? State::kBeforeKey : State::kInvalid;
      after_open_brace_ = true;
      break;
    case State::kBeforeKey:
      if (c == '}' && after_open_brace_) {
        state_ = State::kDone;
        end_ = pos_ + 1;
      } else if (c == '"') {
        state_ = State::kKey;
        key_begin_ = pos_ + 1;
        escaped_ = false;
      } else {
        state_ = State::kInvalid;
      }
      after_open_brace_ = false;
      break;
    case State::kAfterKey:
      state_ = c == ':' ? State::kBeforeValue : State::kInvalid;
      break;
    case State::kBeforeValue:
      members_.back().value_begin = pos_;
      StartValue(c);
      break;
    case State::kAfterValue:
      if (c == ',') {
        state_ = State::kBeforeKey;
      } else if (c == '}') {
        state_ = State::kDone;
        end_ = pos_ + 1;
      } else {
        state_ = State::kInvalid;
      }
      break;
    default:
      break;
  }
  return true;
}

void JsonObjectScanner::StartValue(char c) {
  state_ = State::kValue;
  in_string_ = false;
  escaped_ = false;
  closers_.clear();
  if (c == '"') {
    kind_ = ValueKind::kString;
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    kind_ = ValueKind::kContainer;
    closers_.push_back(c == '{' ? '}' : ']');
  } else if (c == 't' || c == 'f' || c == 'n') {
    kind_ = ValueKind::kLiteral;
    literal_ = c == 't' ? "rue" : c == 'f' ? "alse" : "ull";
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    kind_ = ValueKind::kNumber;
  } else {
    state_ = State::kInvalid;
  }
}

void JsonObjectScanner::EndValue() {
  members_.back().value_end = pos_ + 1;
  members_.back().complete = true;
  state_ = State::kAfterValue;
}

bool JsonObjectScanner::StepValue(char c) {
  if (in_string_) {
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (kind_ == ValueKind::kString) EndValue();
    } else if (static_cast<unsigned char>(c) < 0x20) {
      state_ = State::kInvalid;
    }
    return true;
  }
  switch (kind_) {
    case ValueKind::kContainer:
      if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        if (static_cast<int>(closers_.size()) >= kMaxDepth) state_ = State::kInvalid;
        closers_.push_back(c == '{' ? '}' : ']');
      } else if (c == '}' || c == ']') {
        if (closers_.back() != c) {
          state_ = State::kInvalid;
        } else {
          closers_.pop_back();
          if (closers_.empty()) EndValue();
        }
      }
      return true;
    case ValueKind::kLiteral:
      if (c != literal_.front()) {
        state_ = State::kInvalid;
        return true;
      }
      literal_.remove_prefix(1);
      if (literal_.empty()) EndValue();
      return true;
    case ValueKind::kNumber:
      if (IsNumberChar(c)) return true;
      // The number ended before this byte, which belongs to the structure.
      members_.back().value_end = pos_;
      members_.back().complete = true;
      state_ = State::kAfterValue;
      return false;
    case ValueKind::kString:
      break;
  }
  return true;
}

}  // namespace loom
