// GBNF, llama.cpp's grammar dialect, parsed into a Grammar:
//
//   root   ::= "{" ws pair ("," ws pair)* "}"   # a comment
//   pair   ::= key ws ":" ws [0-9]+
//   key    ::= "\"" [a-z_]{1,16} "\""
//   ws     ::= [ \t\n]*
//
// Rule names are [A-Za-z0-9_-]+; a body holds "literals" (escapes \n \r \t
// \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), [classes] and [^negated classes] of
// code points with ranges, `.` (any code point), rule references, ( groups ),
// alternatives with |, and the postfix operators * + ? {m} {m,} {m,n}. A rule
// ends at the end of its line, except inside parentheses and after | or ::=.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "constraint/grammar.h"

namespace loom::constraint {

// INVALID_ARGUMENT "line L col C: <problem>" for text that is not GBNF, a rule
// defined twice, a reference to an undefined rule, or no rule named `root`.
absl::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root = "root");

}  // namespace loom::constraint
