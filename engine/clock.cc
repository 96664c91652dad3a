#include "engine/clock.h"

#include "absl/time/clock.h"

namespace loom {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* Clock::Real() {
  static auto* const clock = new RealClock();
  return clock;
}

}  // namespace loom
