#include "constraint/pda_stack.h"

#include <algorithm>

namespace loom::constraint {
namespace {

// A closure visits at most this many (state, frame) pairs; an ambiguous
// grammar that needs more loses the rest, as with kMaxStacks.
constexpr size_t kMaxClosure = 4096;

}  // namespace

int32_t PdaWalker::MakeFrame(int32_t state, int32_t parent, size_t first_new) {
  for (size_t f = first_new; f < frames_.size(); ++f) {
    if (frames_[f].state == state && frames_[f].parent == parent) return static_cast<int32_t>(f);
  }
  frames_.push_back({state, parent});
  return static_cast<int32_t>(frames_.size()) - 1;
}

void PdaWalker::Close(std::span<const StackTop> tops, Closure& out) {
  out.ready.clear();
  out.accepting = false;
  const size_t first_new = frames_.size();
  work_.assign(tops.begin(), tops.end());
  seen_.clear();
  while (!work_.empty()) {
    const StackTop top = work_.back();
    work_.pop_back();
    if (std::find(seen_.begin(), seen_.end(), top) != seen_.end()) continue;
    if (seen_.size() >= kMaxClosure) break;
    seen_.push_back(top);
    const AutomatonState& st = a_.states[top.state];
    if (st.edges_begin != st.edges_end && out.ready.size() < kMaxStacks) out.ready.push_back(top);
    for (int32_t c = st.calls_begin; c < st.calls_end; ++c) {
      const CallEdge& call = a_.call_edges[c];
      const int32_t frame = MakeFrame(call.target, top.parent, first_new);
      work_.push_back({a_.rule_start[call.rule], frame});
    }
    if (!st.final) continue;
    if (top.parent == kBottom) {
      out.accepting = true;
    } else if (top.parent == kContext || top.parent == kAnyStack) {
      if (return_sites_ == nullptr) continue;
      for (int32_t site : (*return_sites_)[st.rule]) work_.push_back({site, kAnyStack});
    } else {
      const Frame& below = frames_[top.parent];
      work_.push_back({below.state, below.parent});
    }
  }
}

void PdaWalker::Step(std::span<const StackTop> ready, uint8_t byte,
                     std::vector<StackTop>& out) const {
  out.clear();
  for (const StackTop& top : ready) {
    const int32_t next = a_.Next(top.state, byte);
    if (next < 0) continue;
    const StackTop moved{next, top.parent};
    if (std::find(out.begin(), out.end(), moved) == out.end()) out.push_back(moved);
  }
}

void PdaWalker::Reduce(std::vector<StackTop>& tops) const {
  size_t kept = 0;
  for (size_t i = 0; i < tops.size(); ++i) {
    StackTop top = tops[i];
    while (top.parent >= 0 && a_.IsPopOnly(top.state)) {
      const Frame& below = frames_[top.parent];
      top = {below.state, below.parent};
    }
    if (std::find(tops.begin(), tops.begin() + static_cast<std::ptrdiff_t>(kept), top) ==
        tops.begin() + static_cast<std::ptrdiff_t>(kept)) {
      tops[kept++] = top;
    }
  }
  tops.resize(kept);
}

}  // namespace loom::constraint
