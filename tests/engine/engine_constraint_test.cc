// Structured outputs through the engine: a request's constraint compiled for
// a tiny vocabulary, masks in the StepPlan (which the fake executor honours),
// the matcher advanced on each token, EOS only where the output may end, the
// request stopped as soon as nothing can follow; with n > 1, prefix-cache
// hits and preemption by recompute, and beside unconstrained requests.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "constraint/constraint_compiler.h"
#include "engine/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/fakes.h"

namespace loom::testing {
namespace {

// The vocabulary: JSON pieces, some spanning what a grammar sees as several
// parts ("\":", "1,"), then EOS.
const std::vector<std::string>& Pieces() {
  static const auto* pieces = new std::vector<std::string>{
      "<unk>", "{", "}", "[", "]",  "\"",   ":",     ",",    " ", "\n",    "a",     "b", "ab",
      "\":",   "1", "2", "0", "1,", "true", "false", "null", "x", "\"a\"", "\"b\"", "  "};
  return *pieces;
}
int32_t Eos() { return static_cast<int32_t>(Pieces().size()); }
int32_t VocabSize() { return Eos() + 1; }

std::map<int32_t, std::string> PieceMap() {
  std::map<int32_t, std::string> m;
  for (size_t i = 0; i < Pieces().size(); ++i) m[static_cast<int32_t>(i)] = Pieces()[i];
  return m;
}

// A spread of scripted ids, which the executor moves to the next allowed one.
int32_t Scatter(std::span<const int32_t> prompt, int32_t num_generated) {
  return (prompt.back() * 7 + num_generated * 11) % VocabSize();
}

constexpr char kSchema[] = R"({"type": "object",
  "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "boolean"}}},
  "required": ["a", "b"], "additionalProperties": false})";

class EngineConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ConstraintVocabulary v;
    v.token_bytes = Pieces();
    v.token_bytes[0] = "";  // <unk> spells nothing
    v.token_bytes.push_back("");
    v.eos_token_ids = {Eos()};
    v.vocab_size = VocabSize();
    compiler_ = *ConstraintCompiler::Create(v);
  }

  void Start(FakeExecutor::Options options = {}, bool prefix_caching = true,
             TokenScript script = Scatter) {
    options.vocab_size = VocabSize();
    EngineConfig config;
    config.scheduler.max_num_seqs = 8;
    config.scheduler.max_num_batched_tokens = 64;
    config.scheduler.max_queued_requests = 32;
    config.scheduler.eos_token_ids = {Eos()};
    config.enable_prefix_caching = prefix_caching;
    auto executor = std::make_unique<FakeExecutor>(options, std::move(script));
    executor_ = executor.get();
    engine_ = std::make_unique<Engine>(config, std::move(executor),
                                       std::make_shared<FakeDetokenizer>(PieceMap()), &clock_);
    ASSERT_TRUE(engine_->Start().ok());
  }

  RequestParams Constrained(ConstraintKind kind, const std::string& text,
                            std::vector<int32_t> prompt = {5, 6, 7}) {
    RequestParams p;
    p.prompt_token_ids = std::move(prompt);
    p.stopping.max_tokens = 200;
    auto c = compiler_->Compile({kind, text, {}});
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) p.constraint = *c;
    return p;
  }

  std::shared_ptr<RecordingSink> Run(const RequestParams& p) {
    auto sink = std::make_shared<RecordingSink>();
    absl::StatusOr<RequestHandle> h = engine_->Submit(p, sink);
    EXPECT_TRUE(h.ok()) << h.status();
    EXPECT_TRUE(sink->WaitFinished());
    return sink;
  }

  static FinishReason Reason(const RecordingSink& sink, uint32_t index) {
    for (const RequestOutput& o : sink.outputs()) {
      for (const SampleDelta& d : o.samples) {
        if (d.index == index && d.finish_reason != FinishReason::kNone) return d.finish_reason;
      }
    }
    return FinishReason::kNone;
  }

  // The text is a document of kSchema (the automaton's job) and ended with
  // stop on its closing brace, not on EOS or the length.
  static void ExpectSchemaDocument(const RecordingSink& sink, uint32_t index) {
    const std::string text = sink.Text(index);
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    EXPECT_TRUE(doc["a"].is_number_integer()) << text;
    EXPECT_TRUE(doc["b"].is_array()) << text;
    for (const auto& item : doc["b"]) EXPECT_TRUE(item.is_boolean()) << text;
    EXPECT_EQ(doc.size(), 2u) << text;
    EXPECT_EQ(Reason(sink, index), FinishReason::kStop) << text;
    EXPECT_EQ(text.back(), '}');
  }

  ManualClock clock_;
  std::unique_ptr<ConstraintCompiler> compiler_;
  std::unique_ptr<Engine> engine_;
  FakeExecutor* executor_ = nullptr;
};

TEST_F(EngineConstraintTest, OutputFollowsTheSchemaAndStopsOnItsLastToken) {
  Start();
  const auto sink = Run(Constrained(ConstraintKind::kJsonSchema, kSchema));
  ExpectSchemaDocument(*sink, 0);
  const std::vector<int32_t> tokens = sink->Tokens(0);
  EXPECT_NE(tokens.back(), Eos());
  EXPECT_EQ(executor_->num_masked_samples(), static_cast<int64_t>(tokens.size()));
  EXPECT_TRUE(sink->final_output().status.ok());
}

TEST_F(EngineConstraintTest, EosOnlyWhereTheOutputMayEnd) {
  // The script asks for EOS every time: the mask allows it only after "ab",
  // and then the EOS ends the output (its text left out).
  Start({}, true, [](std::span<const int32_t>, int32_t) { return Eos(); });
  const auto sink = Run(Constrained(ConstraintKind::kRegex, "(ab)+"));
  EXPECT_EQ(sink->Text(0), "ab");
  EXPECT_EQ(sink->Tokens(0).back(), Eos());
  EXPECT_EQ(Reason(*sink, 0), FinishReason::kStop);
}

TEST_F(EngineConstraintTest, UnconstrainedRequestsBesideGetNoMasks) {
  Start();
  RequestParams plain;
  plain.prompt_token_ids = {1, 2, 3};
  plain.stopping.max_tokens = 5;
  plain.stopping.ignore_eos = true;
  auto plain_sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine_->Submit(plain, plain_sink).ok());
  const auto sink = Run(Constrained(ConstraintKind::kJsonSchema, kSchema));
  ASSERT_TRUE(plain_sink->WaitFinished());
  ExpectSchemaDocument(*sink, 0);
  EXPECT_EQ(plain_sink->Tokens(0).size(), 5u);
  EXPECT_EQ(executor_->num_masked_samples(), static_cast<int64_t>(sink->Tokens(0).size()));
}

TEST_F(EngineConstraintTest, EverySampleOfNFollowsItsOwnMatcher) {
  Start();
  RequestParams p = Constrained(ConstraintKind::kJsonSchema, kSchema);
  p.n = 3;
  const auto sink = Run(p);
  for (uint32_t i = 0; i < 3; ++i) ExpectSchemaDocument(*sink, i);
  // Same script, same prompt: each sample's own matcher led to the same text.
  EXPECT_EQ(sink->Text(1), sink->Text(0));
  EXPECT_EQ(sink->Text(2), sink->Text(0));
}

TEST_F(EngineConstraintTest, PrefixCacheHitsChangeNothing) {
  Start();
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const auto first = Run(Constrained(ConstraintKind::kJsonSchema, kSchema, prompt));
  const auto second = Run(Constrained(ConstraintKind::kJsonSchema, kSchema, prompt));
  ASSERT_TRUE(engine_->WaitUntilIdle(absl::Seconds(10)));
  EXPECT_GT(engine_->Stats().prefix_hit_tokens, 0u);
  ExpectSchemaDocument(*second, 0);
  EXPECT_EQ(second->Text(0), first->Text(0));
}

TEST_F(EngineConstraintTest, PreemptionKeepsTheMatchersInStep) {
  // Alone, each request runs unpreempted; together they overflow 14 blocks
  // of 4 tokens, so the scheduler preempts and recomputes.
  std::vector<std::string> alone;
  Start({.num_blocks = 64, .block_size = 4});
  for (int32_t r = 0; r < 4; ++r) {
    alone.push_back(
        Run(Constrained(ConstraintKind::kJsonSchema, kSchema, {5, 6, 7, 20 + r}))->Text(0));
  }
  engine_.reset();
  Start({.num_blocks = 14, .block_size = 4}, /*prefix_caching=*/false);
  // The first step waits until all four are queued, so they run together
  // however the engine thread is scheduled.
  executor_->PauseAtStep(executor_->num_steps() + 1);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int32_t r = 0; r < 4; ++r) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(engine_
                    ->Submit(Constrained(ConstraintKind::kJsonSchema, kSchema, {5, 6, 7, 20 + r}),
                             sinks.back())
                    .ok());
  }
  executor_->WaitUntilPaused();
  executor_->Release();
  for (int32_t r = 0; r < 4; ++r) {
    ASSERT_TRUE(sinks[r]->WaitFinished());
    ExpectSchemaDocument(*sinks[r], 0);
    EXPECT_EQ(sinks[r]->Text(0), alone[r]);
  }
  ASSERT_TRUE(engine_->WaitUntilIdle(absl::Seconds(10)));
  EXPECT_GT(engine_->Stats().num_preemptions, 0u);
  EXPECT_EQ(engine_->Stats().num_blocks_used, 0);
}

TEST_F(EngineConstraintTest, ADeadEndStopsTheSample) {
  Start();
  // No token spells "q": after "a" nothing is allowed.
  const auto sink = Run(Constrained(ConstraintKind::kRegex, "aq"));
  EXPECT_EQ(sink->Text(0), "a");
  EXPECT_EQ(Reason(*sink, 0), FinishReason::kStop);
  ASSERT_TRUE(engine_->WaitUntilIdle(absl::Seconds(10)));
  EXPECT_EQ(engine_->Stats().num_blocks_used, 0);
}

TEST_F(EngineConstraintTest, RefusesAConstraintForAnotherVocabulary) {
  Start();
  ConstraintVocabulary other;
  other.token_bytes = {"a", "b"};
  other.vocab_size = 2;
  auto compiler = *ConstraintCompiler::Create(other);
  RequestParams p;
  p.prompt_token_ids = {1};
  p.constraint = *compiler->Compile({ConstraintKind::kRegex, "a+", {}});
  const absl::Status status = engine_->Submit(p, std::make_shared<RecordingSink>()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            "the constraint's token masks cover 2 tokens; the model's vocabulary has 26");
}

}  // namespace
}  // namespace loom::testing
