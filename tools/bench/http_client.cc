#include "tools/bench/http_client.h"

#include <array>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/mutex.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http.hpp"

namespace loom::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

absl::StatusOr<HttpTarget> ParseHttpTarget(absl::string_view url) {
  absl::string_view rest = url;
  if (absl::StartsWith(rest, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target=", url, ": https is not supported; use http://host:port"));
  }
  absl::ConsumePrefix(&rest, "http://");
  HttpTarget target;
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    absl::string_view path = absl::StripSuffix(rest.substr(slash), "/");
    path = absl::StripSuffix(path, "/v1");
    target.base_path = std::string(path);
  }
  const size_t colon = authority.rfind(':');
  target.host = std::string(authority.substr(0, colon));
  target.port = colon == absl::string_view::npos ? "80" : std::string(authority.substr(colon + 1));
  uint32_t port = 0;
  if (target.host.empty() || !absl::SimpleAtoi(target.port, &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target=", url, ": expected http://host:port with a port in [1, 65535]"));
  }
  return target;
}

namespace {

// One request on its own connection: connect, write, read the head, then read
// the body piece by piece into a fixed buffer and hand each piece on.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(net::io_context& io, http::request<http::string_body> request,
           HttpClient::StreamHandlers handlers, std::optional<absl::Duration> timeout)
      : stream_(io),
        request_(std::move(request)),
        handlers_(std::move(handlers)),
        timeout_(timeout) {}

  void Run(const tcp::resolver::results_type& endpoints) {
    if (timeout_.has_value()) stream_.expires_after(absl::ToChronoNanoseconds(*timeout_));
    stream_.async_connect(
        endpoints, [self = shared_from_this()](error_code ec, const tcp::endpoint&) {
          if (ec) return self->Fail("connect", ec);
          http::async_write(self->stream_, self->request_, [self](error_code ec, size_t) {
            if (ec) return self->Fail("write", ec);
            self->parser_.body_limit(boost::none);
            http::async_read_header(self->stream_, self->buffer_, self->parser_,
                                    [self](error_code ec, size_t) { self->OnHeader(ec); });
          });
        });
  }

 private:
  void OnHeader(error_code ec) {
    if (ec) return Fail("read", ec);
    handlers_.on_status(static_cast<int>(parser_.get().result_int()));
    ReadSome();
  }

  void ReadSome() {
    if (parser_.is_done()) {
      handlers_.on_done(absl::OkStatus());
      return;
    }
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    http::async_read_some(stream_, buffer_, parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(error_code ec) {
    const size_t n = chunk_.size() - parser_.get().body().size;
    if (n > 0) handlers_.on_body(absl::string_view(chunk_.data(), n));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return Fail("read", ec);
    ReadSome();
  }

  void Fail(absl::string_view stage, error_code ec) {
    handlers_.on_done(absl::UnavailableError(absl::StrCat("HTTP ", stage, ": ", ec.message())));
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response_parser<http::buffer_body> parser_;
  std::array<char, 16384> chunk_;
  HttpClient::StreamHandlers handlers_;
  std::optional<absl::Duration> timeout_;
};

}  // namespace

struct HttpClient::Impl {
  HttpTarget target;
  net::io_context io;
  net::executor_work_guard<net::io_context::executor_type> work{io.get_executor()};
  tcp::resolver::results_type endpoints;
  std::thread thread;

  http::request<http::string_body> Request(absl::string_view method, absl::string_view path,
                                           std::string body) const {
    http::request<http::string_body> request(method == "GET" ? http::verb::get : http::verb::post,
                                             absl::StrCat(target.base_path, path), 11);
    request.set(http::field::host, absl::StrCat(target.host, ":", target.port));
    request.set(http::field::user_agent, "loom-bench");
    request.keep_alive(false);
    if (method != "GET") {
      request.set(http::field::content_type, "application/json");
      request.body() = std::move(body);
      request.prepare_payload();
    }
    return request;
  }

  void Start(http::request<http::string_body> request, StreamHandlers handlers,
             std::optional<absl::Duration> timeout) {
    auto exchange =
        std::make_shared<Exchange>(io, std::move(request), std::move(handlers), timeout);
    // Started on the I/O thread, which alone touches the exchange from then on.
    net::post(io, [exchange, this] { exchange->Run(endpoints); });
  }
};

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpTarget& target) {
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  error_code ec;
  tcp::resolver resolver(impl->io);
  impl->endpoints = resolver.resolve(target.host, target.port, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", target.host, ":", target.port, ": ", ec.message()));
  }
  impl->thread = std::thread([io = &impl->io] { io->run(); });
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpClient::~HttpClient() {
  impl_->work.reset();
  impl_->io.stop();
  impl_->thread.join();
}

absl::StatusOr<HttpClient::Response> HttpClient::Fetch(absl::string_view method,
                                                       absl::string_view path, std::string body,
                                                       absl::Duration timeout) {
  // Filled on the I/O thread; read here once done (loom::Mutex, which the
  // tsan build sees, unlike Debian's absl::Notification).
  struct Result {
    Mutex mu;
    CondVar cv;
    bool done = false;
    Response response;
    absl::Status status;
  };
  auto result = std::make_shared<Result>();
  StreamHandlers handlers{
      .on_status = [result](int status) { result->response.status = status; },
      .on_body =
          [result](absl::string_view piece) {
            result->response.body.append(piece.data(), piece.size());
          },
      .on_done =
          [result](absl::Status status) {
            MutexLock lock(result->mu);
            result->status = std::move(status);
            result->done = true;
            result->cv.NotifyAll();
          },
  };
  impl_->Start(impl_->Request(method, path, std::move(body)), std::move(handlers), timeout);
  MutexLock lock(result->mu);
  while (!result->done) result->cv.Wait(result->mu);
  if (!result->status.ok()) return result->status;
  return std::move(result->response);
}

void HttpClient::Stream(absl::string_view path, std::string body, StreamHandlers handlers) {
  impl_->Start(impl_->Request("POST", path, std::move(body)), std::move(handlers), std::nullopt);
}

}  // namespace loom::bench
