// One sample's position in a compiled grammar (types/constraint.h's
// ConstraintMatcher): the set of stack tops after the accepted tokens, over
// the matcher's own frame pool, with a checkpoint per accepted token for
// rollback. A step's mask is the union over the tops of their states'
// precomputed accepted tokens, plus the uncertain tokens that a walk from the
// top, with its real stack, accepts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "constraint/compiled_grammar.h"
#include "constraint/pda_stack.h"
#include "types/constraint.h"

namespace loom::constraint {

class GrammarMatcher : public ConstraintMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  bool FillNextTokenBitmask(std::span<uint32_t> bitmask) override;
  bool AcceptToken(int32_t token_id) override;
  void Rollback(int32_t num_tokens) override;
  int32_t num_accepted_tokens() const override { return static_cast<int32_t>(checkpoints_.size()); }
  bool IsAccepting() const override { return accepting_; }
  bool IsTerminated() const override { return terminated_; }
  std::unique_ptr<ConstraintMatcher> Clone() const override;

 private:
  // What rollback restores: the state before one accepted token.
  struct Checkpoint {
    size_t num_frames = 0;
    size_t tops_begin = 0;  // into saved_tops_: tops, then ready tops
    size_t num_tops = 0;
    size_t num_ready = 0;
    bool accepting = false;
    bool terminated = false;
  };

  // Sets tops_ and derives closure_, accepting_ and terminated_ from them.
  void Settle(std::vector<StackTop> tops);
  // Records the state before a token; num_frames: the frames it holds.
  void SaveCheckpoint(size_t num_frames);
  // Adds the uncertain tokens of `top`'s table that a walk from `top` accepts.
  void CheckUncertain(const StackTop& top, std::span<uint32_t> bitmask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  const Automaton& automaton_;
  std::vector<Frame> frames_;
  PdaWalker walker_;
  std::vector<StackTop> tops_;
  Closure closure_;  // of tops_
  bool accepting_ = false;
  bool terminated_ = false;
  std::vector<Checkpoint> checkpoints_;
  std::vector<StackTop> saved_tops_;
  // Scratch of the walks, one entry per byte depth.
  std::vector<std::vector<StackTop>> scratch_tops_;
  std::vector<Closure> scratch_closures_;
  std::vector<size_t> scratch_frames_;
};

}  // namespace loom::constraint
