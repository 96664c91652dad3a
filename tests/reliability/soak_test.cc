// Soak: thousands of mixed GenerateStream calls against the real loomd on
// loopback (random sampling and stopping parameters, ~10% cancelled
// mid-stream, ~5% with deadlines too short to finish, ~5% invalid), with more
// in flight than the waiting queue holds. Every call must end with a status
// its kind allows, and afterwards the server must hold nothing: no running or
// waiting request, no used KV block, and resident memory within a bound.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tests/integration/loomd_process.h"
#include "tests/reliability/metrics_client.h"
#include "tools/bench/stream_call.h"

namespace loom {
namespace {

using bench::StreamCall;

// Sized for the 2-core CI machine with the bundled 135M model (about a
// minute and a half in a release build): short prompts, 1-6 tokens each.
constexpr int kWarmupRequests = 100;
constexpr int kSoakRequests = 2000;
constexpr int kMaxNumSeqs = 8;
constexpr int kMaxQueued = 32;
// --max_prompt_bytes for loomd, so that an oversized prompt stays small.
constexpr int kMaxPromptBytes = 4096;
// Calls in flight: well within what the server admits (aborted calls linger
// in its queue until the engine loop sees the abort), except in bursts that
// overflow the waiting queue (RESOURCE_EXHAUSTED) at the start of every 500.
constexpr int kInFlight = kMaxNumSeqs + kMaxQueued / 2;
constexpr int kBurstInFlight = 2 * (kMaxNumSeqs + kMaxQueued);
constexpr int kBurstEvery = 500;
constexpr int kBurstLength = 60;
// Growth of resident memory allowed over the soak, after a warm-up that has
// already touched the KV pool, the allocator's arenas and gRPC's buffers.
constexpr double kRssGrowthBound = 64.0 * 1024 * 1024;
constexpr absl::Duration kCallTimeout = absl::Seconds(120);

enum class Kind { kNormal, kCancelled, kShortDeadline, kInvalid };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNormal:
      return "normal";
    case Kind::kCancelled:
      return "cancelled";
    case Kind::kShortDeadline:
      return "short-deadline";
    case Kind::kInvalid:
      return "invalid";
  }
  return "?";
}

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    default:
      return absl::StrCat("code ", code);
  }
}

struct Planned {
  Kind kind;
  v1::GenerateRequest request;
  StreamCall::Options options;
};

// The statuses a call of each kind may end with. Any call may meet a full
// waiting queue; a cancel or a deadline may come after the last token.
std::set<grpc::StatusCode> Allowed(Kind kind) {
  switch (kind) {
    case Kind::kNormal:
      return {grpc::OK, grpc::RESOURCE_EXHAUSTED};
    case Kind::kCancelled:
      return {grpc::CANCELLED, grpc::OK, grpc::RESOURCE_EXHAUSTED};
    case Kind::kShortDeadline:
      return {grpc::DEADLINE_EXCEEDED, grpc::OK, grpc::RESOURCE_EXHAUSTED};
    case Kind::kInvalid:
      return {grpc::INVALID_ARGUMENT};
  }
  return {};
}

// Bytes that do not decode as a GenerateRequest (a truncated varint, a field
// of wire type 7, a length past the end, random bytes), sent raw through a
// generic stub: gRPC's parser on loomd rejects each before loomd sees it.
// loomd's callback-API handlers never run for a message that fails to
// parse; gRPC then ends the call with UNIMPLEMENTED.
// Returns the count per status.
std::map<std::string, int> SendMalformed(const std::shared_ptr<grpc::Channel>& channel, int n) {
  grpc::GenericStub stub(channel);
  std::mt19937 rng(7);
  std::map<std::string, int> counts;
  for (int i = 0; i < n; ++i) {
    std::string bytes;
    switch (i % 4) {
      case 0:
        bytes = "\x08\xff\xff";
        break;
      case 1:
        bytes = "\x0f\x01";
        break;
      case 2:
        bytes = "\x12\x7f" + std::string(4, 'x');
        break;
      default:
        for (int k = 0; k < 32; ++k) bytes.push_back(static_cast<char>(rng() | 0x80));
        bytes[0] = '\xff';
        break;
    }
    grpc::Slice slice(bytes);
    const grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&context, "/loom.v1.GenerationService/Generate", grpc::StubOptions(), &request,
                   &response, [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    ++counts[CodeName(status.error_code())];
  }
  return counts;
}

class Workload {
 public:
  Workload(uint64_t seed, int32_t vocab_size) : rng_(seed), vocab_size_(vocab_size) {}

  Planned Next(int index) {
    Planned p;
    const int roll = Uniform(0, 99);
    p.kind = roll < 80   ? Kind::kNormal
             : roll < 90 ? Kind::kCancelled
             : roll < 95 ? Kind::kShortDeadline
                         : Kind::kInvalid;
    v1::GenerateRequest& r = p.request;
    r.set_request_id(absl::StrCat("soak-", index));
    Prompt(r);
    Sampling(*r.mutable_sampling());
    v1::StoppingCriteria& s = *r.mutable_stopping();
    s.set_max_tokens(static_cast<uint32_t>(Uniform(1, 6)));
    s.set_ignore_eos(Uniform(0, 1) == 1);
    if (Uniform(0, 9) == 0) s.add_stop("\n");
    if (Uniform(0, 9) == 0) r.set_logprobs(Uniform(0, 5));
    r.set_priority(Uniform(-2, 2));
    p.options.timeout = kCallTimeout;
    switch (p.kind) {
      case Kind::kNormal:
        break;
      case Kind::kCancelled:
        s.set_max_tokens(64);
        s.set_ignore_eos(true);
        s.clear_stop();
        p.options.cancel_after_messages = Uniform(1, 2);
        break;
      case Kind::kShortDeadline:
        s.set_max_tokens(64);
        s.set_ignore_eos(true);
        p.options.timeout = absl::Milliseconds(Uniform(1, 30));
        break;
      case Kind::kInvalid:
        MakeInvalid(r);
        break;
    }
    return p;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  void Prompt(v1::GenerateRequest& r) {
    static const char* const kWords[] = {"the", "cat", "sat", "on",   "a",  "mat", "and",  "then",
                                         "ran", "to",  "see", "what", "is", "new", "today"};
    const int kind = Uniform(0, 3);
    if (kind >= 2) {
      for (int i = Uniform(1, 16); i > 0; --i) {
        r.mutable_prompt_token_ids()->add_ids(Uniform(1000, vocab_size_ - 1000));
      }
      return;
    }
    std::string text;
    for (int i = Uniform(1, 12); i > 0; --i) absl::StrAppend(&text, kWords[Uniform(0, 14)], " ");
    if (kind == 1) {
      v1::ChatMessage* m = r.mutable_messages()->add_messages();
      m->set_role("user");
      m->set_content(text);
    } else {
      r.set_prompt(text);
    }
  }

  void Sampling(v1::SamplingParams& s) {
    if (Uniform(0, 3) == 0) {
      s.set_temperature(0);
      return;
    }
    s.set_temperature(static_cast<float>(Uniform(1, 15)) / 10);
    if (Uniform(0, 1)) s.set_top_p(static_cast<float>(Uniform(5, 10)) / 10);
    if (Uniform(0, 1)) s.set_top_k(Uniform(0, 50));
    if (Uniform(0, 3) == 0) s.set_repetition_penalty(1.1f);
    if (Uniform(0, 3) == 0) s.set_presence_penalty(0.5f);
    s.set_seed(static_cast<uint64_t>(Uniform(0, 1 << 30)));
    if (Uniform(0, 19) == 0) s.set_n(2);
  }

  // One field out of its range: the validator's limits (request_validator.h)
  // and the flag limits loomd runs with here (kMaxPromptBytes).
  void MakeInvalid(v1::GenerateRequest& r) {
    v1::SamplingParams& sampling = *r.mutable_sampling();
    v1::StoppingCriteria& stopping = *r.mutable_stopping();
    switch (Uniform(0, 13)) {
      case 0:
        sampling.set_temperature(250);
        break;
      case 1:
        r.set_prompt("");
        break;
      case 2:
        r.mutable_prompt_token_ids()->add_ids(vocab_size_ + 5);
        break;
      case 3:
        for (int i = 0; i < 17; ++i) stopping.add_stop(absl::StrCat("s", i));
        break;
      case 4:
        r.set_logprobs(50);
        break;
      case 5:
        r.set_request_id(std::string(129, 'r'));
        break;
      case 6:
        stopping.set_max_tokens(1u << 24);
        break;
      case 7:
        for (int i = 0; i < 129; ++i) stopping.add_stop_token_ids(i);
        break;
      case 8:
        r.set_cache_salt(std::string(257, 'c'));
        break;
      case 9:
        for (int i = 0; i < 1025; ++i) (*sampling.mutable_logit_bias())[i] = 1;
        break;
      case 10:
        r.set_priority(Uniform(0, 1) ? 1'000'001 : -1'000'001);
        break;
      case 11:
        r.set_prompt(std::string(kMaxPromptBytes + 1, 'p'));
        break;
      case 12:
        sampling.set_top_p(0);
        break;
      default:
        sampling.set_repetition_penalty(-1);
        break;
    }
  }

  std::mt19937 rng_;
  int32_t vocab_size_;
};

struct Outcome {
  std::map<std::string, int> by_kind_and_status;
  std::vector<std::string> violations;
};

// Runs n planned calls with at most kInFlight at a time (kBurstInFlight in bursts).
Outcome RunCalls(v1::GenerationService::Stub& stub, Workload& workload, int first_index, int n) {
  absl::Mutex mu;
  int in_flight = 0;
  Outcome outcome;
  std::vector<std::unique_ptr<StreamCall>> calls;
  std::vector<Kind> kinds;
  for (int i = 0; i < n; ++i) {
    Planned p = workload.Next(first_index + i);
    {
      absl::MutexLock lock(&mu);
      const int limit = i % kBurstEvery < kBurstLength ? kBurstInFlight : kInFlight;
      auto has_room = [&] { return in_flight < limit; };
      mu.Await(absl::Condition(&has_room));
      ++in_flight;
    }
    kinds.push_back(p.kind);
    calls.push_back(std::make_unique<StreamCall>(std::move(p.request), p.options, [&](StreamCall&) {
      absl::MutexLock lock(&mu);
      --in_flight;
    }));
    calls.back()->Start(stub);
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* k) { return *k == 0; }, &in_flight));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const StreamCall& call = *calls[i];
    const grpc::StatusCode code = call.status().error_code();
    ++outcome.by_kind_and_status[absl::StrCat(KindName(kinds[i]), " ", CodeName(code))];
    if (!Allowed(kinds[i]).contains(code)) {
      outcome.violations.push_back(absl::StrCat(call.request().request_id(), " (",
                                                KindName(kinds[i]), ") ended with ", CodeName(code),
                                                ": ", call.status().error_message()));
      continue;
    }
    // A completed single-sample call reports what it streamed.
    if (code == grpc::OK && call.request().sampling().n() <= 1) {
      const bool consistent =
          call.has_usage() && call.finish_reason() != v1::FINISH_REASON_UNSPECIFIED &&
          call.usage().completion_tokens() == call.output_tokens() &&
          call.output_tokens() <= call.request().stopping().max_tokens() &&
          (!call.request().stopping().ignore_eos() || !call.request().stopping().stop().empty() ||
           call.output_tokens() == call.request().stopping().max_tokens());
      if (!consistent) {
        outcome.violations.push_back(absl::StrCat(
            call.request().request_id(), ": streamed ", call.output_tokens(),
            " tokens, usage says ", call.usage().completion_tokens(), ", max_tokens ",
            call.request().stopping().max_tokens(), ", finish ", call.finish_reason()));
      }
    }
  }
  return outcome;
}

double MiB(double bytes) { return bytes / (1024.0 * 1024.0); }

TEST(SoakTest, MixedRequestsEndAsExpectedAndLeaveNothingBehind) {
  absl::StatusOr<std::unique_ptr<testing::LoomdProcess>> loomd =
      testing::LoomdProcess::Start({absl::StrCat("--max_num_seqs=", kMaxNumSeqs),
                                    absl::StrCat("--max_queued_requests=", kMaxQueued),
                                    absl::StrCat("--max_prompt_bytes=", kMaxPromptBytes)});
  ASSERT_TRUE(loomd.ok()) << loomd.status();
  const std::optional<int> http_port = testing::HttpPortFromLog((*loomd)->log());
  ASSERT_TRUE(http_port.has_value()) << (*loomd)->log();
  auto stub = v1::GenerationService::NewStub((*loomd)->NewChannel());

  Workload workload(/*seed=*/20261130, /*vocab_size=*/49152);
  const Outcome warmup = RunCalls(*stub, workload, 0, kWarmupRequests);
  EXPECT_TRUE(warmup.violations.empty()) << warmup.violations.front();
  absl::StatusOr<testing::ServerLoad> before =
      testing::WaitUntilIdle(*http_port, absl::Seconds(30));
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(before->idle());

  // LOOM_SOAK_REQUESTS runs a longer (or shorter) soak by hand.
  int num_requests = kSoakRequests;
  if (const char* n = std::getenv("LOOM_SOAK_REQUESTS"); n != nullptr) {
    ASSERT_TRUE(absl::SimpleAtoi(n, &num_requests)) << n;
  }
  const absl::Time start = absl::Now();
  const Outcome soak = RunCalls(*stub, workload, kWarmupRequests, num_requests);
  const std::map<std::string, int> malformed = SendMalformed((*loomd)->NewChannel(), 40);
  const absl::Duration elapsed = absl::Now() - start;
  absl::StatusOr<testing::ServerLoad> after = testing::WaitUntilIdle(*http_port, absl::Seconds(30));
  ASSERT_TRUE(after.ok()) << after.status();

  std::cout << absl::StrFormat("soak: %d requests in %.1f s (%.1f/s)\n", num_requests,
                               absl::ToDoubleSeconds(elapsed),
                               num_requests / absl::ToDoubleSeconds(elapsed));
  for (const auto& [key, count] : soak.by_kind_and_status) {
    std::cout << absl::StrFormat("  %-34s %5d\n", key, count);
  }
  for (const auto& [code, count] : malformed) {
    std::cout << absl::StrFormat("  %-34s %5d\n", absl::StrCat("malformed ", code), count);
    EXPECT_EQ(code, "UNIMPLEMENTED") << count << " malformed calls";
  }
  std::cout << absl::StrFormat(
      "after: running %.0f, waiting %.0f, used KV blocks %.0f; RSS %.1f MiB -> %.1f MiB "
      "(bound +%.0f MiB)\n",
      after->running, after->waiting, after->used_blocks, MiB(before->rss_bytes),
      MiB(after->rss_bytes), MiB(kRssGrowthBound));

  for (const std::string& v : soak.violations) ADD_FAILURE() << v;
  EXPECT_EQ(after->running, 0);
  EXPECT_EQ(after->waiting, 0);
  EXPECT_EQ(after->used_blocks, 0);
  EXPECT_LT(after->rss_bytes - before->rss_bytes, kRssGrowthBound);
  // The mix did what it is for: every kind of ending happened.
  for (const char* key : {"normal OK", "normal RESOURCE_EXHAUSTED", "cancelled CANCELLED",
                          "short-deadline DEADLINE_EXCEEDED", "invalid INVALID_ARGUMENT"}) {
    EXPECT_GT(soak.by_kind_and_status.count(key), 0u) << "no call ended as " << key;
  }
}

}  // namespace
}  // namespace loom
