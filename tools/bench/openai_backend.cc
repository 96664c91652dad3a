// The `openai` and `openai-chat` backends of `loom bench`: streaming
// /v1/completions or /v1/chat/completions over HTTP, timed per SSE event as
// vLLM's benchmark times them (an event that carries text is a token).
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/bench/backend.h"
#include "tools/bench/http_client.h"
#include "tools/bench/sse.h"

namespace loom::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr absl::Duration kInfoTimeout = absl::Seconds(30);
constexpr size_t kMaxErrorBody = 4096;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// An integer member, or 0 when absent or of another type.
int64_t IntAt(const json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// The message of an OpenAI error body {"error": {"message": ...}}, else the body.
std::string ErrorMessage(const std::string& body) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("error")) {
    const json& error = parsed["error"];
    if (error.is_object() && error.contains("message") && error["message"].is_string()) {
      return error["message"].get<std::string>();
    }
    if (error.is_string()) return error.get<std::string>();
  }
  return body.substr(0, 200);
}

// One streaming request, from the first byte written to the end of the body.
// Only the client's I/O thread touches it after Start.
class OpenAiStream {
 public:
  OpenAiStream(OpenAiRoute route, int64_t prompt_tokens, RequestDone done)
      : route_(route),
        prompt_tokens_(prompt_tokens),
        done_(std::move(done)),
        start_(Clock::now()) {}

  HttpClient::StreamHandlers Handlers(std::shared_ptr<OpenAiStream> self) {
    return {.on_status = [self](int status) { self->status_ = status; },
            .on_body = [self](absl::string_view piece) { self->OnBody(piece); },
            .on_done = [self](absl::Status status) { self->OnDone(std::move(status)); }};
  }

 private:
  void OnBody(absl::string_view piece) {
    if (status_ != 200) {
      if (error_body_.size() < kMaxErrorBody) error_body_.append(piece.data(), piece.size());
      return;
    }
    const Clock::time_point now = Clock::now();
    for (const std::string& data : sse_.Feed(piece)) {
      if (data == "[DONE]") {
        saw_done_ = true;
        continue;
      }
      OnEvent(json::parse(data, nullptr, /*allow_exceptions=*/false), now);
    }
  }

  void OnEvent(const json& event, Clock::time_point now) {
    if (!event.is_object()) {
      if (error_.empty()) error_ = "a stream event is not a JSON object";
      return;
    }
    if (event.contains("error")) {
      if (error_.empty()) error_ = absl::StrCat("stream error: ", ErrorMessage(event.dump()));
      return;
    }
    if (event.contains("usage") && event["usage"].is_object()) {
      usage_prompt_tokens_ = IntAt(event["usage"], "prompt_tokens");
      usage_completion_tokens_ = IntAt(event["usage"], "completion_tokens");
    }
    if (!event.contains("choices") || !event["choices"].is_array() || event["choices"].empty()) {
      return;
    }
    const json& choice = event["choices"][0];
    const json* text = nullptr;
    if (route_ == OpenAiRoute::kCompletions) {
      if (choice.contains("text")) text = &choice["text"];
    } else if (choice.contains("delta") && choice["delta"].is_object() &&
               choice["delta"].contains("content")) {
      text = &choice["delta"]["content"];
    }
    if (text == nullptr || !text->is_string() || text->get_ref<const std::string&>().empty()) {
      return;
    }
    if (token_events_ == 0) {
      first_token_ = now;
    } else {
      itls_.push_back(Seconds(now - last_token_));
    }
    last_token_ = now;
    ++token_events_;
  }

  void OnDone(absl::Status status) {
    RequestRecord record;
    record.e2el = Seconds(Clock::now() - start_);
    std::string error = error_;
    if (!status.ok()) {
      error = std::string(status.message());
    } else if (status_ != 200) {
      error = absl::StrCat("HTTP ", status_, ": ", ErrorMessage(error_body_));
    } else if (error.empty() && !saw_done_) {
      error = "the stream ended without data: [DONE]";
    }
    record.ok = error.empty();
    record.input_tokens = usage_prompt_tokens_ > 0 ? usage_prompt_tokens_ : prompt_tokens_;
    record.output_tokens = usage_completion_tokens_ > 0 ? usage_completion_tokens_ : token_events_;
    record.ttft = token_events_ > 0 ? Seconds(first_token_ - start_) : 0;
    record.itls = std::move(itls_);
    done_(std::move(record), std::move(error));
  }

  const OpenAiRoute route_;
  const int64_t prompt_tokens_;  // the prompt's length when known here, else 0
  RequestDone done_;
  const Clock::time_point start_;
  int status_ = 0;
  std::string error_body_;
  SseReader sse_;
  bool saw_done_ = false;
  std::string error_;
  int64_t token_events_ = 0;
  Clock::time_point first_token_;
  Clock::time_point last_token_;
  std::vector<double> itls_;
  int64_t usage_prompt_tokens_ = 0;
  int64_t usage_completion_tokens_ = 0;
};

class OpenAiBackend : public Backend {
 public:
  OpenAiBackend(std::unique_ptr<HttpClient> client, OpenAiRoute route)
      : client_(std::move(client)), route_(route) {}

  absl::StatusOr<TargetInfo> Info() override {
    absl::StatusOr<HttpClient::Response> response =
        client_->Fetch("GET", "/v1/models", "", kInfoTimeout);
    if (!response.ok()) return response.status();
    if (response->status != 200) {
      return absl::UnavailableError(absl::StrCat("GET /v1/models: HTTP ", response->status, ": ",
                                                 ErrorMessage(response->body)));
    }
    const json list = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
    if (!list.is_object() || !list.contains("data") || !list["data"].is_array() ||
        list["data"].empty() || !list["data"][0].is_object() || !list["data"][0].contains("id") ||
        !list["data"][0]["id"].is_string()) {
      return absl::UnavailableError("GET /v1/models: no model in the list");
    }
    const json& model = list["data"][0];
    TargetInfo info;
    info.model = model["id"].get<std::string>();
    // vLLM and loomd say max_model_len; llama.cpp's server has a meta object
    // whose n_ctx is one slot's context.
    const json meta = model.contains("meta") ? model["meta"] : json::object();
    info.max_model_len = IntAt(model, "max_model_len");
    if (info.max_model_len == 0) info.max_model_len = IntAt(meta, "n_ctx");
    info.vocab_size = static_cast<int32_t>(IntAt(model, "vocab_size"));
    if (info.vocab_size == 0) info.vocab_size = static_cast<int32_t>(IntAt(meta, "n_vocab"));
    model_ = info.model;
    return info;
  }

  absl::Status Prepare(std::vector<BenchPrompt>& prompts) override {
    if (route_ != OpenAiRoute::kChatCompletions) return absl::OkStatus();
    // Chat messages are text: the server's own detokenizer turns the random
    // dataset's ids into it (vLLM and loomd answer "prompt", llama.cpp "content").
    for (BenchPrompt& prompt : prompts) {
      if (prompt.token_ids.empty()) continue;
      const json body = {{"model", model_}, {"tokens", prompt.token_ids}};
      absl::StatusOr<HttpClient::Response> response =
          client_->Fetch("POST", "/detokenize", body.dump(), kInfoTimeout);
      if (!response.ok()) return response.status();
      const json parsed = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
      const char* key = parsed.contains("prompt") ? "prompt" : "content";
      if (response->status != 200 || !parsed.is_object() || !parsed.contains(key) ||
          !parsed[key].is_string()) {
        return absl::UnavailableError(
            absl::StrCat("POST /detokenize (to send the random dataset as chat messages): HTTP ",
                         response->status, ": ", ErrorMessage(response->body)));
      }
      prompt.text = parsed[key].get<std::string>();
      prompt.token_ids.clear();
    }
    return absl::OkStatus();
  }

  void Start(const BenchPrompt& prompt, const std::string& /*request_id*/, int32_t max_tokens,
             RequestDone done) override {
    json body = {{"model", model_},  {"max_tokens", max_tokens},
                 {"temperature", 0}, {"ignore_eos", true},
                 {"stream", true},   {"stream_options", {{"include_usage", true}}}};
    const char* path = "/v1/completions";
    if (route_ == OpenAiRoute::kChatCompletions) {
      path = "/v1/chat/completions";
      body["messages"] = json::array({{{"role", "user"}, {"content", prompt.text}}});
    } else if (prompt.token_ids.empty()) {
      body["prompt"] = prompt.text;
    } else {
      body["prompt"] = prompt.token_ids;
    }
    auto stream = std::make_shared<OpenAiStream>(
        route_, static_cast<int64_t>(prompt.token_ids.size()), std::move(done));
    client_->Stream(path, body.dump(), stream->Handlers(stream));
  }

 private:
  std::unique_ptr<HttpClient> client_;
  const OpenAiRoute route_;
  std::string model_;  // set by Info
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeOpenAiBackend(absl::string_view target,
                                                           OpenAiRoute route) {
  absl::StatusOr<HttpTarget> parsed = ParseHttpTarget(target);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Create(*parsed);
  if (!client.ok()) return client.status();
  return std::make_unique<OpenAiBackend>(*std::move(client), route);
}

}  // namespace loom::bench
