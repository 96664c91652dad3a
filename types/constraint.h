// Constrained decoding as the engine sees it: a compiled constraint (a JSON
// schema, a regular expression, a grammar, ...) and one sequence's position in
// it. The engine asks a sequence's matcher for the tokens allowed next, hands
// them to the executor as a packed bitmask, and feeds the sampled token back.
// The constraint module (constraint/) implements these interfaces; the engine
// and the scheduler never see more than this header.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace loom {

// Words of a packed token bitmask over `vocab_size` tokens: token t is bit
// t % 32 of word t / 32.
inline constexpr int32_t TokenBitmaskWords(int32_t vocab_size) { return (vocab_size + 31) / 32; }

// One sequence's state in a constraint. Owned and used by one thread at a
// time (the engine thread); Clone() starts an independent copy.
class ConstraintMatcher {
 public:
  virtual ~ConstraintMatcher() = default;

  // Sets the bits of the tokens that may come next and clears all others.
  // bitmask.size() is TokenBitmaskWords(vocab_size()) of the constraint. The
  // EOS tokens are set only when IsAccepting(). Returns false when no token
  // at all is allowed (a dead end: the vocabulary cannot spell what must
  // follow), in which case the sequence cannot go on.
  virtual bool FillNextTokenBitmask(std::span<uint32_t> bitmask) = 0;

  // Advances past token_id. Returns false, with the state unchanged, when the
  // token is not allowed here. An EOS token is allowed only when
  // IsAccepting(), and terminates the matcher.
  virtual bool AcceptToken(int32_t token_id) = 0;

  // Undoes the last num_tokens accepted tokens, as if they had never been
  // accepted; 0 <= num_tokens <= num_accepted_tokens().
  virtual void Rollback(int32_t num_tokens) = 0;

  virtual int32_t num_accepted_tokens() const = 0;

  // The output so far is complete: it may end here (EOS is allowed).
  virtual bool IsAccepting() const = 0;

  // The output is complete and nothing can extend it (or EOS was accepted):
  // the sequence stops here.
  virtual bool IsTerminated() const = 0;

  // An independent matcher in the same state (for the samples of n > 1).
  virtual std::unique_ptr<ConstraintMatcher> Clone() const = 0;
};

// A compiled constraint: immutable and thread-safe, shared by every request
// that asked for the same constraint text.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // The tokens the bitmasks cover: the model's vocabulary (logits width).
  virtual int32_t vocab_size() const = 0;

  // A matcher at the start of the constrained output.
  virtual std::unique_ptr<ConstraintMatcher> NewMatcher() const = 0;
};

}  // namespace loom
