#include "tool_calls/json_scan.h"

#include <string>

#include "gtest/gtest.h"

namespace loom {
namespace {

JsonObjectScanner ScanAll(std::string_view text) {
  JsonObjectScanner scanner;
  scanner.Scan(text);
  return scanner;
}

std::string ValueOf(std::string_view text, const JsonMember& member) {
  return std::string(text.substr(member.value_begin, member.value_end - member.value_begin));
}

TEST(JsonObjectScannerTest, MembersAndTheirValueSpans) {
  const std::string text =
      R"({"name": "f", "arguments": {"a": [1, "}]"], "b": null}, "n": -1.5e3})";
  const JsonObjectScanner scan = ScanAll(text);
  ASSERT_TRUE(scan.valid());
  ASSERT_TRUE(scan.closed());
  EXPECT_EQ(scan.end(), text.size());
  ASSERT_EQ(scan.members().size(), 3u);
  EXPECT_EQ(ValueOf(text, *scan.Find("name")), "\"f\"");
  EXPECT_EQ(ValueOf(text, *scan.Find("arguments")), R"({"a": [1, "}]"], "b": null})");
  EXPECT_EQ(ValueOf(text, *scan.Find("n")), "-1.5e3");
  EXPECT_EQ(scan.Find("x"), nullptr);
}

TEST(JsonObjectScannerTest, PrefixesAreValidAndIncomplete) {
  const std::string text = R"({"name": "get", "arguments": {"city": "Par)";
  const JsonObjectScanner scan = ScanAll(text);
  EXPECT_TRUE(scan.valid());
  EXPECT_FALSE(scan.closed());
  ASSERT_EQ(scan.members().size(), 2u);
  EXPECT_TRUE(scan.members()[0].complete);
  EXPECT_FALSE(scan.members()[1].complete);
  EXPECT_EQ(ValueOf(text, scan.members()[1]), R"({"city": "Par)");
}

TEST(JsonObjectScannerTest, ResumingGivesTheSameScanAsOnePass) {
  const std::string text = R"({ "a" : true , "b": [{"c": "d\"}"}], "e": 12 })";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    JsonObjectScanner scanner;
    scanner.Scan(std::string_view(text).substr(0, cut));
    scanner.Scan(text);
    const JsonObjectScanner whole = ScanAll(text);
    ASSERT_TRUE(scanner.closed()) << cut;
    ASSERT_EQ(scanner.members().size(), whole.members().size()) << cut;
    for (size_t i = 0; i < whole.members().size(); ++i) {
      EXPECT_EQ(scanner.members()[i].key, whole.members()[i].key);
      EXPECT_EQ(scanner.members()[i].value_begin, whole.members()[i].value_begin);
      EXPECT_EQ(scanner.members()[i].value_end, whole.members()[i].value_end) << cut;
    }
  }
}

TEST(JsonObjectScannerTest, NotJson) {
  for (const char* text : {"[1]", "{a: 1}", R"({"a" 1})", R"({"a": tru })", R"({"a": 1 2})",
                           R"({"a": [1}})", R"({"a": x})", "{\"a\": \"\x01\"}"}) {
    EXPECT_FALSE(ScanAll(text).valid()) << text;
  }
  EXPECT_TRUE(ScanAll("{}").closed());
  EXPECT_FALSE(ScanAll(R"({"a": 1,})").valid());
}

TEST(JsonObjectScannerTest, NestingIsBounded) {
  const std::string deep = "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_FALSE(ScanAll(deep).valid());
  const std::string shallow = "{\"a\": " + std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_TRUE(ScanAll(shallow).closed());
}

}  // namespace
}  // namespace loom
