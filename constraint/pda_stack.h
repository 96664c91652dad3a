// The pushdown automaton's stacks, as a set of stack tops over a shared pool
// of frames: a top is the state the stack is in and the frame below it; a
// frame is the state to return to and the frame below that. Stacks that share
// a bottom share its frames, so a set of stacks costs a few words per stack.
//
//   top (state 17) -> frame 4 (return to 9) -> frame 1 (return to 3) -> kBottom
//
// The walker advances a set of tops over bytes: Close() expands calls (push a
// frame, enter the callee) and returns (final state: continue at the frame)
// until every top can consume a byte, and Step() consumes one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "constraint/automaton.h"

namespace loom::constraint {

// Below the root rule: popping it ends the output.
inline constexpr int32_t kBottom = -1;
// Below a state whose token table is being computed: whatever stack the
// matcher will hold there, unknown at compile time.
inline constexpr int32_t kContext = -2;
// Below a stack that a token table's walk guessed after popping kContext:
// the state is one its rule may return to, the rest unknown.
inline constexpr int32_t kAnyStack = -3;

struct Frame {
  int32_t state = 0;
  int32_t parent = kBottom;
};

struct StackTop {
  int32_t state = 0;
  int32_t parent = kBottom;
  friend bool operator==(const StackTop&, const StackTop&) = default;
};

// The most stacks a matcher follows at once. An ambiguous grammar could need
// more; the ones past the bound are dropped, which keeps every allowed token
// valid (the tokens of the dropped parses may be masked out).
inline constexpr size_t kMaxStacks = 256;

struct Closure {
  std::vector<StackTop> ready;  // tops whose state has byte edges
  bool accepting = false;       // a stack popped to kBottom: the output may end here
};

class PdaWalker {
 public:
  // frames must outlive the walker; Close() appends to it. With
  // return_sites (per rule, the states its callers continue at), a pop below
  // kContext or kAnyStack continues at every return site of the popped
  // rule, over kAnyStack: the walk then covers every stack that could be
  // below (the token tables' walks; a matcher knows its stack).
  PdaWalker(const Automaton& automaton, std::vector<Frame>& frames,
            const std::vector<std::vector<int32_t>>* return_sites = nullptr)
      : a_(automaton), frames_(frames), return_sites_(return_sites) {}

  // Whether the stack under `top` is the table state's own (ends in
  // kContext or kBottom), not one guessed past it (kAnyStack).
  bool IsCertain(const StackTop& top) const {
    int32_t parent = top.parent;
    while (parent >= 0) parent = frames_[parent].parent;
    return parent != kAnyStack;
  }

  // The tops reachable from `tops` by calls and returns, without consuming a
  // byte, that can consume one; replaces `out`.
  void Close(std::span<const StackTop> tops, Closure& out);

  // The tops after consuming `byte` from `ready` (Close()'s output); replaces
  // `out`. Empty: no stack can take the byte.
  void Step(std::span<const StackTop> ready, uint8_t byte, std::vector<StackTop>& out) const;

  // Replaces every top in a state that can only return (IsPopOnly) and has a
  // frame below by that frame, as often as that holds, so that the tops rest
  // where the next byte is decided and their token tables say the most.
  void Reduce(std::vector<StackTop>& tops) const;

  // Whether the closure of `top` is `top` itself (no calls, not final): the
  // common case inside a rule, which needs no Close().
  bool IsPlain(const StackTop& top) const {
    return !a_.HasCalls(top.state) && !a_.states[top.state].final && a_.HasByteEdges(top.state);
  }

 private:
  // A frame (state, parent), shared with any made by the same Close().
  int32_t MakeFrame(int32_t state, int32_t parent, size_t first_new);

  const Automaton& a_;
  std::vector<Frame>& frames_;
  const std::vector<std::vector<int32_t>>* return_sites_;
  std::vector<StackTop> work_;
  std::vector<StackTop> seen_;
};

}  // namespace loom::constraint
