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

}  // namespace

nlohmann::json CompletionLogprobsJson(const Logprobs& logprobs, const TokenText& token_text,
                                      size_t offset) {
  nlohmann::json tokens = nlohmann::json::array();
  nlohmann::json token_logprobs = nlohmann::json::array();
  nlohmann::json top_logprobs = nlohmann::json::array();
  nlohmann::json text_offset = nlohmann::json::array();
  for (const v1::TokenLogprob& token : logprobs) {
    const std::string text = token_text(token.token_id());
    tokens.push_back(text);
    token_logprobs.push_back(LogprobJson(token.logprob()));
    nlohmann::json top = nullptr;
    if (!token.top().empty()) {
      top = nlohmann::json::object();
      for (const v1::TopLogprob& alternative : token.top()) {
        top[token_text(alternative.token_id())] = LogprobJson(alternative.logprob());
      }
    }
    top_logprobs.push_back(std::move(top));
    text_offset.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(text_offset)}};
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
