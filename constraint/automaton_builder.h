// Grammar -> Automaton: each rule that is called (not inlined) gets its own
// automaton, made deterministic by subset construction over byte ranges and
// rule calls, minimized, and pruned to the states from which the rule can
// still end.
// Grammars the matcher could not run are refused: left recursion (a rule that
// reaches itself before consuming a byte) and a root that matches no text.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "constraint/automaton.h"
#include "constraint/grammar.h"

namespace loom::constraint {

struct AutomatonLimits {
  int64_t max_states = 50000;  // deterministic states over all rules
  absl::Time deadline = absl::InfiniteFuture();
};

// INVALID_ARGUMENT for a left-recursive rule or a root that matches nothing;
// INVALID_ARGUMENT past the state limit or the deadline.
absl::StatusOr<Automaton> BuildAutomaton(const Grammar& grammar, const AutomatonLimits& limits);

}  // namespace loom::constraint
