#include "constraint/nfa.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "constraint/utf8_ranges.h"

namespace loom::constraint {
namespace {

// Rules whose expansion stays within this many automaton states are inlined.
constexpr int64_t kInlineMaxStates = 256;
// Expression trees deeper than this are refused (the builder recurses).
constexpr int kMaxDepth = 2000;

// The rules each rule's body references.
std::vector<std::vector<int32_t>> References(const Grammar& g) {
  std::vector<std::vector<int32_t>> refs(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r) {
    std::vector<int32_t> stack = {g.rules[r].body};
    std::vector<bool> seen(g.exprs.size(), false);
    while (!stack.empty()) {
      const int32_t e = stack.back();
      stack.pop_back();
      if (e < 0 || seen[e]) continue;
      seen[e] = true;
      const Expr& expr = g.exprs[e];
      if (expr.kind == Expr::Kind::kRuleRef) refs[r].push_back(expr.rule);
      stack.insert(stack.end(), expr.children.begin(), expr.children.end());
    }
  }
  return refs;
}

// Rules on a reference cycle, by Tarjan's strongly connected components, and
// the order in which their components complete: every rule after the rules
// it references (outside its own cycle).
struct RuleOrder {
  std::vector<bool> recursive;
  std::vector<int32_t> callees_first;
};

RuleOrder OrderRules(const std::vector<std::vector<int32_t>>& refs) {
  const int32_t n = static_cast<int32_t>(refs.size());
  std::vector<int32_t> index(n, -1), low(n, 0), stack;
  std::vector<bool> on_stack(n, false);
  RuleOrder order;
  order.recursive.assign(n, false);
  std::vector<bool>& recursive = order.recursive;
  int32_t next = 0;
  // Iterative, so that long reference chains cannot exhaust the stack.
  struct Frame {
    int32_t rule;
    size_t child;
  };
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    std::vector<Frame> frames = {{root, 0}};
    index[root] = low[root] = next++;
    stack.push_back(root);
    on_stack[root] = true;
    while (!frames.empty()) {
      Frame& f = frames.back();
      if (f.child < refs[f.rule].size()) {
        const int32_t to = refs[f.rule][f.child++];
        if (to == f.rule) recursive[to] = true;
        if (index[to] < 0) {
          index[to] = low[to] = next++;
          stack.push_back(to);
          on_stack[to] = true;
          frames.push_back({to, 0});
        } else if (on_stack[to]) {
          low[f.rule] = std::min(low[f.rule], index[to]);
        }
        continue;
      }
      const int32_t r = f.rule;
      frames.pop_back();
      if (!frames.empty()) low[frames.back().rule] = std::min(low[frames.back().rule], low[r]);
      if (low[r] != index[r]) continue;
      std::vector<int32_t> component;
      int32_t member = -1;
      do {
        member = stack.back();
        stack.pop_back();
        on_stack[member] = false;
        component.push_back(member);
        order.callees_first.push_back(member);
      } while (member != r);
      if (component.size() > 1) {
        for (int32_t m : component) recursive[m] = true;
      }
    }
  }
  return order;
}

// A class this wide under a repetition makes its rule "heavy": its states
// accept most of the vocabulary, so their token tables cost a walk of nearly
// the whole trie. Such rules stay calls, so that every use shares one copy.
constexpr int64_t kHeavyClassWidth = 64;

struct ExprCost {
  int64_t size = 0;    // rough automaton states
  bool wide = false;   // holds a wide class
  bool heavy = false;  // repeats a wide class
};

bool IsWide(const Expr& expr) {
  if (expr.negated) return true;
  int64_t width = 0;
  for (const CodepointRange& r : expr.ranges) width += r.hi - r.lo + 1;
  return width > kHeavyClassWidth;
}

// The cost of an expression with the inlined rules expanded (rule_cost[r]
// set for them, size -1 for the rules that stay calls).
ExprCost Cost(const Grammar& g, int32_t e, const std::vector<ExprCost>& rule_cost, int depth) {
  ExprCost cost;
  if (e < 0 || depth > kMaxDepth) {
    cost.size = kInlineMaxStates + 1;
    return cost;
  }
  const Expr& expr = g.exprs[e];
  switch (expr.kind) {
    case Expr::Kind::kEmpty:
      return cost;
    case Expr::Kind::kLiteral:
      cost.size = static_cast<int64_t>(expr.text.size());
      return cost;
    case Expr::Kind::kClass:
      cost.size = 4 + static_cast<int64_t>(expr.ranges.size());
      cost.wide = IsWide(expr);
      return cost;
    case Expr::Kind::kRuleRef:
      cost = rule_cost[expr.rule];
      cost.size = 1 + std::max<int64_t>(cost.size, 0);
      return cost;
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice:
      cost.size = 1;
      for (int32_t c : expr.children) {
        const ExprCost child = Cost(g, c, rule_cost, depth + 1);
        cost.size += child.size;
        cost.wide = cost.wide || child.wide;
        cost.heavy = cost.heavy || child.heavy;
        if (cost.size > kInlineMaxStates) return cost;
      }
      return cost;
    case Expr::Kind::kRepeat: {
      const ExprCost child = Cost(g, expr.children[0], rule_cost, depth + 1);
      const int64_t copies = expr.max == kUnbounded ? std::max(expr.min, 1) : expr.max;
      // Saturates: nested bounds must not overflow.
      cost.size = child.size > kInlineMaxStates ? child.size : 1 + copies * child.size;
      cost.wide = child.wide;
      cost.heavy = child.heavy || child.wide;
      return cost;
    }
  }
  cost.size = kInlineMaxStates + 1;
  return cost;
}

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& g, const std::vector<bool>& inlined, int64_t max_states, Nfa& nfa)
      : g_(g), inlined_(inlined), max_states_(max_states), nfa_(nfa) {}

  absl::Status Build(int32_t rule) {
    nfa_.states.clear();
    nfa_.start = NewState();
    const int32_t end = Add(g_.rules[rule].body, nfa_.start, 0);
    if (!status_.ok()) return status_;
    nfa_.end = end;
    return absl::OkStatus();
  }

 private:
  int32_t NewState() {
    if (static_cast<int64_t>(nfa_.states.size()) >= max_states_ && status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("the automaton exceeds the limit of ", max_states_, " states"));
    }
    if (!status_.ok()) return 0;
    nfa_.states.emplace_back();
    return static_cast<int32_t>(nfa_.states.size()) - 1;
  }
  void Epsilon(int32_t from, int32_t to) {
    if (status_.ok()) nfa_.states[from].epsilon.push_back(to);
  }

  // Adds the expression's fragment starting at `from`; returns its end. No
  // fragment adds an edge into its start state, so siblings may share one.
  int32_t Add(int32_t e, int32_t from, int depth) {
    if (!status_.ok()) return from;
    if (depth > kMaxDepth) {
      status_ = absl::InvalidArgumentError("the expression is nested too deeply");
      return from;
    }
    const Expr& expr = g_.exprs[e];
    switch (expr.kind) {
      case Expr::Kind::kEmpty:
        return from;
      case Expr::Kind::kLiteral:
        return AddLiteral(expr.text, from);
      case Expr::Kind::kClass:
        return AddClass(expr, from);
      case Expr::Kind::kRuleRef:
        if (inlined_[expr.rule]) return Add(g_.rules[expr.rule].body, from, depth + 1);
        return AddCall(expr.rule, from);
      case Expr::Kind::kSequence:
        for (int32_t c : expr.children) from = Add(c, from, depth + 1);
        return from;
      case Expr::Kind::kChoice: {
        const int32_t end = NewState();
        for (int32_t c : expr.children) Epsilon(Add(c, from, depth + 1), end);
        return end;
      }
      case Expr::Kind::kRepeat:
        return AddRepeat(expr, from, depth);
    }
    return from;
  }

  int32_t AddLiteral(const std::string& text, int32_t from) {
    for (const char c : text) {
      const int32_t next = NewState();
      if (!status_.ok()) return from;
      const auto b = static_cast<uint8_t>(c);
      nfa_.states[from].bytes.push_back({b, b, next});
      from = next;
    }
    return from;
  }

  int32_t AddClass(const Expr& expr, int32_t from) {
    const int32_t end = NewState();
    const std::vector<Utf8Sequence> seqs =
        Utf8Sequences(expr.negated ? ComplementRanges(expr.ranges) : expr.ranges);
    for (const Utf8Sequence& seq : seqs) {
      int32_t at = from;
      for (size_t k = 0; k < seq.size() && status_.ok(); ++k) {
        const int32_t next = k + 1 == seq.size() ? end : NewState();
        if (!status_.ok()) return from;
        nfa_.states[at].bytes.push_back({seq[k].lo, seq[k].hi, next});
        at = next;
      }
    }
    return end;
  }

  int32_t AddCall(int32_t rule, int32_t from) {
    const int32_t next = NewState();
    if (status_.ok()) nfa_.states[from].calls.push_back({rule, next});
    return next;
  }

  // child{min,max}: min copies, then a loop (no bound) or max - min
  // optional copies, nested so that each one is reached only after the last.
  int32_t AddRepeat(const Expr& expr, int32_t from, int depth) {
    const int32_t child = expr.children[0];
    for (int32_t i = 0; i < expr.min && status_.ok(); ++i) from = Add(child, from, depth + 1);
    if (expr.max == kUnbounded) {
      const int32_t loop = NewState();
      Epsilon(from, loop);
      Epsilon(Add(child, loop, depth + 1), loop);
      return loop;
    }
    const int32_t end = NewState();
    for (int32_t i = expr.min; i < expr.max && status_.ok(); ++i) {
      Epsilon(from, end);
      from = Add(child, from, depth + 1);
    }
    Epsilon(from, end);
    return end;
  }

  const Grammar& g_;
  const std::vector<bool>& inlined_;
  const int64_t max_states_;
  Nfa& nfa_;
  absl::Status status_;
};

}  // namespace

std::vector<bool> InlinableRules(const Grammar& g) {
  const RuleOrder order = OrderRules(References(g));
  // size -1: the rule stays a call. Each reference counts one state, so that
  // a chain of inlined rules stays shorter than kInlineMaxStates.
  std::vector<ExprCost> cost(g.rules.size(), ExprCost{-1, false, false});
  std::vector<bool> inlined(g.rules.size(), false);
  for (int32_t r : order.callees_first) {
    if (order.recursive[r] || r == g.root) continue;
    const ExprCost c = Cost(g, g.rules[r].body, cost, 0);
    if (c.size <= kInlineMaxStates && !c.heavy) {
      cost[r] = c;
      inlined[r] = true;
    }
  }
  return inlined;
}

absl::Status BuildRuleNfa(const Grammar& grammar, int32_t rule, const std::vector<bool>& inlined,
                          int64_t max_states, Nfa& nfa) {
  return NfaBuilder(grammar, inlined, max_states, nfa).Build(rule);
}

}  // namespace loom::constraint
