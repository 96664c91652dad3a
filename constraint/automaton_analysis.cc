#include "constraint/automaton_analysis.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace loom::constraint {
namespace {

std::vector<int32_t> RuleOfStart(const Automaton& a) {
  std::vector<int32_t> rule_of_start(a.states.size(), -1);
  for (size_t r = 0; r < a.rule_start.size(); ++r) rule_of_start[a.rule_start[r]] = r;
  return rule_of_start;
}

// States that can reach a final state of their rule, and rules whose start
// is such a state, by a worklist over reversed edges.
struct Liveness {
  std::vector<bool> live;
  std::vector<bool> productive;
};

Liveness ComputeLiveness(const Automaton& a) {
  const size_t n = a.states.size();
  std::vector<std::vector<int32_t>> byte_preds(n);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> call_preds(n);  // (state, callee)
  std::vector<std::vector<std::pair<int32_t, int32_t>>> call_sites(a.rule_start.size());
  for (size_t s = 0; s < n; ++s) {
    const AutomatonState& st = a.states[s];
    for (int32_t e = st.edges_begin; e < st.edges_end; ++e) {
      byte_preds[a.byte_edges[e].target].push_back(s);
    }
    for (int32_t c = st.calls_begin; c < st.calls_end; ++c) {
      const CallEdge& call = a.call_edges[c];
      call_preds[call.target].emplace_back(s, call.rule);
      call_sites[call.rule].emplace_back(s, call.target);
    }
  }
  const std::vector<int32_t> rule_of_start = RuleOfStart(a);
  Liveness l{std::vector<bool>(n, false), std::vector<bool>(a.rule_start.size(), false)};
  std::vector<int32_t> queue;
  auto mark = [&](int32_t s) {
    if (!l.live[s]) {
      l.live[s] = true;
      queue.push_back(s);
    }
  };
  for (size_t s = 0; s < n; ++s) {
    if (a.states[s].final) mark(s);
  }
  while (!queue.empty()) {
    const int32_t t = queue.back();
    queue.pop_back();
    for (int32_t s : byte_preds[t]) mark(s);
    for (const auto& [s, callee] : call_preds[t]) {
      if (l.productive[callee]) mark(s);
    }
    const int32_t rule = rule_of_start[t];
    if (rule >= 0 && !l.productive[rule]) {
      l.productive[rule] = true;
      for (const auto& [s, target] : call_sites[rule]) {
        if (l.live[target]) mark(s);
      }
    }
  }
  return l;
}

// States reachable from `start` without consuming a byte: through calls of
// nullable rules.
std::vector<int32_t> EpsilonReachable(const Automaton& a, int32_t start,
                                      const std::vector<bool>& nullable) {
  std::vector<int32_t> seen = {start};
  for (size_t i = 0; i < seen.size(); ++i) {
    const AutomatonState& st = a.states[seen[i]];
    for (int32_t c = st.calls_begin; c < st.calls_end; ++c) {
      const CallEdge& call = a.call_edges[c];
      if (!nullable[call.rule]) continue;
      bool known = false;
      for (int32_t s : seen) known = known || s == call.target;
      if (!known) seen.push_back(call.target);
    }
  }
  return seen;
}

}  // namespace

absl::Status PruneDeadStates(Automaton& a) {
  const Liveness l = ComputeLiveness(a);
  if (!l.productive[a.root_rule]) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule \"", a.rule_names[a.root_rule], "\" matches no text"));
  }
  std::vector<ByteEdge> edges;
  std::vector<CallEdge> calls;
  for (AutomatonState& st : a.states) {
    const int32_t edges_begin = static_cast<int32_t>(edges.size());
    const int32_t calls_begin = static_cast<int32_t>(calls.size());
    for (int32_t e = st.edges_begin; e < st.edges_end; ++e) {
      if (l.live[a.byte_edges[e].target]) edges.push_back(a.byte_edges[e]);
    }
    for (int32_t c = st.calls_begin; c < st.calls_end; ++c) {
      const CallEdge& call = a.call_edges[c];
      if (l.productive[call.rule] && l.live[call.target]) calls.push_back(call);
    }
    st.edges_begin = edges_begin;
    st.edges_end = static_cast<int32_t>(edges.size());
    st.calls_begin = calls_begin;
    st.calls_end = static_cast<int32_t>(calls.size());
  }
  a.byte_edges = std::move(edges);
  a.call_edges = std::move(calls);
  return absl::OkStatus();
}

std::vector<bool> NullableRules(const Automaton& a) {
  std::vector<bool> nullable(a.rule_start.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < a.rule_start.size(); ++r) {
      if (nullable[r]) continue;
      for (int32_t s : EpsilonReachable(a, a.rule_start[r], nullable)) {
        if (a.states[s].final) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

absl::Status CheckLeftRecursion(const Automaton& a, absl::Time deadline) {
  const std::vector<bool> nullable = NullableRules(a);
  const size_t n = a.rule_start.size();
  // left[r]: the rules r can call before consuming a byte.
  std::vector<std::vector<int32_t>> left(n);
  for (size_t r = 0; r < n; ++r) {
    if ((r & 63) == 0 && absl::Now() >= deadline) {
      return absl::InvalidArgumentError("compiling exceeds the compile-time limit");
    }
    for (int32_t s : EpsilonReachable(a, a.rule_start[r], nullable)) {
      const AutomatonState& st = a.states[s];
      for (int32_t c = st.calls_begin; c < st.calls_end; ++c) {
        left[r].push_back(a.call_edges[c].rule);
      }
    }
  }
  // Iterative depth-first search for a cycle: 0 unseen, 1 on the path, 2 done.
  std::vector<uint8_t> color(n, 0);
  for (size_t root = 0; root < n; ++root) {
    if (color[root] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> path = {{static_cast<int32_t>(root), 0}};
    color[root] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const int32_t to = left[r][next++];
      if (color[to] == 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("rule \"", a.rule_names[to], "\" is left-recursive"));
      }
      if (color[to] == 0) {
        color[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace loom::constraint
