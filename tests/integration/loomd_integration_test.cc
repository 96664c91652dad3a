// Drives the real loomd (the bundled SmolLM2 model on the CPU) over loopback
// with the C++ gRPC client and the loom CLI's commands: health, validation,
// streaming, cancellation and the SIGTERM drain.
#include <csignal>
#include <memory>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tests/integration/loomd_process.h"
#include "tests/integration/stream_call.h"
#include "tools/loom/commands.h"

namespace loom {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

constexpr absl::Duration kCallTimeout = absl::Seconds(60);

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
}

HealthCheckResponse::ServingStatus CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                               const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(context);
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// One daemon serves every test of this suite except the drain, which ends it.
class LoomdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<testing::LoomdProcess>> started = testing::LoomdProcess::Start();
    ASSERT_TRUE(started.ok()) << started.status();
    loomd_ = started->release();
  }
  static void TearDownTestSuite() {
    if (loomd_ == nullptr) {
      return;
    }
    loomd_->Signal(SIGTERM);
    absl::StatusOr<int> code = loomd_->WaitForExit(kCallTimeout);
    EXPECT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(code.value_or(-1), 0);
    delete loomd_;
    loomd_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(loomd_, nullptr);
    channel_ = loomd_->NewChannel();
    stub_ = v1::GenerationService::NewStub(channel_);
  }

  static testing::LoomdProcess* loomd_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GenerationService::Stub> stub_;
};

testing::LoomdProcess* LoomdTest::loomd_ = nullptr;

TEST_F(LoomdTest, HealthIsServing) {
  EXPECT_EQ(CheckHealth(channel_, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(channel_, "loom.v1.GenerationService"), HealthCheckResponse::SERVING);
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(cli::Health(channel_, "", absl::Seconds(10), out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "SERVING\n");
}

TEST_F(LoomdTest, ModelInfoDescribesTheBundledModel) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.architecture(), "LlamaForCausalLM");
  EXPECT_EQ(info.vocab_size(), 49152U);
  EXPECT_EQ(info.max_model_len(), 512U);
  EXPECT_EQ(info.device(), "cpu");
  EXPECT_GT(info.num_kv_blocks(), 0U);
}

TEST_F(LoomdTest, InvalidRequestsNameTheFieldAndTheServerKeepsServing) {
  struct Case {
    v1::GenerateRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({v1::GenerateRequest(), "input must be set"});
  cases.push_back(
      {testing::GreedyRequest("hi", 4), "sampling.temperature must be in [0, 100]; got 250"});
  cases.back().request.mutable_sampling()->set_temperature(250);
  cases.push_back({testing::GreedyRequest("hi", 4), "sampling.top_p must be in (0, 1]"});
  cases.back().request.mutable_sampling()->set_top_p(0);
  cases.push_back({testing::GreedyRequest("hi", 4), "sampling.n must be in [1, 16]; got 40"});
  cases.back().request.mutable_sampling()->set_n(40);
  cases.push_back({testing::GreedyRequest("hi", 4),
                   "prompt_token_ids.ids[0] must be a token id in [0, 49152)"});
  cases.back().request.mutable_prompt_token_ids()->add_ids(49152);
  cases.push_back({testing::GreedyRequest("hi", 4), "stopping.max_tokens must be >= 1; got 0"});
  cases.back().request.mutable_stopping()->set_max_tokens(0);
  cases.push_back({testing::GreedyRequest("hi", 4), "logprobs must be in [0, 20]; got 21"});
  cases.back().request.set_logprobs(21);
  cases.push_back({testing::GreedyRequest(std::string(3000, 'x'), 4), "max_model_len is 512"});
  for (const Case& c : cases) {
    grpc::ClientContext context;
    SetDeadline(context);
    v1::GenerateResponse response;
    const grpc::Status status = stub_->Generate(&context, c.request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
  grpc::ClientContext context;
  SetDeadline(context);
  v1::GenerateResponse response;
  const grpc::Status status =
      stub_->Generate(&context, testing::GreedyRequest("The capital of France is", 3), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.completions_size(), 1);
  EXPECT_EQ(response.completions(0).token_ids_size(), 3);
  EXPECT_EQ(CheckHealth(channel_, ""), HealthCheckResponse::SERVING);
}

TEST_F(LoomdTest, StreamingMatchesTheUnaryResult) {
  constexpr uint32_t kTokens = 8;
  const v1::GenerateRequest request = testing::GreedyRequest("Once upon a time", kTokens);
  grpc::ClientContext unary_context;
  SetDeadline(unary_context);
  v1::GenerateResponse unary;
  ASSERT_TRUE(stub_->Generate(&unary_context, request, &unary).ok());

  grpc::ClientContext context;
  SetDeadline(context);
  auto reader = stub_->GenerateStream(&context, request);
  v1::GenerateStreamResponse message;
  std::vector<int32_t> tokens;
  std::string text;
  int num_messages = 0;
  v1::GenerateStreamResponse last;
  while (reader->Read(&message)) {
    ++num_messages;
    tokens.insert(tokens.end(), message.token_ids().begin(), message.token_ids().end());
    text += message.text();
    last = message;
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GE(num_messages, 1);
  EXPECT_EQ(tokens.size(), kTokens);
  EXPECT_EQ(std::vector<int32_t>(unary.completions(0).token_ids().begin(),
                                 unary.completions(0).token_ids().end()),
            tokens);
  EXPECT_EQ(text, unary.completions(0).text());
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(last.usage().completion_tokens(), kTokens);
  EXPECT_GT(last.usage().prompt_tokens(), 0U);
}

TEST_F(LoomdTest, CliGenerateStreamsText) {
  cli::GenerateOptions options;
  options.prompt = "Hello";
  options.max_tokens = 4;
  options.temperature = 0;
  options.timeout = kCallTimeout;
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(cli::Generate(channel_, options, out, err), 0) << err.str();
  EXPECT_GT(out.str().size(), 1U);
  EXPECT_THAT(err.str(), HasSubstr("generated tokens"));
}

TEST_F(LoomdTest, CancellingAStreamAbortsTheRequestInTheEngine) {
  v1::GenerateRequest request = testing::GreedyRequest("Count slowly: one, two,", 400);
  request.set_request_id("cancel-me");
  grpc::ClientContext context;
  SetDeadline(context);
  auto reader = stub_->GenerateStream(&context, request);
  v1::GenerateStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));
  context.TryCancel();
  // The engine confirms the abort with the request's final output, which the
  // server logs; the request's blocks are freed with it.
  EXPECT_TRUE(loomd_->WaitForLog("request cancel-me aborted: CANCELLED", kCallTimeout));
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  grpc::ClientContext next_context;
  SetDeadline(next_context);
  v1::GenerateResponse response;
  const grpc::Status status =
      stub_->Generate(&next_context, testing::GreedyRequest("Next", 2), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// SIGTERM with a request in flight: health turns NOT_SERVING, new calls get
// UNAVAILABLE, the request in flight completes, and loomd exits 0.
TEST(LoomdDrainTest, SigtermDrainsAndExitsZero) {
  absl::StatusOr<std::unique_ptr<testing::LoomdProcess>> loomd = testing::LoomdProcess::Start();
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  auto channel = (*loomd)->NewChannel();
  auto stub = v1::GenerationService::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);

  grpc::ClientContext watch_context;
  SetDeadline(watch_context);
  auto watch = health->Watch(&watch_context, HealthCheckRequest());
  HealthCheckResponse health_status;
  ASSERT_TRUE(watch->Read(&health_status));
  EXPECT_EQ(health_status.status(), HealthCheckResponse::SERVING);

  constexpr uint32_t kTokens = 24;
  grpc::ClientContext context;
  SetDeadline(context);
  auto in_flight =
      stub->GenerateStream(&context, testing::GreedyRequest("The history of Rome", kTokens));
  v1::GenerateStreamResponse message;
  ASSERT_TRUE(in_flight->Read(&message));
  int tokens = message.token_ids_size();

  (*loomd)->Signal(SIGTERM);
  ASSERT_TRUE(watch->Read(&health_status));
  EXPECT_EQ(health_status.status(), HealthCheckResponse::NOT_SERVING);

  grpc::ClientContext late_context;
  SetDeadline(late_context);
  v1::GenerateResponse late;
  const grpc::Status rejected =
      stub->Generate(&late_context, testing::GreedyRequest("late", 2), &late);
  EXPECT_EQ(rejected.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(rejected.error_message(), HasSubstr("shutting down"));

  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while (in_flight->Read(&message)) {
    tokens += message.token_ids_size();
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      finish = message.finish_reason();
    }
  }
  const grpc::Status status = in_flight->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, static_cast<int>(kTokens));
  EXPECT_EQ(finish, v1::FINISH_REASON_LENGTH);

  watch_context.TryCancel();
  absl::StatusOr<int> code = (*loomd)->WaitForExit(kCallTimeout);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace loom
