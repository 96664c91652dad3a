// The operators, filters, tests, methods and global functions of the Jinja
// subset, as pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat_template/ast.h"

namespace loom::jinja {

using Kwargs = std::vector<std::pair<std::string, Value>>;

// INVALID_ARGUMENT "chat template error: <what>", for a value of the wrong kind.
absl::Status TypeError(absl::string_view what);
// UNIMPLEMENTED for a filter, test, method, function or operator outside the subset.
absl::Status Unsupported(absl::string_view kind, absl::string_view name);
// s split at code point boundaries, so that strings index and slice by character.
std::vector<std::string> Chars(const std::string& s);

// object.attr / object[key]; undefined when absent.
Value GetItem(const Value& object, const Value& key);
absl::StatusOr<Value> Slice(const Value& object, std::optional<int64_t> start,
                            std::optional<int64_t> stop, std::optional<int64_t> step);
// Comparison, arithmetic, "~", "in" and "not in".
absl::StatusOr<Value> BinaryOp(const std::string& op, const Value& left, const Value& right);
// args[0] is the filtered value.
absl::StatusOr<Value> ApplyFilter(const std::string& name, const std::vector<Value>& args,
                                  const Kwargs& kwargs);
// args[0] is the tested value.
absl::StatusOr<bool> ApplyTest(const std::string& name, const std::vector<Value>& args);
absl::StatusOr<Value> CallMethod(const Value& object, const std::string& name,
                                 const std::vector<Value>& args);
// raise_exception, range, namespace, dict, strftime_now.
absl::StatusOr<Value> CallGlobal(const std::string& name, const std::vector<Value>& args,
                                 const Kwargs& kwargs);

}  // namespace loom::jinja
