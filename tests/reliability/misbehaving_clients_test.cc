// Clients that misbehave against the real loomd on loopback: one that stops
// reading its stream must not stall anyone else, and one that opens 1,000
// streams and dies must leave no request, no KV block behind.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tests/integration/loomd_process.h"
#include "tests/integration/shared_loomd_test.h"
#include "tests/integration/stream_call.h"
#include "tests/reliability/metrics_client.h"
#include "tools/bench/runner.h"

extern char** environ;

namespace loom {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(240);

class MisbehavingClientsTest : public testing::SharedLoomdTest<MisbehavingClientsTest> {
 protected:
  static void SetUpTestSuite() { StartLoomd({"--max_num_seqs=8", "--max_queued_requests=2048"}); }
};

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
}

TEST_F(MisbehavingClientsTest, StreamThatIsNotReadDoesNotStallOthers) {
  // Its own connection with a 1 KiB receive window that never grows: the
  // server runs out of window after a few messages and must hold (coalesce)
  // the rest of this stream's output while it keeps serving everyone else.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetString("loom.test.connection", "slow-reader");
  auto slow_channel =
      grpc::CreateCustomChannel(loomd_->target(), grpc::InsecureChannelCredentials(), args);
  auto slow_stub = v1::GenerationService::NewStub(slow_channel);
  // 20 alternatives per token make each message a few hundred bytes, so the
  // output is many times the window.
  constexpr int kSlowTokens = 120;
  v1::GenerateRequest slow_request =
      testing::GreedyRequest("Write a long story about a lighthouse.", kSlowTokens);
  slow_request.set_logprobs(20);
  grpc::ClientContext slow_context;
  SetDeadline(slow_context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateStreamResponse>> slow =
      slow_stub->GenerateStream(&slow_context, slow_request);

  // Others on another connection, all at once, while the slow stream is unread.
  auto stub = v1::GenerationService::NewStub(loomd_->NewChannel());
  constexpr int kOthers = 12;
  constexpr uint32_t kOtherTokens = 24;
  std::vector<v1::GenerateRequest> others;
  for (int i = 0; i < kOthers; ++i) {
    others.push_back(testing::GreedyRequest(absl::StrCat("Count to ", i), kOtherTokens));
  }
  const bench::RunResult result =
      bench::RunRequests(*stub, others, std::vector<double>(kOthers, 0.0), 0);
  for (int i = 0; i < kOthers; ++i) {
    EXPECT_TRUE(result.records[i].ok) << i;
    EXPECT_EQ(result.records[i].output_tokens, kOtherTokens) << i;
  }

  // Now the slow client reads: nothing was lost while it did not.
  v1::GenerateStreamResponse message;
  int tokens = 0, logprobs = 0, messages = 0;
  while (slow->Read(&message)) {
    ++messages;
    tokens += message.token_ids_size();
    logprobs += message.logprobs_size();
  }
  const grpc::Status status = slow->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, kSlowTokens);
  EXPECT_EQ(logprobs, kSlowTokens);
  std::cout << "slow reader: " << kSlowTokens << " tokens arrived in " << messages << " messages\n";
  absl::StatusOr<testing::ServerLoad> load =
      testing::WaitUntilIdle(loomd_->http_port(), absl::Seconds(30));
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_TRUE(load->idle());
}

// `loom bench` is a ready-made client that opens every stream at once.
pid_t SpawnClient(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

TEST_F(MisbehavingClientsTest, ClientThatOpensAThousandStreamsAndDiesLeaksNothing) {
  const char* loom = std::getenv("LOOM");
  ASSERT_NE(loom, nullptr) << "set LOOM to the loom CLI binary";
  constexpr int kStreams = 1000;
  const pid_t client = SpawnClient({loom, "bench", absl::StrCat("--target=", loomd_->target()),
                                    absl::StrCat("--num_prompts=", kStreams), "--input_len=16",
                                    "--output_len=400", "--request_rate=inf"});
  ASSERT_GT(client, 0);

  // Every stream has reached the engine (running or waiting) before the kill.
  absl::StatusOr<testing::ServerLoad> load;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline) {
    load = testing::ReadLoad(loomd_->http_port());
    if (load.ok() && load->running + load->waiting >= kStreams) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(load.ok()) << load.status();
  std::cout << "before the kill: running " << load->running << ", waiting " << load->waiting
            << ", used KV blocks " << load->used_blocks << "\n";
  EXPECT_GE(load->running + load->waiting, kStreams);
  EXPECT_GT(load->used_blocks, 0);

  kill(client, SIGKILL);
  int wait_status = 0;
  ASSERT_EQ(waitpid(client, &wait_status, 0), client);

  load = testing::WaitUntilIdle(loomd_->http_port(), absl::Seconds(60));
  ASSERT_TRUE(load.ok()) << load.status();
  std::cout << "after the kill: running " << load->running << ", waiting " << load->waiting
            << ", used KV blocks " << load->used_blocks << "\n";
  EXPECT_EQ(load->running, 0);
  EXPECT_EQ(load->waiting, 0);
  EXPECT_EQ(load->used_blocks, 0);
}

}  // namespace
}  // namespace loom
