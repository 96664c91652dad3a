// Compiles ConstraintSpecs into TokenConstraints (types/constraint.h) for one
// model's vocabulary. Built once per loaded model; Compile() is thread-safe and
// caches what it compiled by (kind, text), so the requests that share a schema
// share one automaton and its precomputed token tables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "constraint/constraint_spec.h"
#include "types/constraint.h"

namespace loom {

// The model's tokens as bytes.
struct ConstraintVocabulary {
  // token_bytes[id]: the bytes token id decodes to on its own (Tokenizer::
  // TokenBytes). Empty for tokens that never spell text (special and control
  // tokens): those are never allowed, except EOS where the output may end
  // (the EOS ids never spell text, whatever bytes they are given).
  std::vector<std::string> token_bytes;
  std::vector<int32_t> eos_token_ids;
  // The logits width, >= token_bytes.size(); ids past token_bytes are never
  // allowed.
  int32_t vocab_size = 0;
};

// Bounds on what one Compile() may cost. A constraint over a limit is refused
// (INVALID_ARGUMENT naming the limit, as any field over its size limit is),
// never run.
struct ConstraintLimits {
  int64_t max_text_bytes = 256 * 1024;  // schema, regex or grammar text
  int32_t max_states = 50000;           // automaton states after compilation
  absl::Duration max_compile_time = absl::Seconds(5);
  int32_t cache_capacity = 256;  // compiled constraints kept, least recently used dropped
};

class ConstraintCompiler {
 public:
  struct CacheStats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t entries = 0;
  };

  // INVALID_ARGUMENT when the vocabulary is unusable (vocab_size smaller than
  // the token list, an EOS id outside it, no token at all).
  static absl::StatusOr<std::unique_ptr<ConstraintCompiler>> Create(ConstraintVocabulary vocabulary,
                                                                    ConstraintLimits limits = {});
  ~ConstraintCompiler();
  ConstraintCompiler(const ConstraintCompiler&) = delete;
  ConstraintCompiler& operator=(const ConstraintCompiler&) = delete;

  // Thread-safe. The compiled constraint, from the cache when the same (kind,
  // text, choices) was compiled before. INVALID_ARGUMENT naming the problem
  // and where it is, prefixed with the kind:
  //   json_schema: at /properties/age: unsupported keyword "patternProperties"
  //   regex: at offset 7: unbalanced ')'
  //   grammar: line 3 col 12: undefined rule "foo"
  // INVALID_ARGUMENT as well when the text, the automaton or the compile time
  // exceeds its limit ("regex: the automaton exceeds the limit of 50000
  // states").
  // Cached per scope: the server's is the caller's tenant, so that one
  // tenant's cache hits never tell another what it compiled (a hit answers
  // far faster than a compile); requests of one scope share entries.
  absl::StatusOr<std::shared_ptr<const TokenConstraint>> Compile(const ConstraintSpec& spec,
                                                                 std::string_view scope = "");

  // Thread-safe.
  CacheStats cache_stats() const;
  const ConstraintLimits& limits() const;
  int32_t vocab_size() const;

 private:
  class Impl;
  explicit ConstraintCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom
