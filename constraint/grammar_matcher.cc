#include "constraint/grammar_matcher.h"

#include <algorithm>
#include <climits>
#include <string_view>
#include <utility>

#include "base/check.h"

namespace loom::constraint {

std::unique_ptr<ConstraintMatcher> CompiledGrammar::NewMatcher() const {
  return std::make_unique<GrammarMatcher>(shared_from_this());
}

int64_t CompiledGrammar::MemoryBytes() const {
  return tables_.MemoryBytes() +
         static_cast<int64_t>(automaton_.states.size() * sizeof(AutomatonState) +
                              automaton_.byte_edges.size() * sizeof(ByteEdge) +
                              automaton_.call_edges.size() * sizeof(CallEdge));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)),
      automaton_(grammar_->automaton()),
      walker_(automaton_, frames_) {
  const size_t depth = static_cast<size_t>(grammar_->vocab().trie.max_depth()) + 1;
  scratch_tops_.resize(depth);
  scratch_closures_.resize(depth);
  scratch_frames_.resize(depth);
  Settle({StackTop{automaton_.rule_start[automaton_.root_rule], kBottom}});
}

std::unique_ptr<ConstraintMatcher> GrammarMatcher::Clone() const {
  auto copy = std::make_unique<GrammarMatcher>(grammar_);
  copy->frames_ = frames_;
  copy->tops_ = tops_;
  copy->closure_ = closure_;
  copy->accepting_ = accepting_;
  copy->terminated_ = terminated_;
  copy->checkpoints_ = checkpoints_;
  copy->saved_tops_ = saved_tops_;
  return copy;
}

void GrammarMatcher::Settle(std::vector<StackTop> tops) {
  walker_.Reduce(tops);
  tops_ = std::move(tops);
  walker_.Close(tops_, closure_);
  accepting_ = closure_.accepting;
  terminated_ = accepting_ && closure_.ready.empty();
}

void GrammarMatcher::SaveCheckpoint(size_t num_frames) {
  Checkpoint cp;
  cp.num_frames = num_frames;
  cp.tops_begin = saved_tops_.size();
  cp.num_tops = tops_.size();
  cp.num_ready = closure_.ready.size();
  cp.accepting = accepting_;
  cp.terminated = terminated_;
  saved_tops_.insert(saved_tops_.end(), tops_.begin(), tops_.end());
  saved_tops_.insert(saved_tops_.end(), closure_.ready.begin(), closure_.ready.end());
  checkpoints_.push_back(cp);
}

bool GrammarMatcher::AcceptToken(int32_t token_id) {
  const VocabularyIndex& vocab = grammar_->vocab();
  if (token_id < 0 || token_id >= vocab.vocab_size) return false;
  // EOS may close any output that may end here, a completed one included.
  if (vocab.IsEos(token_id)) {
    if (!accepting_) return false;
    SaveCheckpoint(frames_.size());
    terminated_ = true;
    accepting_ = false;
    return true;
  }
  if (terminated_ || static_cast<size_t>(token_id) >= vocab.token_bytes.size()) return false;
  const std::string_view bytes = vocab.token_bytes[token_id];
  if (bytes.empty()) return false;
  const size_t num_frames = frames_.size();
  std::vector<StackTop> tops;
  Closure closure;
  const std::vector<StackTop>* ready = &closure_.ready;
  for (size_t i = 0; i < bytes.size(); ++i) {
    walker_.Step(*ready, static_cast<uint8_t>(bytes[i]), tops);
    if (tops.empty()) {
      frames_.resize(num_frames);
      return false;
    }
    if (i + 1 < bytes.size()) {
      walker_.Close(tops, closure);
      ready = &closure.ready;
    }
  }
  SaveCheckpoint(num_frames);
  Settle(std::move(tops));
  return true;
}

void GrammarMatcher::Rollback(int32_t num_tokens) {
  LOOM_CHECK(num_tokens >= 0 && num_tokens <= num_accepted_tokens())
      << "rolling back " << num_tokens << " of " << num_accepted_tokens() << " tokens";
  if (num_tokens == 0) return;
  const size_t target = checkpoints_.size() - static_cast<size_t>(num_tokens);
  const Checkpoint cp = checkpoints_[target];
  frames_.resize(cp.num_frames);
  const auto tops = saved_tops_.begin() + static_cast<std::ptrdiff_t>(cp.tops_begin);
  tops_.assign(tops, tops + static_cast<std::ptrdiff_t>(cp.num_tops));
  closure_.ready.assign(tops + static_cast<std::ptrdiff_t>(cp.num_tops),
                        tops + static_cast<std::ptrdiff_t>(cp.num_tops + cp.num_ready));
  closure_.accepting = cp.accepting;
  accepting_ = cp.accepting;
  terminated_ = cp.terminated;
  saved_tops_.resize(cp.tops_begin);
  checkpoints_.resize(target);
}

bool GrammarMatcher::FillNextTokenBitmask(std::span<uint32_t> bitmask) {
  const VocabularyIndex& vocab = grammar_->vocab();
  LOOM_CHECK_EQ(bitmask.size(), static_cast<size_t>(TokenBitmaskWords(vocab.vocab_size)));
  std::fill(bitmask.begin(), bitmask.end(), 0u);
  if (terminated_ && !accepting_) return false;
  const TokenTables& tables = grammar_->tables();
  for (const StackTop& top : tops_) tables.OrAccepted(tables.For(top.state), bitmask);
  for (const StackTop& top : tops_) CheckUncertain(top, bitmask);
  if (accepting_) {
    for (int32_t eos : vocab.eos_token_ids) bitmask[eos >> 5] |= 1u << (eos & 31);
  }
  return std::any_of(bitmask.begin(), bitmask.end(), [](uint32_t w) { return w != 0; });
}

void GrammarMatcher::CheckUncertain(const StackTop& top, std::span<uint32_t> bitmask) {
  const TokenTables& tables = grammar_->tables();
  const std::span<const UncertainToken> tokens = tables.Uncertain(tables.For(top.state));
  if (tokens.empty()) return;
  const std::vector<std::string>& token_bytes = grammar_->vocab().token_bytes;
  const size_t base_frames = frames_.size();
  scratch_tops_[0] = {top};
  scratch_frames_[0] = base_frames;
  // Depths [0, valid] hold the tops after that many bytes of the previous
  // token, closed up to closed_to; a token whose first dead + 1 bytes are
  // the previous one's dead prefix is rejected without a walk.
  int32_t valid = 0;
  int32_t closed_to = -1;
  int32_t dead = INT_MAX;
  for (const UncertainToken& u : tokens) {
    valid = std::min(valid, u.lcp);
    closed_to = std::min(closed_to, valid);
    if (u.lcp > dead) continue;
    dead = INT_MAX;
    const int32_t t = u.token;
    if ((bitmask[t >> 5] >> (t & 31)) & 1u) continue;
    const std::string_view bytes = token_bytes[t];
    int32_t d = valid;
    for (; d < static_cast<int32_t>(bytes.size()); ++d) {
      Closure& c = scratch_closures_[d];
      if (closed_to < d) {
        const std::vector<StackTop>& tops = scratch_tops_[d];
        if (tops.size() == 1 && walker_.IsPlain(tops[0])) {
          c.ready = tops;
        } else {
          frames_.resize(scratch_frames_[d]);
          walker_.Close(tops, c);
        }
        closed_to = d;
      }
      walker_.Step(c.ready, static_cast<uint8_t>(bytes[d]), scratch_tops_[d + 1]);
      scratch_frames_[d + 1] = frames_.size();
      if (scratch_tops_[d + 1].empty()) {
        dead = d;
        break;
      }
    }
    valid = d;
    if (d == static_cast<int32_t>(bytes.size())) bitmask[t >> 5] |= 1u << (t & 31);
  }
  frames_.resize(base_frames);
}

}  // namespace loom::constraint
