#include "constraint/automaton_builder.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "constraint/automaton_analysis.h"
#include "constraint/nfa.h"

namespace loom::constraint {
namespace {

absl::Status Exhausted(const AutomatonLimits& limits) {
  return absl::InvalidArgumentError(
      absl::StrCat("the automaton exceeds the limit of ", limits.max_states, " states"));
}

absl::Status TooSlow() {
  return absl::InvalidArgumentError("compiling exceeds the compile-time limit");
}

// Subset construction of one rule's NFA, appended to the automaton. Call
// edges keep grammar rule ids; BuildAutomaton renumbers them.
class Determinizer {
 public:
  Determinizer(const Nfa& nfa, int32_t rule, Automaton& a, const AutomatonLimits& limits)
      : nfa_(nfa), rule_(rule), a_(a), limits_(limits), mark_(nfa.states.size(), 0) {}

  absl::Status Run() {
    base_ = static_cast<int32_t>(a_.states.size());
    LOOM_ASSIGN_OR_RETURN(const int32_t start, Intern({nfa_.start}));
    (void)start;
    for (size_t i = 0; i < sets_.size(); ++i) {
      if ((i & 63) == 0 && absl::Now() >= limits_.deadline) return TooSlow();
      LOOM_RETURN_IF_ERROR(Expand(i));
    }
    return absl::OkStatus();
  }

 private:
  // The DFA state of the epsilon closure of `seeds`, added when new.
  absl::StatusOr<int32_t> Intern(std::vector<int32_t> seeds) {
    ++generation_;
    std::vector<int32_t> set;
    while (!seeds.empty()) {
      const int32_t s = seeds.back();
      seeds.pop_back();
      if (mark_[s] == generation_) continue;
      mark_[s] = generation_;
      set.push_back(s);
      const std::vector<int32_t>& eps = nfa_.states[s].epsilon;
      seeds.insert(seeds.end(), eps.begin(), eps.end());
    }
    std::sort(set.begin(), set.end());
    auto [it, inserted] = ids_.try_emplace(set, base_ + static_cast<int32_t>(sets_.size()));
    if (inserted) {
      if (static_cast<int64_t>(a_.states.size()) >= limits_.max_states) return Exhausted(limits_);
      AutomatonState state;
      state.rule = rule_;
      state.final = std::binary_search(set.begin(), set.end(), nfa_.end);
      a_.states.push_back(state);
      sets_.push_back(std::move(set));
    }
    return it->second;
  }

  absl::Status Expand(size_t local) {
    const std::vector<int32_t> set = sets_[local];
    std::vector<NfaState::Bytes> edges;
    std::vector<std::pair<int32_t, int32_t>> calls;  // (rule, target)
    for (int32_t s : set) {
      const NfaState& n = nfa_.states[s];
      edges.insert(edges.end(), n.bytes.begin(), n.bytes.end());
      for (const NfaState::Call& c : n.calls) calls.emplace_back(c.rule, c.target);
    }
    std::vector<int> bounds;
    for (const NfaState::Bytes& e : edges) {
      bounds.push_back(e.lo);
      bounds.push_back(e.hi + 1);
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    std::vector<ByteEdge> out;
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      const int lo = bounds[k], hi = bounds[k + 1] - 1;
      std::vector<int32_t> targets;
      for (const NfaState::Bytes& e : edges) {
        if (e.lo <= lo && lo <= e.hi) targets.push_back(e.target);
      }
      if (targets.empty()) continue;
      LOOM_ASSIGN_OR_RETURN(const int32_t target, Intern(std::move(targets)));
      if (!out.empty() && out.back().target == target && out.back().hi + 1 == lo) {
        out.back().hi = static_cast<uint8_t>(hi);
      } else {
        out.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), target});
      }
    }
    std::sort(calls.begin(), calls.end());
    std::vector<CallEdge> out_calls;
    for (size_t i = 0; i < calls.size();) {
      std::vector<int32_t> targets;
      size_t j = i;
      for (; j < calls.size() && calls[j].first == calls[i].first; ++j) {
        targets.push_back(calls[j].second);
      }
      LOOM_ASSIGN_OR_RETURN(const int32_t target, Intern(std::move(targets)));
      out_calls.push_back({calls[i].first, target});
      i = j;
    }
    AutomatonState& state = a_.states[base_ + local];
    state.edges_begin = static_cast<int32_t>(a_.byte_edges.size());
    a_.byte_edges.insert(a_.byte_edges.end(), out.begin(), out.end());
    state.edges_end = static_cast<int32_t>(a_.byte_edges.size());
    state.calls_begin = static_cast<int32_t>(a_.call_edges.size());
    a_.call_edges.insert(a_.call_edges.end(), out_calls.begin(), out_calls.end());
    state.calls_end = static_cast<int32_t>(a_.call_edges.size());
    return absl::OkStatus();
  }

  const Nfa& nfa_;
  const int32_t rule_;
  Automaton& a_;
  const AutomatonLimits& limits_;
  int32_t base_ = 0;
  std::vector<std::vector<int32_t>> sets_;
  absl::flat_hash_map<std::vector<int32_t>, int32_t> ids_;
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
};

// Moore's partition refinement over the rule's states, the last ones of the
// automaton (with their edges, the last edges): states that match the same
// byte and call sequences to the rule's end are merged, which also makes
// their token tables one. Signatures hold the class, finality and the edges
// with targets replaced by classes (adjacent byte ranges to one class
// joined); classes are renumbered until their number stops growing.
void MinimizeLastRule(Automaton& a, int32_t state_begin, int32_t edge_begin, int32_t call_begin) {
  const int32_t n = static_cast<int32_t>(a.states.size()) - state_begin;
  std::vector<int32_t> cls(n), next_cls(n);
  for (int32_t i = 0; i < n; ++i) cls[i] = a.states[state_begin + i].final ? 1 : 0;
  int32_t num_classes = 0;
  std::vector<int64_t> sig;
  for (;;) {
    absl::flat_hash_map<std::vector<int64_t>, int32_t> ids;
    for (int32_t i = 0; i < n; ++i) {
      const AutomatonState& st = a.states[state_begin + i];
      sig.assign({cls[i]});
      for (int32_t e = st.edges_begin; e < st.edges_end; ++e) {
        const ByteEdge& edge = a.byte_edges[e];
        const int32_t target = cls[edge.target - state_begin];
        if (sig.size() >= 4 && sig[sig.size() - 1] == target &&
            sig[sig.size() - 2] + 1 == edge.lo) {
          sig[sig.size() - 2] = edge.hi;
        } else {
          sig.insert(sig.end(), {edge.lo, edge.hi, target});
        }
      }
      sig.push_back(-1);
      for (int32_t c = st.calls_begin; c < st.calls_end; ++c) {
        sig.insert(sig.end(), {a.call_edges[c].rule, cls[a.call_edges[c].target - state_begin]});
      }
      next_cls[i] = ids.try_emplace(sig, static_cast<int32_t>(ids.size())).first->second;
    }
    const auto count = static_cast<int32_t>(ids.size());
    cls.swap(next_cls);
    if (count == num_classes) break;
    num_classes = count;
  }
  // Class c becomes state state_begin + c; the start (state 0 of the rule)
  // stays first because it was numbered first.
  std::vector<int32_t> rep(num_classes, -1);
  for (int32_t i = 0; i < n; ++i) {
    if (rep[cls[i]] < 0) rep[cls[i]] = i;
  }
  const std::vector<ByteEdge> edges(a.byte_edges.begin() + edge_begin, a.byte_edges.end());
  const std::vector<CallEdge> calls(a.call_edges.begin() + call_begin, a.call_edges.end());
  const std::vector<AutomatonState> old(a.states.begin() + state_begin, a.states.end());
  a.byte_edges.resize(edge_begin);
  a.call_edges.resize(call_begin);
  a.states.resize(state_begin);
  for (int32_t c = 0; c < num_classes; ++c) {
    AutomatonState st = old[rep[c]];
    const int32_t eb = st.edges_begin - edge_begin, ee = st.edges_end - edge_begin;
    const int32_t cb = st.calls_begin - call_begin, ce = st.calls_end - call_begin;
    st.edges_begin = static_cast<int32_t>(a.byte_edges.size());
    for (int32_t e = eb; e < ee; ++e) {
      ByteEdge edge = edges[e];
      edge.target = state_begin + cls[edge.target - state_begin];
      if (!a.byte_edges.empty() && static_cast<int32_t>(a.byte_edges.size()) > st.edges_begin &&
          a.byte_edges.back().target == edge.target && a.byte_edges.back().hi + 1 == edge.lo) {
        a.byte_edges.back().hi = edge.hi;
      } else {
        a.byte_edges.push_back(edge);
      }
    }
    st.edges_end = static_cast<int32_t>(a.byte_edges.size());
    st.calls_begin = static_cast<int32_t>(a.call_edges.size());
    for (int32_t k = cb; k < ce; ++k) {
      CallEdge call = calls[k];
      call.target = state_begin + cls[call.target - state_begin];
      a.call_edges.push_back(call);
    }
    st.calls_end = static_cast<int32_t>(a.call_edges.size());
    a.states.push_back(st);
  }
}

}  // namespace

absl::StatusOr<Automaton> BuildAutomaton(const Grammar& grammar, const AutomatonLimits& limits) {
  const std::vector<bool> inlined = InlinableRules(grammar);
  std::vector<int32_t> index_of(grammar.rules.size(), -1);
  std::vector<int32_t> grammar_rule;  // automaton rule -> grammar rule
  std::deque<int32_t> queue = {grammar.root};
  index_of[grammar.root] = 0;
  grammar_rule.push_back(grammar.root);
  Automaton a;
  Nfa nfa;
  while (!queue.empty()) {
    const int32_t rule = queue.front();
    queue.pop_front();
    const int64_t left = limits.max_states - static_cast<int64_t>(a.states.size());
    LOOM_RETURN_IF_ERROR(BuildRuleNfa(grammar, rule, inlined, 8 * std::max<int64_t>(left, 1), nfa));
    const int32_t calls_begin = static_cast<int32_t>(a.call_edges.size());
    const int32_t edges_begin = static_cast<int32_t>(a.byte_edges.size());
    a.rule_start.push_back(static_cast<int32_t>(a.states.size()));
    LOOM_RETURN_IF_ERROR(Determinizer(nfa, index_of[rule], a, limits).Run());
    MinimizeLastRule(a, a.rule_start.back(), edges_begin, calls_begin);
    for (size_t c = calls_begin; c < a.call_edges.size(); ++c) {
      const int32_t callee = a.call_edges[c].rule;
      if (index_of[callee] < 0) {
        index_of[callee] = static_cast<int32_t>(grammar_rule.size());
        grammar_rule.push_back(callee);
        queue.push_back(callee);
      }
    }
  }
  for (CallEdge& c : a.call_edges) c.rule = index_of[c.rule];
  for (int32_t r : grammar_rule) a.rule_names.push_back(grammar.rules[r].name);
  a.root_rule = 0;
  LOOM_RETURN_IF_ERROR(PruneDeadStates(a));
  LOOM_RETURN_IF_ERROR(CheckLeftRecursion(a, limits.deadline));
  return a;
}

}  // namespace loom::constraint
