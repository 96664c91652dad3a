#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/probe_routes.h"

namespace loom {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A blocking test client on a raw socket, so that the tests control exactly
// what goes over the wire (pipelining, partial heads, disconnects).
class Client {
 public:
  explicit Client(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~Client() { Close(); }

  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  void Send(std::string_view data) {
    ASSERT_EQ(write(fd_, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }

  // Reads more bytes; false at EOF or error.
  bool Fill() {
    char buffer[4096];
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n <= 0) return false;
    buffered_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  // True when the server closed the connection (EOF) with nothing more sent.
  bool ReadsEof() {
    while (Fill()) {
    }
    return true;
  }

  struct Response {
    int status = 0;
    std::string head;
    std::string body;
    bool chunked = false;
  };

  // One response: by Content-Length, chunked, or until EOF. status 0 when
  // the connection closed before a whole head arrived.
  Response Read(bool head_only_body = false) {
    Response response;
    size_t end;
    while ((end = buffered_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return response;
    }
    response.head = buffered_.substr(0, end + 2);
    buffered_.erase(0, end + 4);
    response.status = std::stoi(response.head.substr(9, 3));
    if (head_only_body || response.status == 100) return response;
    const std::string lower = Lower(response.head);
    if (lower.find("transfer-encoding: chunked") != std::string::npos) {
      response.chunked = true;
      ReadChunks(response.body);
    } else if (size_t at = lower.find("content-length: "); at != std::string::npos) {
      size_t length = 0;
      EXPECT_TRUE(
          absl::SimpleAtoi(lower.substr(at + 16, lower.find("\r\n", at) - at - 16), &length));
      while (buffered_.size() < length && Fill()) {
      }
      response.body = buffered_.substr(0, length);
      buffered_.erase(0, length);
    } else {
      while (Fill()) {
      }
      response.body = std::move(buffered_);
      buffered_.clear();
    }
    return response;
  }

  Response Get(const std::string& path, const std::string& method = "GET") {
    Send(absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: test\r\n\r\n"));
    return Read(method == "HEAD");
  }

 private:
  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  void ReadChunks(std::string& body) {
    while (true) {
      size_t line;
      while ((line = buffered_.find("\r\n")) == std::string::npos) {
        if (!Fill()) return;
      }
      const size_t size = std::stoul(buffered_.substr(0, line), nullptr, 16);
      while (buffered_.size() < line + 2 + size + 2) {
        if (!Fill()) return;
      }
      body.append(buffered_, line + 2, size);
      buffered_.erase(0, line + 2 + size + 2);
      if (size == 0) return;
    }
  }

  int fd_;
  bool connected_ = false;
  std::string buffered_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer({}); }

  void StartServer(HttpServerOptions options, std::vector<HttpServer::Route> extra = {}) {
    server_.reset();
    options.host = "127.0.0.1";
    options.port = 0;
    std::vector<HttpServer::Route> routes =
        ProbeRoutes({.metrics = [this] { return absl::StrCat("loom_scrapes ", ++scrapes_, "\n"); },
                     .live = [this] { return live_.load(); },
                     .ready = [this] { return ready_.load(); }});
    for (HttpServer::Route& route : extra) routes.push_back(std::move(route));
    auto server =
        HttpServer::Start(options, std::move(routes), [this](std::string_view route, int code) {
          recorded_.fetch_add(1);
          if (route == "other") others_.fetch_add(1);
          (void)code;
        });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  int port() const { return server_->port(); }

  std::atomic<int> scrapes_{0};
  std::atomic<bool> live_{true};
  std::atomic<bool> ready_{false};
  std::atomic<int> recorded_{0};
  std::atomic<int> others_{0};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, ServesMetricsText) {
  Client client(port());
  const Client::Response first = client.Get("/metrics");
  EXPECT_EQ(first.status, 200);
  EXPECT_THAT(first.head, HasSubstr("text/plain; version=0.0.4"));
  EXPECT_EQ(first.body, "loom_scrapes 1\n");
  // The same keep-alive connection serves the next request.
  EXPECT_EQ(client.Get("/metrics").body, "loom_scrapes 2\n");
  EXPECT_EQ(server_->open_connections(), 1);
}

TEST_F(HttpServerTest, ProbesFollowTheirCallbacks) {
  Client client(port());
  EXPECT_EQ(client.Get("/healthz").status, 200);
  EXPECT_EQ(client.Get("/readyz").status, 503);
  ready_ = true;
  EXPECT_EQ(client.Get("/readyz").status, 200);
  EXPECT_EQ(client.Get("/health").status, 200);
  live_ = false;
  EXPECT_EQ(client.Get("/healthz").status, 503);
  EXPECT_EQ(client.Get("/health").status, 503);
  const Client::Response head = client.Get("/readyz", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_THAT(head.head, HasSubstr("Content-Length"));
  // HEAD sent no body: the next response on the connection parses.
  EXPECT_EQ(client.Get("/healthz").status, 503);
}

TEST_F(HttpServerTest, RejectsOtherPathsAndMethods) {
  Client client(port());
  const Client::Response missing = client.Get("/metricsx");
  EXPECT_EQ(missing.status, 404);
  // The port's own errors have the routes' JSON error shape.
  EXPECT_THAT(missing.head, HasSubstr("Content-Type: application/json"));
  EXPECT_EQ(missing.body,
            "{\"error\":{\"code\":null,\"message\":\"no route for /metricsx\",\"param\":null,"
            "\"type\":\"invalid_request_error\"}}\n");
  EXPECT_EQ(client.Get("/").status, 404);
  const Client::Response post = client.Get("/metrics", "POST");
  EXPECT_EQ(post.status, 405);
  EXPECT_THAT(post.head, HasSubstr("Allow: GET"));
  EXPECT_THAT(post.body, HasSubstr("\"message\":\"method not allowed for /metrics\""));
  EXPECT_EQ(scrapes_.load(), 0);
  EXPECT_EQ(others_.load(), 2);  // the two 404s; the 405 is /metrics' own
}

TEST_F(HttpServerTest, AnswersPipelinedRequestsInOrder) {
  Client client(port());
  client.Send(
      "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
      "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(client.Read().body, "loom_scrapes 1\n");
  EXPECT_EQ(client.Read().body, "ok\n");
  const Client::Response last = client.Read();
  EXPECT_EQ(last.body, "loom_scrapes 2\n");
  EXPECT_THAT(last.head, HasSubstr("Connection: close"));
  EXPECT_TRUE(client.ReadsEof());
}

TEST_F(HttpServerTest, ReportsATakenPort) {
  auto second = HttpServer::Start({.host = "127.0.0.1", .port = port()}, {});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), StartsWith("cannot serve HTTP on"));
}

TEST_F(HttpServerTest, LimitsHeadAndBodySizes) {
  StartServer({.max_header_bytes = 1024, .max_body_bytes = 100},
              {{"POST", "/echo", [](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
                  exchange->Respond(200, "text/plain", request.body);
                }}});
  {
    Client client(port());
    client.Send(absl::StrCat("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"));
    EXPECT_EQ(client.Read().body, "hello");
  }
  {
    Client client(port());
    client.Send(
        absl::StrCat("GET /healthz HTTP/1.1\r\nX-Big: ", std::string(2000, 'a'), "\r\n\r\n"));
    EXPECT_EQ(client.Read().status, 431);
    EXPECT_TRUE(client.ReadsEof());
  }
  {
    Client client(port());
    client.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 101\r\n\r\n");
    const Client::Response over = client.Read();
    EXPECT_EQ(over.status, 413);
    EXPECT_THAT(over.body,
                HasSubstr("\"message\":\"the request body is over --http_max_body_bytes=100\""));
    EXPECT_TRUE(client.ReadsEof());
  }
  {
    Client client(port());
    client.Send("this is not HTTP\r\n\r\n");
    EXPECT_EQ(client.Read().status, 400);
  }
}

// Only "chunked" frames a body besides Content-Length: another transfer
// coding, or chunked before another, is a 400 and the connection closes, so
// that a body the server cannot delimit is never read as the next request.
TEST_F(HttpServerTest, AcceptsOnlyChunkedTransferEncoding) {
  StartServer({},
              {{"POST", "/echo", [](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
                  exchange->Respond(200, "text/plain", request.body);
                }}});
  {
    Client client(port());
    client.Send(
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n0\r\n\r\n");
    EXPECT_EQ(client.Read().body, "hello");
  }
  for (const char* coding : {"chunked, identity", "gzip", "identity", "gzip, chunked, identity"}) {
    SCOPED_TRACE(coding);
    Client client(port());
    client.Send(absl::StrCat("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: ", coding,
                             "\r\n\r\nGET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
    const Client::Response refused = client.Read();
    EXPECT_EQ(refused.status, 400);
    EXPECT_THAT(refused.body, HasSubstr("Transfer-Encoding"));
    EXPECT_TRUE(client.ReadsEof());
  }
  {
    Client client(port());
    client.Send(
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    EXPECT_EQ(client.Read().status, 400);
  }
}

TEST_F(HttpServerTest, ClosesConnectionsWhoseHeadOrBodyDoesNotArrive) {
  StartServer({.header_timeout = absl::Milliseconds(100), .body_timeout = absl::Milliseconds(100)},
              {{"POST", "/echo", [](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
                  exchange->Respond(200, "text/plain", request.body);
                }}});
  Client idle(port());
  Client half_head(port());
  half_head.Send("GET /healthz HTTP/1.1\r\n");
  Client half_body(port());
  half_body.Send("POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  // Each read blocks until the server gives up on the connection.
  EXPECT_TRUE(idle.ReadsEof());
  EXPECT_EQ(half_head.Read().status, 0);
  EXPECT_EQ(half_body.Read().status, 0);
}

TEST_F(HttpServerTest, ContinuesAnExpectingUpload) {
  StartServer({},
              {{"POST", "/echo", [](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
                  exchange->Respond(200, "text/plain", request.body);
                }}});
  Client client(port());
  client.Send(
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(client.Read().status, 100);
  client.Send("abc");
  EXPECT_EQ(client.Read().body, "abc");
}

TEST_F(HttpServerTest, StreamsChunksPostedFromOtherThreads) {
  std::vector<std::thread> threads;
  StartServer({},
              {{"GET", "/stream", [&threads](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
                  exchange->StartStream(200, "text/event-stream");
                  exchange->Write("data: 1\n\n");
                  // As an engine sink would: from another thread, via Post.
                  threads.emplace_back([exchange] {
                    for (int i = 2; i <= 3; ++i) {
                      EXPECT_TRUE(exchange->Post(
                          [exchange, i] { exchange->Write(absl::StrCat("data: ", i, "\n\n")); }));
                    }
                    EXPECT_TRUE(exchange->Post([exchange] { exchange->End(); }));
                  });
                }}});
  Client client(port());
  const Client::Response response = client.Get("/stream");
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(response.status, 200);
  EXPECT_TRUE(response.chunked);
  EXPECT_THAT(response.head, HasSubstr("Content-Type: text/event-stream"));
  EXPECT_EQ(response.body, "data: 1\n\ndata: 2\n\ndata: 3\n\n");
  // The connection is kept after a chunked response.
  EXPECT_EQ(client.Get("/healthz").status, 200);
}

TEST_F(HttpServerTest, TellsTheHandlerWhenTheClientDisconnects) {
  std::promise<void> closed;
  std::promise<std::shared_ptr<HttpExchange>> started;
  StartServer({}, {{"GET", "/stream", [&](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
                      exchange->StartStream(200, "text/event-stream");
                      exchange->OnClose([&closed] { closed.set_value(); });
                      started.set_value(exchange);
                    }}});
  auto client = std::make_unique<Client>(port());
  client->Send("GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
  const std::shared_ptr<HttpExchange> exchange = started.get_future().get();
  client.reset();  // the client goes away mid-stream
  closed.get_future().wait();
  // The exchange is closed: either its session is gone (Post refuses) or, on
  // the strand, it says so.
  std::promise<bool> is_closed;
  if (exchange->Post([&] { is_closed.set_value(exchange->closed()); })) {
    EXPECT_TRUE(is_closed.get_future().get());
  }
}

TEST_F(HttpServerTest, AnswersProbesWhileManyConnectionsIdle) {
  StartServer({.threads = 1});
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<Client>(port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  idle.back()->Send("GET /healthz HTTP/1.1\r\n");  // and one with half a head
  Client probe(port());
  EXPECT_EQ(probe.Get("/healthz").status, 200);
}

TEST_F(HttpServerTest, RefusesConnectionsOverTheCap) {
  StartServer({.max_connections = 2});
  Client first(port());
  Client second(port());
  EXPECT_EQ(first.Get("/healthz").status, 200);
  EXPECT_EQ(second.Get("/healthz").status, 200);
  Client third(port());
  const Client::Response refused = third.Read();
  EXPECT_EQ(refused.status, 503);
  EXPECT_THAT(refused.body, HasSubstr("\"message\":\"too many connections\""));
  first.Close();
  // Once the server has seen the close, a new connection is served.
  for (;;) {
    Client again(port());
    if (again.Get("/healthz").status == 200) break;
  }
}

TEST_F(HttpServerTest, StopLetsAStreamInFlightFinishThenRefusesPosts) {
  std::promise<std::shared_ptr<HttpExchange>> started;
  StartServer({}, {{"GET", "/stream", [&](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
                      exchange->StartStream(200, "text/event-stream");
                      started.set_value(exchange);
                    }}});
  Client client(port());
  client.Send("GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
  const std::shared_ptr<HttpExchange> exchange = started.get_future().get();
  std::thread stopper([this] { server_->Stop(absl::Now() + absl::Seconds(30)); });
  ASSERT_TRUE(exchange->Post([exchange] {
    exchange->Write("data: last\n\n");
    exchange->End();
  }));
  const Client::Response response = client.Read();
  stopper.join();
  EXPECT_EQ(response.body, "data: last\n\n");
  EXPECT_FALSE(exchange->Post([] {}));
  EXPECT_TRUE(client.ReadsEof());
}

}  // namespace
}  // namespace loom
