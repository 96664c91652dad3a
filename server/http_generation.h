// One OpenAI completion or chat request on the HTTP port, from its submission
// to the engine to its last byte: one engine request per prompt (each with n
// samples), the outputs rendered as OpenAI JSON (openai/) and written to the
// HttpExchange, whole or as an SSE stream.
//
// Everything but the sinks' Push runs on the exchange's strand: the sinks post
// each engine output there, so the engine thread never renders or writes. A
// client that disconnects aborts every engine request at once; an engine
// failure, the drain's end or a client that stops reading ends a started
// stream with an OpenAI error event and [DONE].
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/request_output.h"
#include "loom/v1/generation.pb.h"
#include "openai/chat_response.h"
#include "openai/openai_error.h"
#include "openai/response_context.h"
#include "server/generation_backend.h"
#include "server/http_server.h"
#include "tool_calls/tool_call_parser.h"
#include "types/request_params.h"

namespace loom {

struct HttpGenerationLimits {
  // A stream whose unsent bytes stay above this for `grace` is ended with a
  // RESOURCE_EXHAUSTED error event (the client is not reading).
  int64_t max_stream_buffer_bytes = int64_t{4} << 20;
  absl::Duration stream_buffer_grace = absl::Seconds(10);
  bool access_log = true;
};

class HttpGeneration : public std::enable_shared_from_this<HttpGeneration> {
 public:
  // route names the endpoint in the access log ("/v1/completions"); it must
  // outlive the generation (a string literal). tool_calls: a chat whose
  // replies are parsed for tool calls in this format (kNone: plain content).
  HttpGeneration(GenerationBackend& backend, std::shared_ptr<HttpExchange> exchange,
                 openai::ResponseContext context, openai::Endpoint endpoint, const char* route,
                 const HttpGenerationLimits& limits,
                 ToolCallFormat tool_calls = ToolCallFormat::kNone);

  // Submits one engine request per prompt; echo[p] is prompt p's text for
  // `echo`. On a submit error the requests already submitted are aborted and
  // the error is answered. On the exchange's strand.
  void Start(std::vector<RequestParams> prompts, std::vector<std::string> echo);

 private:
  struct Prompt {
    std::optional<GenerationBackend::Handle> handle;
    v1::GenerateResponse response;     // non-streaming: the outputs so far
    std::vector<size_t> text_offsets;  // streaming completions: per sample
    std::vector<bool> started;         // streaming: a chunk was sent, per sample
    // Streaming chats parsed for tool calls: per sample, its parser and the
    // ids of the calls it has begun.
    std::vector<std::unique_ptr<ToolCallParser>> parsers;
    std::vector<std::vector<std::string>> call_ids;
    bool finished = false;
  };

  class Sink;

  void OnOutput(size_t prompt, RequestOutput output);
  void StreamOutput(size_t prompt, const RequestOutput& output);
  // A sample's delta through its tool-call parser, as the chunk shows it.
  openai::ChatChoiceMessage ParseDelta(Prompt& prompt, const SampleDelta& sample);
  // The whole replies of a non-streaming chat, split into content and calls.
  std::vector<openai::ChatChoiceMessage> ParseReplies(const v1::GenerateResponse& response);
  // A new OpenAI-style call id ("call_" and 24 random characters).
  std::string NewCallId();
  void StreamEcho();
  void CheckBacklog();
  // The client went away: abort every engine request.
  void OnClientGone();
  void AbortAll();
  void Finish();
  void Fail(const absl::Status& status);
  void LogEnd(const absl::Status& status) const;

  GenerationBackend& backend_;
  const std::shared_ptr<HttpExchange> exchange_;
  const openai::ResponseContext context_;
  const openai::Endpoint endpoint_;
  const char* const route_;
  const HttpGenerationLimits limits_;
  const ToolCallFormat tool_calls_;
  absl::BitGen rng_;  // call ids; on the strand only
  std::vector<Prompt> prompts_;
  std::vector<std::string> echo_;
  size_t num_finished_ = 0;
  bool done_ = false;       // the response has ended, or the client is gone
  bool streaming_ = false;  // the stream's 200 has been sent
  v1::Usage usage_;
  Usage engine_usage_;  // summed over the prompts, for the access log
  std::optional<absl::Time> over_since_;
};

}  // namespace loom
