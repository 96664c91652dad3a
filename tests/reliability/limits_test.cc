// The request and per-client limits of docs/api.md against the real loomd on
// loopback: an oversized message gets RESOURCE_EXHAUSTED naming the limit, a
// long but valid prompt_token_ids list is served, a field over its limit gets
// INVALID_ARGUMENT, every finished call leaves an access log line, and 64
// streams whose client never reads are aborted with RESOURCE_EXHAUSTED while
// loomd's memory stays bounded and every KV block comes back.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tests/integration/loomd_process.h"
#include "tests/integration/shared_loomd_test.h"
#include "tests/reliability/metrics_client.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kCallTimeout = absl::Seconds(240);
constexpr int kStreamBufferBytes = 8192;
constexpr int kMaxModelLen = 2048;
constexpr int kDefaultReceiveBytes = 16 << 20;
constexpr int64_t kKvCacheBytes = int64_t{256} << 20;

class LimitsTest : public testing::SharedLoomdTest<LimitsTest> {
 protected:
  static void SetUpTestSuite() {
    StartLoomd({absl::StrCat("--max_model_len=", kMaxModelLen),
                absl::StrCat("--kv_cache_bytes=", kKvCacheBytes), "--max_num_seqs=64",
                absl::StrCat("--max_stream_buffer_bytes=", kStreamBufferBytes),
                "--stream_buffer_grace=1s", "--max_stop_token_ids=8"});
  }
};

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
}

TEST_F(LimitsTest, MessageOverTheReceiveLimitGetsResourceExhaustedNamingTheLimit) {
  v1::GenerateRequest request;
  request.set_prompt(std::string(kDefaultReceiveBytes + 1024, 'a'));
  auto stub = v1::GenerationService::NewStub(loomd_->NewChannel());
  grpc::ClientContext context;
  SetDeadline(context);
  v1::GenerateResponse response;
  const grpc::Status status = stub->Generate(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat(kDefaultReceiveBytes)));
}

TEST_F(LimitsTest, LongValidPromptTokenIdsAreServed) {
  v1::GenerateRequest request;
  for (int i = 0; i < kMaxModelLen - 1; ++i) {
    request.mutable_prompt_token_ids()->add_ids(100 + i % 1000);
  }
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(1);
  auto stub = v1::GenerationService::NewStub(loomd_->NewChannel());
  grpc::ClientContext context;
  SetDeadline(context);
  v1::GenerateResponse response;
  const grpc::Status status = stub->Generate(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.usage().prompt_tokens(), static_cast<uint32_t>(kMaxModelLen - 1));
  EXPECT_EQ(response.usage().completion_tokens(), 1U);
}

TEST_F(LimitsTest, FieldOverItsLimitIsInvalidArgumentAndEveryCallIsLogged) {
  auto stub = v1::GenerationService::NewStub(loomd_->NewChannel());
  v1::GenerateRequest request;
  request.set_request_id("too-many-stop-ids");
  request.set_prompt("hello");
  for (int i = 0; i < 9; ++i) request.mutable_stopping()->add_stop_token_ids(i);
  grpc::ClientContext context;
  SetDeadline(context);
  v1::GenerateResponse response;
  const grpc::Status status = stub->Generate(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "stopping.stop_token_ids must have at most 8 entries; got 9 entries");
  EXPECT_TRUE(loomd_->WaitForLog(
      "access id=too-many-stop-ids method=Generate status=INVALID_ARGUMENT", absl::Seconds(30)));

  request.mutable_stopping()->Clear();
  request.mutable_stopping()->set_max_tokens(3);
  request.set_request_id("served");
  grpc::ClientContext ok_context;
  SetDeadline(ok_context);
  ASSERT_TRUE(stub->Generate(&ok_context, request, &response).ok());
  EXPECT_TRUE(loomd_->WaitForLog("access id=served method=Generate status=OK prompt_tokens=",
                                 absl::Seconds(30)));
  EXPECT_THAT(loomd_->log(), HasSubstr("output_tokens=3 queue_s="));
}

TEST_F(LimitsTest, SixtyFourStreamsThatAreNeverReadAreAbortedWithBoundedMemory) {
  absl::StatusOr<testing::ServerLoad> before =
      testing::WaitUntilIdle(loomd_->http_port(), absl::Seconds(60));
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(before->idle());

  // One connection whose 1 KiB stream windows never grow: after a few
  // messages every stream's output piles up on the server.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetString("loom.test.connection", "never-reads");
  auto channel =
      grpc::CreateCustomChannel(loomd_->target(), grpc::InsecureChannelCredentials(), args);
  auto stub = v1::GenerationService::NewStub(channel);
  constexpr int kStreams = 64;
  constexpr uint32_t kMaxTokens = 1500;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateStreamResponse>>> streams;
  for (int i = 0; i < kStreams; ++i) {
    v1::GenerateRequest request;
    request.set_prompt(absl::StrCat("Tell story number ", i, " about a lighthouse."));
    request.mutable_sampling()->set_temperature(0);
    request.mutable_stopping()->set_max_tokens(kMaxTokens);
    request.mutable_stopping()->set_ignore_eos(true);
    request.set_logprobs(20);  // a few hundred bytes per token
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    SetDeadline(*contexts.back());
    streams.push_back(stub->GenerateStream(contexts.back().get(), request));
  }

  // Unread, the streams pass the cap and are aborted after the grace period:
  // the engine frees their KV long before 1,500 tokens each could be made.
  double peak_rss = before->rss_bytes;
  absl::StatusOr<testing::ServerLoad> load;
  bool busy_seen = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  while (absl::Now() < deadline) {
    load = testing::ReadLoad(loomd_->http_port());
    ASSERT_TRUE(load.ok()) << load.status();
    peak_rss = std::max(peak_rss, load->rss_bytes);
    busy_seen = busy_seen || load->running > 0;
    if (busy_seen && load->idle()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(load.ok());
  EXPECT_TRUE(busy_seen);
  EXPECT_TRUE(load->idle()) << "running " << load->running << ", waiting " << load->waiting
                            << ", used blocks " << load->used_blocks;
  // The KV pool's pages join the resident set as its blocks are first
  // written (base/zero_pages.h), so up to the whole pool may be new here.
  const double bound = before->rss_bytes + kStreams * double{kStreamBufferBytes} +
                       static_cast<double>(kKvCacheBytes) + (64 << 20);
  std::cout << "resident memory: before " << before->rss_bytes / (1 << 20) << " MiB, peak "
            << peak_rss / (1 << 20) << " MiB, bound " << bound / (1 << 20) << " MiB\n";
  EXPECT_LE(peak_rss, bound);

  // Now the client reads: what was written arrives, then the status.
  int exhausted = 0;
  for (int i = 0; i < kStreams; ++i) {
    v1::GenerateStreamResponse message;
    uint32_t tokens = 0;
    while (streams[i]->Read(&message)) tokens += message.token_ids_size();
    const grpc::Status status = streams[i]->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << i << ": " << status.error_message();
    EXPECT_LT(tokens, kMaxTokens) << i;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
      EXPECT_THAT(status.error_message(),
                  HasSubstr(absl::StrCat("--max_stream_buffer_bytes=", kStreamBufferBytes)));
    }
  }
  std::cout << exhausted << " of " << kStreams << " streams ended with RESOURCE_EXHAUSTED\n";
}

}  // namespace
}  // namespace loom
