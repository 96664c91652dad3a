#include "openai/logprobs_json.h"

#include <string>

#include "openai/response_json.h"

namespace loom::openai {
namespace {

nlohmann::json BytesOf(const std::string& text) {
  nlohmann::json bytes = nlohmann::json::array();
  for (const char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

nlohmann::json ChatTokenJson(const std::string& text, float logprob) {
  return {{"token", text}, {"logprob", LogprobJson(logprob)}, {"bytes", BytesOf(text)}};
}

// The four parallel arrays of the completions format, filled token by token.
class LegacyLogprobs {
 public:
  LegacyLogprobs(const TokenText& token_text, size_t offset)
      : token_text_(token_text), offset_(offset) {}

  void Add(int32_t token_id, nlohmann::json logprob, nlohmann::json top) {
    const std::string text = token_text_(token_id);
    tokens_.push_back(text);
    token_logprobs_.push_back(std::move(logprob));
    top_logprobs_.push_back(std::move(top));
    text_offset_.push_back(offset_);
    offset_ += text.size();
  }

  void AddAll(const Logprobs& logprobs) {
    for (const v1::TokenLogprob& token : logprobs) {
      nlohmann::json top = nullptr;
      if (!token.top().empty()) {
        top = nlohmann::json::object();
        for (const v1::TopLogprob& alternative : token.top()) {
          top[token_text_(alternative.token_id())] = LogprobJson(alternative.logprob());
        }
      }
      Add(token.token_id(), LogprobJson(token.logprob()), std::move(top));
    }
  }

  nlohmann::json Json() && {
    return {{"tokens", std::move(tokens_)},
            {"token_logprobs", std::move(token_logprobs_)},
            {"top_logprobs", std::move(top_logprobs_)},
            {"text_offset", std::move(text_offset_)}};
  }

 private:
  const TokenText& token_text_;
  size_t offset_;
  nlohmann::json tokens_ = nlohmann::json::array();
  nlohmann::json token_logprobs_ = nlohmann::json::array();
  nlohmann::json top_logprobs_ = nlohmann::json::array();
  nlohmann::json text_offset_ = nlohmann::json::array();
};

nlohmann::json RankedJson(float logprob, int32_t rank, std::string decoded) {
  return {{"logprob", LogprobJson(logprob)}, {"rank", rank}, {"decoded_token", std::move(decoded)}};
}

}  // namespace

nlohmann::json CompletionLogprobsJson(const Logprobs& logprobs, const TokenText& token_text,
                                      size_t offset) {
  LegacyLogprobs out(token_text, offset);
  out.AddAll(logprobs);
  return std::move(out).Json();
}

nlohmann::json EchoedCompletionLogprobsJson(int32_t first_prompt_token_id,
                                            const Logprobs& prompt_logprobs,
                                            const Logprobs& logprobs, const TokenText& token_text) {
  LegacyLogprobs out(token_text, 0);
  out.Add(first_prompt_token_id, nullptr, nullptr);
  out.AddAll(prompt_logprobs);
  out.AddAll(logprobs);
  return std::move(out).Json();
}

nlohmann::json PromptLogprobsJson(const Logprobs& prompt_logprobs, const TokenText& token_text) {
  nlohmann::json out = nlohmann::json::array({nullptr});
  for (const v1::TokenLogprob& token : prompt_logprobs) {
    nlohmann::json entry = nlohmann::json::object();
    for (int i = 0; i < token.top_size(); ++i) {
      const v1::TopLogprob& alternative = token.top(i);
      entry[std::to_string(alternative.token_id())] =
          RankedJson(alternative.logprob(), i + 1, token_text(alternative.token_id()));
    }
    // The prompt token itself, with its own rank (it may also be an alternative).
    entry[std::to_string(token.token_id())] =
        RankedJson(token.logprob(), token.rank(), token_text(token.token_id()));
    out.push_back(std::move(entry));
  }
  return out;
}

nlohmann::json ChatLogprobsJson(const Logprobs& logprobs, const TokenText& token_text) {
  nlohmann::json content = nlohmann::json::array();
  for (const v1::TokenLogprob& token : logprobs) {
    nlohmann::json entry = ChatTokenJson(token_text(token.token_id()), token.logprob());
    nlohmann::json top = nlohmann::json::array();
    for (const v1::TopLogprob& alternative : token.top()) {
      top.push_back(ChatTokenJson(token_text(alternative.token_id()), alternative.logprob()));
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

}  // namespace loom::openai
