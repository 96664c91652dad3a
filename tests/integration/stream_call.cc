#include "tests/integration/stream_call.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "tests/reliability/metrics_client.h"

namespace loom::testing {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

v1::GenerateRequest GreedyRequest(const std::string& prompt, uint32_t max_tokens) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(max_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

StreamCall::StreamCall(const std::shared_ptr<grpc::Channel>& channel,
                       const v1::GenerateRequest& request, absl::Duration deadline)
    : stub_(v1::GenerationService::NewStub(channel)), request_(request) {
  context_.set_deadline(absl::ToChronoTime(
      absl::Now() + (deadline == absl::InfiniteDuration() ? absl::Seconds(120) : deadline)));
  reader_ = std::thread([this] { Read(); });
}

StreamCall::~StreamCall() {
  context_.TryCancel();
  reader_.join();
}

void StreamCall::Read() {
  auto reader = stub_->GenerateStream(&context_, request_);
  v1::GenerateStreamResponse message;
  while (reader->Read(&message)) {
    const std::lock_guard<std::mutex> lock(mu_);
    num_tokens_ += message.token_ids_size();
    changed_.notify_all();
  }
  grpc::Status status = reader->Finish();
  const std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(status);
  done_ = true;
  changed_.notify_all();
}

bool StreamCall::WaitForTokens(int32_t count, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                    [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_ || num_tokens_ >= count; });
  return num_tokens_ >= count;
}

grpc::Status StreamCall::Finish(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                         [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_; })) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the stream did not end in time");
  }
  return status_;
}

int32_t StreamCall::num_tokens() {
  const std::lock_guard<std::mutex> lock(mu_);
  return num_tokens_;
}

HealthWatch::HealthWatch(const std::shared_ptr<grpc::Channel>& channel, const std::string& service)
    : stub_(grpc::health::v1::Health::NewStub(channel)), service_(service) {
  context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  reader_ = std::thread([this] {
    HealthCheckRequest request;
    request.set_service(service_);
    auto reader = stub_->Watch(&context_, request);
    HealthCheckResponse response;
    while (reader->Read(&response)) {
      const std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(response.status());
      changed_.notify_all();
    }
    (void)reader->Finish();
    const std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    changed_.notify_all();
  });
}

HealthWatch::~HealthWatch() {
  context_.TryCancel();
  reader_.join();
}

bool HealthWatch::WaitFor(ServingStatus status, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto seen = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return std::find(seen_.begin(), seen_.end(), status) != seen_.end();
  };
  changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                    [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_ || seen(); });
  return seen();
}

HealthCheckResponse::ServingStatus CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                               const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  if (!stub->Check(&context, request, &response).ok()) {
    return HealthCheckResponse::UNKNOWN;
  }
  return response.status();
}

int HttpStatus(int port, const std::string& path) {
  const absl::StatusOr<std::string> body = HttpGet(port, path);
  if (body.ok()) {
    return 200;
  }
  // HttpGet reports any other answer as "bad HTTP response: HTTP/1.x NNN ...".
  const std::string message(body.status().message());
  const size_t at = message.find("HTTP/1.");
  if (at == std::string::npos || message.size() < at + 12) {
    return 0;
  }
  int code = 0;
  return absl::SimpleAtoi(message.substr(at + 9, 3), &code) ? code : 0;
}

bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) {
      return false;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

}  // namespace loom::testing
