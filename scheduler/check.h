// Invariant checks for the scheduler module. A broken invariant is a bug, so
// it aborts with file, line and a streamed message (the Abseil release this
// project builds against predates ABSL_CHECK). Usage:
//   LOOM_SCHEDULER_CHECK(in_flight_) << "Update without a Schedule";
#ifndef LOOM_SCHEDULER_CHECK_H_
#define LOOM_SCHEDULER_CHECK_H_

#include <sstream>

#include "absl/base/optimization.h"

namespace loom::scheduler_internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Gives the streamed failure expression type void so that both arms of the
// conditional match.
struct Voidify {
  void operator&(std::ostream& /*unused*/) {}
};

}  // namespace loom::scheduler_internal

#define LOOM_SCHEDULER_CHECK(condition)     \
  ABSL_PREDICT_TRUE(condition)              \
  ? (void)0                                 \
  : ::loom::scheduler_internal::Voidify() & \
          ::loom::scheduler_internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#endif  // LOOM_SCHEDULER_CHECK_H_
