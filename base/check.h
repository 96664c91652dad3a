// Invariant checks for every module: a broken invariant is a bug, so
// it aborts with file, line and a streamed message (the Abseil release this
// project builds against predates ABSL_CHECK). Usage:
//   LOOM_CHECK(slot < capacity) << "slot " << slot;
//   LOOM_CHECK_EQ(a.size(), b.size());
#pragma once

#include <sstream>

#include "absl/base/optimization.h"

namespace loom::check_internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Gives the streamed failure expression type void so that both arms of the
// conditional in LOOM_CHECK match.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace loom::check_internal

#define LOOM_CHECK(condition)           \
  ABSL_PREDICT_TRUE(condition)          \
  ? (void)0                             \
  : ::loom::check_internal::Voidify() & \
          ::loom::check_internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define LOOM_CHECK_OP(a, op, b) LOOM_CHECK((a)op(b)) << (a) << " vs " << (b) << ": "
#define LOOM_CHECK_EQ(a, b) LOOM_CHECK_OP(a, ==, b)
#define LOOM_CHECK_NE(a, b) LOOM_CHECK_OP(a, !=, b)
#define LOOM_CHECK_LT(a, b) LOOM_CHECK_OP(a, <, b)
#define LOOM_CHECK_LE(a, b) LOOM_CHECK_OP(a, <=, b)
#define LOOM_CHECK_GT(a, b) LOOM_CHECK_OP(a, >, b)
#define LOOM_CHECK_GE(a, b) LOOM_CHECK_OP(a, >=, b)
