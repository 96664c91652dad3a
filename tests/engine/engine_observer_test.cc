// The observer hooks that metrics build on: one OnRequestFinished per request
// with its label, OnStep per executed step, inter-token latencies per token.
#include "engine/engine_observer.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace loom::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

class RecordingObserver : public EngineObserver {
 public:
  // Keyed "label" or, for a request with a tenant, "label/tenant".
  void OnRequestFinished(FinishLabel label, const Usage& usage, std::string_view tenant) override {
    std::lock_guard lock(mu_);
    std::string key(FinishLabelName(label));
    if (!tenant.empty()) key += "/" + std::string(tenant);
    labels_[key]++;
    completion_tokens_ += usage.completion_tokens;
  }
  void OnStep(double step_seconds, int32_t batch_seqs, int32_t batch_tokens) override {
    std::lock_guard lock(mu_);
    steps_.push_back({batch_seqs, batch_tokens});
    step_seconds_ += step_seconds;
  }
  void OnInterTokenLatencies(std::span<const double> seconds) override {
    std::lock_guard lock(mu_);
    inter_token_.insert(inter_token_.end(), seconds.begin(), seconds.end());
  }

  std::map<std::string, int> labels() const {
    std::lock_guard lock(mu_);
    return labels_;
  }
  std::vector<std::pair<int32_t, int32_t>> steps() const {
    std::lock_guard lock(mu_);
    return steps_;
  }
  std::vector<double> inter_token() const {
    std::lock_guard lock(mu_);
    return inter_token_;
  }
  uint64_t completion_tokens() const {
    std::lock_guard lock(mu_);
    return completion_tokens_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> labels_;
  std::vector<std::pair<int32_t, int32_t>> steps_;
  std::vector<double> inter_token_;
  double step_seconds_ = 0;
  uint64_t completion_tokens_ = 0;
};

class EngineObserverTest : public EngineTest {
 protected:
  Engine& StartObserved(EngineConfig config = DefaultConfig()) {
    auto executor = std::make_unique<FakeExecutor>(FakeExecutor::Options{});
    executor_ = executor.get();
    engine_ = std::make_unique<Engine>(std::move(config), std::move(executor),
                                       std::make_shared<FakeDetokenizer>(TestPieces()), &clock_);
    engine_->SetObserver(&observer_);
    EXPECT_TRUE(engine_->Start().ok());
    return *engine_;
  }

  RecordingObserver observer_;
};

TEST_F(EngineObserverTest, StepsAndInterTokenLatencies) {
  Engine& engine = StartObserved();
  executor().PauseAtStep(3);
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10, 10, 10}, 3), sink);
  executor().WaitUntilPaused();
  clock_.Advance(absl::Milliseconds(250));  // the first decode step takes 250 ms
  executor().Release();
  ASSERT_TRUE(sink->WaitFinished());
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  // A prefill of 3 tokens, then two decodes of one token each.
  EXPECT_THAT(observer_.steps(), ElementsAre(Pair(1, 3), Pair(1, 1), Pair(1, 1)));
  EXPECT_THAT(observer_.inter_token(), ElementsAre(0.25, 0.0));
  EXPECT_THAT(observer_.labels(), ElementsAre(Pair("length", 1)));
  EXPECT_EQ(observer_.completion_tokens(), 3u);
}

TEST_F(EngineObserverTest, LabelsForEveryWayARequestEnds) {
  EngineConfig config = DefaultConfig();
  config.scheduler.max_num_seqs = 1;
  config.scheduler.max_queued_requests = 1;
  Engine& engine = StartObserved(config);
  executor().PauseAtStep(2);

  auto stopped = std::make_shared<RecordingSink>();
  RequestParams params = Prompt({10}, 5);
  params.stopping.stop = {"lo"};
  params.tenant = "alpha";  // the tenant reaches the observer on every path
  SubmitOk(params, stopped);
  executor().WaitUntilPaused();

  auto aborted = std::make_shared<RecordingSink>();
  RequestParams to_abort = Prompt({10}, 5);
  to_abort.tenant = "alpha";
  engine.Abort(SubmitOk(to_abort, aborted));
  auto rejected = std::make_shared<RecordingSink>();
  RequestParams over = Prompt({10}, 5);
  over.tenant = "beta";
  EXPECT_EQ(engine.Submit(over, rejected).status().code(), absl::StatusCode::kResourceExhausted);
  executor().Release();
  ASSERT_TRUE(stopped->WaitFinished());
  ASSERT_TRUE(aborted->WaitFinished());

  // One at a time: the queue holds one request.
  RequestParams late = Prompt({10}, 5);
  late.deadline = clock_.Now();
  for (const RequestParams& params : {late, Prompt({}, 5), Prompt({10}, 2)}) {
    ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
    SubmitOk(params, std::make_shared<RecordingSink>());
  }
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));

  EXPECT_THAT(observer_.labels(),
              ElementsAre(Pair("aborted/alpha", 1), Pair("deadline", 1), Pair("error", 1),
                          Pair("length", 1), Pair("rejected/beta", 1), Pair("stop/alpha", 1)));
}

TEST(FinishLabelTest, NamesAndStatuses) {
  EXPECT_EQ(FinishLabelName(FinishLabel::kDeadline), "deadline");
  EXPECT_EQ(FinishLabelFor(absl::CancelledError()), FinishLabel::kAborted);
  EXPECT_EQ(FinishLabelFor(absl::UnavailableError("")), FinishLabel::kAborted);
  EXPECT_EQ(FinishLabelFor(absl::DeadlineExceededError("")), FinishLabel::kDeadline);
  EXPECT_EQ(FinishLabelFor(absl::ResourceExhaustedError("")), FinishLabel::kRejected);
  EXPECT_EQ(FinishLabelFor(absl::InternalError("")), FinishLabel::kError);
}

}  // namespace
}  // namespace loom::testing
