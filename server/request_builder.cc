#include "server/request_builder.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
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
  absl::StatusOr<std::string> text = model.RenderChat(messages);
  if (!text.ok()) {
    return text.status();
  }
  return model.Encode(*text, add_special_tokens);
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
  if (absl::Status st = ValidateTokenizeRequest(request, limits_); !st.ok()) {
    return st;
  }
  const bool is_chat = request.has_messages();
  const bool add_special =
      AddSpecialTokens(request.has_add_special_tokens(), request.add_special_tokens(), is_chat);
  if (is_chat) {
    return EncodeChat(model_, request.messages(), add_special);
  }
  return model_.Encode(request.text(), add_special);
}

absl::StatusOr<RequestParams> RequestBuilder::Build(const v1::GenerateRequest& request,
                                                    absl::Time now, absl::Time deadline) {
  const v1::ModelInfo& info = model_.Info();
  const auto vocab_size = static_cast<int32_t>(info.vocab_size());
  const int64_t max_model_len = info.max_model_len();
  if (absl::Status st = ValidateGenerateRequest(request, vocab_size, limits_); !st.ok()) {
    return st;
  }

  absl::StatusOr<std::vector<int32_t>> ids = PromptIds(request);
  if (!ids.ok()) {
    return ids.status();
  }
  std::vector<int32_t> prompt = *std::move(ids);
  if (prompt.empty()) {
    return absl::InvalidArgumentError("the input encodes to no tokens");
  }

  const v1::StoppingCriteria& stopping = request.stopping();
  const bool explicit_max = stopping.has_max_tokens();
  // The output needs room: at least one token, or the max_tokens asked for.
  const int64_t reserved = explicit_max ? stopping.max_tokens() : 1;
  if (explicit_max && reserved >= max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat("stopping.max_tokens must be in [1, ",
                                                   max_model_len - 1, "]; got ", reserved));
  }
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  if (prompt_len + reserved > max_model_len) {
    switch (request.truncate()) {
      case v1::TRUNCATION_LEFT:
      case v1::TRUNCATION_RIGHT: {
        // Keep room for max_tokens, or for the default output when unset.
        const int64_t keep =
            max_model_len -
            (explicit_max ? reserved : std::min<int64_t>(kDefaultMaxTokens, max_model_len - 1));
        if (request.truncate() == v1::TRUNCATION_LEFT) {
          prompt.erase(prompt.begin(), prompt.end() - keep);
        } else {
          prompt.resize(keep);
        }
        break;
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
  const int64_t room = max_model_len - static_cast<int64_t>(prompt.size());
  const int64_t max_tokens = explicit_max ? reserved : std::min<int64_t>(kDefaultMaxTokens, room);
  if (stopping.min_tokens() > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("stopping.min_tokens must be in [0, ",
                                                   max_tokens, "]; got ", stopping.min_tokens()));
  }

  RequestParams params;
  params.request_id = request.request_id().empty() ? NewRequestId() : request.request_id();
  params.prompt_token_ids = std::move(prompt);

  const v1::SamplingParams& s = request.sampling();
  SamplingParams& sampling = params.sampling;
  if (s.has_temperature()) {
    sampling.temperature = s.temperature();
  }
  if (s.has_top_p()) {
    sampling.top_p = s.top_p();
  }
  if (s.has_top_k()) {
    sampling.top_k = s.top_k();
  }
  if (s.has_min_p()) {
    sampling.min_p = s.min_p();
  }
  if (s.has_repetition_penalty()) {
    sampling.repetition_penalty = s.repetition_penalty();
  }
  if (s.has_presence_penalty()) {
    sampling.presence_penalty = s.presence_penalty();
  }
  if (s.has_frequency_penalty()) {
    sampling.frequency_penalty = s.frequency_penalty();
  }
  sampling.seed = s.has_seed() ? s.seed() : NewSeed();
  for (const auto& [id, bias] : s.logit_bias()) {
    sampling.logit_bias.emplace_back(id, bias);
  }
  // Protobuf maps have no order; a sorted list keeps same-request runs identical.
  std::sort(sampling.logit_bias.begin(), sampling.logit_bias.end());
  sampling.num_logprobs = request.has_logprobs() ? request.logprobs() : -1;
  params.n = s.has_n() ? s.n() : 1;

  StoppingParams& stop = params.stopping;
  stop.max_tokens = static_cast<int32_t>(max_tokens);
  stop.min_tokens = static_cast<int32_t>(stopping.min_tokens());
  stop.stop.assign(stopping.stop().begin(), stopping.stop().end());
  stop.stop_token_ids.assign(stopping.stop_token_ids().begin(), stopping.stop_token_ids().end());
  stop.ignore_eos = stopping.ignore_eos();
  stop.include_stop_str_in_output = stopping.include_stop_str_in_output();

  params.priority = request.priority();
  params.cache_salt = request.cache_salt();
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
