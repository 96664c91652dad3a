// Typed reads of one field of a JSON request object, for the request parsers.
// An absent or null field is "unset": the setter is not called. A field of the
// wrong JSON type is INVALID_ARGUMENT naming it ("temperature must be a
// number"); ranges are the request validator's business, only what the proto
// cannot represent (a negative max_tokens) is rejected here.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "openai/ordered_json.h"

namespace loom::openai {

// The field, or nullptr when it is absent or null.
const Json* FindField(const Json& object, absl::string_view name);

// The parsed body when it is a JSON object nested at most kMaxJsonDepth deep.
inline constexpr int kMaxJsonDepth = 64;
absl::StatusOr<Json> ParseJsonObject(absl::string_view body);

// value as an integer in [lo, hi]: JSON integers, and floats with an integral
// value (as OpenAI's own server accepts 5.0 for 5).
absl::StatusOr<int64_t> AsInteger(const Json& value, absl::string_view name, int64_t lo,
                                  int64_t hi);
// value as a float; magnitudes beyond float's range become +-inf for the
// validator to reject.
absl::StatusOr<float> AsFloat(const Json& value, absl::string_view name);

template <typename Set>
absl::Status ReadFloat(const Json& object, absl::string_view name, Set set) {
  const Json* value = FindField(object, name);
  if (value == nullptr) return absl::OkStatus();
  absl::StatusOr<float> number = AsFloat(*value, name);
  if (!number.ok()) return number.status();
  set(*number);
  return absl::OkStatus();
}

template <typename Set>
absl::Status ReadInteger(const Json& object, absl::string_view name, int64_t lo, int64_t hi,
                         Set set) {
  const Json* value = FindField(object, name);
  if (value == nullptr) return absl::OkStatus();
  absl::StatusOr<int64_t> number = AsInteger(*value, name, lo, hi);
  if (!number.ok()) return number.status();
  set(*number);
  return absl::OkStatus();
}

absl::Status TypeError(absl::string_view name, absl::string_view expected);

template <typename Set>
absl::Status ReadBool(const Json& object, absl::string_view name, Set set) {
  const Json* value = FindField(object, name);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_boolean()) return TypeError(name, "a boolean");
  set(value->get<bool>());
  return absl::OkStatus();
}

template <typename Set>
absl::Status ReadString(const Json& object, absl::string_view name, Set set) {
  const Json* value = FindField(object, name);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_string()) return TypeError(name, "a string");
  set(value->get_ref<const std::string&>());
  return absl::OkStatus();
}

}  // namespace loom::openai
