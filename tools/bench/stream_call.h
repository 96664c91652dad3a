// One GenerateStream call on the gRPC callback API that times what it reads:
// the first token, every gap between token-carrying messages and the end. It
// can cancel itself after a number of messages, so the benchmark and the
// reliability tests share one asynchronous client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tools/bench/bench_stats.h"

namespace loom::bench {

class StreamCall : public grpc::ClientReadReactor<v1::GenerateStreamResponse> {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    absl::Duration timeout = absl::InfiniteDuration();
    // Cancel the call (TryCancel) once this many messages arrived; 0 = never.
    int cancel_after_messages = 0;
  };

  // on_done runs on a gRPC thread once the call is over; the call must stay
  // alive until then.
  StreamCall(v1::GenerateRequest request, Options options,
             std::function<void(StreamCall&)> on_done);

  void Start(v1::GenerationService::Stub& stub);

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Valid once on_done ran.
  const grpc::Status& status() const { return status_; }
  int64_t messages() const { return messages_; }
  int64_t output_tokens() const { return output_tokens_; }
  bool has_usage() const { return has_usage_; }
  const v1::Usage& usage() const { return usage_; }
  v1::FinishReason finish_reason() const { return finish_reason_; }
  const v1::GenerateRequest& request() const { return request_; }
  // Seconds from Start(): to the first token (0 when none came), to OnDone.
  double ttft() const;
  double e2el() const;
  // Seconds between consecutive messages that carried tokens.
  const std::vector<double>& itls() const { return itls_; }

 private:
  v1::GenerateRequest request_;
  Options options_;
  std::function<void(StreamCall&)> on_done_;
  grpc::ClientContext context_;
  v1::GenerateStreamResponse message_;

  Clock::time_point start_;
  Clock::time_point first_token_;
  Clock::time_point last_token_;
  Clock::time_point end_;
  int64_t messages_ = 0;
  int64_t output_tokens_ = 0;
  std::vector<double> itls_;
  bool has_usage_ = false;
  v1::Usage usage_;
  v1::FinishReason finish_reason_ = v1::FINISH_REASON_UNSPECIFIED;
  grpc::Status status_;
};

// What a finished call measured, and "" or its error as "CODE: message".
RequestRecord ToRecord(const StreamCall& call);
std::string ErrorOf(const StreamCall& call);

}  // namespace loom::bench
