// Helpers for the daemon-level lifecycle and fault tests: a GenerateStream call
// read on its own thread, gRPC health checks and /healthz probes, and bounded
// polling for a condition (never a sleep standing in for an assertion).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "loom/v1/generation.grpc.pb.h"

namespace loom::testing {

// A greedy request for exactly max_tokens tokens.
v1::GenerateRequest GreedyRequest(const std::string& prompt, uint32_t max_tokens);

// One GenerateStream call, read to its end on a thread of its own.
class StreamCall {
 public:
  // deadline bounds the call on the client side (InfiniteFuture: 120 s).
  StreamCall(const std::shared_ptr<grpc::Channel>& channel, const v1::GenerateRequest& request,
             absl::Duration deadline = absl::InfiniteDuration());
  ~StreamCall();  // cancels the call if it still runs, then joins

  StreamCall(const StreamCall&) = delete;
  StreamCall& operator=(const StreamCall&) = delete;

  // True once the first token arrived; false after timeout or at the end.
  bool WaitForTokens(int32_t count, absl::Duration timeout);
  // Waits for the call's end; its status (DEADLINE_EXCEEDED locally on timeout).
  grpc::Status Finish(absl::Duration timeout = absl::Seconds(120));
  int32_t num_tokens();

 private:
  void Read();

  grpc::ClientContext context_;
  std::unique_ptr<v1::GenerationService::Stub> stub_;
  v1::GenerateRequest request_;
  std::mutex mu_;
  std::condition_variable changed_;
  int32_t num_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

// A grpc.health.v1.Health/Watch stream for one service, read on its own
// thread: it sees a status change even when the listener closes right after.
class HealthWatch {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthWatch(const std::shared_ptr<grpc::Channel>& channel, const std::string& service);
  ~HealthWatch();  // cancels the stream and joins

  HealthWatch(const HealthWatch&) = delete;
  HealthWatch& operator=(const HealthWatch&) = delete;

  // True once the stream has reported status; false after timeout.
  bool WaitFor(ServingStatus status, absl::Duration timeout);

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  std::string service_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<ServingStatus> seen_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reader_;
};

// grpc.health.v1.Health/Check for service ("" is the whole server); nullopt-like
// UNKNOWN when the call itself fails.
grpc::health::v1::HealthCheckResponse::ServingStatus CheckHealth(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service);

// The HTTP status of GET path on 127.0.0.1:port (0 when the request failed).
int HttpStatus(int port, const std::string& path);

// Polls condition every 50 ms until it holds (true) or timeout passes (false).
bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout);

}  // namespace loom::testing
