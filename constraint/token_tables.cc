#include "constraint/token_tables.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "constraint/pda_stack.h"
#include "types/constraint.h"

namespace loom::constraint {

// Per rule, the states its callers continue at once it returns.
std::vector<std::vector<int32_t>> ReturnSites(const Automaton& a) {
  std::vector<std::vector<int32_t>> sites(a.rule_start.size());
  for (const CallEdge& c : a.call_edges) {
    std::vector<int32_t>& s = sites[c.rule];
    if (std::find(s.begin(), s.end(), c.target) == s.end()) s.push_back(c.target);
  }
  return sites;
}

// Walks the token trie once per table state (see token_tables.h). Per trie
// depth it keeps the stack tops after that many bytes of the current path and
// their closure, so that siblings share their parent's work; the frames that
// a deeper closure made are dropped when the walk moves to a new branch.
class TableBuilder {
 public:
  TableBuilder(const Automaton& a, const TokenTrie& trie,
               const std::vector<std::string>& token_bytes, TokenTables& out)
      : a_(a),
        trie_(trie),
        token_bytes_(token_bytes),
        out_(out),
        return_sites_(ReturnSites(a)),
        walker_(a, frames_, &return_sites_),
        next_row_(a.states.size(), -1) {
    const size_t depth = static_cast<size_t>(trie.max_depth()) + 1;
    tops_.resize(depth);
    closures_.resize(depth);
    closed_.resize(depth);
    frames_at_.resize(depth);
  }

  void Build(int32_t state) {
    accepted_.clear();
    uncertain_.clear();
    Walk(state);
    Store();
  }

 private:
  void Walk(int32_t state) {
    frames_.clear();
    tops_[0] = {StackTop{state, kContext}};
    closed_[0] = false;
    frames_at_[0] = 0;
    const std::vector<TokenTrie::Node>& nodes = trie_.nodes();
    const std::vector<int32_t>& ids = trie_.token_ids();
    size_t k = 1;
    while (k < nodes.size()) {
      const TokenTrie::Node& node = nodes[k];
      const int32_t d = node.depth;
      const Closure& parent = CloseDepth(d - 1);
      if (parent.ready.size() == 1) {
        // The common case, one stack: no dedup, no allocation.
        std::vector<StackTop>& here = tops_[d];
        here.clear();
        const int32_t next = Next(parent.ready[0].state, node.byte);
        if (next >= 0) here.push_back({next, parent.ready[0].parent});
      } else {
        walker_.Step(parent.ready, node.byte, tops_[d]);
      }
      closed_[d] = false;
      frames_at_[d] = frames_.size();
      if (tops_[d].empty()) {
        // No stack, the guessed ones included, takes this prefix.
        k = static_cast<size_t>(node.subtree_end);
        continue;
      }
      if (node.tokens_begin != node.tokens_end) {
        const bool certain = std::any_of(tops_[d].begin(), tops_[d].end(),
                                         [&](const StackTop& t) { return walker_.IsCertain(t); });
        std::vector<int32_t>& set = certain ? accepted_ : uncertain_;
        set.insert(set.end(), ids.begin() + node.tokens_begin, ids.begin() + node.tokens_end);
      }
      ++k;
    }
  }

  // Automaton::Next, through a 256-entry row for states with many edges (a
  // string's characters), built on first use.
  int32_t Next(int32_t state, uint8_t byte) {
    const AutomatonState& st = a_.states[state];
    if (st.edges_end - st.edges_begin <= kDirectEdges) return a_.Next(state, byte);
    int32_t& row = next_row_[state];
    if (row < 0) {
      row = static_cast<int32_t>(next_rows_.size());
      next_rows_.resize(next_rows_.size() + 256, -1);
      for (int32_t e = st.edges_begin; e < st.edges_end; ++e) {
        const ByteEdge& edge = a_.byte_edges[e];
        for (int b = edge.lo; b <= edge.hi; ++b) next_rows_[row + b] = edge.target;
      }
    }
    return next_rows_[row + byte];
  }

  const Closure& CloseDepth(int32_t d) {
    Closure& c = closures_[d];
    if (closed_[d]) return c;
    closed_[d] = true;
    const std::vector<StackTop>& tops = tops_[d];
    if (tops.size() == 1 && walker_.IsPlain(tops[0])) {
      c.ready = tops;
      c.accepting = false;
      return c;
    }
    frames_.resize(frames_at_[d]);
    walker_.Close(tops, c);
    return c;
  }

  // Appends the walk's sets to the output as one table.
  void Store() {
    TokenTables::Table table;
    // A bitmap once the list would take more than half its size.
    if (static_cast<int64_t>(accepted_.size()) * 2 > out_.words_) {
      table.bitmap = static_cast<int32_t>(out_.bitmaps_.size());
      out_.bitmaps_.resize(out_.bitmaps_.size() + out_.words_, 0);
      uint32_t* bits = out_.bitmaps_.data() + table.bitmap;
      for (int32_t t : accepted_) bits[t >> 5] |= 1u << (t & 31);
    } else {
      std::sort(accepted_.begin(), accepted_.end());
      table.accepted_begin = static_cast<int32_t>(out_.accepted_.size());
      out_.accepted_.insert(out_.accepted_.end(), accepted_.begin(), accepted_.end());
      table.accepted_end = static_cast<int32_t>(out_.accepted_.size());
    }
    table.uncertain_begin = static_cast<int32_t>(out_.uncertain_.size());
    std::string_view prev;
    for (int32_t t : uncertain_) {
      const std::string_view bytes = token_bytes_[t];
      int32_t lcp = 0;
      while (lcp < static_cast<int32_t>(std::min(prev.size(), bytes.size())) &&
             prev[lcp] == bytes[lcp]) {
        ++lcp;
      }
      out_.uncertain_.push_back({t, lcp});
      prev = bytes;
    }
    table.uncertain_end = static_cast<int32_t>(out_.uncertain_.size());
    out_.tables_.push_back(table);
  }

  const Automaton& a_;
  const TokenTrie& trie_;
  const std::vector<std::string>& token_bytes_;
  TokenTables& out_;
  const std::vector<std::vector<int32_t>> return_sites_;
  std::vector<Frame> frames_;
  PdaWalker walker_;
  std::vector<std::vector<StackTop>> tops_;
  std::vector<Closure> closures_;
  std::vector<uint8_t> closed_;
  std::vector<size_t> frames_at_;
  std::vector<int32_t> accepted_;
  std::vector<int32_t> uncertain_;
  // Next's rows: next_row_[state] is the offset of its 256 targets, or -1.
  static constexpr int32_t kDirectEdges = 4;
  std::vector<int32_t> next_row_;
  std::vector<int32_t> next_rows_;
};

absl::StatusOr<TokenTables> TokenTables::Build(const Automaton& automaton, const TokenTrie& trie,
                                               const std::vector<std::string>& token_bytes,
                                               int32_t vocab_size, absl::Time deadline) {
  TokenTables out;
  out.words_ = TokenBitmaskWords(vocab_size);
  // The states a stack top can rest in between tokens: the root's start,
  // where a byte or a return leads, except where the matcher returns at once
  // (PdaWalker::Reduce) because only the root's end has no caller.
  std::vector<bool> needed(automaton.states.size(), false);
  needed[automaton.rule_start[automaton.root_rule]] = true;
  for (const ByteEdge& e : automaton.byte_edges) needed[e.target] = true;
  for (const CallEdge& c : automaton.call_edges) needed[c.target] = true;
  for (size_t s = 0; s < automaton.states.size(); ++s) {
    const bool root = automaton.states[s].rule == automaton.root_rule;
    if (automaton.IsPopOnly(static_cast<int32_t>(s)) && !root) needed[s] = false;
  }
  out.table_of_state_.assign(automaton.states.size(), -1);
  TableBuilder builder(automaton, trie, token_bytes, out);
  for (size_t s = 0; s < automaton.states.size(); ++s) {
    if (!needed[s]) continue;
    if (absl::Now() >= deadline) {
      return absl::InvalidArgumentError("compiling exceeds the compile-time limit");
    }
    out.table_of_state_[s] = static_cast<int32_t>(out.tables_.size());
    builder.Build(static_cast<int32_t>(s));
  }
  return out;
}

void TokenTables::OrAccepted(const Table& table, std::span<uint32_t> mask) const {
  if (table.bitmap >= 0) {
    const uint32_t* bits = bitmaps_.data() + table.bitmap;
    for (int32_t w = 0; w < words_; ++w) mask[w] |= bits[w];
    return;
  }
  for (int32_t i = table.accepted_begin; i < table.accepted_end; ++i) {
    const int32_t t = accepted_[i];
    mask[t >> 5] |= 1u << (t & 31);
  }
}

int64_t TokenTables::MemoryBytes() const {
  return static_cast<int64_t>(table_of_state_.size() * sizeof(int32_t) +
                              tables_.size() * sizeof(Table) + bitmaps_.size() * sizeof(uint32_t) +
                              accepted_.size() * sizeof(int32_t) +
                              uncertain_.size() * sizeof(UncertainToken));
}

}  // namespace loom::constraint
