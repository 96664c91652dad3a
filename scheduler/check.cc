#include "scheduler/check.h"

#include <cstdio>
#include <cstdlib>

namespace loom::scheduler_internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  std::fputs(stream_.str().c_str(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace loom::scheduler_internal
