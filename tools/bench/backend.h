// What `loom bench` drives: loomd's GenerateStream over gRPC (`loom`), or any
// OpenAI-compatible server's streaming /v1/completions (`openai`) or
// /v1/chat/completions (`openai-chat`) over HTTP, as vLLM's benchmark names
// its backends. Every request is greedy with ignore_eos, so output lengths
// are exact on servers that honour it (loomd, vLLM, llama.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "tools/bench/dataset.h"
#include "tools/bench/runner.h"

namespace loom::bench {

// What the benchmark needs to know of the served model.
struct TargetInfo {
  std::string model;
  int64_t max_model_len = 0;  // 0 when the server does not say
  int32_t vocab_size = 0;     // 0 when the server does not say
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::StatusOr<TargetInfo> Info() = 0;
  // Makes the prompts sendable, once, before the run: the chat backend sends
  // text, so it has the server detokenize the random dataset's token ids.
  virtual absl::Status Prepare(std::vector<BenchPrompt>& /*prompts*/) { return absl::OkStatus(); }
  // Starts one request (prompt and id stay alive until done ran).
  virtual void Start(const BenchPrompt& prompt, const std::string& request_id, int32_t max_tokens,
                     RequestDone done) = 0;
};

std::unique_ptr<Backend> MakeGrpcBackend(std::shared_ptr<grpc::Channel> channel);

enum class OpenAiRoute { kCompletions, kChatCompletions };
// target: "http://host:port" (see ParseHttpTarget).
absl::StatusOr<std::unique_ptr<Backend>> MakeOpenAiBackend(absl::string_view target,
                                                           OpenAiRoute route);

}  // namespace loom::bench
