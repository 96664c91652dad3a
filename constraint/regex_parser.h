// Regular expressions (the common subset of Python's re and ECMAScript) parsed
// into the Grammar form: literals, `.` (any code point but \n), classes with
// ranges and negation, \d \w \s \D \W \S, escapes (\n \r \t \f \v \0 \xHH
// \uHHHH \u{H..}, any escaped punctuation), groups ( ) (?: ) (?P<n> ) (?<n> ),
// alternation |, and the quantifiers * + ? {m} {m,} {m,n} (a lazy ? after
// one is accepted and changes nothing: only the language matters). ^ and $
// are allowed only at the very start and end. Backreferences, lookarounds
// and word boundaries are refused: no automaton can check them.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "constraint/grammar.h"

namespace loom::constraint {

struct RegexParse {
  int32_t expr = -1;  // in the grammar passed in
  bool anchored_start = false;
  bool anchored_end = false;
};

// Adds the pattern's expression to `grammar`. INVALID_ARGUMENT "at offset N:
// <problem>" (N counts bytes from 0).
absl::StatusOr<RegexParse> ParseRegexInto(std::string_view pattern, Grammar& grammar);

// A grammar whose root rule matches exactly the strings the whole pattern
// matches (full match, anchored or not).
absl::StatusOr<Grammar> ParseRegex(std::string_view pattern);

}  // namespace loom::constraint
