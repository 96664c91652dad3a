// The flags of `loom bench` (API.md §3); linked only into the loom binary.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tools/bench/bench.h"

ABSL_DECLARE_FLAG(int64_t, seed);

ABSL_FLAG(std::string, backend, "loom",
          "bench: loom (gRPC GenerateStream; --target=host:port), or openai / openai-chat "
          "(streaming /v1/completions or /v1/chat/completions of any OpenAI-compatible server; "
          "--target=http://host:port).");
ABSL_FLAG(int32_t, vocab_size, 0,
          "bench: draw random prompt ids below this (0: as the server reports; loomd and "
          "llama.cpp do).");
ABSL_FLAG(int32_t, num_prompts, 200, "bench: requests to send.");
ABSL_FLAG(double, request_rate, std::numeric_limits<double>::infinity(),
          "bench: Poisson arrivals per second; inf sends all at once.");
ABSL_FLAG(int32_t, max_concurrency, 0, "bench: requests in flight at most (0: unbounded).");
ABSL_FLAG(std::string, dataset, "random",
          "bench: random, or a JSONL file of {\"prompt\": ..., \"output_len\": ...}.");
ABSL_FLAG(int32_t, input_len, 256, "bench: prompt tokens of the random dataset.");
ABSL_FLAG(int32_t, output_len, 128, "bench: output tokens per request.");
ABSL_FLAG(double, range_ratio, 0, "bench: random lengths are uniform in [len*(1-r), len*(1+r)].");
ABSL_FLAG(std::string, slo, "", "bench: goodput objectives, e.g. ttft=500ms,tpot=50ms.");
ABSL_FLAG(std::string, json, "", "bench: write the result as JSON (vLLM's keys) here.");

namespace loom::bench {

int BenchFromFlags(const std::string& target, std::ostream& out, std::ostream& err) {
  BenchOptions options;
  options.backend_name = absl::GetFlag(FLAGS_backend);
  absl::StatusOr<BackendKind> kind = ParseBackend(options.backend_name);
  if (!kind.ok()) {
    err << kind.status().message() << "\n";
    return 2;
  }
  options.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  options.num_prompts = absl::GetFlag(FLAGS_num_prompts);
  options.request_rate = absl::GetFlag(FLAGS_request_rate);
  options.max_concurrency = absl::GetFlag(FLAGS_max_concurrency);
  options.dataset = absl::GetFlag(FLAGS_dataset);
  options.input_len = absl::GetFlag(FLAGS_input_len);
  options.output_len = absl::GetFlag(FLAGS_output_len);
  options.range_ratio = absl::GetFlag(FLAGS_range_ratio);
  // --seed is shared with `loom generate`, where -1 means random; the
  // benchmark is always seeded.
  options.seed = static_cast<uint64_t>(std::max<int64_t>(absl::GetFlag(FLAGS_seed), 0));
  options.slo = absl::GetFlag(FLAGS_slo);
  options.json_path = absl::GetFlag(FLAGS_json);
  std::unique_ptr<Backend> backend;
  if (*kind == BackendKind::kLoom) {
    backend = MakeGrpcBackend(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  } else {
    absl::StatusOr<std::unique_ptr<Backend>> http =
        MakeOpenAiBackend(target, *kind == BackendKind::kOpenAi ? OpenAiRoute::kCompletions
                                                                : OpenAiRoute::kChatCompletions);
    if (!http.ok()) {
      err << http.status().message() << "\n";
      return 2;
    }
    backend = *std::move(http);
  }
  return Bench(*backend, options, out, err);
}

}  // namespace loom::bench
