#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct HttpResponse {
  int status = 0;
  std::string head;
  std::string body;
};

// One HTTP/1.0 request to 127.0.0.1:port; the server closes the connection
// after the response, so reading to EOF yields all of it.
HttpResponse Request(int port, const std::string& method, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request = absl::StrCat(method, " ", path, " HTTP/1.0\r\n\r\n");
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) raw.append(buffer, n);
  close(fd);
  HttpResponse response;
  const size_t split = raw.find("\r\n\r\n");
  response.head = raw.substr(0, split);
  if (split != std::string::npos) response.body = raw.substr(split + 4);
  if (raw.size() > 12) response.status = std::stoi(raw.substr(9, 3));
  return response;
}

// One server for the suite.
class HttpServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    HttpHandlers handlers{
        .metrics = [] { return absl::StrCat("loom_scrapes ", ++scrapes_, "\n"); },
        .live = [] { return live_.load(); },
        .ready = [] { return ready_.load(); },
    };
    auto server = HttpServer::Start({.host = "127.0.0.1", .port = 0}, std::move(handlers));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value().release();
    ASSERT_GT(server_->port(), 0);
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    live_ = true;
    ready_ = false;
  }

  static inline std::atomic<int> scrapes_ = 0;
  static inline std::atomic<bool> live_ = true;
  static inline std::atomic<bool> ready_ = false;
  static inline HttpServer* server_ = nullptr;
};

TEST_F(HttpServerTest, ServesMetricsText) {
  const int before = scrapes_;
  const HttpResponse first = Request(server_->port(), "GET", "/metrics");
  EXPECT_EQ(first.status, 200);
  EXPECT_THAT(first.head, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_EQ(first.body, absl::StrCat("loom_scrapes ", before + 1, "\n"));
  EXPECT_EQ(Request(server_->port(), "GET", "/metrics").body,
            absl::StrCat("loom_scrapes ", before + 2, "\n"));
}

TEST_F(HttpServerTest, ProbesFollowTheirCallbacks) {
  EXPECT_EQ(Request(server_->port(), "GET", "/healthz").status, 200);
  EXPECT_EQ(Request(server_->port(), "GET", "/readyz").status, 503);
  ready_ = true;
  EXPECT_EQ(Request(server_->port(), "GET", "/readyz").status, 200);
  live_ = false;
  EXPECT_EQ(Request(server_->port(), "GET", "/healthz").status, 503);
  const HttpResponse head = Request(server_->port(), "HEAD", "/readyz");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
}

TEST_F(HttpServerTest, RejectsOtherPathsAndMethods) {
  const int before = scrapes_;
  EXPECT_EQ(Request(server_->port(), "GET", "/metricsx").status, 404);
  EXPECT_EQ(Request(server_->port(), "GET", "/").status, 404);
  EXPECT_EQ(Request(server_->port(), "POST", "/metrics").status, 405);
  EXPECT_EQ(scrapes_.load(), before);
}

TEST_F(HttpServerTest, ReportsATakenPort) {
  auto second = HttpServer::Start({.host = "127.0.0.1", .port = server_->port()},
                                  {.metrics = [] { return std::string(); },
                                   .live = [] { return true; },
                                   .ready = [] { return true; }});
  EXPECT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), StartsWith("cannot serve HTTP on"));
}

TEST(HttpServerStartTest, NeedsEveryHandler) {
  EXPECT_EQ(HttpServer::Start({.port = 0}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
