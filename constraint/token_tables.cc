#include "constraint/token_tables.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "constraint/automaton_analysis.h"
#include "constraint/pda_stack.h"
#include "types/constraint.h"

namespace loom::constraint {

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
        follow_(FollowBytes(a)),
        walker_(a, frames_) {
    const size_t depth = static_cast<size_t>(trie.max_depth()) + 1;
    tops_.resize(depth);
    closures_.resize(depth);
    closed_.resize(depth);
    marked_.resize(depth);
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
    context_rule_ = a_.states[state].rule;
    frames_.clear();
    tops_[0] = {StackTop{state, kContext}};
    closed_[0] = false;
    marked_[0] = false;
    frames_at_[0] = 0;
    const std::vector<TokenTrie::Node>& nodes = trie_.nodes();
    const std::vector<int32_t>& ids = trie_.token_ids();
    size_t k = 1;
    while (k < nodes.size()) {
      const TokenTrie::Node& node = nodes[k];
      const int32_t d = node.depth;
      const Closure& parent = CloseDepth(d - 1);
      walker_.Step(parent.ready, node.byte, tops_[d]);
      marked_[d] = marked_[d - 1] || (parent.reaches_context && follow_[context_rule_][node.byte]);
      closed_[d] = false;
      frames_at_[d] = frames_.size();
      if (tops_[d].empty()) {
        if (marked_[d]) {
          const int32_t end = nodes[node.subtree_end - 1].tokens_end;
          uncertain_.insert(uncertain_.end(), ids.begin() + node.tokens_begin, ids.begin() + end);
        }
        k = static_cast<size_t>(node.subtree_end);
        continue;
      }
      accepted_.insert(accepted_.end(), ids.begin() + node.tokens_begin,
                       ids.begin() + node.tokens_end);
      ++k;
    }
  }

  const Closure& CloseDepth(int32_t d) {
    Closure& c = closures_[d];
    if (closed_[d]) return c;
    closed_[d] = true;
    const std::vector<StackTop>& tops = tops_[d];
    if (tops.size() == 1 && walker_.IsPlain(tops[0])) {
      c.ready = tops;
      c.accepting = false;
      c.reaches_context = false;
      return c;
    }
    frames_.resize(frames_at_[d]);
    walker_.Close(tops, c);
    return c;
  }

  // Appends the walk's sets to the output as one table.
  void Store() {
    TokenTables::Table table;
    std::sort(accepted_.begin(), accepted_.end());
    // A bitmap once the list would take more than half its size.
    if (static_cast<int64_t>(accepted_.size()) * 2 > out_.words_) {
      table.bitmap = static_cast<int32_t>(out_.bitmaps_.size());
      out_.bitmaps_.resize(out_.bitmaps_.size() + out_.words_, 0);
      uint32_t* bits = out_.bitmaps_.data() + table.bitmap;
      for (int32_t t : accepted_) bits[t >> 5] |= 1u << (t & 31);
    } else {
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
  const std::vector<ByteSet> follow_;
  std::vector<Frame> frames_;
  PdaWalker walker_;
  // The rule of the state being walked: kContext stands for what follows it.
  int32_t context_rule_ = 0;
  std::vector<std::vector<StackTop>> tops_;
  std::vector<Closure> closures_;
  std::vector<bool> closed_;
  std::vector<bool> marked_;
  std::vector<size_t> frames_at_;
  std::vector<int32_t> accepted_;
  std::vector<int32_t> uncertain_;
};

absl::StatusOr<TokenTables> TokenTables::Build(const Automaton& automaton, const TokenTrie& trie,
                                               const std::vector<std::string>& token_bytes,
                                               int32_t vocab_size, absl::Time deadline) {
  TokenTables out;
  out.words_ = TokenBitmaskWords(vocab_size);
  // The states a stack top can rest in between tokens.
  std::vector<bool> needed(automaton.states.size(), false);
  needed[automaton.rule_start[automaton.root_rule]] = true;
  for (const ByteEdge& e : automaton.byte_edges) needed[e.target] = true;
  out.table_of_state_.assign(automaton.states.size(), -1);
  TableBuilder builder(automaton, trie, token_bytes, out);
  for (size_t s = 0; s < automaton.states.size(); ++s) {
    if (!needed[s]) continue;
    if (absl::Now() >= deadline) {
      return absl::ResourceExhaustedError("compiling exceeds the compile-time limit");
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
