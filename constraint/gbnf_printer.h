// Grammar -> GBNF text that ParseGbnf reads back into the same language: how
// JsonSchemaToGrammar hands its rules to callers that compose grammars.
#pragma once

#include <string>

#include "constraint/grammar.h"

namespace loom::constraint {

// One line per rule that has a body, the root first.
std::string PrintGbnf(const Grammar& grammar);

}  // namespace loom::constraint
