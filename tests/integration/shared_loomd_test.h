// One real loomd shared by every test of a suite: the suite's
// SetUpTestSuite calls StartLoomd with its flags, and the daemon is killed
// after the suite. Suite is the deriving fixture (one daemon per suite).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/integration/loomd_process.h"

namespace loom::testing {

template <typename Suite>
class SharedLoomdTest : public ::testing::Test {
 protected:
  static void StartLoomd(const std::vector<std::string>& flags = {}) {
    absl::StatusOr<std::unique_ptr<LoomdProcess>> started = LoomdProcess::Start(flags);
    ASSERT_TRUE(started.ok()) << started.status();
    loomd_ = started->release();
  }
  static void TearDownTestSuite() {
    delete loomd_;
    loomd_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(loomd_, nullptr); }

  static inline LoomdProcess* loomd_ = nullptr;
};

}  // namespace loom::testing
