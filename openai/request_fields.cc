#include "openai/request_fields.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "openai/json_fields.h"
#include "openai/openai_error.h"
#include "openai/structured_output.h"

namespace loom::openai {
namespace {

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kUint32Max = std::numeric_limits<uint32_t>::max();

absl::Status ReadSampling(const Json& body, v1::SamplingParams* s, OpenAiOptions* options) {
  LOOM_RETURN_IF_ERROR(ReadFloat(body, "temperature", [&](float v) { s->set_temperature(v); }));
  LOOM_RETURN_IF_ERROR(ReadFloat(body, "top_p", [&](float v) { s->set_top_p(v); }));
  LOOM_RETURN_IF_ERROR(ReadFloat(body, "min_p", [&](float v) { s->set_min_p(v); }));
  LOOM_RETURN_IF_ERROR(
      ReadFloat(body, "presence_penalty", [&](float v) { s->set_presence_penalty(v); }));
  LOOM_RETURN_IF_ERROR(
      ReadFloat(body, "frequency_penalty", [&](float v) { s->set_frequency_penalty(v); }));
  LOOM_RETURN_IF_ERROR(
      ReadFloat(body, "repetition_penalty", [&](float v) { s->set_repetition_penalty(v); }));
  // vLLM spells "off" -1; the proto spells it 0 (its default).
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "top_k", kInt32Min, kInt32Max, [&](int64_t v) {
    if (v != -1) s->set_top_k(static_cast<int32_t>(v));
  }));
  // Negative seeds are valid OpenAI seeds; their two's complement is the proto's.
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "seed", std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max(),
                                   [&](int64_t v) { s->set_seed(static_cast<uint64_t>(v)); }));
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "n", kInt32Min, kInt32Max, [&](int64_t v) {
    s->set_n(static_cast<int32_t>(v));
    options->n = static_cast<int32_t>(v);
  }));
  const Json* bias = FindField(body, "logit_bias");
  if (bias == nullptr) return absl::OkStatus();
  if (!bias->is_object()) return TypeError("logit_bias", "an object of token id -> bias");
  for (const auto& [key, value] : bias->items()) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(key, &id)) {
      return InvalidParam("logit_bias",
                          absl::StrCat("logit_bias keys must be token ids; got \"", key, "\""));
    }
    LOOM_ASSIGN_OR_RETURN(const float v, AsFloat(value, "logit_bias"));
    (*s->mutable_logit_bias())[id] = v;
  }
  return absl::OkStatus();
}

absl::Status ReadStop(const Json& body, v1::StoppingCriteria* s) {
  const Json* stop = FindField(body, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    s->add_stop(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return TypeError("stop", "a string or an array of strings");
  for (const Json& item : *stop) {
    if (!item.is_string()) return TypeError("stop", "a string or an array of strings");
    s->add_stop(item.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadStopping(const Json& body, v1::StoppingCriteria* s) {
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "max_tokens", 0, kUint32Max, [&](int64_t v) {
    s->set_max_tokens(static_cast<uint32_t>(v));
  }));
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "min_tokens", 0, kUint32Max, [&](int64_t v) {
    s->set_min_tokens(static_cast<uint32_t>(v));
  }));
  LOOM_RETURN_IF_ERROR(ReadStop(body, s));
  LOOM_RETURN_IF_ERROR(ReadBool(body, "ignore_eos", [&](bool v) { s->set_ignore_eos(v); }));
  LOOM_RETURN_IF_ERROR(ReadBool(body, "include_stop_str_in_output",
                                [&](bool v) { s->set_include_stop_str_in_output(v); }));
  const Json* ids = FindField(body, "stop_token_ids");
  if (ids == nullptr) return absl::OkStatus();
  if (!ids->is_array()) return TypeError("stop_token_ids", "an array of token ids");
  for (const Json& id : *ids) {
    LOOM_ASSIGN_OR_RETURN(const int64_t v, AsInteger(id, "stop_token_ids", kInt32Min, kInt32Max));
    s->add_stop_token_ids(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

absl::Status ReadStreamOptions(const Json& body, OpenAiOptions* options) {
  LOOM_RETURN_IF_ERROR(ReadBool(body, "stream", [&](bool v) { options->stream = v; }));
  const Json* stream_options = FindField(body, "stream_options");
  if (stream_options == nullptr) return absl::OkStatus();
  if (!stream_options->is_object()) return TypeError("stream_options", "an object");
  if (!options->stream) {
    return InvalidParam("stream_options", "stream_options is only allowed when stream is true");
  }
  const Json* include_usage = FindField(*stream_options, "include_usage");
  if (include_usage == nullptr) return absl::OkStatus();
  if (!include_usage->is_boolean()) return TypeError("stream_options.include_usage", "a boolean");
  options->include_usage = include_usage->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadEngineFields(const Json& body, v1::GenerateRequest* request,
                              OpenAiOptions* options) {
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "priority", kInt32Min, kInt32Max, [&](int64_t v) {
    request->set_priority(static_cast<int32_t>(v));
  }));
  LOOM_RETURN_IF_ERROR(
      ReadString(body, "cache_salt", [&](const std::string& v) { request->set_cache_salt(v); }));
  LOOM_RETURN_IF_ERROR(
      ReadBool(body, "add_special_tokens", [&](bool v) { request->set_add_special_tokens(v); }));
  LOOM_RETURN_IF_ERROR(
      ReadBool(body, "skip_special_tokens", [&](bool v) { options->skip_special_tokens = v; }));
  LOOM_RETURN_IF_ERROR(ReadInteger(body, "prompt_logprobs", kInt32Min, kInt32Max, [&](int64_t v) {
    request->set_prompt_logprobs(static_cast<int32_t>(v));
    options->prompt_logprobs = static_cast<int32_t>(v);
  }));
  return ReadInteger(body, "truncate_prompt_tokens", -1, kInt32Max, [&](int64_t v) {
    options->truncate_prompt_tokens = static_cast<int32_t>(v);
    if (v == -1) request->set_truncate(v1::TRUNCATION_LEFT);
  });
}

}  // namespace

absl::Status ReadSharedFields(const Json& body, v1::GenerateRequest* request,
                              OpenAiOptions* options) {
  LOOM_RETURN_IF_ERROR(
      ReadString(body, "model", [&](const std::string& v) { options->model = v; }));
  LOOM_RETURN_IF_ERROR(ReadString(body, "user", [&](const std::string& v) { options->user = v; }));
  LOOM_RETURN_IF_ERROR(ReadSampling(body, request->mutable_sampling(), options));
  LOOM_RETURN_IF_ERROR(ReadStopping(body, request->mutable_stopping()));
  LOOM_RETURN_IF_ERROR(ReadStreamOptions(body, options));
  LOOM_RETURN_IF_ERROR(ReadStructuredOutput(body, request, options));
  return ReadEngineFields(body, request, options);
}

}  // namespace loom::openai
