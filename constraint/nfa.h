// Thompson construction: one rule's expression tree as a nondeterministic
// automaton over bytes with epsilon edges and rule calls. Code-point classes
// become their UTF-8 byte sequences; {m,n} repetition is unrolled; references
// to small rules that cannot recurse are expanded in place (inlined), so that
// their bytes join the caller's automaton instead of costing a call, unless
// they repeat a wide class (a JSON string's characters): those stay one
// shared rule, whose costly token tables are then computed once.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "constraint/grammar.h"

namespace loom::constraint {

struct NfaState {
  std::vector<int32_t> epsilon;
  struct Bytes {
    uint8_t lo, hi;
    int32_t target;
  };
  std::vector<Bytes> bytes;
  struct Call {
    int32_t rule, target;
  };
  std::vector<Call> calls;
};

struct Nfa {
  std::vector<NfaState> states;
  int32_t start = 0;
  int32_t end = 0;  // the one accepting state
};

// Which rules are expanded in place where they are referenced: rules outside
// every reference cycle whose expansion stays small and repeats no wide
// class, never the root.
std::vector<bool> InlinableRules(const Grammar& grammar);

// INVALID_ARGUMENT when the automaton would exceed max_states.
absl::Status BuildRuleNfa(const Grammar& grammar, int32_t rule, const std::vector<bool>& inlined,
                          int64_t max_states, Nfa& nfa);

}  // namespace loom::constraint
