// The part both parsers share: one call's JSON object, seen as a growing
// prefix (or whole), turned into deltas: the function's name once its string
// is complete, then the arguments' text ("arguments" or "parameters") as it
// grows. Each Update reads only the bytes added since the last.
#pragma once

#include <cstddef>
#include <string_view>

#include "tool_calls/json_scan.h"
#include "tool_calls/tool_call_parser.h"

namespace loom {

class CallBuilder {
 public:
  explicit CallBuilder(int index) : index_(index) {}

  // `object` is the call's text from its '{', the same prefix plus more each
  // time; appends the deltas it adds to `update`. False when the text cannot
  // be a call: not a JSON object, or a name that is not a string.
  bool Update(std::string_view object, ToolCallUpdate& update);
  // The call's text has ended: a closed call without arguments gets "{}";
  // one cut off before its arguments keeps none ("").
  void Finish(ToolCallUpdate& update);

  bool named() const { return named_; }
  bool closed() const { return scanner_.closed(); }
  // One past the object's closing '}', once closed().
  size_t end() const { return scanner_.end(); }
  // The bytes of the object read so far (through the offending byte when
  // the text turned out not to be JSON).
  size_t scanned() const { return scanner_.scanned(); }

 private:
  const int index_;
  JsonObjectScanner scanner_;
  bool named_ = false;
  size_t arguments_sent_ = 0;  // bytes of the arguments' text sent
};

}  // namespace loom
