// loom: the command-line client of loomd (API.md §3).
//   loom generate "text"   streams a completion to stdout
//   loom health            exits 0 when the server reports SERVING
//   loom bench             serving benchmark (BENCHMARKS.md §1)
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tools/bench/bench.h"
#include "tools/loom/commands.h"

ABSL_FLAG(std::string, target, "localhost:50051",
          "loomd's gRPC address; bench with an openai backend: the server's URL "
          "(http://host:port).");
ABSL_FLAG(int32_t, max_tokens, -1, "generate: most tokens to generate (-1: server default).");
// The CLI's sampling defaults are for a person reading the answer: low enough
// that a 135M model answers a plain question the same way nearly every time
// (docs/api.md §3). A negative value leaves the field to loomd, whose default
// is the model's generation config or the API's.
ABSL_FLAG(double, temperature, 0.2,
          "generate: sampling temperature (0 = greedy; negative: loomd's default).");
ABSL_FLAG(double, top_p, 0.5, "generate: nucleus sampling mass (negative: loomd's default).");
ABSL_FLAG(int64_t, seed, -1, "generate: sampling seed (-1: random).");
ABSL_FLAG(bool, chat, false, "generate: send the text as a user message (chat template).");
// A string, parsed with absl::ParseDuration: reading a Duration-typed flag takes
// a sequence lock whose fences GCC rejects under -fsanitize=thread.
ABSL_FLAG(std::string, timeout, "inf",
          "Deadline of the call, e.g. 10s (generate: none by default; health: 5s).");
ABSL_FLAG(std::string, service, "", "health: the service to ask about (\"\" = the whole server).");

namespace {

constexpr char kUsage[] =
    "loom <command> [flags]\n"
    "  generate \"text\"   stream a completion to stdout\n"
    "  health            exit 0 when loomd reports SERVING\n"
    "  bench             serving benchmark: vLLM's metrics under load\n";

// The --timeout flag; an unparsable value counts as no deadline.
absl::Duration Timeout() {
  absl::Duration timeout = absl::InfiniteDuration();
  if (!absl::ParseDuration(absl::GetFlag(FLAGS_timeout), &timeout)) {
    std::cerr << "ignoring --timeout=" << absl::GetFlag(FLAGS_timeout) << ": not a duration\n";
    return absl::InfiniteDuration();
  }
  return timeout;
}

int Usage() {
  std::cerr << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    return Usage();
  }
  const std::string command = args[1];
  auto channel =
      grpc::CreateChannel(absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials());

  if (command == "health") {
    const absl::Duration timeout = Timeout();
    return loom::cli::Health(channel, absl::GetFlag(FLAGS_service),
                             timeout == absl::InfiniteDuration() ? absl::Seconds(5) : timeout,
                             std::cout, std::cerr);
  }
  if (command == "bench") {
    return loom::bench::BenchFromFlags(absl::GetFlag(FLAGS_target), std::cout, std::cerr);
  }
  if (command == "generate") {
    if (args.size() < 3) {
      return Usage();
    }
    loom::cli::GenerateOptions options;
    options.prompt = absl::StrJoin(args.begin() + 2, args.end(), " ");
    options.chat = absl::GetFlag(FLAGS_chat);
    if (absl::GetFlag(FLAGS_max_tokens) >= 0) {
      options.max_tokens = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_tokens));
    }
    if (absl::GetFlag(FLAGS_temperature) >= 0) {
      options.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
    }
    if (absl::GetFlag(FLAGS_top_p) >= 0) {
      options.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
    }
    if (absl::GetFlag(FLAGS_seed) >= 0) {
      options.seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
    }
    options.timeout = Timeout();
    return loom::cli::Generate(channel, options, std::cout, std::cerr);
  }
  return Usage();
}
