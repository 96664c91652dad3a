// Structured outputs in the scheduler: token masks in the plan for exactly
// the constrained sampling rows, each sample's matcher advanced on its tokens,
// a completed constraint ending the sample at once; with n > 1, prefix-cache
// hits, preemption by recompute (checked by the fake executor's KV
// fingerprints) and a dead end.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constraint/constraint_compiler.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scheduler/scheduler_harness.h"

namespace loom::testing {
namespace {

// Ids 3..258 are the bytes 0..255 except 'q', 259..358 the digit pairs
// "00".."99"; the rest of the fake's vocabulary spells nothing.
ConstraintVocabulary TinyVocabulary() {
  ConstraintVocabulary v;
  v.vocab_size = kFakeVocabSize;
  v.token_bytes.assign(kFakeVocabSize, "");
  for (int b = 0; b < 256; ++b) {
    if (b != 'q') v.token_bytes[3 + b] = std::string(1, static_cast<char>(b));
  }
  for (int d = 0; d < 100; ++d) {
    v.token_bytes[259 + d] =
        std::string{static_cast<char>('0' + d / 10), static_cast<char>('0' + d % 10)};
  }
  v.eos_token_ids = {kFakeEosToken};
  return v;
}

constexpr char kSchema[] = R"({"type": "object",
  "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 9999},
                 "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 3}},
  "required": ["id", "tags"], "additionalProperties": false})";

class SchedulerConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override { compiler_ = *ConstraintCompiler::Create(vocab_); }

  static SchedulerHarness::Options Options(int32_t num_blocks, bool prefix_caching) {
    SchedulerHarness::Options options;
    options.scheduler.max_num_batched_tokens = 32;
    options.scheduler.max_num_seqs = 8;
    options.scheduler.max_model_len = 128;
    options.scheduler.eos_token_ids = {kFakeEosToken};
    options.cache = {
        .num_blocks = num_blocks, .block_size = 4, .enable_prefix_caching = prefix_caching};
    return options;
  }

  RequestParams Constrained(int32_t prompt_len, uint64_t salt, const std::string& regex = "") {
    RequestParams p = MakeRequest(prompt_len, 100, salt);
    const ConstraintSpec spec = regex.empty()
                                    ? ConstraintSpec{ConstraintKind::kJsonSchema, kSchema, {}}
                                    : ConstraintSpec{ConstraintKind::kRegex, regex, {}};
    p.constraint = *compiler_->Compile(spec);
    return p;
  }

  std::string Text(const std::vector<int32_t>& tokens) const {
    std::string text;
    for (int32_t t : tokens) text += vocab_.token_bytes[t];
    return text;
  }

  static const FinishedSeq* FinishOf(const SchedulerHarness& h, RequestHandle handle,
                                     uint32_t index) {
    for (const FinishedSeq& f : h.finished) {
      if (f.handle == handle && f.index == index) return &f;
    }
    return nullptr;
  }

  // A document of kSchema that ended on its closing brace.
  void ExpectDocument(const SchedulerHarness& h, RequestHandle handle, uint32_t index) {
    const std::string text = Text(h.tokens(handle, index));
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    EXPECT_TRUE(doc["id"].is_number_integer()) << text;
    EXPECT_LE(doc["tags"].size(), 3u) << text;
    const FinishedSeq* f = FinishOf(h, handle, index);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->reason, FinishReason::kStop);
    EXPECT_TRUE(f->completes_constraint);
  }

  ConstraintVocabulary vocab_ = TinyVocabulary();
  std::unique_ptr<ConstraintCompiler> compiler_;
};

TEST_F(SchedulerConstraintTest, MasksOnlyForConstrainedSamplingRows) {
  SchedulerHarness h(Options(64, false));
  // A 40-token prompt takes two chunks: the first samples nothing.
  const RequestHandle constrained = h.Add(Constrained(40, 1));
  const RequestHandle plain = h.Add(MakeRequest(8, 4, 2));
  int32_t rows = 0;
  h.set_on_plan([&](const StepPlan& plan) {
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const ScheduledSeq& s = plan.seqs[i];
      const bool wants =
          s.sample && s.seq_id / kMaxSamplesPerRequest == static_cast<int64_t>(constrained);
      EXPECT_EQ(plan.token_masks.RowOf(i) != nullptr, wants) << "seq " << s.seq_id;
      rows += wants ? 1 : 0;
    }
    if (plan.token_masks.row_of_seq.empty()) return;
    EXPECT_EQ(plan.token_masks.words_per_row, TokenBitmaskWords(kFakeVocabSize));
  });
  h.Run();
  ExpectDocument(h, constrained, 0);
  EXPECT_EQ(rows, static_cast<int32_t>(h.tokens(constrained).size()));
  EXPECT_EQ(h.tokens(plain).size(), 4u);
}

TEST_F(SchedulerConstraintTest, ACompletedConstraintEndsTheSampleAtOnce) {
  SchedulerHarness h(Options(64, false));
  const RequestHandle handle = h.Add(Constrained(6, 3, "[0-9]{5}"));
  h.Run();
  const std::string text = Text(h.tokens(handle));
  EXPECT_EQ(text.size(), 5u) << text;
  EXPECT_EQ(text.find_first_not_of("0123456789"), std::string::npos) << text;
  const FinishedSeq* f = FinishOf(h, handle, 0);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->reason, FinishReason::kStop);
  EXPECT_TRUE(f->completes_constraint);
}

TEST_F(SchedulerConstraintTest, SamplesOfNFollowTheirOwnMatchers) {
  SchedulerHarness h(Options(64, false));
  RequestParams p = Constrained(9, 4);
  p.n = 3;
  const RequestHandle handle = h.Add(std::move(p));
  h.Run();
  for (uint32_t i = 0; i < 3; ++i) ExpectDocument(h, handle, i);
  // Different seeds drew different documents.
  EXPECT_NE(h.tokens(handle, 0), h.tokens(handle, 1));
  EXPECT_NE(h.tokens(handle, 1), h.tokens(handle, 2));
}

TEST_F(SchedulerConstraintTest, PrefixCacheHitsChangeNothing) {
  SchedulerHarness h(Options(64, true));
  const RequestHandle first = h.Add(Constrained(12, 5));
  h.Run();
  const RequestHandle second = h.Add(Constrained(12, 5));
  h.Run();
  ASSERT_EQ(h.started.size(), 2u);
  EXPECT_GT(h.started[1].num_cached_prompt_tokens, 0);
  ExpectDocument(h, second, 0);
  EXPECT_EQ(h.tokens(second), h.tokens(first));
}

TEST_F(SchedulerConstraintTest, PreemptionKeepsEachMatcherWithItsTokens) {
  std::vector<std::vector<int32_t>> alone;
  {
    SchedulerHarness h(Options(256, false));
    std::vector<RequestHandle> handles;
    for (uint64_t r = 0; r < 6; ++r) handles.push_back(h.Add(Constrained(8, 10 + r)));
    h.Run();
    EXPECT_EQ(h.scheduler().num_preemptions(), 0);
    for (RequestHandle handle : handles) alone.push_back(h.tokens(handle));
  }
  SchedulerHarness h(Options(20, false));
  std::vector<RequestHandle> handles;
  for (uint64_t r = 0; r < 6; ++r) handles.push_back(h.Add(Constrained(8, 10 + r)));
  h.Run();
  EXPECT_GT(h.scheduler().num_preemptions(), 0);
  for (size_t r = 0; r < handles.size(); ++r) {
    ExpectDocument(h, handles[r], 0);
    EXPECT_EQ(h.tokens(handles[r]), alone[r]) << r;
  }
  EXPECT_EQ(h.cache().Stats().num_used, 0);
}

TEST_F(SchedulerConstraintTest, ADeadEndStopsWithoutTheRejectedToken) {
  SchedulerHarness h(Options(64, false));
  // The vocabulary cannot spell 'q'.
  const RequestHandle handle = h.Add(Constrained(6, 7, "12q"));
  h.Run();
  EXPECT_EQ(Text(h.tokens(handle)), "12");
  const FinishedSeq* f = FinishOf(h, handle, 0);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->reason, FinishReason::kStop);
  EXPECT_FALSE(f->completes_constraint);
}

}  // namespace
}  // namespace loom::testing
