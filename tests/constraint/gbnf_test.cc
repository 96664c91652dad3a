// GBNF parsing and matching: the dialect's constructs accept and reject the
// texts they should (byte by byte, each byte checked against the mask), and
// malformed grammars fail with the line and column of the problem.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "constraint/constraint_compiler.h"
#include "constraint/gbnf_parser.h"
#include "constraint/gbnf_printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/constraint/constraint_test_util.h"

namespace loom {
namespace {

using ::loom::testing::ByteMatch;
using ::loom::testing::ByteVocabulary;
using ::testing::HasSubstr;

class GbnfTest : public ::testing::Test {
 protected:
  void SetUp() override { compiler_ = *ConstraintCompiler::Create(ByteVocabulary()); }

  std::shared_ptr<const TokenConstraint> Compile(const std::string& grammar) {
    absl::StatusOr<std::shared_ptr<const TokenConstraint>> c =
        compiler_->Compile({ConstraintKind::kGrammar, grammar, {}});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }
  absl::Status CompileError(const std::string& grammar) {
    return compiler_->Compile({ConstraintKind::kGrammar, grammar, {}}).status();
  }

  std::unique_ptr<ConstraintCompiler> compiler_;
};

TEST_F(GbnfTest, ArithmeticWithRulesGroupsAndRepetition) {
  const auto c = Compile(R"gbnf(
# arithmetic over small integers
root  ::= expr
expr  ::= term ([-+*/] term)*
term  ::= num | "(" expr ")"
num   ::= [0-9]{1,3}
)gbnf");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(ByteMatch(*c, "1+2"));
  EXPECT_TRUE(ByteMatch(*c, "(12*3)-(4/5)"));
  EXPECT_TRUE(ByteMatch(*c, "((7))"));
  EXPECT_FALSE(ByteMatch(*c, "1+"));
  EXPECT_FALSE(ByteMatch(*c, "1234"));
  EXPECT_FALSE(ByteMatch(*c, "(1"));
  EXPECT_FALSE(ByteMatch(*c, ""));
}

TEST_F(GbnfTest, AlternativesContinueAfterBarAndInsideParentheses) {
  const auto c = Compile("root ::= \"a\" |\n  \"b\" | (\n  \"c\"\n  | \"d\"\n)\n");
  ASSERT_NE(c, nullptr);
  for (const char* s : {"a", "b", "c", "d"}) EXPECT_TRUE(ByteMatch(*c, s)) << s;
  EXPECT_FALSE(ByteMatch(*c, "e"));
}

TEST_F(GbnfTest, EscapesAndUnicodeClasses) {
  const auto c = Compile(R"(root ::= "\"" [^"\\\x00-\x1F]* "\"" "\n" [ぁ-ゟ]+ "\u00e9\U0001F600")");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(ByteMatch(*c, "\"héllo\"\nひらがな\u00e9\U0001F600"));
  EXPECT_FALSE(ByteMatch(*c, "\"a\"b\"\nあ\u00e9\U0001F600"));
  EXPECT_FALSE(ByteMatch(*c, "\"a\"\nア\u00e9\U0001F600"));  // katakana
}

TEST_F(GbnfTest, AnyCharacterIsOneWholeCodePoint) {
  const auto c = Compile("root ::= . .");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(ByteMatch(*c, "ab"));
  EXPECT_TRUE(ByteMatch(*c, "\xE2\x82\xAC\xF0\x9F\x98\x80"));  // € and 😀
  EXPECT_FALSE(ByteMatch(*c, "\xE2\x82x"));                    // broken UTF-8
  EXPECT_FALSE(ByteMatch(*c, "\xED\xA0\x80z"));                // a surrogate
  EXPECT_FALSE(ByteMatch(*c, "abc"));
}

TEST_F(GbnfTest, BoundedRepetitionForms) {
  const auto c = Compile("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"? \"e\"+");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(ByteMatch(*c, "aabe"));
  EXPECT_TRUE(ByteMatch(*c, "aabbbccdeee"));
  EXPECT_FALSE(ByteMatch(*c, "abe"));
  EXPECT_FALSE(ByteMatch(*c, "aabccce"));
  EXPECT_FALSE(ByteMatch(*c, "aab"));
}

TEST_F(GbnfTest, RecursionThroughRules) {
  const auto c =
      Compile("root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= list | [0-9]");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(ByteMatch(*c, "[]"));
  EXPECT_TRUE(ByteMatch(*c, "[1,[2,[]],[[3]]]"));
  EXPECT_FALSE(ByteMatch(*c, "[1,]"));
  EXPECT_FALSE(ByteMatch(*c, "[[1]"));
}

TEST_F(GbnfTest, PrintedGrammarParsesToTheSameLanguage) {
  const std::string text =
      "root ::= (\"x\" | [a-c\\-\\]]+)? item{2,3}\nitem ::= [^\\n\\\\] | \"\\\\\" [nt]";
  absl::StatusOr<constraint::Grammar> g = constraint::ParseGbnf(text);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string printed = constraint::PrintGbnf(*g);
  const auto original = Compile(text);
  const auto reparsed = Compile(printed);
  ASSERT_NE(reparsed, nullptr) << printed;
  for (const char* s : {"xab", "a-]bc\\n", "x\\t\\nq", "ab", "x", "-]]qq", "\\x\\y"}) {
    EXPECT_EQ(ByteMatch(*original, s), ByteMatch(*reparsed, s)) << s << "\n" << printed;
  }
}

TEST_F(GbnfTest, ErrorsNameTheLineAndColumn) {
  struct Case {
    const char* grammar;
    const char* message;
  };
  const Case cases[] = {
      {"root ::= foo", "grammar: line 1 col 10: undefined rule \"foo\""},
      {"root ::= \"a\"\nx ::= \"b\"\nroot ::= \"c\"",
       "grammar: line 3 col 1: rule \"root\" is defined twice"},
      {"root = \"a\"", "grammar: line 1 col 6: expected \"::=\" after the rule name"},
      {"root ::= \"abc", "grammar: line 1 col 14: unterminated string literal"},
      {"root ::= \"\\q\"", "grammar: line 1 col 11: unknown escape"},
      {"root ::= [abc", "grammar: line 1 col 10: unterminated character class"},
      {"root ::= [z-a]", "grammar: line 1 col 14: character range out of order"},
      {"root ::= (\"a\"", "grammar: line 1 col 14: expected ')'"},
      {"root ::= \"a\"{3,2}", "grammar: line 1 col 17: repetition {m,n} with n < m"},
      {"root ::= \"a\"{99999}", "grammar: line 1 col 14: repetition bound above 10000"},
      {"item ::= \"a\"", "grammar: no rule named \"root\""},
      {"root ::= \"a\" )", "grammar: line 1 col 14: unexpected ')'"},
      {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"",
       "grammar: rule \"expr\" is left-recursive"},
      {"root ::= \"a\" root", "grammar: rule \"root\" matches no text"},
  };
  for (const Case& c : cases) {
    const absl::Status status = CompileError(c.grammar);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.grammar;
    EXPECT_EQ(std::string(status.message()), c.message) << c.grammar;
  }
}

TEST_F(GbnfTest, DeepNestingIsRefusedNotCrashed) {
  std::string deep = "root ::= " + std::string(1000, '(') + "\"a\"" + std::string(1000, ')');
  EXPECT_THAT(std::string(CompileError(deep).message()), HasSubstr("nested too deeply"));
  std::string postfix = "root ::= \"a\"" + std::string(5000, '?');
  EXPECT_FALSE(CompileError(postfix).ok());
}

}  // namespace
}  // namespace loom
