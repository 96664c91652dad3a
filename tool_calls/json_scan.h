// A scanner for the JSON object of one tool call while it is still being
// generated: which members it has so far and where their values lie in the
// text, so that a streaming parser can send a function's name as soon as it
// is complete and its arguments as they grow. It is resumable: each call
// reads only the bytes added since the last, so a call streamed token by
// token costs time linear in its length. No JSON tree is built.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct JsonMember {
  std::string key;  // the raw key text between the quotes (escapes kept)
  size_t value_begin = 0;
  // One past the value's last character; valid when complete. An incomplete
  // value runs to the end of the text scanned so far, or to the byte that
  // made the text invalid.
  size_t value_end = 0;
  bool complete = false;
};

class JsonObjectScanner {
 public:
  // Nesting deeper than this is invalid.
  static constexpr int kMaxDepth = 64;

  // Reads text[scanned():] of an object text that grows by appending: pass
  // the whole text each time, always the same prefix plus more.
  void Scan(std::string_view text);

  // The text is a JSON object, or a prefix of one, so far. Inside member
  // values only brackets and strings are checked.
  bool valid() const { return state_ != State::kInvalid; }
  bool closed() const { return state_ == State::kDone; }
  // One past the closing '}' once closed().
  size_t end() const { return end_; }
  size_t scanned() const { return pos_; }
  const std::vector<JsonMember>& members() const { return members_; }
  // The member with this key, or nullptr.
  const JsonMember* Find(std::string_view key) const;

 private:
  enum class State {
    kStart,        // before '{'
    kBeforeKey,    // after '{' or ','
    kKey,          // inside the key's string
    kAfterKey,     // before ':'
    kBeforeValue,  // after ':'
    kValue,        // inside a value
    kAfterValue,   // before ',' or '}'
    kDone,
    kInvalid,
  };
  enum class ValueKind { kString, kContainer, kLiteral, kNumber };

  // The byte at pos_ in the current state; false when it must be read again
  // in the new state (a number ends at the byte after it).
  bool Step(std::string_view text);
  bool StepStructure(std::string_view text);
  bool StepValue(char c);
  void StartValue(char c);
  void EndValue();

  State state_ = State::kStart;
  size_t pos_ = 0;
  size_t end_ = 0;
  std::vector<JsonMember> members_;
  // Inside a key or value.
  size_t key_begin_ = 0;
  bool after_open_brace_ = false;  // '}' may close an empty object
  ValueKind kind_ = ValueKind::kString;
  bool in_string_ = false;
  bool escaped_ = false;
  std::string closers_;       // containers: the brackets still open
  std::string_view literal_;  // literals: the rest expected
};

}  // namespace loom
