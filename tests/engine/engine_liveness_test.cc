// The engine's heartbeat and stall detection, the abort that races a deadline,
// and the LOOM_TEST_FAULT executor wrapper, on the fake executor and a manual
// clock: no sleeps.
#include <memory>
#include <utility>

#include "engine/fault_injecting_executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace loom::testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kStallTimeout = absl::Seconds(60);

TEST_F(EngineTest, IdleEngineIsNeverStalled) {
  Engine& engine = StartEngine();
  clock_.Advance(absl::Hours(1));
  EXPECT_FALSE(engine.Stalled(kStallTimeout));
  EXPECT_EQ(engine.Heartbeat().num_in_flight, 0);
}

TEST_F(EngineTest, HungStepIsStalledOnceTheTimeoutPasses) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(3);  // warm-up, the prefill, then the hung decode
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 4), sink);
  executor().WaitUntilPaused();
  const EngineHeartbeat before = engine.Heartbeat();
  EXPECT_EQ(before.num_steps, 1u);
  EXPECT_FALSE(before.parked);
  EXPECT_EQ(before.num_in_flight, 1);
  clock_.Advance(kStallTimeout);
  EXPECT_FALSE(engine.Stalled(kStallTimeout));  // exactly the timeout is not over it
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(engine.Stalled(kStallTimeout));

  executor().Release();
  ASSERT_TRUE(sink->WaitFinished());
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));
  EXPECT_FALSE(engine.Stalled(kStallTimeout));
  const EngineHeartbeat after = engine.Heartbeat();
  EXPECT_GT(after.num_steps, before.num_steps);
  EXPECT_GT(after.last_progress, before.last_progress);
}

TEST_F(EngineTest, LongStepThatAdvancesIsNotStalled) {
  Engine& engine = StartEngine();
  executor().PauseAtStep(3);
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 4), sink);
  executor().WaitUntilPaused();
  for (int layer = 0; layer < 3; ++layer) {  // a step far longer than the timeout
    clock_.Advance(absl::Seconds(50));
    executor().AdvanceProgress();
    EXPECT_FALSE(engine.Stalled(kStallTimeout)) << "after layer " << layer;
  }
  clock_.Advance(kStallTimeout + absl::Seconds(1));  // then nothing moves
  EXPECT_TRUE(engine.Stalled(kStallTimeout));
  executor().Release();
  ASSERT_TRUE(sink->WaitFinished());
}

class EngineAbortTest : public EngineTest {
 protected:
  // Submits a request with a 10 s deadline, aborts it `abort_after` later
  // while its step 3 is paused, and returns the status it ends with.
  absl::StatusCode AbortAfter(absl::Duration abort_after) {
    StartEngine();
    executor().PauseAtStep(3);
    auto sink = std::make_shared<RecordingSink>();
    RequestParams params = Prompt({10}, 50);
    params.deadline = clock_.Now() + absl::Seconds(10);
    const RequestHandle handle = SubmitOk(params, sink);
    executor().WaitUntilPaused();
    clock_.Advance(abort_after);
    engine_->Abort(handle);
    executor().Release();
    EXPECT_TRUE(sink->WaitFinished());
    return sink->final_output().status.code();
  }
};

TEST_F(EngineAbortTest, AbortAtTheDeadlineCountsAsDeadline) {
  // The client's cancellation for its deadline reaches the engine before the
  // engine's own expiry does.
  EXPECT_EQ(AbortAfter(absl::Seconds(10)), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(EngineAbortTest, AbortBeforeTheDeadlineIsCancelled) {
  EXPECT_EQ(AbortAfter(absl::Seconds(5)), absl::StatusCode::kCancelled);
}

TEST(TestFaultTest, ParsesBothFormsAndRejectsOthers) {
  absl::StatusOr<std::shared_ptr<TestFault>> fail = TestFault::Parse("fail_at:7");
  ASSERT_TRUE(fail.ok()) << fail.status();
  EXPECT_EQ((*fail)->kind(), TestFault::Kind::kFail);
  EXPECT_EQ((*fail)->step(), 7);
  absl::StatusOr<std::shared_ptr<TestFault>> stall = TestFault::Parse("stall_at:1");
  ASSERT_TRUE(stall.ok()) << stall.status();
  EXPECT_EQ((*stall)->kind(), TestFault::Kind::kStall);
  for (const char* bad : {"fail_at:0", "stall_at:", "crash_at:3", "fail_at:2x", "fail_at:-1"}) {
    absl::StatusOr<std::shared_ptr<TestFault>> parsed = TestFault::Parse(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("LOOM_TEST_FAULT")) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr(bad));
  }
}

class FaultEngineTest : public EngineTest {
 protected:
  // An engine on the fake executor wrapped by the fault of spec; Start()'s status.
  absl::Status StartWithFault(absl::string_view spec) {
    absl::StatusOr<std::shared_ptr<TestFault>> fault = TestFault::Parse(spec);
    EXPECT_TRUE(fault.ok()) << fault.status();
    fault_ = *fault;
    auto executor = std::make_unique<FaultInjectingExecutor>(
        std::make_unique<FakeExecutor>(FakeExecutor::Options{}), fault_);
    engine_ = std::make_unique<Engine>(DefaultConfig(), std::move(executor),
                                       std::make_shared<FakeDetokenizer>(), &clock_);
    return engine_->Start();
  }
  void TearDown() override {
    if (fault_ != nullptr) fault_->Release();
  }

  std::shared_ptr<TestFault> fault_;
};

TEST_F(FaultEngineTest, FailAtFailsThatStepForEveryone) {
  ASSERT_TRUE(StartWithFault("fail_at:3").ok());
  Engine& engine = *engine_;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine.Submit(Prompt({10}, 20), sink).ok());
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_EQ(sink->final_output().status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(sink->final_output().status.message(), HasSubstr("injected fault at step 3"));
  EXPECT_EQ(sink->Tokens(0).size(), 1u);                 // the prefill's token, before step 3
  ASSERT_TRUE(engine.WaitUntilIdle(absl::Seconds(30)));  // the snapshot after the failure
  EXPECT_FALSE(engine.healthy());
  EXPECT_EQ(engine.Stats().num_blocks_used, 0);
}

TEST_F(FaultEngineTest, StallAtBlocksUntilReleasedThenRunsTheStep) {
  ASSERT_TRUE(StartWithFault("stall_at:2").ok());
  Engine& engine = *engine_;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine.Submit(Prompt({10}, 3), sink).ok());
  ASSERT_TRUE(fault_->WaitUntilStalled(absl::Seconds(30)));
  clock_.Advance(absl::Minutes(2));
  EXPECT_TRUE(engine.Stalled(kStallTimeout));
  EXPECT_TRUE(sink->outputs().empty());
  fault_->Release();
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_TRUE(sink->final_output().status.ok());
  EXPECT_EQ(sink->Tokens(0).size(), 3u);
  EXPECT_TRUE(engine.healthy());
}

TEST_F(FaultEngineTest, FailAtOneFailsTheWarmUp) {
  const absl::Status status = StartWithFault("fail_at:1");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("warm-up step failed"));
  EXPECT_THAT(status.message(), HasSubstr("injected fault at step 1"));
}

}  // namespace
}  // namespace loom::testing
