#include "server/request_builder.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/request_validator.h"

namespace loom {
namespace {

// A chat template writes the model's special tokens (BOS included) itself, so
// rendered chats are encoded without adding them unless the client asks.
bool AddSpecialTokens(bool has_value, bool value, bool is_chat) {
  return has_value ? value : !is_chat;
}

absl::StatusOr<std::vector<int32_t>> EncodeChat(const ModelFrontend& model,
                                                const v1::ChatMessages& messages,
                                                bool add_special_tokens) {
  LOOM_ASSIGN_OR_RETURN(const std::string text, model.RenderChat(messages));
  return model.Encode(text, add_special_tokens);
}

// Makes prompt leave room for the output: at least one token, or the
// max_tokens asked for. A request that truncates loses tokens on its side;
// any other that does not fit is rejected, naming the limit it broke.
absl::Status FitPrompt(const v1::GenerateRequest& request, int64_t max_model_len,
                       int64_t default_max_tokens, std::vector<int32_t>& prompt) {
  const v1::StoppingCriteria& stopping = request.stopping();
  const bool explicit_max = stopping.has_max_tokens();
  const int64_t reserved = explicit_max ? stopping.max_tokens() : 1;
  if (explicit_max && reserved >= max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat("stopping.max_tokens must be in [1, ",
                                                   max_model_len - 1, "]; got ", reserved));
  }
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  if (prompt_len + reserved <= max_model_len) {
    return absl::OkStatus();
  }
  switch (request.truncate()) {
    case v1::TRUNCATION_LEFT:
    case v1::TRUNCATION_RIGHT: {
      // Keep room for max_tokens, or for the default output when unset.
      const int64_t keep =
          max_model_len -
          (explicit_max ? reserved : std::min<int64_t>(default_max_tokens, max_model_len - 1));
      if (request.truncate() == v1::TRUNCATION_LEFT) {
        prompt.erase(prompt.begin(), prompt.end() - keep);
      } else {
        prompt.resize(keep);
      }
      return absl::OkStatus();
    }
    default:
      if (prompt_len >= max_model_len) {
        return absl::InvalidArgumentError(
            absl::StrCat("prompt has ", prompt_len, " tokens; max_model_len is ", max_model_len));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "stopping.max_tokens must be in [1, ", max_model_len - prompt_len, "] (max_model_len ",
          max_model_len, " - ", prompt_len, " prompt tokens); got ", reserved));
  }
}

// The output's token budget once the prompt fits: the max_tokens asked for,
// else the default capped by the room the prompt leaves; min_tokens must fit.
absl::StatusOr<int64_t> MaxTokens(const v1::StoppingCriteria& stopping, int64_t max_model_len,
                                  int64_t default_max_tokens, size_t prompt_len) {
  const int64_t room = max_model_len - static_cast<int64_t>(prompt_len);
  const int64_t max_tokens = stopping.has_max_tokens()
                                 ? stopping.max_tokens()
                                 : std::min<int64_t>(default_max_tokens, room);
  if (stopping.min_tokens() > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("stopping.min_tokens must be in [0, ",
                                                   max_tokens, "]; got ", stopping.min_tokens()));
  }
  return max_tokens;
}

// The request's sampling fields over the server's defaults over the API's;
// the seed is the caller's.
SamplingParams SamplingFromProto(const v1::GenerateRequest& request,
                                 const GenerationDefaults& defaults) {
  const v1::SamplingParams& s = request.sampling();
  SamplingParams sampling;
  sampling.temperature = defaults.temperature.value_or(sampling.temperature);
  sampling.top_p = defaults.top_p.value_or(sampling.top_p);
  sampling.top_k = defaults.top_k.value_or(sampling.top_k);
  sampling.min_p = defaults.min_p.value_or(sampling.min_p);
  sampling.repetition_penalty = defaults.repetition_penalty.value_or(sampling.repetition_penalty);
  sampling.presence_penalty = defaults.presence_penalty.value_or(sampling.presence_penalty);
  sampling.frequency_penalty = defaults.frequency_penalty.value_or(sampling.frequency_penalty);
  if (s.has_temperature()) sampling.temperature = s.temperature();
  if (s.has_top_p()) sampling.top_p = s.top_p();
  if (s.has_top_k()) sampling.top_k = s.top_k();
  if (s.has_min_p()) sampling.min_p = s.min_p();
  if (s.has_repetition_penalty()) sampling.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) sampling.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) sampling.frequency_penalty = s.frequency_penalty();
  for (const auto& [id, bias] : s.logit_bias()) {
    sampling.logit_bias.emplace_back(id, bias);
  }
  // Protobuf maps have no order; a sorted list keeps same-request runs identical.
  std::sort(sampling.logit_bias.begin(), sampling.logit_bias.end());
  sampling.num_logprobs = request.has_logprobs() ? request.logprobs() : -1;
  return sampling;
}

StoppingParams StoppingFromProto(const v1::StoppingCriteria& stopping, int64_t max_tokens) {
  StoppingParams stop;
  stop.max_tokens = static_cast<int32_t>(max_tokens);
  stop.min_tokens = static_cast<int32_t>(stopping.min_tokens());
  stop.stop.assign(stopping.stop().begin(), stopping.stop().end());
  stop.stop_token_ids.assign(stopping.stop_token_ids().begin(), stopping.stop_token_ids().end());
  stop.ignore_eos = stopping.ignore_eos();
  stop.include_stop_str_in_output = stopping.include_stop_str_in_output();
  return stop;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> RequestBuilder::PromptIds(
    const v1::GenerateRequest& request) const {
  const bool has_special = request.has_add_special_tokens();
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      return model_.Encode(request.prompt(),
                           AddSpecialTokens(has_special, request.add_special_tokens(), false));
    case v1::GenerateRequest::kPromptTokenIds:
      return std::vector<int32_t>(request.prompt_token_ids().ids().begin(),
                                  request.prompt_token_ids().ids().end());
    case v1::GenerateRequest::kMessages:
      return EncodeChat(model_, request.messages(),
                        AddSpecialTokens(has_special, request.add_special_tokens(), true));
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "input must be set: one of prompt, prompt_token_ids or messages");
}

absl::StatusOr<std::vector<int32_t>> RequestBuilder::Tokenize(
    const v1::TokenizeRequest& request) const {
  LOOM_RETURN_IF_ERROR(ValidateTokenizeRequest(request, limits_));
  const bool is_chat = request.has_messages();
  const bool add_special =
      AddSpecialTokens(request.has_add_special_tokens(), request.add_special_tokens(), is_chat);
  if (is_chat) {
    return EncodeChat(model_, request.messages(), add_special);
  }
  return model_.Encode(request.text(), add_special);
}

absl::StatusOr<RequestParams> RequestBuilder::Build(const v1::GenerateRequest& request,
                                                    absl::Time now, absl::Time deadline,
                                                    std::string_view cache_scope) {
  const v1::ModelInfo& info = model_.Info();
  const auto vocab_size = static_cast<int32_t>(info.vocab_size());
  const int64_t max_model_len = info.max_model_len();
  LOOM_RETURN_IF_ERROR(ValidateGenerateRequest(request, vocab_size, limits_));

  LOOM_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptIds(request));
  if (prompt.empty()) {
    return absl::InvalidArgumentError("the input encodes to no tokens");
  }
  const int64_t default_max_tokens = defaults_.max_tokens.value_or(kDefaultMaxTokens);
  LOOM_RETURN_IF_ERROR(FitPrompt(request, max_model_len, default_max_tokens, prompt));
  LOOM_ASSIGN_OR_RETURN(const int64_t max_tokens, MaxTokens(request.stopping(), max_model_len,
                                                            default_max_tokens, prompt.size()));
  // Last of the checks: compiling is the costliest, though cached.
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<const TokenConstraint> constraint,
                        CompileRequestConstraint(request, outputs_, cache_scope));

  RequestParams params;
  params.request_id = request.request_id().empty() ? NewRequestId() : request.request_id();
  params.prompt_token_ids = std::move(prompt);
  params.sampling = SamplingFromProto(request, defaults_);
  params.sampling.seed = request.sampling().has_seed() ? request.sampling().seed() : NewSeed();
  params.n = request.sampling().has_n() ? request.sampling().n() : 1;
  params.stopping = StoppingFromProto(request.stopping(), max_tokens);
  params.priority = request.priority();
  params.cache_salt = request.cache_salt();
  params.prompt_logprobs = request.has_prompt_logprobs() ? request.prompt_logprobs() : -1;
  params.constraint = std::move(constraint);
  params.arrival_time = now;
  params.deadline = deadline;
  return params;
}

std::string RequestBuilder::NewRequestId() {
  uint64_t hi;
  uint64_t lo;
  {
    MutexLock lock(mu_);
    hi = absl::Uniform<uint64_t>(rng_);
    lo = absl::Uniform<uint64_t>(rng_);
  }
  hi = (hi & ~uint64_t{0xF000}) | uint64_t{0x4000};            // version 4
  lo = (lo & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof(buf),
                "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64, hi >> 32,
                (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48, lo & 0xFFFFFFFFFFFF);
  return buf;
}

uint64_t RequestBuilder::NewSeed() {
  MutexLock lock(mu_);
  return absl::Uniform<uint64_t>(rng_);
}

}  // namespace loom
