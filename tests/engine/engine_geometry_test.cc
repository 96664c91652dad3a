// Engine::Start against the executor's reported per-step limits: budgets
// above them refuse to start, naming the flag and the limit; budgets within
// them start and serve.
#include <memory>

#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"

namespace loom::testing {
namespace {

using ::testing::HasSubstr;

class EngineGeometryTest : public EngineTest {
 protected:
  // Starts an engine with the default budgets (8 seqs, 64 tokens) over an
  // executor that reports these limits.
  absl::Status StartWithLimits(int32_t max_seqs, int32_t max_tokens) {
    FakeExecutor::Options options;
    options.max_num_seqs = max_seqs;
    options.max_num_batched_tokens = max_tokens;
    auto executor = std::make_unique<FakeExecutor>(options);
    executor_ = executor.get();
    engine_ = std::make_unique<Engine>(DefaultConfig(), std::move(executor),
                                       std::make_shared<FakeDetokenizer>(), &clock_);
    return engine_->Start();
  }
};

TEST_F(EngineGeometryTest, SeqBudgetAboveExecutorLimitFailsStart) {
  const absl::Status status = StartWithLimits(4, 64);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--max_num_seqs 8"));
  EXPECT_THAT(status.message(), HasSubstr("limit of 4 sequences"));
  EXPECT_EQ(executor().num_steps(), 0);  // refused before the warm-up
}

TEST_F(EngineGeometryTest, TokenBudgetAboveExecutorLimitFailsStart) {
  const absl::Status status = StartWithLimits(8, 63);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--max_num_batched_tokens 64"));
  EXPECT_THAT(status.message(), HasSubstr("limit of 63 tokens"));
}

TEST_F(EngineGeometryTest, BudgetsWithinExecutorLimitsStartAndServe) {
  ASSERT_TRUE(StartWithLimits(8, 64).ok());
  auto sink = std::make_shared<RecordingSink>();
  SubmitOk(Prompt({10}, 3), sink);
  ASSERT_TRUE(sink->WaitFinished());
  EXPECT_TRUE(sink->final_output().status.ok());
}

TEST_F(EngineGeometryTest, ExecutorWithoutLimitsAcceptsAnyBudget) {
  EXPECT_TRUE(StartWithLimits(0, 0).ok());
}

}  // namespace
}  // namespace loom::testing
