#include "server/http_generation.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "openai/chat_response.h"
#include "openai/completion_response.h"
#include "openai/sse.h"
#include "server/access_log.h"
#include "server/log.h"
#include "server/proto_convert.h"
#include "server/stream_coalescer.h"

namespace loom {
namespace {

constexpr char kJson[] = "application/json";
constexpr char kEventStream[] = "text/event-stream";

void AddUsage(const Usage& from, Usage& to) {
  to.prompt_tokens += from.prompt_tokens;
  to.completion_tokens += from.completion_tokens;
  to.cached_prompt_tokens += from.cached_prompt_tokens;
  to.queue_seconds = std::max(to.queue_seconds, from.queue_seconds);
  to.time_to_first_token_seconds =
      std::max(to.time_to_first_token_seconds, from.time_to_first_token_seconds);
  to.total_seconds = std::max(to.total_seconds, from.total_seconds);
}

}  // namespace

// Hands each engine output to the generation on its strand. Holding the
// generation keeps it alive for as long as the engine may push.
class HttpGeneration::Sink final : public OutputSink {
 public:
  Sink(std::shared_ptr<HttpGeneration> generation, size_t prompt)
      : generation_(std::move(generation)), prompt_(prompt) {}

  void Push(RequestOutput output) override {
    generation_->exchange_->Post(
        [generation = generation_, prompt = prompt_, output = std::move(output)]() mutable {
          generation->OnOutput(prompt, std::move(output));
        });
  }

 private:
  const std::shared_ptr<HttpGeneration> generation_;
  const size_t prompt_;
};

HttpGeneration::HttpGeneration(GenerationBackend& backend, std::shared_ptr<HttpExchange> exchange,
                               openai::ResponseContext context, openai::Endpoint endpoint,
                               const char* route, const HttpGenerationLimits& limits,
                               ToolCallFormat tool_calls)
    : backend_(backend),
      exchange_(std::move(exchange)),
      context_(std::move(context)),
      endpoint_(endpoint),
      route_(route),
      limits_(limits),
      tool_calls_(tool_calls) {}

void HttpGeneration::Start(std::vector<RequestParams> prompts, std::vector<std::string> echo) {
  echo_ = std::move(echo);
  prompts_.resize(prompts.size());
  const auto n = static_cast<size_t>(context_.options.n);
  for (Prompt& prompt : prompts_) {
    prompt.text_offsets.assign(n, 0);
    prompt.started.assign(n, false);
    if (tool_calls_ != ToolCallFormat::kNone && context_.options.stream) {
      for (size_t i = 0; i < n; ++i) prompt.parsers.push_back(MakeToolCallParser(tool_calls_));
      prompt.call_ids.resize(n);
    }
    for (int32_t i = 0; i < context_.options.n; ++i) {
      prompt.response.add_completions()->set_index(static_cast<uint32_t>(i));
    }
  }
  exchange_->OnClose([self = shared_from_this()] { self->OnClientGone(); });
  for (size_t p = 0; p < prompts.size(); ++p) {
    prompts_[p].response.set_request_id(prompts[p].request_id);
    absl::StatusOr<GenerationBackend::Handle> handle =
        backend_.Submit(std::move(prompts[p]), std::make_shared<Sink>(shared_from_this(), p));
    if (!handle.ok()) {
      LogLine(absl::StrCat("request ", context_.id, " rejected: ", handle.status().ToString()));
      Fail(handle.status());
      return;
    }
    prompts_[p].handle = *handle;
  }
  if (context_.options.stream) {
    exchange_->StartStream(200, kEventStream);
    streaming_ = true;
    StreamEcho();
  }
}

void HttpGeneration::StreamEcho() {
  if (!context_.options.echo || endpoint_ != openai::Endpoint::kCompletions) {
    return;
  }
  for (size_t p = 0; p < prompts_.size() && p < echo_.size(); ++p) {
    for (int32_t i = 0; i < context_.options.n; ++i) {
      v1::GenerateStreamResponse delta;
      delta.set_index(static_cast<uint32_t>(i));
      delta.set_text(echo_[p]);
      exchange_->Write(openai::RenderCompletionChunk(context_, delta, static_cast<uint32_t>(p), 0));
      prompts_[p].text_offsets[static_cast<size_t>(i)] = echo_[p].size();
    }
  }
}

void HttpGeneration::OnOutput(size_t prompt_index, RequestOutput output) {
  if (done_ || prompt_index >= prompts_.size()) {
    return;
  }
  Prompt& prompt = prompts_[prompt_index];
  if (context_.options.stream) {
    StreamOutput(prompt_index, output);
  } else {
    AppendToResponse(output, prompt.response);
  }
  if (!output.finished) {
    CheckBacklog();
    return;
  }
  prompt.finished = true;
  ++num_finished_;
  AddUsage(output.usage, engine_usage_);
  if (!output.status.ok()) {
    Fail(output.status);
    return;
  }
  CopyUsage(output.usage, *prompt.response.mutable_usage());
  openai::AccumulateUsage(prompt.response.usage(), &usage_);
  if (num_finished_ == prompts_.size()) {
    Finish();
  } else {
    CheckBacklog();
  }
}

void HttpGeneration::StreamOutput(size_t prompt_index, const RequestOutput& output) {
  Prompt& prompt = prompts_[prompt_index];
  for (const SampleDelta& sample : output.samples) {
    if (sample.index >= prompt.started.size()) {
      continue;
    }
    const size_t i = sample.index;
    const bool parsed = !prompt.parsers.empty();
    openai::ChatChoiceMessage message;
    if (parsed) message = ParseDelta(prompt, sample);
    const bool nothing_new =
        parsed ? message.content.empty() && message.tool_calls.empty() : sample.text.empty();
    if (nothing_new && sample.logprobs.empty() && sample.finish_reason == FinishReason::kNone &&
        prompt.started[i]) {
      continue;  // tokens whose text is held back: nothing to show yet
    }
    v1::GenerateStreamResponse delta;
    AppendDelta(sample, delta);
    if (endpoint_ == openai::Endpoint::kChatCompletions) {
      exchange_->Write(openai::RenderChatChunk(context_, delta, !prompt.started[i],
                                               parsed ? &message : nullptr,
                                               parsed && prompt.parsers[i]->num_calls() > 0));
    } else {
      exchange_->Write(openai::RenderCompletionChunk(
          context_, delta, static_cast<uint32_t>(prompt_index), prompt.text_offsets[i]));
      prompt.text_offsets[i] += sample.text.size();
    }
    prompt.started[i] = true;
  }
}

openai::ChatChoiceMessage HttpGeneration::ParseDelta(Prompt& prompt, const SampleDelta& sample) {
  ToolCallParser& parser = *prompt.parsers[sample.index];
  std::vector<std::string>& ids = prompt.call_ids[sample.index];
  ToolCallUpdate update = parser.Feed(sample.text);
  if (sample.finish_reason != FinishReason::kNone) {
    ToolCallUpdate rest = parser.Finish();
    update.content += rest.content;
    update.calls.insert(update.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  openai::ChatChoiceMessage message{std::move(update.content), {}};
  for (ToolCallDelta& call : update.calls) {
    std::string id;
    if (call.index >= static_cast<int>(ids.size())) {
      id = NewCallId();
      ids.push_back(id);
    }
    message.tool_calls.push_back(
        {call.index, std::move(id), std::move(call.name), std::move(call.arguments)});
  }
  return message;
}

std::vector<openai::ChatChoiceMessage> HttpGeneration::ParseReplies(
    const v1::GenerateResponse& response) {
  std::vector<openai::ChatChoiceMessage> messages;
  if (tool_calls_ == ToolCallFormat::kNone) return messages;
  for (const v1::Completion& completion : response.completions()) {
    ParsedToolCalls parsed = ParseToolCalls(tool_calls_, completion.text());
    openai::ChatChoiceMessage& message = messages.emplace_back();
    message.content = std::move(parsed.content);
    for (size_t k = 0; k < parsed.calls.size(); ++k) {
      message.tool_calls.push_back({static_cast<int>(k), NewCallId(),
                                    std::move(parsed.calls[k].name),
                                    std::move(parsed.calls[k].arguments)});
    }
  }
  return messages;
}

std::string HttpGeneration::NewCallId() {
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) {
    id += kAlphabet[absl::Uniform<size_t>(rng_, 0, kAlphabet.size())];
  }
  return id;
}

void HttpGeneration::CheckBacklog() {
  if (!context_.options.stream) {
    return;
  }
  const int64_t queued = exchange_->queued_bytes();
  if (queued <= limits_.max_stream_buffer_bytes) {
    over_since_.reset();
    return;
  }
  const absl::Time now = absl::Now();
  if (!over_since_.has_value()) {
    over_since_ = now;
    return;
  }
  if (now - *over_since_ < limits_.stream_buffer_grace) {
    return;
  }
  Fail(absl::ResourceExhaustedError(
      absl::StrCat("the stream's unsent output stayed over --max_stream_buffer_bytes=",
                   limits_.max_stream_buffer_bytes,
                   " for --stream_buffer_grace=", absl::FormatDuration(limits_.stream_buffer_grace),
                   " (the client is not reading); got ", queued, " bytes")));
}

void HttpGeneration::Finish() {
  done_ = true;
  LogEnd(absl::OkStatus());
  if (context_.options.stream) {
    if (context_.options.include_usage) {
      exchange_->Write(endpoint_ == openai::Endpoint::kChatCompletions
                           ? openai::RenderChatUsageChunk(context_, usage_)
                           : openai::RenderCompletionUsageChunk(context_, usage_));
    }
    exchange_->Write(openai::SseDone());
    exchange_->End();
    return;
  }
  std::vector<v1::GenerateResponse> responses;
  responses.reserve(prompts_.size());
  for (Prompt& prompt : prompts_) {
    responses.push_back(std::move(prompt.response));
  }
  exchange_->Respond(200, kJson,
                     endpoint_ == openai::Endpoint::kChatCompletions
                         ? openai::RenderChatCompletion(context_, responses.front(),
                                                        ParseReplies(responses.front()))
                         : openai::RenderCompletionResponse(context_, responses, echo_));
}

void HttpGeneration::Fail(const absl::Status& status) {
  if (done_) {
    return;
  }
  done_ = true;
  AbortAll();
  LogEnd(status);
  const openai::OpenAiError error = openai::ToOpenAiError(status, endpoint_);
  if (streaming_) {
    // The stream has started (its 200 is sent): the error travels as an event.
    exchange_->Write(openai::SseErrorEvent(error));
    exchange_->Write(openai::SseDone());
    exchange_->End();
    return;
  }
  exchange_->Respond(error.http_status, kJson, openai::RenderErrorBody(error));
}

void HttpGeneration::OnClientGone() {
  if (done_) {
    return;
  }
  done_ = true;
  AbortAll();
  LogEnd(absl::CancelledError("the client disconnected"));
}

void HttpGeneration::AbortAll() {
  for (Prompt& prompt : prompts_) {
    if (prompt.handle.has_value() && !prompt.finished) {
      backend_.Abort(*prompt.handle);
    }
  }
}

void HttpGeneration::LogEnd(const absl::Status& status) const {
  if (!status.ok()) {
    LogLine(absl::StrCat("request ", context_.id, " aborted: ", status.ToString()));
  }
  LogAccess(limits_.access_log, context_.id, route_, status, engine_usage_);
}

}  // namespace loom
