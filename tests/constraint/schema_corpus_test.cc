// The schema corpus (tests/constraint/schemas): every compiled automaton
// accepts each known-good document, in each of the forms a model writes, and
// rejects each known-bad one: byte by byte, then token by token through the
// default model's vocabulary, and again through the GBNF that
// JsonSchemaToGrammar prints.
#include "tests/constraint/schema_corpus.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "constraint/constraint_compiler.h"
#include "constraint/json_schema_to_grammar.h"
#include "gtest/gtest.h"
#include "tests/constraint/constraint_test_util.h"
#include "tests/constraint/model_vocabulary.h"
#include "tests/fixtures/fixture_util.h"

namespace loom {
namespace {

using ::loom::testing::ByteMatch;
using ::loom::testing::ByteVocabulary;
using ::loom::testing::LoadSchemaCorpus;
using ::loom::testing::MaskHas;
using ::loom::testing::Render;
using ::loom::testing::SchemaCase;

std::vector<SchemaCase> Corpus() { return LoadSchemaCorpus(LOOM_SCHEMA_CORPUS_DIR); }

TEST(SchemaCorpusTest, HoldsAtLeastFiftySchemasWithDocuments) {
  const std::vector<SchemaCase> corpus = Corpus();
  EXPECT_GE(corpus.size(), 50u);
  for (const SchemaCase& c : corpus) EXPECT_FALSE(c.valid.empty()) << c.name;
}

TEST(SchemaCorpusTest, ByteLevelAutomataAcceptGoodAndRejectBadDocuments) {
  auto compiler = *ConstraintCompiler::Create(ByteVocabulary());
  for (const SchemaCase& c : Corpus()) {
    auto compiled = compiler->Compile({ConstraintKind::kJsonSchema, c.schema, {}});
    ASSERT_TRUE(compiled.ok()) << c.name << ": " << compiled.status();
    for (const auto& doc : c.valid) {
      for (const std::string& form : c.forms) {
        EXPECT_TRUE(ByteMatch(**compiled, Render(doc, form))) << c.name << " " << form;
      }
    }
    for (const auto& doc : c.invalid) {
      EXPECT_FALSE(ByteMatch(**compiled, doc.dump())) << c.name << ": " << doc.dump();
    }
  }
}

TEST(SchemaCorpusTest, PrintedGrammarsMatchLikeTheSchemas) {
  auto compiler = *ConstraintCompiler::Create(ByteVocabulary());
  for (const SchemaCase& c : Corpus()) {
    absl::StatusOr<std::string> gbnf = JsonSchemaToGrammar(c.schema, "root");
    ASSERT_TRUE(gbnf.ok()) << c.name << ": " << gbnf.status();
    auto compiled = compiler->Compile({ConstraintKind::kGrammar, *gbnf, {}});
    ASSERT_TRUE(compiled.ok()) << c.name << ": " << compiled.status() << "\n" << *gbnf;
    for (const auto& doc : c.valid) EXPECT_TRUE(ByteMatch(**compiled, doc.dump())) << c.name;
    for (const auto& doc : c.invalid) EXPECT_FALSE(ByteMatch(**compiled, doc.dump())) << c.name;
  }
}

// Feeds the tokenization of `text`; each token must be in the mask, and a
// sample of other tokens must be in it exactly when AcceptToken takes them.
bool TokenMatch(const TokenConstraint& constraint, const std::vector<int32_t>& tokens,
                std::mt19937& rng) {
  std::unique_ptr<ConstraintMatcher> m = constraint.NewMatcher();
  std::vector<uint32_t> mask(TokenBitmaskWords(constraint.vocab_size()));
  std::uniform_int_distribution<int32_t> any_token(0, constraint.vocab_size() - 1);
  for (const int32_t t : tokens) {
    m->FillNextTokenBitmask(mask);
    for (int i = 0; i < 16; ++i) {
      const int32_t probe = any_token(rng);
      EXPECT_EQ(MaskHas(mask, probe), m->Clone()->AcceptToken(probe)) << "token " << probe;
    }
    const bool allowed = MaskHas(mask, t);
    EXPECT_EQ(allowed, m->Clone()->AcceptToken(t));
    if (!allowed || !m->AcceptToken(t)) return false;
  }
  return m->IsAccepting();
}

TEST(SchemaCorpusTest, TokenLevelThroughTheDefaultModelsVocabulary) {
  const std::string gguf = testing::DefaultGgufIfPresent();
  if (gguf.empty()) GTEST_SKIP() << "default model not fetched (scripts/setup)";
  auto tokenizer = testing::LoadGgufTokenizer(gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto compiler = *ConstraintCompiler::Create(testing::VocabularyOf(**tokenizer));
  std::mt19937 rng(20);
  for (const SchemaCase& c : Corpus()) {
    auto compiled = compiler->Compile({ConstraintKind::kJsonSchema, c.schema, {}});
    ASSERT_TRUE(compiled.ok()) << c.name << ": " << compiled.status();
    for (const auto& doc : c.valid) {
      for (const std::string& form : c.forms) {
        const std::string text = Render(doc, form);
        EXPECT_TRUE(TokenMatch(**compiled, (*tokenizer)->Encode(text, false), rng))
            << c.name << " " << form << ": " << text;
      }
    }
    for (const auto& doc : c.invalid) {
      EXPECT_FALSE(TokenMatch(**compiled, (*tokenizer)->Encode(doc.dump(), false), rng))
          << c.name << ": " << doc.dump();
    }
  }
}

}  // namespace
}  // namespace loom
