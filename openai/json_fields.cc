#include "openai/json_fields.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "openai/openai_error.h"

namespace loom::openai {
namespace {

// nlohmann's parser keeps its own stack, but the values it builds are walked
// recursively (comparison, copies), so the depth is bounded before parsing.
bool NestedAtMost(absl::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace

const Json* FindField(const Json& object, absl::string_view name) {
  const auto it = object.find(std::string(name));
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<Json> ParseJsonObject(absl::string_view body) {
  if (!NestedAtMost(body, kMaxJsonDepth)) {
    return InvalidParam(
        "", absl::StrCat("request body is nested deeper than ", kMaxJsonDepth, " levels"));
  }
  Json json = ParseOrderedJson(body);
  if (json.is_discarded()) return InvalidParam("", "request body is not valid JSON");
  if (!json.is_object()) return InvalidParam("", "request body must be a JSON object");
  return json;
}

absl::Status TypeError(absl::string_view name, absl::string_view expected) {
  return InvalidParam(name, absl::StrCat(name, " must be ", expected));
}

absl::StatusOr<int64_t> AsInteger(const Json& value, absl::string_view name, int64_t lo,
                                  int64_t hi) {
  auto out_of_type = [&] {
    return TypeError(name, absl::StrCat("an integer in [", lo, ", ", hi, "]"));
  };
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return out_of_type();
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) {
    const int64_t i = value.get<int64_t>();
    if (i < lo || i > hi) return out_of_type();
    return i;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    // hi converts exactly while it is below 2^53 (the int32 and uint32 fields);
    // int64's maximum rounds up to 2^63, which itself is out of range.
    const double limit = static_cast<double>(hi);
    const bool in_range =
        static_cast<double>(lo) <= d && (hi < (int64_t{1} << 53) ? d <= limit : d < limit);
    if (!(std::trunc(d) == d && in_range)) return out_of_type();
    return static_cast<int64_t>(d);
  }
  return TypeError(name, "an integer");
}

absl::StatusOr<float> AsFloat(const Json& value, absl::string_view name) {
  if (!value.is_number()) return TypeError(name, "a number");
  const double d = value.get<double>();
  constexpr double kMax = std::numeric_limits<float>::max();
  if (d > kMax) return std::numeric_limits<float>::infinity();
  if (d < -kMax) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(d);
}

}  // namespace loom::openai
