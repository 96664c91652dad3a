// The pieces of `loom bench`'s HTTP backends that need no server: the SSE
// reader over arbitrary splits of a body, and --target URLs.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/http_client.h"
#include "tools/bench/sse.h"

namespace loom::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kBody[] =
    "data: {\"a\": 1}\n\n"
    ": a comment\n\n"
    "event: message\r\ndata: {\"b\": 2}\r\n\r\n"
    "data: line one\ndata: line two\n\n"
    "data: [DONE]\n\n";

TEST(SseReaderTest, WholeBody) {
  SseReader reader;
  EXPECT_THAT(reader.Feed(kBody),
              ElementsAre("{\"a\": 1}", "{\"b\": 2}", "line one\nline two", "[DONE]"));
}

TEST(SseReaderTest, EverySplitGivesTheSameEvents) {
  const std::string body = kBody;
  SseReader whole;
  const std::vector<std::string> expected = whole.Feed(body);
  for (size_t cut = 0; cut <= body.size(); ++cut) {
    SseReader reader;
    std::vector<std::string> events = reader.Feed(body.substr(0, cut));
    for (std::string& e : reader.Feed(body.substr(cut))) events.push_back(std::move(e));
    EXPECT_EQ(events, expected) << "cut at " << cut;
  }
  SseReader bytewise;
  std::vector<std::string> events;
  for (char c : body) {
    for (std::string& e : bytewise.Feed(std::string(1, c))) events.push_back(std::move(e));
  }
  EXPECT_EQ(events, expected);
}

TEST(SseReaderTest, AnUnfinishedEventWaits) {
  SseReader reader;
  EXPECT_TRUE(reader.Feed("data: {\"a\"").empty());
  EXPECT_TRUE(reader.Feed(": 1}\n").empty());
  EXPECT_THAT(reader.Feed("\n"), ElementsAre("{\"a\": 1}"));
}

TEST(ParseHttpTargetTest, HostPortAndBasePath) {
  absl::StatusOr<HttpTarget> t = ParseHttpTarget("http://127.0.0.1:8080");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, "8080");
  EXPECT_EQ(t->base_path, "");

  t = ParseHttpTarget("localhost:18080/v1/");  // the SDK's base_url, scheme left out
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "localhost");
  EXPECT_EQ(t->port, "18080");
  EXPECT_EQ(t->base_path, "");

  t = ParseHttpTarget("http://gateway/llama/v1");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->port, "80");
  EXPECT_EQ(t->base_path, "/llama");
}

TEST(ParseHttpTargetTest, BadTargetsNameTheProblem) {
  EXPECT_THAT(ParseHttpTarget("https://x:443").status().message(), HasSubstr("https"));
  EXPECT_THAT(ParseHttpTarget("http://x:0").status().message(), HasSubstr("[1, 65535]"));
  EXPECT_THAT(ParseHttpTarget("http://x:port").status().message(), HasSubstr("[1, 65535]"));
  EXPECT_THAT(ParseHttpTarget("http://:80").status().message(), HasSubstr("host:port"));
}

}  // namespace
}  // namespace loom::bench
