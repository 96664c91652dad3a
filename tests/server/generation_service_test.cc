// GenerationService over a real in-process gRPC channel, with a scripted
// backend standing in for the engine: the test pushes engine outputs into the
// request's sink and observes what clients get, what the engine is asked to
// abort, and how draining and validation behave.
#include "server/generation_service.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tests/server/fake_model_frontend.h"

namespace loom {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::chrono::seconds kWait(10);

class ScriptedBackend final : public GenerationBackend {
 public:
  absl::StatusOr<Handle> Submit(RequestParams params, std::shared_ptr<OutputSink> sink) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!reject_.ok()) {
      return reject_;
    }
    submitted_.push_back(std::move(params));
    sinks_.push_back(std::move(sink));
    changed_.notify_all();
    return sinks_.size() - 1;
  }

  // As the engine does: an aborted request ends with CANCELLED.
  void Abort(Handle handle) override {
    std::shared_ptr<OutputSink> sink;
    {
      std::unique_lock<std::mutex> lock(mu_);
      aborted_.push_back(handle);
      sink = sinks_[handle];
      changed_.notify_all();
    }
    RequestOutput out;
    out.finished = true;
    out.status = absl::CancelledError("aborted by the client");
    sink->Push(std::move(out));
  }

  void RejectWith(absl::Status status) {
    std::unique_lock<std::mutex> lock(mu_);
    reject_ = std::move(status);
  }

  // Waits for the request with this handle to be submitted.
  std::shared_ptr<OutputSink> WaitForSink(Handle handle) {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(changed_.wait_for(
        lock, kWait, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return sinks_.size() > handle; }));
    return sinks_.size() > handle ? sinks_[handle] : nullptr;
  }

  bool WaitForAbort(Handle handle) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, kWait, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return std::find(aborted_.begin(), aborted_.end(), handle) != aborted_.end();
    });
  }

  RequestParams params(Handle handle) {
    std::unique_lock<std::mutex> lock(mu_);
    return submitted_.at(handle);
  }
  size_t num_submitted() {
    std::unique_lock<std::mutex> lock(mu_);
    return submitted_.size();
  }

 private:
  // std::mutex rather than absl::Mutex: ThreadSanitizer sees its ordering.
  std::mutex mu_;
  std::condition_variable changed_;
  absl::Status reject_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestParams> submitted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<OutputSink>> sinks_ ABSL_GUARDED_BY(mu_);
  std::vector<Handle> aborted_ ABSL_GUARDED_BY(mu_);
};

RequestOutput Token(int32_t id, std::string text) {
  RequestOutput out;
  SampleDelta& d = out.samples.emplace_back();
  d.token_ids = {id};
  d.text = std::move(text);
  return out;
}

RequestOutput Last(int32_t id, std::string text) {
  RequestOutput out = Token(id, std::move(text));
  out.samples[0].finish_reason = FinishReason::kLength;
  out.finished = true;
  out.usage.prompt_tokens = 3;
  out.usage.completion_tokens = 2;
  return out;
}

class GenerationServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = std::make_unique<GenerationService>(
        model_, backend_, [this](std::string_view method, absl::StatusCode code) {
          std::unique_lock<std::mutex> lock(mu_);
          recorded_.push_back(std::string(method) + ":" + absl::StatusCodeToString(code));
        });
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = v1::GenerationService::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }

  // Shutdown waits for every callback, the recorder's included; taking mu_
  // after it shows TSan that order before recorded_ is destroyed.
  void TearDown() override {
    server_->Shutdown();
    std::unique_lock<std::mutex> lock(mu_);
  }

  static v1::GenerateRequest Request(std::string prompt) {
    v1::GenerateRequest r;
    r.set_prompt(std::move(prompt));
    r.mutable_stopping()->set_max_tokens(2);
    return r;
  }

  std::vector<std::string> recorded() {
    std::unique_lock<std::mutex> lock(mu_);
    return recorded_;
  }

  testing::FakeModelFrontend model_;
  ScriptedBackend backend_;
  std::unique_ptr<GenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::GenerationService::Stub> stub_;
  std::mutex mu_;
  std::vector<std::string> recorded_ ABSL_GUARDED_BY(mu_);
};

TEST_F(GenerationServiceTest, UnaryGathersTheWholeResult) {
  v1::GenerateResponse response;
  grpc::Status status;
  std::thread client([&] {
    grpc::ClientContext ctx;
    v1::GenerateRequest r = Request("hi");
    r.set_request_id("u1");
    status = stub_->Generate(&ctx, r, &response);
  });
  std::shared_ptr<OutputSink> sink = backend_.WaitForSink(0);
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(backend_.params(0).request_id, "u1");
  EXPECT_THAT(backend_.params(0).prompt_token_ids,
              ElementsAre(testing::FakeModelFrontend::kBos, 'h', 'i'));
  sink->Push(Token(10, "He"));
  sink->Push(Last(11, "llo"));
  client.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.request_id(), "u1");
  ASSERT_EQ(response.completions_size(), 1);
  EXPECT_EQ(response.completions(0).text(), "Hello");
  EXPECT_THAT(response.completions(0).token_ids(), ElementsAre(10, 11));
  EXPECT_EQ(response.completions(0).finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(response.usage().completion_tokens(), 2U);
  EXPECT_THAT(recorded(), ElementsAre("Generate:OK"));
}

// The engine's first output for a prompt of three tokens scored with one
// alternative each.
RequestOutput ScoredFirst(int32_t id, std::string text) {
  RequestOutput out = Token(id, std::move(text));
  out.first_prompt_token_id = testing::FakeModelFrontend::kBos;
  out.prompt_logprobs = {{'h', -1.5f, {{'x', -0.5f}}, 2}, {'i', -0.25f, {{'i', -0.25f}}, 1}};
  return out;
}

void ExpectScoredPrompt(const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& got) {
  ASSERT_EQ(got.size(), 2);
  EXPECT_EQ(got[0].token_id(), 'h');
  EXPECT_FLOAT_EQ(got[0].logprob(), -1.5f);
  EXPECT_EQ(got[0].rank(), 2);
  ASSERT_EQ(got[0].top_size(), 1);
  EXPECT_EQ(got[0].top(0).token_id(), 'x');
  EXPECT_EQ(got[1].token_id(), 'i');
  EXPECT_EQ(got[1].rank(), 1);
}

TEST_F(GenerationServiceTest, PromptLogprobsReachBothResponses) {
  v1::GenerateResponse response;
  grpc::Status status;
  std::thread unary([&] {
    grpc::ClientContext ctx;
    v1::GenerateRequest r = Request("hi");
    r.set_prompt_logprobs(1);
    status = stub_->Generate(&ctx, r, &response);
  });
  std::shared_ptr<OutputSink> sink = backend_.WaitForSink(0);
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(backend_.params(0).prompt_logprobs, 1);
  sink->Push(ScoredFirst(10, "He"));
  sink->Push(Last(11, "llo"));
  unary.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.first_prompt_token_id(), testing::FakeModelFrontend::kBos);
  ExpectScoredPrompt(response.prompt_logprobs());

  std::vector<v1::GenerateStreamResponse> messages;
  std::thread stream([&] {
    grpc::ClientContext ctx;
    v1::GenerateRequest r = Request("hi");
    r.set_prompt_logprobs(1);
    auto reader = stub_->GenerateStream(&ctx, r);
    v1::GenerateStreamResponse m;
    while (reader->Read(&m)) messages.push_back(m);
    status = reader->Finish();
  });
  sink = backend_.WaitForSink(1);
  ASSERT_NE(sink, nullptr);
  sink->Push(ScoredFirst(10, "He"));
  sink->Push(Last(11, "llo"));
  stream.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0].first_prompt_token_id(), testing::FakeModelFrontend::kBos);
  ExpectScoredPrompt(messages[0].prompt_logprobs());
  for (size_t i = 1; i < messages.size(); ++i) EXPECT_EQ(messages[i].prompt_logprobs_size(), 0);
}

TEST_F(GenerationServiceTest, MaxTokensZeroNeedsPromptLogprobs) {
  v1::GenerateRequest r = Request("hi");
  r.mutable_stopping()->set_max_tokens(0);
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  EXPECT_EQ(stub_->Generate(&ctx, r, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(backend_.num_submitted(), 0U);

  r.set_prompt_logprobs(0);
  grpc::Status status;
  std::thread client([&] {
    grpc::ClientContext scored_ctx;
    status = stub_->Generate(&scored_ctx, r, &response);
  });
  std::shared_ptr<OutputSink> sink = backend_.WaitForSink(0);
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(backend_.params(0).stopping.max_tokens, 0);
  RequestOutput only = ScoredFirst(0, "");
  only.samples[0].token_ids.clear();
  only.samples[0].finish_reason = FinishReason::kLength;
  only.finished = true;
  sink->Push(std::move(only));
  client.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.completions(0).token_ids_size(), 0);
  EXPECT_EQ(response.completions(0).finish_reason(), v1::FINISH_REASON_LENGTH);
  ExpectScoredPrompt(response.prompt_logprobs());
}

TEST_F(GenerationServiceTest, StreamDeliversEveryTokenInOrder) {
  constexpr int kTokens = 500;
  std::vector<v1::GenerateStreamResponse> messages;
  grpc::Status status;
  std::thread client([&] {
    grpc::ClientContext ctx;
    auto reader = stub_->GenerateStream(&ctx, Request("x"));
    v1::GenerateStreamResponse m;
    while (reader->Read(&m)) {
      messages.push_back(m);
    }
    status = reader->Finish();
  });
  std::shared_ptr<OutputSink> sink = backend_.WaitForSink(0);
  ASSERT_NE(sink, nullptr);
  // Pushed as fast as the engine would: the reactor must never block this
  // thread and must coalesce whatever the client has not taken yet.
  for (int i = 0; i < kTokens - 1; ++i) {
    sink->Push(Token(i, "t"));
  }
  sink->Push(Last(kTokens - 1, "!"));
  client.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(messages.empty());
  EXPECT_LE(messages.size(), static_cast<size_t>(kTokens));
  std::vector<int32_t> tokens;
  std::string text;
  for (const auto& m : messages) {
    EXPECT_EQ(m.request_id(), backend_.params(0).request_id);
    tokens.insert(tokens.end(), m.token_ids().begin(), m.token_ids().end());
    text += m.text();
  }
  ASSERT_EQ(tokens.size(), static_cast<size_t>(kTokens));
  for (int i = 0; i < kTokens; ++i) {
    EXPECT_EQ(tokens[i], i);
  }
  EXPECT_EQ(text, std::string(kTokens - 1, 't') + "!");
  EXPECT_EQ(messages.back().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(messages.back().usage().prompt_tokens(), 3U);
  for (size_t i = 0; i + 1 < messages.size(); ++i) {
    EXPECT_FALSE(messages[i].has_usage());
  }
}

TEST_F(GenerationServiceTest, CancellingAStreamAbortsTheRequestInTheEngine) {
  grpc::ClientContext ctx;
  auto reader = stub_->GenerateStream(&ctx, Request("x"));
  std::shared_ptr<OutputSink> sink = backend_.WaitForSink(0);
  ASSERT_NE(sink, nullptr);
  sink->Push(Token(1, "a"));
  v1::GenerateStreamResponse m;
  ASSERT_TRUE(reader->Read(&m));
  ctx.TryCancel();
  EXPECT_TRUE(backend_.WaitForAbort(0));
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Outputs after the end reach no reactor and do no harm.
  sink->Push(Token(2, "b"));
}

TEST_F(GenerationServiceTest, CancellingAUnaryCallAbortsTheRequest) {
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  grpc::Status status;
  std::thread client([&] { status = stub_->Generate(&ctx, Request("x"), &response); });
  ASSERT_NE(backend_.WaitForSink(0), nullptr);
  ctx.TryCancel();
  EXPECT_TRUE(backend_.WaitForAbort(0));
  client.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(GenerationServiceTest, InvalidRequestsNeverReachTheEngine) {
  v1::GenerateRequest r = Request("x");
  r.mutable_sampling()->set_temperature(250);
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  grpc::Status status = stub_->Generate(&ctx, r, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "sampling.temperature must be in [0, 100]; got 250");

  grpc::ClientContext stream_ctx;
  auto reader = stub_->GenerateStream(&stream_ctx, Request(std::string(100, 'x')));
  v1::GenerateStreamResponse m;
  EXPECT_FALSE(reader->Read(&m));
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "prompt has 101 tokens; max_model_len is 64");
  EXPECT_EQ(backend_.num_submitted(), 0U);
  EXPECT_THAT(recorded(),
              ElementsAre("Generate:INVALID_ARGUMENT", "GenerateStream:INVALID_ARGUMENT"));
}

TEST_F(GenerationServiceTest, EngineRejectionKeepsItsCode) {
  backend_.RejectWith(absl::ResourceExhaustedError("1024 requests waiting; limit 1024"));
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  grpc::Status status = stub_->Generate(&ctx, Request("x"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("limit 1024"));
}

TEST_F(GenerationServiceTest, DeadlineTravelsWithTheRequest) {
  grpc::ClientContext ctx;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  ctx.set_deadline(absl::ToChronoTime(deadline));
  v1::GenerateResponse response;
  std::thread client([&] { (void)stub_->Generate(&ctx, Request("x"), &response); });
  std::shared_ptr<OutputSink> sink = backend_.WaitForSink(0);
  ASSERT_NE(sink, nullptr);
  EXPECT_LT(absl::AbsDuration(backend_.params(0).deadline - deadline), absl::Seconds(1));
  sink->Push(Last(1, "a"));
  client.join();
}

TEST_F(GenerationServiceTest, DrainingRejectsNewCallsAndFinishesRunningOnes) {
  grpc::ClientContext running_ctx;
  auto running = stub_->GenerateStream(&running_ctx, Request("x"));
  std::shared_ptr<OutputSink> sink = backend_.WaitForSink(0);
  ASSERT_NE(sink, nullptr);

  service_->StopAccepting();
  grpc::ClientContext ctx;
  v1::GenerateResponse response;
  grpc::Status status = stub_->Generate(&ctx, Request("y"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext info_ctx;
  v1::ModelInfo info;
  EXPECT_EQ(stub_->GetModelInfo(&info_ctx, v1::GetModelInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  sink->Push(Last(1, "ok"));
  v1::GenerateStreamResponse m;
  ASSERT_TRUE(running->Read(&m));
  EXPECT_EQ(m.text(), "ok");
  EXPECT_TRUE(running->Finish().ok());
}

TEST_F(GenerationServiceTest, TokenizeAndModelInfo) {
  grpc::ClientContext ctx;
  v1::TokenizeRequest r;
  r.set_text("ab");
  r.set_add_special_tokens(false);
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(stub_->Tokenize(&ctx, r, &tokens).ok());
  EXPECT_THAT(tokens.token_ids(), ElementsAre('a', 'b'));
  EXPECT_THAT(tokens.tokens(), ElementsAre("a", "b"));

  grpc::ClientContext info_ctx;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&info_ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.name(), "fake");
  EXPECT_EQ(info.vocab_size(), 300U);
}

}  // namespace
}  // namespace loom
