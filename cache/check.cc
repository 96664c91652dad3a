#include "cache/check.h"

#include <cstdio>
#include <cstdlib>

namespace loom::cache_internal {

void CheckFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace loom::cache_internal
