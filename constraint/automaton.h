// A grammar compiled for matching: one deterministic automaton per rule over
// bytes, whose edges either consume a byte range or call another rule (push
// the return state, run the callee from its start, pop when it reaches a final
// state). Together they form a pushdown automaton over bytes: a recursive
// transition network. A state's byte edges are deterministic; a byte that
// several of its call edges (or a call and a byte edge) could take makes the
// matcher follow each, as a set of stacks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::constraint {

struct ByteEdge {
  uint8_t lo = 0;
  uint8_t hi = 0;
  int32_t target = -1;
};

struct CallEdge {
  int32_t rule = -1;
  int32_t target = -1;  // the state to continue from once the callee returns
};

struct AutomatonState {
  int32_t edges_begin = 0;  // into Automaton::byte_edges, sorted by lo, disjoint
  int32_t edges_end = 0;
  int32_t calls_begin = 0;  // into Automaton::call_edges
  int32_t calls_end = 0;
  int32_t rule = -1;
  bool final = false;  // the rule may end here (pop)
};

struct Automaton {
  std::vector<AutomatonState> states;
  std::vector<ByteEdge> byte_edges;
  std::vector<CallEdge> call_edges;
  std::vector<int32_t> rule_start;  // per rule: its start state
  std::vector<std::string> rule_names;
  int32_t root_rule = -1;

  // The state a byte edge of `state` leads to on `byte`; -1 when none does.
  int32_t Next(int32_t state, uint8_t byte) const {
    const AutomatonState& s = states[state];
    for (int32_t e = s.edges_begin; e < s.edges_end; ++e) {
      const ByteEdge& edge = byte_edges[e];
      if (byte < edge.lo) return -1;
      if (byte <= edge.hi) return edge.target;
    }
    return -1;
  }
  bool HasByteEdges(int32_t state) const {
    return states[state].edges_begin != states[state].edges_end;
  }
  bool HasCalls(int32_t state) const {
    return states[state].calls_begin != states[state].calls_end;
  }
  // A final state with no edges: all it can do is return to its caller.
  bool IsPopOnly(int32_t state) const {
    return states[state].final && !HasByteEdges(state) && !HasCalls(state);
  }
};

}  // namespace loom::constraint
