#include "constraint/constraint_compiler.h"

#include <list>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "constraint/automaton_builder.h"
#include "constraint/compiled_grammar.h"
#include "constraint/gbnf_parser.h"
#include "constraint/json_schema_grammar.h"
#include "constraint/regex_parser.h"
#include "constraint/token_tables.h"
#include "constraint/vocabulary_index.h"

namespace loom {
namespace {

using constraint::Grammar;

// The cache key: the scope, the kind, then the text or the choices,
// unambiguously.
std::string CacheKey(const ConstraintSpec& spec, std::string_view scope = "") {
  std::string key = std::to_string(scope.size()) + ":" + std::string(scope);
  key += ConstraintKindName(spec.kind);
  key += '\0';
  if (spec.kind != ConstraintKind::kChoice) return key + spec.text;
  for (const std::string& choice : spec.choices) {
    absl::StrAppend(&key, choice.size(), ":", choice);
  }
  return key;
}

absl::StatusOr<Grammar> ChoiceGrammar(const std::vector<std::string>& choices) {
  if (choices.empty()) return absl::InvalidArgumentError("at least one choice is needed");
  Grammar g;
  std::vector<int32_t> literals;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("choice ", i, " is empty"));
    }
    literals.push_back(g.AddLiteral(choices[i]));
  }
  g.rules.push_back(constraint::Rule{"root", g.AddList(constraint::Expr::Kind::kChoice, literals)});
  g.root = 0;
  return g;
}

absl::StatusOr<Grammar> ParseSpec(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema:
      return constraint::JsonSchemaGrammar(spec.text, "root");
    case ConstraintKind::kRegex:
      return constraint::ParseRegex(spec.text);
    case ConstraintKind::kGrammar:
      return constraint::ParseGbnf(spec.text);
    case ConstraintKind::kJsonObject:
      return constraint::JsonObjectGrammar("root");
    case ConstraintKind::kChoice:
      return ChoiceGrammar(spec.choices);
  }
  return absl::InvalidArgumentError("unknown constraint kind");
}

}  // namespace

class ConstraintCompiler::Impl {
 public:
  Impl(std::shared_ptr<const constraint::VocabularyIndex> vocab, ConstraintLimits limits)
      : vocab_(std::move(vocab)), limits_(limits) {}

  absl::StatusOr<std::shared_ptr<const TokenConstraint>> Compile(const ConstraintSpec& spec,
                                                                 std::string_view scope) {
    std::string key = CacheKey(spec, scope);
    {
      MutexLock lock(mu_);
      if (auto it = index_.find(key); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++stats_.hits;
        return it->second->second;
      }
      ++stats_.misses;
    }
    absl::StatusOr<std::shared_ptr<const TokenConstraint>> compiled = CompileUncached(spec);
    if (!compiled.ok()) {
      return absl::Status(compiled.status().code(),
                          absl::StrCat(std::string(ConstraintKindName(spec.kind)), ": ",
                                       std::string(compiled.status().message())));
    }
    MutexLock lock(mu_);
    if (index_.contains(key) || limits_.cache_capacity <= 0) return compiled;
    lru_.emplace_front(key, *compiled);
    index_.emplace(std::move(key), lru_.begin());
    while (static_cast<int64_t>(lru_.size()) > limits_.cache_capacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    stats_.entries = static_cast<int64_t>(lru_.size());
    return compiled;
  }

  CacheStats stats() const {
    MutexLock lock(mu_);
    return stats_;
  }
  const ConstraintLimits& limits() const { return limits_; }
  int32_t vocab_size() const { return vocab_->vocab_size; }

 private:
  absl::StatusOr<std::shared_ptr<const TokenConstraint>> CompileUncached(
      const ConstraintSpec& spec) const {
    const size_t size =
        spec.kind == ConstraintKind::kChoice ? CacheKey(spec).size() : spec.text.size();
    if (static_cast<int64_t>(size) > limits_.max_text_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the constraint is ", size, " bytes, above the limit of ", limits_.max_text_bytes));
    }
    const absl::Time deadline = absl::Now() + limits_.max_compile_time;
    LOOM_ASSIGN_OR_RETURN(const Grammar grammar, ParseSpec(spec));
    LOOM_ASSIGN_OR_RETURN(constraint::Automaton automaton,
                          constraint::BuildAutomaton(
                              grammar, {.max_states = limits_.max_states, .deadline = deadline}));
    LOOM_ASSIGN_OR_RETURN(
        constraint::TokenTables tables,
        constraint::TokenTables::Build(automaton, vocab_->trie, vocab_->token_bytes,
                                       vocab_->vocab_size, deadline));
    return std::make_shared<const constraint::CompiledGrammar>(vocab_, std::move(automaton),
                                                               std::move(tables));
  }

  const std::shared_ptr<const constraint::VocabularyIndex> vocab_;
  const ConstraintLimits limits_;
  mutable Mutex mu_;
  // Most recently used first.
  std::list<std::pair<std::string, std::shared_ptr<const TokenConstraint>>> lru_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, decltype(lru_)::iterator> index_ ABSL_GUARDED_BY(mu_);
  CacheStats stats_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::Create(
    ConstraintVocabulary vocabulary, ConstraintLimits limits) {
  const auto num_tokens = static_cast<int64_t>(vocabulary.token_bytes.size());
  if (num_tokens == 0) return absl::InvalidArgumentError("the vocabulary has no tokens");
  if (vocabulary.vocab_size < num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size ", vocabulary.vocab_size,
                                                   " is below the ", num_tokens, " tokens given"));
  }
  for (int32_t eos : vocabulary.eos_token_ids) {
    if (eos < 0 || eos >= vocabulary.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("EOS token ", eos, " is outside [0, ", vocabulary.vocab_size, ")"));
    }
    // EOS ends the output; it never spells text, whatever bytes it has.
    if (eos < num_tokens) vocabulary.token_bytes[eos].clear();
  }
  auto vocab = std::make_shared<const constraint::VocabularyIndex>(
      std::move(vocabulary.token_bytes), std::move(vocabulary.eos_token_ids),
      vocabulary.vocab_size);
  return std::unique_ptr<ConstraintCompiler>(
      new ConstraintCompiler(std::make_unique<Impl>(std::move(vocab), limits)));
}

ConstraintCompiler::ConstraintCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConstraintCompiler::~ConstraintCompiler() = default;

absl::StatusOr<std::shared_ptr<const TokenConstraint>> ConstraintCompiler::Compile(
    const ConstraintSpec& spec, std::string_view scope) {
  return impl_->Compile(spec, scope);
}

ConstraintCompiler::CacheStats ConstraintCompiler::cache_stats() const { return impl_->stats(); }
const ConstraintLimits& ConstraintCompiler::limits() const { return impl_->limits(); }
int32_t ConstraintCompiler::vocab_size() const { return impl_->vocab_size(); }

}  // namespace loom
