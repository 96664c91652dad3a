// Test-only fault injection for the daemon-level failure and liveness tests.
// LOOM_TEST_FAULT (read only when set; docs/api.md) wraps the real executor:
//
//   fail_at:N   Execute() call number N returns INTERNAL
//   stall_at:N  Execute() call number N blocks until Release()
//
// Calls are counted from 1 and the warm-up step is call 1. A stalled call runs
// the real step once released, so a released stall leaves no trace.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "model/executor.h"

namespace loom {

inline constexpr char kTestFaultEnv[] = "LOOM_TEST_FAULT";

class TestFault {
 public:
  enum class Kind { kFail, kStall };

  // INVALID_ARGUMENT naming LOOM_TEST_FAULT, the accepted forms and the value.
  static absl::StatusOr<std::shared_ptr<TestFault>> Parse(absl::string_view spec);
  // nullptr when LOOM_TEST_FAULT is unset or empty.
  static absl::StatusOr<std::shared_ptr<TestFault>> FromEnvironment();

  TestFault(Kind kind, int64_t step) : kind_(kind), step_(step) {}

  // Reports each injected fault as it happens (loomd's log); call before use.
  void set_log(std::function<void(absl::string_view)> log) { log_ = std::move(log); }

  // Called once per Execute(): counts the call, fails or blocks at step N.
  absl::Status BeforeStep();
  // Thread-safe. Ends a stall in progress and disarms one not reached yet.
  void Release();
  // Thread-safe. True once step N has started stalling; false after timeout.
  bool WaitUntilStalled(absl::Duration timeout);

  [[nodiscard]] Kind kind() const { return kind_; }
  [[nodiscard]] int64_t step() const { return step_; }

 private:
  const Kind kind_;
  const int64_t step_;
  std::function<void(absl::string_view)> log_;  // set before use, then only read
  Mutex mu_;
  CondVar cv_;  // stalled_ or released_ changed
  int64_t num_steps_ ABSL_GUARDED_BY(mu_) = 0;
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// Forwards to inner, consulting fault before every step.
class FaultInjectingExecutor final : public Executor {
 public:
  FaultInjectingExecutor(std::unique_ptr<Executor> inner, std::shared_ptr<TestFault> fault)
      : inner_(std::move(inner)), fault_(std::move(fault)) {}

  ExecutorGeometry Geometry() const override { return inner_->Geometry(); }
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override;
  uint64_t progress() const override { return inner_->progress(); }

 private:
  const std::unique_ptr<Executor> inner_;
  const std::shared_ptr<TestFault> fault_;
};

}  // namespace loom
