#include "server/request_validator.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/chat_messages_validator.h"

namespace loom {
namespace {

absl::Status OutOfRange(absl::string_view field, absl::string_view range, absl::string_view got) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", range, "; got ", got));
}

// Written as !(in range) so that NaN is rejected too.
absl::Status CheckClosed(float value, float lo, float hi, absl::string_view field) {
  if (std::isfinite(value) && lo <= value && value <= hi) {
    return absl::OkStatus();
  }
  return OutOfRange(field, absl::StrCat("in [", lo, ", ", hi, "]"), absl::StrCat(value));
}

absl::Status CheckTokenId(int32_t id, int32_t vocab_size, absl::string_view field) {
  if (0 <= id && id < vocab_size) {
    return absl::OkStatus();
  }
  return OutOfRange(field, absl::StrCat("a token id in [0, ", vocab_size, ")"), absl::StrCat(id));
}

absl::Status CheckSize(absl::string_view field, int64_t count, int64_t limit,
                       absl::string_view unit) {
  if (count <= limit) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must have at most ", limit, " ", unit, "; got ", count, " ", unit));
}

absl::Status ValidateSampling(const v1::SamplingParams& s, int32_t vocab_size,
                              const RequestLimits& limits) {
  if (s.has_temperature()) {
    LOOM_RETURN_IF_ERROR(CheckClosed(s.temperature(), 0, 100, "sampling.temperature"));
  }
  if (s.has_top_p() && !(std::isfinite(s.top_p()) && 0 < s.top_p() && s.top_p() <= 1)) {
    return OutOfRange("sampling.top_p", "in (0, 1]", absl::StrCat(s.top_p()));
  }
  if (s.has_top_k() && s.top_k() < 0) {
    return OutOfRange("sampling.top_k", ">= 0 (0 = off)", absl::StrCat(s.top_k()));
  }
  if (s.has_min_p()) {
    LOOM_RETURN_IF_ERROR(CheckClosed(s.min_p(), 0, 1, "sampling.min_p"));
  }
  if (s.has_repetition_penalty() &&
      !(std::isfinite(s.repetition_penalty()) && s.repetition_penalty() > 0)) {
    return OutOfRange("sampling.repetition_penalty", "> 0", absl::StrCat(s.repetition_penalty()));
  }
  if (s.has_presence_penalty()) {
    LOOM_RETURN_IF_ERROR(CheckClosed(s.presence_penalty(), -2, 2, "sampling.presence_penalty"));
  }
  if (s.has_frequency_penalty()) {
    LOOM_RETURN_IF_ERROR(CheckClosed(s.frequency_penalty(), -2, 2, "sampling.frequency_penalty"));
  }
  if (s.has_n() && !(1 <= s.n() && s.n() <= kMaxSamples)) {
    return OutOfRange("sampling.n", absl::StrCat("in [1, ", kMaxSamples, "]"), absl::StrCat(s.n()));
  }
  LOOM_RETURN_IF_ERROR(
      CheckSize("sampling.logit_bias", s.logit_bias_size(), limits.max_logit_bias, "entries"));
  for (const auto& [id, bias] : s.logit_bias()) {
    LOOM_RETURN_IF_ERROR(CheckTokenId(id, vocab_size, "sampling.logit_bias key"));
    LOOM_RETURN_IF_ERROR(
        CheckClosed(bias, -100, 100, absl::StrCat("sampling.logit_bias[", id, "]")));
  }
  return absl::OkStatus();
}

// A repeated or string field of count items (entries or bytes) against its limit.

// max_tokens = 0 asks for no output: only a request scoring its prompt
// (prompt_logprobs) has anything to return.
absl::Status ValidateStopping(const v1::StoppingCriteria& s, int32_t vocab_size,
                              const RequestLimits& limits, bool scores_prompt) {
  if (s.has_max_tokens() && s.max_tokens() == 0 && !scores_prompt) {
    return OutOfRange("stopping.max_tokens", ">= 1", "0");
  }
  if (s.has_max_tokens() && s.min_tokens() > s.max_tokens()) {
    return OutOfRange("stopping.min_tokens",
                      absl::StrCat("in [0, stopping.max_tokens] = [0, ", s.max_tokens(), "]"),
                      absl::StrCat(s.min_tokens()));
  }
  if (s.stop_size() > kMaxStopStrings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stopping.stop must have at most ", kMaxStopStrings, " strings; got ", s.stop_size()));
  }
  for (int i = 0; i < s.stop_size(); ++i) {
    const size_t size = s.stop(i).size();
    if (size < 1 || size > kMaxStopStringBytes) {
      return OutOfRange(absl::StrCat("stopping.stop[", i, "]"),
                        absl::StrCat("1..", kMaxStopStringBytes, " bytes long"),
                        absl::StrCat(size, " bytes"));
    }
  }
  LOOM_RETURN_IF_ERROR(CheckSize("stopping.stop_token_ids", s.stop_token_ids_size(),
                                 limits.max_stop_token_ids, "entries"));
  for (int i = 0; i < s.stop_token_ids_size(); ++i) {
    LOOM_RETURN_IF_ERROR(CheckTokenId(s.stop_token_ids(i), vocab_size,
                                      absl::StrCat("stopping.stop_token_ids[", i, "]")));
  }
  return absl::OkStatus();
}

absl::Status ValidateInput(const v1::GenerateRequest& request, int32_t vocab_size,
                           const RequestLimits& limits) {
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      if (request.prompt().empty()) {
        return absl::InvalidArgumentError("prompt must not be empty");
      }
      return CheckSize("prompt", static_cast<int64_t>(request.prompt().size()),
                       limits.max_prompt_bytes, "bytes");
    case v1::GenerateRequest::kPromptTokenIds: {
      const auto& ids = request.prompt_token_ids().ids();
      if (ids.empty()) {
        return absl::InvalidArgumentError("prompt_token_ids.ids must not be empty");
      }
      LOOM_RETURN_IF_ERROR(
          CheckSize("prompt_token_ids.ids", ids.size(), limits.max_prompt_tokens, "entries"));
      for (int i = 0; i < ids.size(); ++i) {
        LOOM_RETURN_IF_ERROR(
            CheckTokenId(ids[i], vocab_size, absl::StrCat("prompt_token_ids.ids[", i, "]")));
      }
      return absl::OkStatus();
    }
    case v1::GenerateRequest::kMessages:
      return ValidateChatMessages(request.messages(), "messages", limits);
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "input must be set: one of prompt, prompt_token_ids or messages");
}

absl::Status CheckConstraintText(const std::string& text, absl::string_view field,
                                 const RequestLimits& limits) {
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " must not be empty"));
  return CheckSize(field, static_cast<int64_t>(text.size()), limits.max_constraint_bytes, "bytes");
}

absl::Status ValidateConstraint(const v1::GenerateRequest& request, const RequestLimits& limits) {
  switch (request.constraint_case()) {
    case v1::GenerateRequest::kJsonSchema:
      return CheckConstraintText(request.json_schema(), "json_schema", limits);
    case v1::GenerateRequest::kRegex:
      return CheckConstraintText(request.regex(), "regex", limits);
    case v1::GenerateRequest::kGrammar:
      return CheckConstraintText(request.grammar(), "grammar", limits);
    case v1::GenerateRequest::kJsonObject:
      if (!request.json_object()) {
        return absl::InvalidArgumentError("json_object must be true when set");
      }
      return absl::OkStatus();
    case v1::GenerateRequest::kChoice: {
      const auto& choices = request.choice().choices();
      if (choices.empty() || choices.size() > kMaxChoices) {
        return OutOfRange("choice.choices", absl::StrCat("1..", kMaxChoices, " strings"),
                          absl::StrCat(choices.size()));
      }
      int64_t bytes = 0;
      for (int i = 0; i < choices.size(); ++i) {
        if (choices[i].empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("choice.choices[", i, "] must not be empty"));
        }
        bytes += static_cast<int64_t>(choices[i].size());
      }
      return CheckSize("choice.choices (together)", bytes, limits.max_constraint_bytes, "bytes");
    }
    case v1::GenerateRequest::CONSTRAINT_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, int32_t vocab_size,
                                     const RequestLimits& limits) {
  if (request.request_id().size() > kMaxRequestIdLength) {
    return OutOfRange("request_id", absl::StrCat("at most ", kMaxRequestIdLength, " characters"),
                      absl::StrCat(request.request_id().size(), " characters"));
  }
  LOOM_RETURN_IF_ERROR(CheckSize("cache_salt", static_cast<int64_t>(request.cache_salt().size()),
                                 limits.max_cache_salt_bytes, "bytes"));
  if (!(kMinPriority <= request.priority() && request.priority() <= kMaxPriority)) {
    return OutOfRange("priority", absl::StrCat("in [", kMinPriority, ", ", kMaxPriority, "]"),
                      absl::StrCat(request.priority()));
  }
  LOOM_RETURN_IF_ERROR(ValidateInput(request, vocab_size, limits));
  LOOM_RETURN_IF_ERROR(ValidateSampling(request.sampling(), vocab_size, limits));
  LOOM_RETURN_IF_ERROR(
      ValidateStopping(request.stopping(), vocab_size, limits, request.has_prompt_logprobs()));
  if (request.has_logprobs() && !(0 <= request.logprobs() && request.logprobs() <= kMaxLogprobs)) {
    return OutOfRange("logprobs", absl::StrCat("in [0, ", kMaxLogprobs, "]"),
                      absl::StrCat(request.logprobs()));
  }
  if (request.has_prompt_logprobs() &&
      !(0 <= request.prompt_logprobs() && request.prompt_logprobs() <= kMaxLogprobs)) {
    return OutOfRange("prompt_logprobs", absl::StrCat("in [0, ", kMaxLogprobs, "]"),
                      absl::StrCat(request.prompt_logprobs()));
  }
  LOOM_RETURN_IF_ERROR(ValidateConstraint(request, limits));
  if (!v1::Truncation_IsValid(request.truncate())) {
    return OutOfRange("truncate",
                      "one of TRUNCATION_UNSPECIFIED, TRUNCATION_LEFT, TRUNCATION_RIGHT",
                      absl::StrCat(request.truncate()));
  }
  return absl::OkStatus();
}

absl::Status ValidateGenerationDefaults(const GenerationDefaults& defaults) {
  v1::SamplingParams s;
  if (defaults.temperature) s.set_temperature(*defaults.temperature);
  if (defaults.top_p) s.set_top_p(*defaults.top_p);
  if (defaults.top_k) s.set_top_k(*defaults.top_k);
  if (defaults.min_p) s.set_min_p(*defaults.min_p);
  if (defaults.repetition_penalty) s.set_repetition_penalty(*defaults.repetition_penalty);
  if (defaults.presence_penalty) s.set_presence_penalty(*defaults.presence_penalty);
  if (defaults.frequency_penalty) s.set_frequency_penalty(*defaults.frequency_penalty);
  LOOM_RETURN_IF_ERROR(ValidateSampling(s, /*vocab_size=*/0, RequestLimits{}));
  if (defaults.max_tokens && *defaults.max_tokens < 1) {
    return OutOfRange("max_tokens", ">= 1", absl::StrCat(*defaults.max_tokens));
  }
  return absl::OkStatus();
}

absl::Status ValidateTokenizeRequest(const v1::TokenizeRequest& request,
                                     const RequestLimits& limits) {
  switch (request.input_case()) {
    case v1::TokenizeRequest::kText:
      return CheckSize("text", static_cast<int64_t>(request.text().size()), limits.max_prompt_bytes,
                       "bytes");
    case v1::TokenizeRequest::kMessages:
      return ValidateChatMessages(request.messages(), "messages", limits);
    case v1::TokenizeRequest::INPUT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("input must be set: one of text or messages");
}

}  // namespace loom
