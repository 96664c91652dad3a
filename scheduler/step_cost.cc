#include "scheduler/step_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom {
namespace {

// Steps before the fit is trusted, and the spread of sizes it needs (the
// variance of tokens, in tokens^2): decodes alone at a steady batch size
// say nothing about what a prompt chunk adds.
constexpr int64_t kMinSteps = 4;
constexpr double kMinVariance = 4.0;

}  // namespace

void StepCost::Observe(int32_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds >= 0.0) || !std::isfinite(seconds)) return;
  const double x = tokens;
  w_ = w_ * kDecay + 1.0;
  x_ = x_ * kDecay + x;
  y_ = y_ * kDecay + seconds;
  xx_ = xx_ * kDecay + x * x;
  xy_ = xy_ * kDecay + x * seconds;
  ++steps_;
}

bool StepCost::Known() const {
  if (steps_ < kMinSteps) return false;
  const double mean = x_ / w_;
  return xx_ / w_ - mean * mean >= kMinVariance;
}

double StepCost::seconds_per_token() const {
  const double mean_x = x_ / w_, mean_y = y_ / w_;
  const double var = xx_ / w_ - mean_x * mean_x;
  const double cov = xy_ / w_ - mean_x * mean_y;
  // Noise can tilt the line; a token never makes a step cheaper, and the
  // line through the origin and the mean point bounds the slope above.
  return std::clamp(cov / var, 0.0, mean_y / mean_x);
}

double StepCost::fixed_seconds() const {
  return std::max(0.0, y_ / w_ - seconds_per_token() * x_ / w_);
}

double StepCost::Seconds(int32_t tokens) const {
  return fixed_seconds() + seconds_per_token() * tokens;
}

int32_t StepCost::TokensWithin(double seconds) const {
  const double left = seconds - fixed_seconds();
  if (left <= 0.0) return 0;
  const double per_token = seconds_per_token();
  if (per_token <= 0.0) return std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(
      std::min<double>(left / per_token, std::numeric_limits<int32_t>::max()));
}

}  // namespace loom
