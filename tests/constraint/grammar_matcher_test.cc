// The matcher over multi-byte tokens: every mask equals what AcceptToken says
// token by token (so the precomputed tables and the run-time checks of
// uncertain tokens agree with a plain walk), EOS only where the text may
// end, termination, rollback, clones, and the compiler's cache and limits.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "constraint/constraint_compiler.h"
#include "gtest/gtest.h"
#include "tests/constraint/constraint_test_util.h"

namespace loom {
namespace {

using ::loom::testing::CheckedMask;
using ::loom::testing::MaskHas;
using ::loom::testing::WordVocabulary;

// Tokens that split JSON at awkward places: a quote with what follows it, a
// colon with a space, digits with a comma, whitespace runs.
std::vector<std::string> JsonishTokens() {
  return {"{",    "}",   "\"",   ":",    ",",    " ",      "\n",  "  ",  "a",    "b",   "ab", "\":",
          "\",",  "\"}", "\": ", "1",    "12",   "1,",     "0",   ".",   "-",    "[",   "]",  "],",
          "true", "tr",  "ue",   "null", "\"a",  "\"ab\"", "{\"", "}}",  "\n  ", "e",   "E",  "+",
          "\\",   "\\n", "x",    "é",    "\xC3", "\xA9",   "]}",  "\"]", "[\"",  "\"ab"};
}

class MatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vocab_ = WordVocabulary(JsonishTokens());
    eos_ = vocab_.eos_token_ids[0];
    compiler_ = *ConstraintCompiler::Create(vocab_);
  }
  std::shared_ptr<const TokenConstraint> Compile(ConstraintKind kind, const std::string& text) {
    absl::StatusOr<std::shared_ptr<const TokenConstraint>> c = compiler_->Compile({kind, text, {}});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }
  int32_t Token(const std::string& s) const {
    for (size_t i = 0; i < vocab_.token_bytes.size(); ++i) {
      if (vocab_.token_bytes[i] == s) return static_cast<int32_t>(i);
    }
    ADD_FAILURE() << "no token " << s;
    return -1;
  }
  // Feeds the tokens, checking each step's mask against a plain walk.
  void Feed(ConstraintMatcher& m, const std::vector<std::string>& tokens) {
    for (const std::string& t : tokens) {
      const std::vector<uint32_t> mask = CheckedMask(m, vocab_.vocab_size);
      ASSERT_TRUE(MaskHas(mask, Token(t))) << t;
      ASSERT_TRUE(m.AcceptToken(Token(t))) << t;
    }
  }

  ConstraintVocabulary vocab_;
  int32_t eos_ = 0;
  std::unique_ptr<ConstraintCompiler> compiler_;
};

TEST_F(MatcherTest, SchemaMasksAgreeWithAcceptTokenAlongADocument) {
  const auto c = Compile(ConstraintKind::kJsonSchema, R"({
    "type": "object",
    "properties": {"ab": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}},
    "required": ["ab", "b"], "additionalProperties": false})");
  ASSERT_NE(c, nullptr);
  auto m = c->NewMatcher();
  Feed(*m,
       {"{\"", "ab", "\": ", "\"a", "b", "\",", " ", "\"", "b", "\":", "[", "1,", " ", "12", "]}"});
  EXPECT_TRUE(m->IsAccepting());
  EXPECT_TRUE(m->IsTerminated());
  const std::vector<uint32_t> mask = CheckedMask(*m, vocab_.vocab_size);
  for (int32_t t = 0; t < vocab_.vocab_size; ++t) EXPECT_EQ(MaskHas(mask, t), t == eos_) << t;
}

TEST_F(MatcherTest, JsonObjectMasksAgreeInsideNestedValues) {
  const auto c = Compile(ConstraintKind::kJsonObject, "");
  ASSERT_NE(c, nullptr);
  auto m = c->NewMatcher();
  Feed(*m, {"{\"", "a", "\":", "{\"", "b", "\": ", "[\"", "x", "\"]", "}", ",", "\n  ", "\"ab\"",
            ":", "null", "}"});
  EXPECT_TRUE(m->IsTerminated());
}

TEST_F(MatcherTest, EosOnlyWhereTheTextMayEnd) {
  const auto c = Compile(ConstraintKind::kRegex, "(ab)+x?");
  ASSERT_NE(c, nullptr);
  auto m = c->NewMatcher();
  std::vector<uint32_t> mask = CheckedMask(*m, vocab_.vocab_size);
  EXPECT_FALSE(MaskHas(mask, eos_));
  EXPECT_FALSE(m->AcceptToken(eos_));
  ASSERT_TRUE(m->AcceptToken(Token("ab")));
  mask = CheckedMask(*m, vocab_.vocab_size);
  EXPECT_TRUE(MaskHas(mask, eos_));
  EXPECT_TRUE(m->IsAccepting());
  EXPECT_FALSE(m->IsTerminated());  // "ab" or "x" may follow
  ASSERT_TRUE(m->AcceptToken(eos_));
  EXPECT_TRUE(m->IsTerminated());
  EXPECT_FALSE(m->AcceptToken(Token("ab")));
}

TEST_F(MatcherTest, RollbackRestoresEveryEarlierState) {
  const auto c = Compile(ConstraintKind::kJsonObject, "");
  ASSERT_NE(c, nullptr);
  auto m = c->NewMatcher();
  const std::vector<std::string> doc = {"{\"", "a", "\":", "[", "1,", "tr", "ue", "]", "}"};
  std::vector<std::vector<uint32_t>> masks;
  for (const std::string& t : doc) {
    masks.push_back(CheckedMask(*m, vocab_.vocab_size));
    ASSERT_TRUE(m->AcceptToken(Token(t)));
  }
  EXPECT_TRUE(m->IsTerminated());
  m->Rollback(3);
  EXPECT_EQ(m->num_accepted_tokens(), 6);
  EXPECT_FALSE(m->IsTerminated());
  EXPECT_EQ(CheckedMask(*m, vocab_.vocab_size), masks[6]);
  m->Rollback(6);
  EXPECT_EQ(CheckedMask(*m, vocab_.vocab_size), masks[0]);
  // Replaying after a rollback gives the same states again.
  for (size_t i = 0; i < doc.size(); ++i) {
    EXPECT_EQ(CheckedMask(*m, vocab_.vocab_size), masks[i]) << i;
    ASSERT_TRUE(m->AcceptToken(Token(doc[i])));
  }
  EXPECT_TRUE(m->IsTerminated());
}

TEST_F(MatcherTest, RejectedTokenLeavesTheStateUnchanged) {
  absl::StatusOr<std::shared_ptr<const TokenConstraint>> choice =
      compiler_->Compile({ConstraintKind::kChoice, "", {"true", "null", "ab"}});
  ASSERT_TRUE(choice.ok()) << choice.status();
  auto m = (*choice)->NewMatcher();
  const std::vector<uint32_t> before = CheckedMask(*m, vocab_.vocab_size);
  EXPECT_FALSE(m->AcceptToken(Token("x")));
  EXPECT_FALSE(m->AcceptToken(Token("ue")));
  EXPECT_EQ(m->num_accepted_tokens(), 0);
  EXPECT_EQ(CheckedMask(*m, vocab_.vocab_size), before);
  ASSERT_TRUE(m->AcceptToken(Token("tr")));
  ASSERT_TRUE(m->AcceptToken(Token("ue")));
  EXPECT_TRUE(m->IsTerminated());
}

TEST_F(MatcherTest, ClonesAreIndependent) {
  const auto c = Compile(ConstraintKind::kRegex, "(a|b)+");
  ASSERT_NE(c, nullptr);
  auto m = c->NewMatcher();
  ASSERT_TRUE(m->AcceptToken(Token("a")));
  auto copy = m->Clone();
  ASSERT_TRUE(copy->AcceptToken(Token("ab")));
  EXPECT_EQ(copy->num_accepted_tokens(), 2);
  EXPECT_EQ(m->num_accepted_tokens(), 1);
  copy->Rollback(2);
  EXPECT_EQ(copy->num_accepted_tokens(), 0);
  EXPECT_TRUE(m->IsAccepting());
  EXPECT_FALSE(copy->IsAccepting());
}

TEST_F(MatcherTest, TokensSplittingUtf8CharactersAreMatchedByByte) {
  const auto c = Compile(ConstraintKind::kRegex, "é+");
  ASSERT_NE(c, nullptr);
  auto m = c->NewMatcher();
  Feed(*m, {"\xC3", "\xA9", "é", "\xC3"});
  EXPECT_FALSE(m->IsAccepting());
  Feed(*m, {"\xA9"});
  EXPECT_TRUE(m->IsAccepting());
}

TEST_F(MatcherTest, CacheHitsOnRepeatsAndKeysByKindAndText) {
  const ConstraintSpec spec{ConstraintKind::kRegex, "ab|x", {}};
  auto first = compiler_->Compile(spec);
  auto second = compiler_->Compile(spec);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());
  auto grammar = compiler_->Compile({ConstraintKind::kGrammar, "root ::= \"ab\" | \"x\"", {}});
  ASSERT_TRUE(grammar.ok());
  EXPECT_NE(grammar->get(), first->get());
  const ConstraintCompiler::CacheStats stats = compiler_->cache_stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.entries, 2);
}

// Entries are kept per cache scope (the tenant): the same spec from another
// tenant compiles again, so a cache hit's speed tells no tenant what another
// sent.
TEST_F(MatcherTest, CacheKeysByScope) {
  const ConstraintSpec spec{ConstraintKind::kRegex, "ab|x", {}};
  auto a = compiler_->Compile(spec, "tenant-a");
  auto b = compiler_->Compile(spec, "tenant-b");
  auto a_again = compiler_->Compile(spec, "tenant-a");
  ASSERT_TRUE(a.ok() && b.ok() && a_again.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(a->get(), a_again->get());
  const ConstraintCompiler::CacheStats stats = compiler_->cache_stats();
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.hits, 1);
}

TEST_F(MatcherTest, CacheDropsTheLeastRecentlyUsed) {
  auto small = *ConstraintCompiler::Create(vocab_, ConstraintLimits{.cache_capacity = 2});
  for (const char* p : {"a", "b", "a", "x", "b"})
    ASSERT_TRUE(small->Compile({ConstraintKind::kRegex, p, {}}).ok());
  // a, b miss; a hits; x misses and drops b; b misses again.
  EXPECT_EQ(small->cache_stats().hits, 1);
  EXPECT_EQ(small->cache_stats().misses, 4);
  EXPECT_EQ(small->cache_stats().entries, 2);
}

TEST_F(MatcherTest, LimitsRefuseLargeConstraints) {
  auto limited = *ConstraintCompiler::Create(
      vocab_, ConstraintLimits{.max_text_bytes = 64, .max_states = 200});
  absl::Status status =
      limited->Compile({ConstraintKind::kRegex, std::string(65, 'a'), {}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            "regex: the constraint is 65 bytes, above the limit of 64");
  status = limited->Compile({ConstraintKind::kRegex, "[ab]{500}", {}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()), "regex: the automaton exceeds the limit of 200 states");
  // A blow-up of the deterministic automaton (the n-th last letter is an a).
  status = limited->Compile({ConstraintKind::kRegex, "[ab]*a[ab]{12}", {}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  auto slow = *ConstraintCompiler::Create(
      vocab_, ConstraintLimits{.max_compile_time = absl::ZeroDuration()});
  status = slow->Compile({ConstraintKind::kJsonObject, "", {}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()), "json_object: compiling exceeds the compile-time limit");
}

TEST_F(MatcherTest, CompileIsThreadSafe) {
  const std::vector<ConstraintSpec> specs = {{ConstraintKind::kRegex, "(ab)+", {}},
                                             {ConstraintKind::kJsonObject, "", {}},
                                             {ConstraintKind::kChoice, "", {"true", "null"}},
                                             {ConstraintKind::kGrammar, "root ::= \"a\"+", {}}};
  std::vector<std::thread> threads;
  std::vector<std::vector<std::shared_ptr<const TokenConstraint>>> got(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (const ConstraintSpec& spec : specs) {
          auto c = compiler_->Compile(spec);
          ASSERT_TRUE(c.ok()) << c.status();
          got[t].push_back(*c);
          // Matchers of a shared constraint run on any thread.
          auto m = (*c)->NewMatcher();
          std::vector<uint32_t> mask(TokenBitmaskWords(vocab_.vocab_size));
          EXPECT_TRUE(m->FillNextTokenBitmask(mask));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const ConstraintCompiler::CacheStats stats = compiler_->cache_stats();
  EXPECT_EQ(stats.hits + stats.misses, 4 * 5 * 4);
  EXPECT_EQ(stats.entries, 4);
  // By the last round every thread hit the cache: one compiled constraint
  // per spec.
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto cached = *compiler_->Compile(specs[i]);
    for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t][specs.size() * 4 + i].get(), cached.get());
  }
}

TEST(CompilerCreateTest, EosNeverSpellsText) {
  // EOS (id 1) has the bytes "a": still only allowed where the output may end.
  ConstraintVocabulary v;
  v.token_bytes = {"a", "a", "b"};
  v.eos_token_ids = {1};
  v.vocab_size = 3;
  auto compiler = *ConstraintCompiler::Create(v);
  auto c = *compiler->Compile({ConstraintKind::kRegex, "ab?", {}});
  auto m = c->NewMatcher();
  std::vector<uint32_t> mask = CheckedMask(*m, 3);
  EXPECT_EQ(mask[0], 1u);  // token 0 only
  ASSERT_TRUE(m->AcceptToken(0));
  mask = CheckedMask(*m, 3);
  EXPECT_EQ(mask[0], 0b110u);  // "b" or EOS
}

TEST(CompilerCreateTest, RefusesUnusableVocabularies) {
  EXPECT_FALSE(ConstraintCompiler::Create(ConstraintVocabulary{}).ok());
  ConstraintVocabulary v = WordVocabulary({"a"});
  v.vocab_size = 1;
  EXPECT_EQ(ConstraintCompiler::Create(v).status().message(),
            "vocab_size 1 is below the 2 tokens given");
  v = WordVocabulary({"a"});
  v.eos_token_ids = {7};
  EXPECT_EQ(ConstraintCompiler::Create(v).status().message(), "EOS token 7 is outside [0, 2)");
}

}  // namespace
}  // namespace loom
