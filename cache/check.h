// Invariant checks for the cache module. A broken invariant is a bug, so it
// aborts with file and line instead of returning a status (the Abseil release
// this project builds against predates ABSL_CHECK).
#ifndef LOOM_CACHE_CHECK_H_
#define LOOM_CACHE_CHECK_H_

#include "absl/base/optimization.h"

namespace loom::cache_internal {

[[noreturn]] void CheckFailed(const char* condition, const char* file, int line);

}  // namespace loom::cache_internal

#define LOOM_CACHE_CHECK(condition)                                        \
  do {                                                                     \
    if (ABSL_PREDICT_FALSE(!(condition))) {                                \
      ::loom::cache_internal::CheckFailed(#condition, __FILE__, __LINE__); \
    }                                                                      \
  } while (false)

#endif  // LOOM_CACHE_CHECK_H_
