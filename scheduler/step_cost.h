// What a step costs, learned from the steps the engine ran: a line through
// (tokens scheduled, seconds) fitted by least squares over the recent steps
// (each older step's weight decays by kDecay a step), so
//   seconds ~ fixed + per_token * tokens.
// On the CPU a step reads every weight once (the fixed part, the memory
// bound) and multiplies each scheduled token's row by them (the per-token
// part, compute), and a decode and a prompt token cost about the same: both
// are one row of every product. The scheduler uses the line to size prefill
// chunks under a step-time target (SchedulerConfig::max_step_ms), so that the
// decodes running next to a long prompt keep a bounded inter-token latency.
//
// Pure logic: the engine passes each step's size and wall time.
#pragma once

#include <cstdint>

namespace loom {

class StepCost {
 public:
  // Weight of the step before the last one relative to the last.
  static constexpr double kDecay = 0.9;

  void Observe(int32_t tokens, double seconds);

  // Whether enough steps of different sizes were seen to extrapolate.
  bool Known() const;
  // Predicted seconds of a step of `tokens` tokens; Known() first.
  double Seconds(int32_t tokens) const;
  // Most tokens a step can hold within `seconds` (0 when even an empty step
  // takes longer); Known() first.
  int32_t TokensWithin(double seconds) const;

  double fixed_seconds() const;
  double seconds_per_token() const;

 private:
  // Decayed sums of the weights, x (tokens), y (seconds), x^2 and x y.
  double w_ = 0.0, x_ = 0.0, y_ = 0.0, xx_ = 0.0, xy_ = 0.0;
  int64_t steps_ = 0;
};

}  // namespace loom
