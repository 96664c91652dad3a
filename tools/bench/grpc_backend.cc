// The `loom` backend of `loom bench`: GenerateStream on loomd's gRPC port.
#include <deque>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "grpcpp/client_context.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tools/bench/backend.h"
#include "tools/bench/stream_call.h"

namespace loom::bench {
namespace {

constexpr absl::Duration kInfoTimeout = absl::Seconds(30);

v1::GenerateRequest ToRequest(const BenchPrompt& prompt, const std::string& request_id,
                              int32_t max_tokens) {
  v1::GenerateRequest r;
  r.set_request_id(request_id);
  if (prompt.token_ids.empty()) {
    r.set_prompt(prompt.text);
  } else {
    r.mutable_prompt_token_ids()->mutable_ids()->Add(prompt.token_ids.begin(),
                                                     prompt.token_ids.end());
    // The ids are the whole prompt: no BOS in front, so lengths are exact.
    r.set_add_special_tokens(false);
  }
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

class GrpcBackend : public Backend {
 public:
  explicit GrpcBackend(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::GenerationService::NewStub(channel)) {}

  absl::StatusOr<TargetInfo> Info() override {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kInfoTimeout));
    v1::ModelInfo info;
    const grpc::Status status = stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (!status.ok()) {
      return absl::UnavailableError(
          absl::StrCat("GetModelInfo failed: ", status.error_code(), " ", status.error_message()));
    }
    return TargetInfo{.model = info.name(),
                      .max_model_len = info.max_model_len(),
                      .vocab_size = static_cast<int32_t>(info.vocab_size())};
  }

  void Start(const BenchPrompt& prompt, const std::string& request_id, int32_t max_tokens,
             RequestDone done) override {
    auto call = std::make_unique<StreamCall>(
        ToRequest(prompt, request_id, max_tokens), StreamCall::Options{},
        [done = std::move(done)](StreamCall& c) { done(ToRecord(c), ErrorOf(c)); });
    StreamCall* started = call.get();
    {
      MutexLock lock(mu_);
      calls_.push_back(std::move(call));
    }
    started->Start(*stub_);
  }

 private:
  std::unique_ptr<v1::GenerationService::Stub> stub_;
  Mutex mu_;
  // Every call lives as long as the backend: gRPC uses it until after OnDone.
  std::deque<std::unique_ptr<StreamCall>> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Backend> MakeGrpcBackend(std::shared_ptr<grpc::Channel> channel) {
  return std::make_unique<GrpcBackend>(std::move(channel));
}

}  // namespace loom::bench
