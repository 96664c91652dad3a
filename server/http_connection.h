// Internal to loom_http (server/http_server.cc, server/http_connection.cc):
// the server's state (HttpServer::Impl: listener, routes, the sessions'
// registry) and one connection's (Session: reading requests, writing
// responses) with the HttpExchange a handler answers through. Nothing outside
// loom_http includes it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "server/file_stamp.h"
#include "server/http_server.h"

namespace loom {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

// The JSON body of an error the HTTP port answers before any route runs (no
// route, method not allowed, a head or body over its limit, a malformed
// request, too many connections, a handler's exception): OpenAI's error
// shape, as the routes' own errors, so that every client of the port parses
// one format.
std::string TransportErrorBody(int status, std::string_view message);

// Whether the server still runs handlers. Stop closes it before the I/O
// threads end, so a late Post from the engine is dropped instead of queued on
// an io_context that no one runs any more.
class PostGate {
 public:
  // Runs post() under the gate's lock when open; false when closed.
  template <typename F>
  bool PostIfOpen(F&& post) {
    MutexLock lock(mu_);
    if (!open_) {
      return false;
    }
    return post();
  }
  void Close() {
    MutexLock lock(mu_);
    open_ = false;
  }

 private:
  Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
};

// A connection's byte stream: the TCP socket itself, or TLS over it. It keeps
// the TLS context it was made with alive, so a reload that replaces the
// server's context leaves open connections alone.
class SessionStream {
 public:
  using executor_type = tcp::socket::executor_type;

  explicit SessionStream(tcp::socket socket) : plain_(std::move(socket)) {}
  SessionStream(tcp::socket socket, std::shared_ptr<net::ssl::context> tls)
      : tls_context_(std::move(tls)), tls_(std::in_place, std::move(socket), *tls_context_) {}

  executor_type get_executor() { return lowest_layer().get_executor(); }
  tcp::socket& lowest_layer() { return tls_ ? tls_->next_layer() : *plain_; }
  bool tls() const { return tls_.has_value(); }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_write_some(buffers, std::forward<Handler>(handler));
    }
  }
  // TLS only: the server side of the handshake.
  template <typename Handler>
  void async_handshake(Handler&& handler) {
    tls_->async_handshake(net::ssl::stream_base::server, std::forward<Handler>(handler));
  }

 private:
  std::shared_ptr<net::ssl::context> tls_context_;
  std::optional<net::ssl::stream<tcp::socket>> tls_;
  std::optional<tcp::socket> plain_;
};

class Session;

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, std::vector<Route> routes, HttpRecorder recorder);

  absl::Status Listen();
  void Run();
  void Stop(absl::Time deadline);

  int port() const { return port_; }
  int64_t open_connections() const { return open_.load(std::memory_order_acquire); }

  void Register(uint64_t id, std::weak_ptr<Session> session);
  void Unregister(uint64_t id);

  // The handler for a request, with its route label; nullptr with the status
  // to answer (404, 405) otherwise.
  const HttpHandler* Find(const HttpRequest& request, std::string* route, int* status) const;
  // The methods registered for path, as a 405's Allow header lists them.
  std::string Allowed(const std::string& path) const;
  void Record(std::string_view route, int status) const {
    if (recorder_) recorder_(route, status);
  }

  const HttpServerOptions& options() const { return options_; }
  const std::shared_ptr<PostGate>& gate() const { return gate_; }

  // Loads the TLS files into a new context when they changed (or at first).
  absl::StatusOr<bool> ReloadTls(bool force);
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

 private:
  void Accept();
  void OnAccept(const error_code& ec, tcp::socket socket);

  const HttpServerOptions options_;
  const HttpRecorder recorder_;
  // The TLS context new connections take; null without TLS.
  Mutex tls_mu_;
  std::shared_ptr<net::ssl::context> tls_ ABSL_GUARDED_BY(tls_mu_);
  std::vector<std::optional<FileStamp>> tls_stamps_ ABSL_GUARDED_BY(tls_mu_);
  std::map<std::string, std::vector<Route>, std::less<>> routes_;
  // Sessions unregister from their destructors, which run while io_ is
  // destroyed: the registry is declared before io_ so that it outlives it.
  Mutex sessions_mu_;
  CondVar sessions_cv_;
  absl::flat_hash_map<uint64_t, std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(sessions_mu_);
  std::atomic<int64_t> open_{0};
  std::atomic<bool> stopping_{false};
  uint64_t next_id_ = 1;  // on the acceptor's strand
  std::shared_ptr<PostGate> gate_ = std::make_shared<PostGate>();
  std::unique_ptr<net::io_context> io_ = std::make_unique<net::io_context>();
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::optional<tcp::acceptor> acceptor_;
  std::optional<net::steady_timer> accept_retry_;
  std::vector<std::thread> threads_;
  int port_ = 0;
  bool stopped_ = false;  // Stop's own state; Stop runs on one thread
};

// The HttpExchange of one request: forwards to its session while the session
// is alive and still serving this request.
class SessionExchange final : public HttpExchange {
 public:
  SessionExchange(std::weak_ptr<Session> session, uint64_t seq, std::shared_ptr<PostGate> gate)
      : session_(std::move(session)), seq_(seq), gate_(std::move(gate)) {}

  void Respond(int status, std::string_view content_type, std::string body) override;
  void StartStream(int status, std::string_view content_type) override;
  void Write(std::string data) override;
  void End() override;
  bool Post(std::function<void()> f) override;
  void OnClose(std::function<void()> f) override;
  int64_t queued_bytes() const override;
  bool closed() const override;

 private:
  // The session when it is still on this exchange's request.
  std::shared_ptr<Session> Current() const;

  const std::weak_ptr<Session> session_;
  const uint64_t seq_;
  const std::shared_ptr<PostGate> gate_;
};

// One TCP connection: reads requests one after another (keep-alive), hands
// each to its handler with a SessionExchange and writes what the exchange
// queues.
// Everything runs on the connection's strand (the socket's executor). While a
// request is being handled a read stays posted on the socket, so a client
// that goes away is noticed at once, not at the next write.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, SessionStream stream, uint64_t id)
      : server_(server),
        id_(id),
        socket_(std::move(stream)),
        timer_(socket_.get_executor()),
        buffer_(static_cast<size_t>(server.options().max_header_bytes) + 4096) {}
  ~Session() { server_.Unregister(id_); }

  net::any_io_executor executor() { return socket_.get_executor(); }

  void Start();
  // Posted by Stop: idle connections close now, busy ones after their response.
  void OnServerStop() {
    keep_alive_ = false;
    if (phase_ == Phase::kHead) {
      Close();
    }
  }

  // The exchange's calls; seq names the request they are for.
  bool IsCurrent(uint64_t seq) const { return seq == seq_ && phase_ == Phase::kHandling; }
  // allow: the Allow header of a 405.
  void Respond(int status, std::string_view content_type, std::string body,
               std::string_view allow = {});
  void StartStream(int status, std::string_view content_type);
  void Write(std::string data);
  void End();
  void SetOnClose(std::function<void()> f) { on_close_ = std::move(f); }
  int64_t queued_bytes() const { return queued_bytes_; }
  bool response_ended() const { return response_ended_; }

 private:
  enum class Phase { kHead, kBody, kHandling, kFinishing, kClosed };

  void ReadHead();
  void OnHead(const error_code& ec);
  void ReadBody();
  void OnBody(const error_code& ec);
  void OnRequest();
  void Dispatch(HttpRequest request);
  // A response the server itself gives (bad request, too large): then close.
  void Reject(int status, std::string_view message);

  void Watch();
  void OnWatch(const error_code& ec, size_t bytes);
  void Enqueue(std::string data);
  void DoWrite();
  void OnWrite(const error_code& ec);
  void MaybeFinishExchange();
  void Close();

  void ArmTimer(absl::Duration timeout);
  void CancelTimer();
  std::string HeaderOf(http::response<http::empty_body>& response);

  HttpServer::Impl& server_;
  const uint64_t id_;
  SessionStream socket_;
  net::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Phase phase_ = Phase::kHead;

  // The request being handled.
  uint64_t seq_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_request_ = false;
  bool response_started_ = false;
  bool response_ended_ = false;
  std::string route_ = "other";
  std::function<void()> on_close_;

  // Writes: one in flight; what queues meanwhile goes out together next.
  std::deque<std::string> queue_;
  bool writing_ = false;
  int64_t queued_bytes_ = 0;
  bool watching_ = false;
};

}  // namespace loom
