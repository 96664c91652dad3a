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
  std::vector<StackTop> ready;   // tops whose state has byte edges
  bool accepting = false;        // a stack popped to kBottom: the output may end here
  bool reaches_context = false;  // a stack popped to kContext
};

class PdaWalker {
 public:
  // frames must outlive the walker; Close() appends to it.
  PdaWalker(const Automaton& automaton, std::vector<Frame>& frames)
      : a_(automaton), frames_(frames) {}

  // The tops reachable from `tops` by calls and returns, without consuming a
  // byte, that can consume one; replaces `out`.
  void Close(std::span<const StackTop> tops, Closure& out);

  // The tops after consuming `byte` from `ready` (Close()'s output); replaces
  // `out`. Empty: no stack can take the byte.
  void Step(std::span<const StackTop> ready, uint8_t byte, std::vector<StackTop>& out) const;

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
  std::vector<StackTop> work_;
  std::vector<StackTop> seen_;
};

}  // namespace loom::constraint
