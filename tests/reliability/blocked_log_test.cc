// loomd with a stderr pipe that nobody reads: once the pipe and the log queue
// are full, log lines are dropped and counted in
// loom_log_messages_dropped_total, requests are still served (no engine or
// gRPC thread waits on stderr), and SIGTERM still drains and exits 0.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tests/reliability/metrics_client.h"

extern char** environ;

namespace loom {
namespace {

// Starts loomd with stderr on a pipe; returns its pid and the pipe's read end.
pid_t SpawnLoomd(int* read_fd) {
  const char* binary = std::getenv("LOOMD");
  if (binary == nullptr) return -1;
  std::vector<std::string> args = {binary,
                                   "--host=127.0.0.1",
                                   "--port=0",
                                   "--http_port=0",
                                   "--threads=2",
                                   "--max_model_len=512",
                                   "--kv_cache_bytes=67108864",
                                   "--drain_timeout=60s"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  *read_fd = fds[0];
  return pid;
}

// Reads fd until the serving line is complete; what was read, or "" at EOF.
std::string ReadUntilServing(int fd) {
  std::string log;
  char buffer[4096];
  while (log.find(" (HTTP)") == std::string::npos) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    log.append(buffer, static_cast<size_t>(n));
  }
  return log;
}

std::optional<int> GrpcPortFromLog(const std::string& log) {
  const size_t end = log.find(" (gRPC)");
  const size_t colon = log.rfind(':', end);
  int port = 0;
  if (end == std::string::npos || colon == std::string::npos ||
      !absl::SimpleAtoi(log.substr(colon + 1, end - colon - 1), &port)) {
    return std::nullopt;
  }
  return port;
}

// Waits up to timeout for pid to exit; its exit code, or -1.
int WaitForExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return -1;
}

TEST(BlockedLogTest, UnreadStderrDropsAndCountsLinesAndServingGoesOn) {
  int log_fd = -1;
  const pid_t pid = SpawnLoomd(&log_fd);
  ASSERT_GT(pid, 0) << "set LOOMD to the loomd binary";
  const std::string log = ReadUntilServing(log_fd);
  const std::optional<int> grpc_port = GrpcPortFromLog(log);
  const std::optional<int> http_port = testing::HttpPortFromLog(log);
  ASSERT_TRUE(grpc_port.has_value() && http_port.has_value()) << log;
  // From here on nobody reads stderr.

  auto stub = v1::GenerationService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", *grpc_port), grpc::InsecureChannelCredentials()));
  // Each rejected request logs two lines (~300 bytes): 8,000 of them are about
  // twice the pipe plus the 1 MiB queue.
  constexpr int kRejected = 8000;
  v1::GenerateRequest invalid;
  invalid.set_request_id(std::string(100, 'r'));
  invalid.set_prompt("");
  for (int i = 0; i < kRejected; ++i) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::GenerateResponse response;
    ASSERT_EQ(stub->Generate(&context, invalid, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << i;
  }
  absl::StatusOr<std::string> metrics = testing::HttpGet(*http_port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::optional<double> dropped =
      testing::SampleValue(*metrics, "loom_log_messages_dropped_total");
  ASSERT_TRUE(dropped.has_value());
  std::cout << "log lines dropped: " << *dropped << " of about " << 2 * kRejected << "\n";
  EXPECT_GT(*dropped, 0);

  // The engine still generates (its access line is dropped, not waited for).
  v1::GenerateRequest valid;
  valid.set_prompt("Hello");
  valid.mutable_stopping()->set_max_tokens(8);
  valid.mutable_stopping()->set_ignore_eos(true);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  v1::GenerateResponse response;
  const grpc::Status status = stub->Generate(&context, valid, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.usage().completion_tokens(), 8U);

  // Drain and exit do not wait on stderr either.
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  const int code = WaitForExit(pid, absl::Seconds(120));
  if (code < 0) kill(pid, SIGKILL);
  EXPECT_EQ(code, 0);
  close(log_fd);
}

}  // namespace
}  // namespace loom
