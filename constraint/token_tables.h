// The tokens each automaton state allows, computed once per compiled
// constraint against the vocabulary (xgrammar's adaptive token mask cache).
// Walking the token trie from a state with an unknown stack below it sorts
// every token into one of three sets:
//   accepted   some path consumes all its bytes without popping the state's
//              own frame: allowed whatever the stack below holds;
//   rejected   no path consumes it, not even one that pops the frame and goes
//              on at any place the rule may return to (and so on, further
//              down): never allowed;
//   uncertain  the rest: only the stack below can tell, so the matcher walks
//              these (usually few) tokens at run time.
// A step's mask is then the accepted set (a copied bitmap or a short list)
// plus the uncertain tokens that pass.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "constraint/automaton.h"
#include "constraint/token_trie.h"

namespace loom::constraint {

struct UncertainToken {
  int32_t token = 0;
  int32_t lcp = 0;  // leading bytes shared with the previous token of its list
};

class TokenTables {
 public:
  struct Table {
    int32_t bitmap = -1;  // word offset into the bitmaps; -1: a list
    int32_t accepted_begin = 0;
    int32_t accepted_end = 0;
    int32_t uncertain_begin = 0;
    int32_t uncertain_end = 0;
  };

  // Tables for every state that can be a stack top between tokens (the root's
  // start and every byte edge's target). INVALID_ARGUMENT past the deadline.
  static absl::StatusOr<TokenTables> Build(const Automaton& automaton, const TokenTrie& trie,
                                           const std::vector<std::string>& token_bytes,
                                           int32_t vocab_size, absl::Time deadline);

  bool Has(int32_t state) const { return table_of_state_[state] >= 0; }
  const Table& For(int32_t state) const { return tables_[table_of_state_[state]]; }
  // Sets the bits of the table's accepted tokens.
  void OrAccepted(const Table& table, std::span<uint32_t> mask) const;
  std::span<const UncertainToken> Uncertain(const Table& table) const {
    return std::span<const UncertainToken>(uncertain_)
        .subspan(table.uncertain_begin, table.uncertain_end - table.uncertain_begin);
  }
  int64_t MemoryBytes() const;

 private:
  friend class TableBuilder;
  int32_t words_ = 0;
  std::vector<int32_t> table_of_state_;
  std::vector<Table> tables_;
  std::vector<uint32_t> bitmaps_;
  std::vector<int32_t> accepted_;
  std::vector<UncertainToken> uncertain_;
};

}  // namespace loom::constraint
