// A compiled constraint (types/constraint.h's TokenConstraint): the automaton
// and its token tables for one vocabulary. Immutable once built, so requests
// on any thread share it; each sample's GrammarMatcher keeps it alive.
#pragma once

#include <cstdint>
#include <memory>

#include "constraint/automaton.h"
#include "constraint/token_tables.h"
#include "constraint/vocabulary_index.h"
#include "types/constraint.h"

namespace loom::constraint {

class CompiledGrammar : public TokenConstraint,
                        public std::enable_shared_from_this<CompiledGrammar> {
 public:
  CompiledGrammar(std::shared_ptr<const VocabularyIndex> vocab, Automaton automaton,
                  TokenTables tables)
      : vocab_(std::move(vocab)), automaton_(std::move(automaton)), tables_(std::move(tables)) {}

  int32_t vocab_size() const override { return vocab_->vocab_size; }
  std::unique_ptr<ConstraintMatcher> NewMatcher() const override;

  const VocabularyIndex& vocab() const { return *vocab_; }
  const Automaton& automaton() const { return automaton_; }
  const TokenTables& tables() const { return tables_; }
  int64_t MemoryBytes() const;

 private:
  const std::shared_ptr<const VocabularyIndex> vocab_;
  const Automaton automaton_;
  const TokenTables tables_;
};

}  // namespace loom::constraint
