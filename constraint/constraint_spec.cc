#include "constraint/constraint_spec.h"

namespace loom {

std::string_view ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kJsonSchema:
      return "json_schema";
    case ConstraintKind::kRegex:
      return "regex";
    case ConstraintKind::kGrammar:
      return "grammar";
    case ConstraintKind::kJsonObject:
      return "json_object";
    case ConstraintKind::kChoice:
      return "choice";
  }
  return "unknown";
}

}  // namespace loom
