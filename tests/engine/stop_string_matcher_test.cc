#include "engine/stop_string_matcher.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace loom {
namespace {

// Feeds pieces one by one (matching on) and returns what was emitted per piece.
std::vector<std::string> Feed(StopStringMatcher& checker, const std::vector<std::string>& pieces,
                              std::string* stop) {
  std::vector<std::string> out;
  for (const std::string& piece : pieces) {
    StopStringMatcher::Result result = checker.Append(piece, /*match=*/true);
    out.push_back(result.text);
    if (result.stop_string) {
      *stop = *result.stop_string;
      break;
    }
  }
  return out;
}

TEST(StopStringMatcherTest, NoStopStringsEmitsEverythingAtOnce) {
  StopStringMatcher checker({}, false);
  std::string stop;
  EXPECT_EQ(Feed(checker, {"Hel", "lo"}, &stop), (std::vector<std::string>{"Hel", "lo"}));
  EXPECT_EQ(stop, "");
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopStringMatcherTest, MatchAcrossTokensHoldsBackThenCuts) {
  // "a</" may begin "</s>": held; "s" still may; ">" completes the match.
  StopStringMatcher checker({"</s>"}, false);
  std::string stop;
  EXPECT_EQ(Feed(checker, {"a</", "s", ">tail"}, &stop), (std::vector<std::string>{"a", "", ""}));
  EXPECT_EQ(stop, "</s>");
}

TEST(StopStringMatcherTest, IncludeStopStringKeepsItButDropsWhatFollows) {
  StopStringMatcher checker({"END"}, true);
  std::string stop;
  EXPECT_EQ(Feed(checker, {"x E", "NDy"}, &stop), (std::vector<std::string>{"x ", "END"}));
  EXPECT_EQ(stop, "END");
}

TEST(StopStringMatcherTest, FalseStartIsReleased) {
  // "</" held back, then "x" shows it was not "</s>".
  StopStringMatcher checker({"</s>"}, false);
  std::string stop;
  EXPECT_EQ(Feed(checker, {"a</", "x", "b"}, &stop), (std::vector<std::string>{"a", "</x", "b"}));
  EXPECT_EQ(stop, "");
}

TEST(StopStringMatcherTest, OverlappingPrefixHoldsLongestTail) {
  // "aab" ends with "ab", a prefix of "abc"; the first "a" is safe.
  StopStringMatcher checker({"abc"}, false);
  std::string stop;
  EXPECT_EQ(Feed(checker, {"aab", "c"}, &stop), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(stop, "abc");
}

TEST(StopStringMatcherTest, EarliestMatchWinsAmongSeveral) {
  StopStringMatcher checker({"world", "lo w"}, false);
  std::string stop;
  EXPECT_EQ(Feed(checker, {"hello world"}, &stop), (std::vector<std::string>{"hel"}));
  EXPECT_EQ(stop, "lo w");
}

TEST(StopStringMatcherTest, FlushReleasesHeldText) {
  StopStringMatcher checker({"STOP"}, false);
  EXPECT_EQ(checker.Append("go ST", true).text, "go ");
  EXPECT_EQ(checker.Flush(), "ST");
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopStringMatcherTest, NotMatchingBeforeMinTokensButCompletingAfter) {
  StopStringMatcher checker({"STOP"}, false);
  // A whole match while matching is off is plain text.
  StopStringMatcher::Result r1 = checker.Append("STOP S", false);
  EXPECT_EQ(r1.text, "STOP ");
  EXPECT_FALSE(r1.stop_string);
  // The held "S" begins a match that completes once matching is on.
  StopStringMatcher::Result r2 = checker.Append("TOP!", true);
  EXPECT_EQ(r2.text, "");
  EXPECT_EQ(r2.stop_string, "STOP");
}

TEST(StopStringMatcherTest, MultiByteStopStringHeldOnCharacterBoundary) {
  // "é" is 2 bytes; the stop string "éé" may begin at the last "é".
  StopStringMatcher checker({"\xC3\xA9\xC3\xA9"}, false);
  EXPECT_EQ(checker.Append("a\xC3\xA9", true).text, "a");
  StopStringMatcher::Result r = checker.Append("\xC3\xA9", true);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.stop_string, "\xC3\xA9\xC3\xA9");
}

TEST(StopStringMatcherTest, EmptyStopStringsAreIgnored) {
  StopStringMatcher checker({""}, false);
  StopStringMatcher::Result r = checker.Append("abc", true);
  EXPECT_EQ(r.text, "abc");
  EXPECT_FALSE(r.stop_string);
}

}  // namespace
}  // namespace loom
