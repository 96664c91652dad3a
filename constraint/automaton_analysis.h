// Whole-automaton analyses: which states can still reach an end (the rest is
// cut away, so that a matcher never walks into a dead end), which rules can
// match the empty text, and left recursion (which the matcher could not
// expand).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "constraint/automaton.h"

namespace loom::constraint {

// Removes the edges into states from which their rule cannot end and the
// calls of rules that match no text. INVALID_ARGUMENT when the root rule
// matches no text at all.
absl::Status PruneDeadStates(Automaton& a);

// Per rule: whether it matches the empty text.
std::vector<bool> NullableRules(const Automaton& a);

// INVALID_ARGUMENT naming a rule that can call itself before consuming a
// byte; INVALID_ARGUMENT past the deadline.
absl::Status CheckLeftRecursion(const Automaton& a, absl::Time deadline);

}  // namespace loom::constraint
