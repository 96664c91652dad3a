// The engine-failure and liveness paths of the real loomd, driven through the
// test-only LOOM_TEST_FAULT hook: a failed step ends every stream with
// INTERNAL, turns health NOT_SERVING and makes loomd exit non-zero; a stalled
// step turns /healthz and gRPC health while an idle engine stays healthy.
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/loomd_process.h"
#include "tests/integration/stream_call.h"

namespace loom::testing {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kBound = absl::Seconds(60);
constexpr char kServiceName[] = "loom.v1.GenerationService";

TEST(LoomdFaultTest, FailedStepEndsEveryStreamWithInternalAndExitsNonZero) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd =
      LoomdProcess::Start({}, {"LOOM_TEST_FAULT=fail_at:60"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  const std::shared_ptr<grpc::Channel> channel = (*loomd)->NewChannel();
  HealthWatch server_health(channel, "");
  HealthWatch service_health(channel, kServiceName);
  ASSERT_TRUE(server_health.WaitFor(HealthCheckResponse::SERVING, kBound));
  ASSERT_TRUE(service_health.WaitFor(HealthCheckResponse::SERVING, kBound));

  // Four streams that cannot finish before step 60 (each wants 400 tokens).
  std::vector<std::unique_ptr<StreamCall>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::make_unique<StreamCall>(
        channel, GreedyRequest("Stream " + std::to_string(i) + " says", 400)));
  }
  for (auto& stream : streams) {
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("injected fault at step 60"));
    // It was in flight: it had tokens before the failure.
    EXPECT_GT(stream->num_tokens(), 0);
    EXPECT_LT(stream->num_tokens(), 400);
  }
  EXPECT_TRUE(server_health.WaitFor(HealthCheckResponse::NOT_SERVING, kBound));
  EXPECT_TRUE(service_health.WaitFor(HealthCheckResponse::NOT_SERVING, kBound));
  absl::StatusOr<int> code = (*loomd)->WaitForExit(kBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2);
  EXPECT_THAT((*loomd)->log(), HasSubstr("test fault: failing step 60"));
  EXPECT_THAT((*loomd)->log(), HasSubstr("engine failed"));
}

TEST(LoomdFaultTest, FailedWarmUpRefusesToServe) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd =
      LoomdProcess::Spawn({}, {"LOOM_TEST_FAULT=fail_at:1"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  absl::StatusOr<int> code = (*loomd)->WaitForExit(kBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 1);
  EXPECT_THAT((*loomd)->log(), HasSubstr("warm-up step failed: injected fault at step 1"));
  EXPECT_THAT((*loomd)->log(), Not(HasSubstr(" (gRPC)")));
}

TEST(LoomdFaultTest, MalformedFaultSpecIsRejected) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd =
      LoomdProcess::Spawn({}, {"LOOM_TEST_FAULT=explode"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  absl::StatusOr<int> code = (*loomd)->WaitForExit(kBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2);
  EXPECT_THAT((*loomd)->log(),
              HasSubstr("LOOM_TEST_FAULT must be fail_at:N or stall_at:N with N >= 1; got "
                        "\"explode\""));
}

bool Live(LoomdProcess& loomd, const std::shared_ptr<grpc::Channel>& channel) {
  return HttpStatus(loomd.http_port(), "/healthz") == 200 &&
         CheckHealth(channel, "") == HealthCheckResponse::SERVING &&
         CheckHealth(channel, kServiceName) == HealthCheckResponse::SERVING;
}

TEST(LoomdFaultTest, StalledStepTurnsBothProbesAndIdleStaysHealthy) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd =
      // The drain may take its time: under TSan a token can take a second.
      LoomdProcess::Start({"--engine_stall_timeout=1s", "--drain_timeout=10m"},
                          {"LOOM_TEST_FAULT=stall_at:8"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  const std::shared_ptr<grpc::Channel> channel = (*loomd)->NewChannel();
  // Idle for well over the stall timeout: every probe stays healthy.
  EXPECT_FALSE(PollUntil([&] { return !Live(**loomd, channel); }, absl::Seconds(3)));

  StreamCall stream(channel, GreedyRequest("The engine will hang", 64));
  ASSERT_TRUE((*loomd)->WaitForLog("test fault: stalling step 8", kBound));
  EXPECT_TRUE(
      PollUntil([&] { return HttpStatus((*loomd)->http_port(), "/healthz") == 503; }, kBound));
  EXPECT_TRUE(PollUntil(
      [&] { return CheckHealth(channel, "") == HealthCheckResponse::NOT_SERVING; }, kBound));
  EXPECT_TRUE(PollUntil(
      [&] { return CheckHealth(channel, kServiceName) == HealthCheckResponse::NOT_SERVING; },
      kBound));
  EXPECT_LT(stream.num_tokens(), 64);
  EXPECT_THAT((*loomd)->log(), HasSubstr("engine stalled"));

  // SIGTERM ends the stall (the hook's contract); the drain then finishes it.
  (*loomd)->Signal(SIGTERM);
  const grpc::Status status = stream.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stream.num_tokens(), 64);
  absl::StatusOr<int> code = (*loomd)->WaitForExit(kBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace loom::testing
