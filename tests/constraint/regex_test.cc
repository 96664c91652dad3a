// Regular expressions: the whole output must match (full match), checked byte
// by byte against the mask; unsupported constructs fail with their offset.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "constraint/constraint_compiler.h"
#include "gtest/gtest.h"
#include "tests/constraint/constraint_test_util.h"

namespace loom {
namespace {

using ::loom::testing::ByteMatch;
using ::loom::testing::ByteVocabulary;

struct RegexCase {
  const char* pattern;
  std::vector<std::string> matches;
  std::vector<std::string> non_matches;
};

class RegexTest : public ::testing::TestWithParam<RegexCase> {};

TEST_P(RegexTest, FullMatch) {
  const RegexCase& c = GetParam();
  auto compiler = *ConstraintCompiler::Create(ByteVocabulary());
  absl::StatusOr<std::shared_ptr<const TokenConstraint>> compiled =
      compiler->Compile({ConstraintKind::kRegex, c.pattern, {}});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (const std::string& s : c.matches) EXPECT_TRUE(ByteMatch(**compiled, s)) << s;
  for (const std::string& s : c.non_matches) EXPECT_FALSE(ByteMatch(**compiled, s)) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, RegexTest,
    ::testing::Values(
        RegexCase{"abc", {"abc"}, {"ab", "abcd", "", "abd"}},
        RegexCase{"^a|b$", {"a", "b"}, {"ab", ""}},
        RegexCase{"\\d{3}-\\d{4}", {"555-1234"}, {"55-1234", "555-12345", "abc-defg"}},
        RegexCase{"[A-Z][a-z]+( [A-Z][a-z]+)*", {"Ada", "Ada Lovelace"}, {"ada", "Ada ", "A"}},
        RegexCase{"(?:ab|cd)+e?", {"ab", "cdabe", "abab"}, {"", "e", "abc"}},
        RegexCase{"(?P<year>\\d{4})-(?<m>0[1-9]|1[0-2])", {"2024-01", "1999-12"}, {"2024-13"}},
        RegexCase{"\\w+@\\w+\\.(com|org)", {"a_b@c1.com", "x@y.org"}, {"a@b.net", "@b.com"}},
        RegexCase{"\\s*\\S+\\s*", {"x", "  xy\t"}, {"", "  ", "a b"}},
        RegexCase{"[^abc]{2}", {"de", "\xC3\xA9z"}, {"ad", "d", "def"}},
        RegexCase{"a.c",
                  {"abc",
                   "a\xE2\x82\xAC"
                   "c"},
                  {"a\nc", "ac"}},
        RegexCase{"[\\d\\-.]+", {"1-2.3", "..."}, {"", "a"}},
        RegexCase{"\\$\\(\\)\\[\\]\\{\\}\\*\\+\\?\\.\\^\\|\\\\", {"$()[]{}*+?.^|\\"}, {"$"}},
        RegexCase{"x{2,}y{0,1}z{3}", {"xxzzz", "xxxxyzzz"}, {"xzzz", "xxyyzzz"}},
        RegexCase{"\\u00e9\\x41\\u{1F600}",
                  {"\xC3\xA9"
                   "A\xF0\x9F\x98\x80"},
                  {"eA"}},
        RegexCase{"(a|ab)(c|bcd)", {"abcd", "ac", "abc"}, {"abd"}},
        RegexCase{"[]a]+", {"]", "a]a"}, {"b"}},
        RegexCase{"(true|false|null|-?[0-9]+)", {"true", "-12", "null"}, {"True", "1.5"}},
        RegexCase{"a*?b+?", {"b", "aabb"}, {"a", ""}}));

TEST(RegexErrorTest, UnsupportedConstructsNameTheirOffset) {
  auto compiler = *ConstraintCompiler::Create(ByteVocabulary());
  struct Case {
    const char* pattern;
    const char* message;
  };
  const Case cases[] = {
      {"abc)def", "regex: at offset 3: unbalanced ')'"},
      {"ab(cd", "regex: at offset 2: unbalanced '('"},
      {"(a)\\1", "regex: at offset 3: backreferences and word boundaries are not supported"},
      {"a(?=b)", "regex: at offset 1: lookarounds and inline flags are not supported"},
      {"\\bword", "regex: at offset 0: backreferences and word boundaries are not supported"},
      {"a^b", "regex: at offset 1: anchors are only supported at the start and the end"},
      {"*a", "regex: at offset 0: quantifier without anything to repeat"},
      {"[a-", "regex: at offset 0: unterminated character class"},
      {"[z-a]", "regex: at offset 4: character range out of order"},
      {"a{5,2}", "regex: at offset 1: repetition {m,n} with n < m"},
      {"\\q", "regex: at offset 0: unknown escape \\q"},
      {"[[:alpha:]]", "regex: at offset 1: POSIX classes are not supported"},
  };
  for (const Case& c : cases) {
    const absl::Status status = compiler->Compile({ConstraintKind::kRegex, c.pattern, {}}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.pattern;
    EXPECT_EQ(std::string(status.message()), c.message) << c.pattern;
  }
}

}  // namespace
}  // namespace loom
