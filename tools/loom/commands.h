// The loom CLI's subcommands as plain functions over a gRPC channel, so that
// main.cc only parses flags and tests can drive them against any loomd.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace loom::cli {

struct GenerateOptions {
  std::string prompt;
  bool chat = false;  // send the prompt as one user message (chat template)
  std::optional<uint32_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<uint64_t> seed;
  absl::Duration timeout = absl::InfiniteDuration();
};

// Streams the completion's text to out as it arrives and a one-line summary
// to err. Returns the process exit code: 0 on success, 1 on an RPC error.
int Generate(const std::shared_ptr<grpc::Channel>& channel, const GenerateOptions& options,
             std::ostream& out, std::ostream& err);

// Prints the health of service ("" = the whole server) and returns 0 only when
// it is SERVING.
int Health(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
           absl::Duration timeout, std::ostream& out, std::ostream& err);

}  // namespace loom::cli
