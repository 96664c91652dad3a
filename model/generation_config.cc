#include "model/generation_config.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using nlohmann::json;

absl::Status WrongType(const std::string& key, const char* expected) {
  return absl::InvalidArgumentError(absl::StrCat(key, " must be ", expected));
}

// Sets field from a JSON number; a value of another type is an error when
// strict and skipped otherwise.
absl::Status ReadFloat(const std::string& key, const json& value, bool strict,
                       std::optional<float>& field) {
  if (!value.is_number()) {
    return strict ? WrongType(key, "a number") : absl::OkStatus();
  }
  field = value.get<float>();
  return absl::OkStatus();
}

absl::Status ReadInt(const std::string& key, const json& value, bool strict,
                     std::optional<int32_t>& field) {
  if (!value.is_number_integer() || value.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
      value.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    return strict ? WrongType(key, "a 32-bit integer") : absl::OkStatus();
  }
  field = static_cast<int32_t>(value.get<int64_t>());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerationDefaults> GenerationDefaultsFromJson(std::string_view text, bool strict) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError("expected a JSON object, e.g. {\"temperature\": 0.7}");
  }
  GenerationDefaults d;
  for (const auto& [key, value] : parsed.items()) {
    if (value.is_null() && !strict) continue;
    absl::Status s;
    if (key == "temperature") {
      s = ReadFloat(key, value, strict, d.temperature);
    } else if (key == "top_p") {
      s = ReadFloat(key, value, strict, d.top_p);
    } else if (key == "top_k") {
      s = ReadInt(key, value, strict, d.top_k);
      if (d.top_k == -1) d.top_k = 0;  // vLLM's "off"
    } else if (key == "min_p") {
      s = ReadFloat(key, value, strict, d.min_p);
    } else if (key == "repetition_penalty") {
      s = ReadFloat(key, value, strict, d.repetition_penalty);
    } else if (key == "max_new_tokens" || (strict && key == "max_tokens")) {
      s = ReadInt(key, value, strict, d.max_tokens);
    } else if (strict && key == "presence_penalty") {
      s = ReadFloat(key, value, strict, d.presence_penalty);
    } else if (strict && key == "frequency_penalty") {
      s = ReadFloat(key, value, strict, d.frequency_penalty);
    } else if (strict) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown key ", key,
                       "; the keys are temperature, top_p, top_k, min_p, repetition_penalty, "
                       "presence_penalty, frequency_penalty, max_tokens (or max_new_tokens)"));
    }
    if (!s.ok()) return s;
  }
  return d;
}

GenerationDefaults GenerationDefaultsFromGguf(const GgufFile& gguf) {
  GenerationDefaults d;
  auto read_float = [&gguf](const char* key, std::optional<float>& field) {
    if (std::optional<double> v = gguf.GetFloat(key); v.has_value()) {
      field = static_cast<float>(*v);
    }
  };
  read_float("general.sampling.temp", d.temperature);
  read_float("general.sampling.top_p", d.top_p);
  read_float("general.sampling.min_p", d.min_p);
  read_float("general.sampling.penalty_repeat", d.repetition_penalty);
  if (std::optional<int64_t> k = gguf.GetInt("general.sampling.top_k"); k.has_value()) {
    d.top_k = static_cast<int32_t>(std::max<int64_t>(0, std::min<int64_t>(*k, INT32_MAX)));
  }
  return d;
}

}  // namespace loom
