// The real loomd's signals and lifecycle: stray signals cannot disable the
// SIGTERM drain, SIGTERM during load or warm-up exits cleanly, the drain
// serves queued requests and ends what remains at --drain_timeout with
// UNAVAILABLE, a client deadline is counted as a deadline, and a taken port
// fails start-up before the model loads.
#include <csignal>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/loomd_process.h"
#include "tests/integration/stream_call.h"
#include "tests/reliability/metrics_client.h"

namespace loom::testing {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kBound = absl::Seconds(60);
constexpr char kNothingLeft[] = "exiting with 0 requests running, 0 waiting, 0 KV blocks in use";

void ExpectExit(LoomdProcess& loomd, int expected) {
  absl::StatusOr<int> code = loomd.WaitForExit(kBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, expected);
}

TEST(LoomdLifecycleTest, OtherSignalsDoNotDisableTheDrain) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd = LoomdProcess::Start();
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  const std::shared_ptr<grpc::Channel> channel = (*loomd)->NewChannel();
  for (int signal : {SIGUSR1, SIGUSR2, SIGHUP}) (*loomd)->Signal(signal);
  EXPECT_EQ(CheckHealth(channel, ""), HealthCheckResponse::SERVING);

  StreamCall stream(channel, GreedyRequest("Still serving after SIGUSR1", 32));
  ASSERT_TRUE(stream.WaitForTokens(1, kBound));
  (*loomd)->Signal(SIGTERM);
  const grpc::Status status = stream.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stream.num_tokens(), 32);
  ExpectExit(**loomd, 0);
  EXPECT_THAT((*loomd)->log(), HasSubstr("received Terminated: draining"));
  EXPECT_THAT((*loomd)->log(), HasSubstr(kNothingLeft));
}

// A second loomd on a port the first listens on fails at once, before it
// loads the model, naming the flag and the port; the first keeps serving.
// (gRPC's default SO_REUSEPORT let a second one serve the gRPC port beside
// the first, each taking part of the calls; a taken HTTP port failed only
// after the model had loaded.)
TEST(LoomdLifecycleTest, TakenPortFailsStartBeforeTheModelLoads) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> first = LoomdProcess::Start();
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string target = (*first)->target();
  const std::string grpc_port = target.substr(target.rfind(':') + 1);
  const std::string http_port = std::to_string((*first)->http_port());
  for (const auto& [flag, port] : std::vector<std::pair<std::string, std::string>>{
           {"port", grpc_port}, {"http_port", http_port}, {"metrics_port", http_port}}) {
    SCOPED_TRACE(flag);
    absl::StatusOr<std::unique_ptr<LoomdProcess>> second =
        LoomdProcess::Spawn({"--" + flag + "=" + port});
    ASSERT_TRUE(second.ok()) << second.status();
    ExpectExit(**second, 1);
    const std::string log = (*second)->log();
    EXPECT_THAT(log, HasSubstr("cannot start: --" + flag + "=" + port + ": cannot listen on"));
    EXPECT_THAT(log, HasSubstr("in use"));
    EXPECT_THAT(log, Not(HasSubstr("loading ")));
  }
  grpc::health::v1::HealthCheckRequest request;
  HealthCheckResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kBound));
  ASSERT_TRUE(grpc::health::v1::Health::NewStub((*first)->NewChannel())
                  ->Check(&context, request, &response)
                  .ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

// Listening beyond loopback with no API keys is logged as a warning at
// start-up (anyone who reaches the ports may generate); on loopback, or with
// keys, it is not.
TEST(LoomdLifecycleTest, EveryInterfaceWithoutKeysIsWarned) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> open = LoomdProcess::Start({"--host=0.0.0.0"});
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_THAT((*open)->log(),
              HasSubstr("warning: --host=0.0.0.0 listens on every interface with "
                        "no --api_keys_file: anyone who can reach its ports can generate"));
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loopback = LoomdProcess::Start();
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  EXPECT_THAT((*loopback)->log(), Not(HasSubstr("warning: --host")));
}

// --help and -h print a short usage (the common flags, and where the rest
// are) without loading a model; --version names Loom's version, the build,
// the CPU's features and CUDA support. (absl's --help said "No flags
// matched.", -h was an unknown flag, and --version printed "Debug build
// (NDEBUG not #defined)" on a release build.)
TEST(LoomdLifecycleTest, HelpAndVersionDescribeLoomd) {
  for (const char* arg : {"--help", "-h"}) {
    SCOPED_TRACE(arg);
    absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd = LoomdProcess::Spawn({arg});
    ASSERT_TRUE(loomd.ok()) << loomd.status();
    ExpectExit(**loomd, 0);
    const std::string out = (*loomd)->log();
    EXPECT_THAT(out, HasSubstr("Usage: loomd [--model=PATH] [flags]"));
    EXPECT_THAT(out, HasSubstr("--model=PATH"));
    EXPECT_THAT(out, HasSubstr("--api_keys_file=FILE"));
    EXPECT_THAT(out, HasSubstr("loomd --helpfull"));
    EXPECT_THAT(out, Not(HasSubstr("No flags matched")));
    EXPECT_THAT(out, Not(HasSubstr("loading ")));
  }
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd = LoomdProcess::Spawn({"--version"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  ExpectExit(**loomd, 0);
  const std::string out = (*loomd)->log();
  EXPECT_THAT(out, ContainsRegex("loomd [0-9]+\\.[0-9]+\\.[0-9]+\n"));
  EXPECT_THAT(out, ContainsRegex("\nbuild: (release|debug) "));
  EXPECT_THAT(out, HasSubstr("\nCPU features: "));
  EXPECT_THAT(out, HasSubstr("\nCUDA backend: "));
  EXPECT_THAT(out, Not(HasSubstr("NDEBUG not #defined")));
  EXPECT_THAT(out, Not(HasSubstr("loading ")));
}

TEST(LoomdLifecycleTest, SigtermDuringWarmUpExitsCleanly) {
  // The warm-up step (step 1) stalls until the signal arrives.
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd =
      LoomdProcess::Spawn({}, {"LOOM_TEST_FAULT=stall_at:1"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  ASSERT_TRUE((*loomd)->WaitForLog("test fault: stalling step 1", kBound));
  (*loomd)->Signal(SIGTERM);
  ExpectExit(**loomd, 0);
  EXPECT_THAT((*loomd)->log(), HasSubstr("received Terminated during start-up; exiting"));
  EXPECT_THAT((*loomd)->log(), Not(HasSubstr(" (gRPC)")));
}

TEST(LoomdLifecycleTest, SigtermDuringModelLoadExitsCleanly) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd = LoomdProcess::Spawn();
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  ASSERT_TRUE((*loomd)->WaitForLog("loading ", kBound));
  (*loomd)->Signal(SIGTERM);
  ExpectExit(**loomd, 0);
  // Whichever start-up stage the signal met, it ends in a clean exit.
  const std::string log = (*loomd)->log();
  EXPECT_TRUE(log.find("during start-up; exiting") != std::string::npos ||
              log.find(kNothingLeft) != std::string::npos)
      << log;
}

// Three streams behind --max_num_seqs=1: one running, two queued unstarted.
std::vector<std::unique_ptr<StreamCall>> StartQueuedStreams(LoomdProcess& loomd,
                                                            uint32_t max_tokens) {
  const std::shared_ptr<grpc::Channel> channel = loomd.NewChannel();
  std::vector<std::unique_ptr<StreamCall>> streams;
  for (int i = 0; i < 3; ++i) {
    streams.push_back(std::make_unique<StreamCall>(
        channel, GreedyRequest("Queued request " + std::to_string(i), max_tokens)));
  }
  EXPECT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<ServerLoad> load = ReadLoad(loomd.http_port());
        return load.ok() && load->running == 1 && load->waiting == 2;
      },
      kBound));
  return streams;
}

// Under ThreadSanitizer a loaded machine makes about one token a second.
#if defined(__SANITIZE_THREAD__)
constexpr int32_t kQueuedTokens = 16;
#else
constexpr int32_t kQueuedTokens = 64;
#endif

TEST(LoomdLifecycleTest, DrainServesQueuedUnstartedRequests) {
  // The three requests run one after another; the drain must not time out.
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd =
      LoomdProcess::Start({"--max_num_seqs=1", "--drain_timeout=10m"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  std::vector<std::unique_ptr<StreamCall>> streams =
      StartQueuedStreams(**loomd, static_cast<uint32_t>(kQueuedTokens));
  (*loomd)->Signal(SIGTERM);
  ASSERT_TRUE((*loomd)->WaitForLog("draining", kBound));
  // New calls are refused while the queued ones still run to the end.
  StreamCall late((*loomd)->NewChannel(), GreedyRequest("Too late", 4));
  EXPECT_EQ(late.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  for (auto& stream : streams) {
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(stream->num_tokens(), kQueuedTokens);
  }
  ExpectExit(**loomd, 0);
  EXPECT_THAT((*loomd)->log(), Not(HasSubstr("drain timeout")));
  EXPECT_THAT((*loomd)->log(), HasSubstr(kNothingLeft));
}

TEST(LoomdLifecycleTest, DrainTimeoutEndsTheRestWithUnavailable) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd =
      LoomdProcess::Start({"--max_num_seqs=1", "--drain_timeout=500ms"});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  // 3 x 480 tokens one at a time cannot finish in 500 ms on any CPU.
  std::vector<std::unique_ptr<StreamCall>> streams = StartQueuedStreams(**loomd, 480);
  (*loomd)->Signal(SIGTERM);
  int num_unavailable = 0;
  for (auto& stream : streams) {
    const grpc::Status status = stream->Finish();
    if (status.ok()) {
      EXPECT_EQ(stream->num_tokens(), 480);
      continue;
    }
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("shut down before the request finished"));
    ++num_unavailable;
  }
  EXPECT_GE(num_unavailable, 2);  // at least the two that never started
  ExpectExit(**loomd, 0);
  EXPECT_THAT((*loomd)->log(),
              HasSubstr("drain timeout: ending the " + std::to_string(num_unavailable) +
                        " requests still in flight with UNAVAILABLE"));
  EXPECT_THAT((*loomd)->log(), HasSubstr(kNothingLeft));
}

double Counter(int http_port, const std::string& finish_reason) {
  absl::StatusOr<std::string> text = HttpGet(http_port, "/metrics");
  if (!text.ok()) {
    return -1;
  }
  return SampleValue(*text, "loom_requests_total{finish_reason=\"" + finish_reason + "\"}")
      .value_or(0);
}

TEST(LoomdLifecycleTest, ClientDeadlineIsCountedAsDeadline) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> loomd = LoomdProcess::Start();
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  const int port = (*loomd)->http_port();
  const double deadline_before = Counter(port, "deadline");
  const double aborted_before = Counter(port, "aborted");
  ASSERT_GE(deadline_before, 0);
  constexpr int kCalls = 4;
  std::vector<std::unique_ptr<StreamCall>> streams;
  for (int i = 0; i < kCalls; ++i) {
    streams.push_back(std::make_unique<StreamCall>(
        (*loomd)->NewChannel(), GreedyRequest("Out of time " + std::to_string(i), 480),
        absl::Milliseconds(300 + 100 * i)));
  }
  for (auto& stream : streams) {
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(
      PollUntil([&] { return Counter(port, "deadline") >= deadline_before + kCalls; }, kBound));
  EXPECT_EQ(Counter(port, "deadline"), deadline_before + kCalls);
  EXPECT_EQ(Counter(port, "aborted"), aborted_before);
  (*loomd)->Signal(SIGTERM);
  ExpectExit(**loomd, 0);
}

}  // namespace
}  // namespace loom::testing
