#include "engine/fault_injecting_executor.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace loom {

absl::StatusOr<std::shared_ptr<TestFault>> TestFault::Parse(absl::string_view spec) {
  absl::string_view rest = spec;
  Kind kind = Kind::kFail;
  if (absl::ConsumePrefix(&rest, "fail_at:")) {
    kind = Kind::kFail;
  } else if (absl::ConsumePrefix(&rest, "stall_at:")) {
    kind = Kind::kStall;
  } else {
    rest = "";
  }
  int64_t step = 0;
  if (!absl::SimpleAtoi(rest, &step) || step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kTestFaultEnv, " must be fail_at:N or stall_at:N with N >= 1; got \"", spec, "\""));
  }
  return std::make_shared<TestFault>(kind, step);
}

absl::StatusOr<std::shared_ptr<TestFault>> TestFault::FromEnvironment() {
  const char* spec = std::getenv(kTestFaultEnv);
  if (spec == nullptr || *spec == '\0') return std::shared_ptr<TestFault>();
  return Parse(spec);
}

absl::Status TestFault::BeforeStep() {
  MutexLock lock(mu_);
  if (++num_steps_ != step_ || released_) return absl::OkStatus();
  if (kind_ == Kind::kFail) {
    if (log_) log_(absl::StrCat("test fault: failing step ", step_));
    return absl::InternalError(absl::StrCat("injected fault at step ", step_, " (", kTestFaultEnv,
                                            "=fail_at:", step_, ")"));
  }
  if (log_) log_(absl::StrCat("test fault: stalling step ", step_));
  stalled_ = true;
  cv_.NotifyAll();
  while (!released_) cv_.Wait(mu_);
  return absl::OkStatus();
}

void TestFault::Release() {
  {
    MutexLock lock(mu_);
    released_ = true;
  }
  cv_.NotifyAll();
}

bool TestFault::WaitUntilStalled(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(mu_);
  while (!stalled_) {
    if (!cv_.WaitFor(mu_, deadline - absl::Now())) return stalled_;
  }
  return true;
}

absl::StatusOr<StepResult> FaultInjectingExecutor::Execute(const StepPlan& plan) {
  LOOM_RETURN_IF_ERROR(fault_->BeforeStep());
  return inner_->Execute(plan);
}

}  // namespace loom
