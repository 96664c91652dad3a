// TenantLimitedBackend: one tenant over its cap or its queue share is refused
// before the engine, while other tenants and tenant-less requests pass, and
// every slot comes back when its request finishes or fails to start.
#include "server/tenant_limiter.h"

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

// Keeps the sinks it was given, so the test decides when a request starts
// (its first output) and when it finishes.
class HoldingBackend final : public GenerationBackend {
 public:
  absl::StatusOr<Handle> Submit(RequestParams params, std::shared_ptr<OutputSink> sink) override {
    if (!fail_next.ok()) {
      return std::exchange(fail_next, absl::OkStatus());
    }
    submitted.push_back(params.tenant);
    sinks.push_back(std::move(sink));
    return sinks.size() - 1;
  }
  void Abort(Handle) override {}

  void Emit(size_t i, bool finished) {
    RequestOutput output;
    SampleDelta delta;
    delta.token_ids = {7};
    output.samples.push_back(std::move(delta));
    output.finished = finished;
    sinks[i]->Push(std::move(output));
  }

  absl::Status fail_next;
  std::vector<std::string> submitted;
  std::vector<std::shared_ptr<OutputSink>> sinks;
};

class CountingSink final : public OutputSink {
 public:
  void Push(RequestOutput output) override { finished += output.finished ? 1 : 0; }
  int finished = 0;
};

class RejectionCounter final : public EngineObserver {
 public:
  void OnRequestFinished(FinishLabel label, const Usage&, std::string_view) override {
    rejected += label == FinishLabel::kRejected ? 1 : 0;
  }
  void OnStep(double, int32_t, int32_t) override {}
  void OnInterTokenLatencies(std::span<const double>) override {}
  int rejected = 0;
};

RequestParams For(std::string tenant) {
  RequestParams params;
  params.tenant = std::move(tenant);
  return params;
}

TEST(TenantLimiterTest, CapRefusesOneTenantWhileOthersPass) {
  HoldingBackend inner;
  RejectionCounter observer;
  TenantLimitedBackend limiter(inner, {.max_concurrent = 2}, &observer);
  auto sink = std::make_shared<CountingSink>();
  ASSERT_TRUE(limiter.Submit(For("a"), sink).ok());
  ASSERT_TRUE(limiter.Submit(For("a"), sink).ok());
  absl::StatusOr<GenerationBackend::Handle> third = limiter.Submit(For("a"), sink);
  ASSERT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("tenant a has 2 requests in flight"), std::string::npos)
      << third.status();
  EXPECT_NE(third.status().message().find("--tenant_max_concurrent_requests=2"), std::string::npos);
  EXPECT_EQ(observer.rejected, 1);
  // Another tenant and a caller without one are not held back.
  EXPECT_TRUE(limiter.Submit(For("b"), sink).ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(limiter.Submit(For(""), sink).ok());
  }
  EXPECT_EQ(inner.submitted.size(), 8u);

  // A finished request frees its slot, and the client hears of the end.
  inner.Emit(0, /*finished=*/false);
  inner.Emit(0, /*finished=*/true);
  EXPECT_EQ(sink->finished, 1);
  EXPECT_EQ(limiter.CountsOf("a").in_flight, 1);
  EXPECT_TRUE(limiter.Submit(For("a"), sink).ok());
  EXPECT_FALSE(limiter.Submit(For("a"), sink).ok());
  EXPECT_EQ(observer.rejected, 2);
}

TEST(TenantLimiterTest, QueueShareCountsOnlyRequestsWithoutOutput) {
  HoldingBackend inner;
  TenantLimitedBackend limiter(inner, {.max_waiting = 1});
  auto sink = std::make_shared<CountingSink>();
  ASSERT_TRUE(limiter.Submit(For("a"), sink).ok());
  absl::StatusOr<GenerationBackend::Handle> second = limiter.Submit(For("a"), sink);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(second.status().message().find("1 requests waiting"), std::string::npos)
      << second.status();
  // Once the first produces output it runs; the tenant may queue another.
  inner.Emit(0, /*finished=*/false);
  EXPECT_EQ(limiter.CountsOf("a").waiting, 0);
  EXPECT_EQ(limiter.CountsOf("a").in_flight, 1);
  ASSERT_TRUE(limiter.Submit(For("a"), sink).ok());
  EXPECT_EQ(limiter.CountsOf("a").waiting, 1);
  // A request that ends while waiting (cancelled, deadline) frees both counts.
  inner.Emit(1, /*finished=*/true);
  inner.Emit(0, /*finished=*/true);
  EXPECT_EQ(limiter.CountsOf("a").in_flight, 0);
  EXPECT_EQ(limiter.CountsOf("a").waiting, 0);
}

TEST(TenantLimiterTest, RefusedByTheEngineGivesTheSlotBack) {
  HoldingBackend inner;
  TenantLimitedBackend limiter(inner, {.max_concurrent = 1});
  auto sink = std::make_shared<CountingSink>();
  inner.fail_next = absl::ResourceExhaustedError("the queue is full");
  EXPECT_EQ(limiter.Submit(For("a"), sink).status().message(), "the queue is full");
  EXPECT_EQ(limiter.CountsOf("a").in_flight, 0);
  EXPECT_TRUE(limiter.Submit(For("a"), sink).ok());
}

TEST(TenantLimiterTest, WithoutLimitsNothingIsCounted) {
  HoldingBackend inner;
  TenantLimitedBackend limiter(inner, {});
  auto sink = std::make_shared<CountingSink>();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(limiter.Submit(For("a"), sink).ok());
  }
  EXPECT_EQ(limiter.CountsOf("a").in_flight, 0);
}

}  // namespace
}  // namespace loom
