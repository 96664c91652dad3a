// The engine's source of time. Deadlines, queue time and latencies are measured
// on it, so tests can inject a manual clock and expire requests without sleeping.
#pragma once

#include "absl/time/time.h"

namespace loom {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide wall clock (absl::Now()); never destroyed.
  static Clock* Real();
};

}  // namespace loom
