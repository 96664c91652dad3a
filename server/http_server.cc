#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"

namespace loom {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

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

// Beast speaks boost::core::string_view and std::string_view; Debian's Abseil
// has its own string_view type.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string ChunkOf(std::string_view data) {
  return absl::StrCat(absl::Hex(data.size()), "\r\n", Absl(data), "\r\n");
}

constexpr std::string_view kLastChunk = "0\r\n\r\n";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// What a connection over --http_max_connections gets before it is closed.
constexpr std::string_view kTooManyConnections =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
    "Connection: close\r\n\r\ntoo many connections\n";

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) {
      return value;
    }
  }
  return {};
}

std::string_view HttpReason(int status) {
  const std::string_view reason = http::obsolete_reason(static_cast<http::status>(status));
  return reason.empty() ? std::string_view("Unknown") : reason;
}

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
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

 private:
  void Accept();
  void OnAccept(const error_code& ec, tcp::socket socket);

  const HttpServerOptions options_;
  const HttpRecorder recorder_;
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

namespace {

// The HttpExchange of one request: forwards to its session while the session
// is alive and still serving this request.
class Exchange final : public HttpExchange {
 public:
  Exchange(std::weak_ptr<Session> session, uint64_t seq, std::shared_ptr<PostGate> gate)
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

}  // namespace

// One TCP connection: reads requests one after another (keep-alive), hands
// each to its handler with an Exchange and writes what the exchange queues.
// Everything runs on the connection's strand (the socket's executor). While a
// request is being handled a read stays posted on the socket, so a client
// that goes away is noticed at once, not at the next write.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, tcp::socket socket, uint64_t id)
      : server_(server),
        id_(id),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(static_cast<size_t>(server.options().max_header_bytes) + 4096) {}
  ~Session() { server_.Unregister(id_); }

  net::any_io_executor executor() { return socket_.get_executor(); }

  void Start() {
    server_.Register(id_, weak_from_this());
    ReadHead();
  }
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
  tcp::socket socket_;
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

void Session::ArmTimer(absl::Duration timeout) {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_after(absl::ToChronoNanoseconds(timeout));
  timer_.async_wait([self = shared_from_this(), generation](const error_code& ec) {
    if (!ec && generation == self->timer_generation_) {
      self->Close();  // the read or write in progress then fails
    }
  });
}

void Session::CancelTimer() {
  ++timer_generation_;
  timer_.cancel();
}

void Session::ReadHead() {
  if (server_.stopping()) {
    Close();
    return;
  }
  phase_ = Phase::kHead;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_.options().max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(server_.options().max_body_bytes));
  ArmTimer(server_.options().header_timeout);
  http::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnHead(ec); });
}

void Session::OnHead(const error_code& ec) {
  if (phase_ == Phase::kClosed) {
    return;
  }
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    Reject(431, absl::StrCat("the request head is over the limit of ",
                             server_.options().max_header_bytes, " bytes\n"));
    return;
  }
  if (ec == http::error::body_limit) {
    Reject(413, absl::StrCat("the request body is over --http_max_body_bytes=",
                             server_.options().max_body_bytes, "\n"));
    return;
  }
  if (ec && ec.category() == http::make_error_code(http::error::bad_method).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    Reject(400, absl::StrCat("malformed HTTP request: ", ec.message(), "\n"));
    return;
  }
  if (ec) {
    Close();  // end of stream, timeout, reset
    return;
  }
  const auto& head = parser_->get();
  if (absl::EqualsIgnoreCase(Absl(head[http::field::expect]), "100-continue") &&
      !parser_->is_done()) {
    Enqueue(std::string(kContinue));
  }
  ReadBody();
}

void Session::ReadBody() {
  phase_ = Phase::kBody;
  if (parser_->is_done()) {
    OnRequest();
    return;
  }
  ArmTimer(server_.options().body_timeout);
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](const error_code& ec, size_t) { self->OnBody(ec); });
}

void Session::OnBody(const error_code& ec) {
  if (phase_ == Phase::kClosed) {
    return;
  }
  if (ec == http::error::body_limit) {
    Reject(413, absl::StrCat("the request body is over --http_max_body_bytes=",
                             server_.options().max_body_bytes, "\n"));
    return;
  }
  if (ec) {
    Close();
    return;
  }
  OnRequest();
}

void Session::OnRequest() {
  CancelTimer();
  http::request<http::string_body> message = parser_->release();
  parser_.reset();
  HttpRequest request;
  request.method = std::string(message.method_string());
  const std::string_view target = message.target();
  const size_t question = target.find('?');
  request.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) {
    request.query = std::string(target.substr(question + 1));
  }
  for (const auto& field : message) {
    request.headers.emplace_back(absl::AsciiStrToLower(Absl(field.name_string())),
                                 std::string(field.value()));
  }
  request.body = std::move(message.body());
  version_ = message.version();
  keep_alive_ = message.keep_alive() && !server_.stopping();
  head_request_ = request.method == "HEAD";
  Dispatch(std::move(request));
}

void Session::Dispatch(HttpRequest request) {
  ++seq_;
  phase_ = Phase::kHandling;
  response_started_ = false;
  response_ended_ = false;
  on_close_ = nullptr;
  Watch();
  int status = 404;
  const HttpHandler* handler = server_.Find(request, &route_, &status);
  if (handler == nullptr) {
    Respond(status, "text/plain; charset=utf-8",
            absl::StrCat(status == 405 ? "method not allowed for " : "no route for ", request.path,
                         "\n"),
            status == 405 ? server_.Allowed(request.path) : std::string());
    return;
  }
  auto exchange = std::make_shared<Exchange>(weak_from_this(), seq_, server_.gate());
  try {
    (*handler)(std::move(request), exchange);
  } catch (const std::exception& e) {
    // Handlers report errors as responses; an exception is a bug, and costs
    // only this request.
    if (!response_started_) {
      Respond(500, "text/plain; charset=utf-8", absl::StrCat("internal error: ", e.what(), "\n"));
    } else {
      Close();
    }
  }
}

void Session::Reject(int status, std::string_view message) {
  keep_alive_ = false;
  ++seq_;
  phase_ = Phase::kHandling;
  response_started_ = false;
  response_ended_ = false;
  route_ = "other";
  head_request_ = false;
  Respond(status, "text/plain; charset=utf-8", std::string(message));
}

std::string Session::HeaderOf(http::response<http::empty_body>& response) {
  response.version(version_);
  response.set(http::field::server, "loom");
  response.keep_alive(keep_alive_);
  std::ostringstream out;
  out << response.base();
  return std::move(out).str();
}

void Session::Respond(int status, std::string_view content_type, std::string body,
                      std::string_view allow) {
  if (response_started_ || phase_ != Phase::kHandling) {
    return;
  }
  response_started_ = true;
  response_ended_ = true;
  server_.Record(route_, status);
  http::response<http::empty_body> response{static_cast<http::status>(status), version_};
  response.set(http::field::content_type, content_type);
  if (!allow.empty()) {
    response.set(http::field::allow, allow);
  }
  response.content_length(body.size());
  std::string bytes = HeaderOf(response);
  if (!head_request_) {
    bytes += body;
  }
  Enqueue(std::move(bytes));
  MaybeFinishExchange();
}

void Session::StartStream(int status, std::string_view content_type) {
  if (response_started_ || phase_ != Phase::kHandling) {
    return;
  }
  response_started_ = true;
  server_.Record(route_, status);
  http::response<http::empty_body> response{static_cast<http::status>(status), version_};
  response.set(http::field::content_type, content_type);
  response.set(http::field::cache_control, "no-cache");
  response.set("X-Accel-Buffering", "no");  // proxies must not hold events back
  response.chunked(true);
  Enqueue(HeaderOf(response));
}

void Session::Write(std::string data) {
  if (!response_started_ || response_ended_ || phase_ != Phase::kHandling || data.empty()) {
    return;
  }
  Enqueue(ChunkOf(data));
}

void Session::End() {
  if (!response_started_ || response_ended_ || phase_ != Phase::kHandling) {
    return;
  }
  response_ended_ = true;
  Enqueue(std::string(kLastChunk));
  MaybeFinishExchange();
}

void Session::Watch() {
  if (watching_ || phase_ != Phase::kHandling || buffer_.size() >= buffer_.max_size()) {
    return;  // a full buffer (pipelined requests) waits; writes still notice a reset
  }
  watching_ = true;
  const size_t room = std::min<size_t>(1024, buffer_.max_size() - buffer_.size());
  socket_.async_read_some(buffer_.prepare(room),
                          [self = shared_from_this()](const error_code& ec, size_t bytes) {
                            self->OnWatch(ec, bytes);
                          });
}

void Session::OnWatch(const error_code& ec, size_t bytes) {
  watching_ = false;
  if (!ec) {
    buffer_.commit(bytes);
  }
  switch (phase_) {
    case Phase::kClosed:
      return;
    case Phase::kHandling:
      if (ec) {
        Close();  // the client went away mid-request
      } else {
        Watch();
      }
      return;
    case Phase::kFinishing:
      if (ec && ec != net::error::operation_aborted) {
        Close();
      } else {
        ReadHead();
      }
      return;
    case Phase::kHead:
    case Phase::kBody:
      return;
  }
}

void Session::Enqueue(std::string data) {
  if (phase_ == Phase::kClosed) {
    return;
  }
  queued_bytes_ += static_cast<int64_t>(data.size());
  queue_.push_back(std::move(data));
  if (!writing_) {
    DoWrite();
  }
}

void Session::DoWrite() {
  while (queue_.size() > 1) {  // coalesce what piled up behind a slow client
    queue_[0] += queue_[1];
    queue_.erase(queue_.begin() + 1);
  }
  writing_ = true;
  if (phase_ == Phase::kHandling || phase_ == Phase::kFinishing) {
    ArmTimer(server_.options().write_timeout);
  }
  net::async_write(
      socket_, net::buffer(queue_.front()),
      [self = shared_from_this()](const error_code& ec, size_t) { self->OnWrite(ec); });
}

void Session::OnWrite(const error_code& ec) {
  writing_ = false;
  if (phase_ == Phase::kHandling || phase_ == Phase::kFinishing) {
    CancelTimer();
  }
  if (phase_ == Phase::kClosed) {
    return;
  }
  queued_bytes_ -= static_cast<int64_t>(queue_.front().size());
  queue_.pop_front();
  if (ec) {
    Close();
    return;
  }
  if (!queue_.empty()) {
    DoWrite();
    return;
  }
  MaybeFinishExchange();
}

void Session::MaybeFinishExchange() {
  if (phase_ != Phase::kHandling || !response_ended_ || writing_ || !queue_.empty()) {
    return;
  }
  on_close_ = nullptr;
  if (!keep_alive_ || server_.stopping()) {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    Close();
    return;
  }
  phase_ = Phase::kFinishing;
  if (watching_) {
    error_code ignored;
    socket_.cancel(ignored);  // OnWatch then reads the next request
    return;
  }
  ReadHead();
}

void Session::Close() {
  if (phase_ == Phase::kClosed) {
    return;
  }
  const bool mid_request = phase_ == Phase::kHandling;
  phase_ = Phase::kClosed;
  CancelTimer();
  error_code ignored;
  socket_.close(ignored);
  std::function<void()> on_close = std::move(on_close_);
  on_close_ = nullptr;
  queue_.clear();
  queued_bytes_ = 0;
  if (mid_request && on_close) {
    on_close();
  }
}

// --- Exchange ---

std::shared_ptr<Session> Exchange::Current() const {
  std::shared_ptr<Session> session = session_.lock();
  return session != nullptr && session->IsCurrent(seq_) ? session : nullptr;
}

void Exchange::Respond(int status, std::string_view content_type, std::string body) {
  if (auto session = Current()) session->Respond(status, content_type, std::move(body));
}

void Exchange::StartStream(int status, std::string_view content_type) {
  if (auto session = Current()) session->StartStream(status, content_type);
}

void Exchange::Write(std::string data) {
  if (auto session = Current()) session->Write(std::move(data));
}

void Exchange::End() {
  if (auto session = Current()) session->End();
}

bool Exchange::Post(std::function<void()> f) {
  // The session is locked under the gate's lock: once Stop has closed the
  // gate no other thread holds a session, so all of them go with io_context.
  return gate_->PostIfOpen([&] {
    std::shared_ptr<Session> session = session_.lock();
    if (session == nullptr) {
      return false;
    }
    // The lambda keeps the session alive until f has run.
    net::post(session->executor(), [session, f = std::move(f)]() mutable {
      (void)session;
      f();
    });
    return true;
  });
}

void Exchange::OnClose(std::function<void()> f) {
  if (auto session = Current()) session->SetOnClose(std::move(f));
}

int64_t Exchange::queued_bytes() const {
  auto session = Current();
  return session == nullptr ? 0 : session->queued_bytes();
}

bool Exchange::closed() const {
  auto session = Current();
  return session == nullptr || session->response_ended();
}

// --- HttpServer::Impl ---

HttpServer::Impl::Impl(const HttpServerOptions& options, std::vector<Route> routes,
                       HttpRecorder recorder)
    : options_(options), recorder_(std::move(recorder)) {
  for (Route& route : routes) {
    std::string path = route.path;
    routes_[path].push_back(std::move(route));
  }
  acceptor_.emplace(net::make_strand(*io_));
  accept_retry_.emplace(acceptor_->get_executor());
}

absl::Status HttpServer::Impl::Listen() {
  const std::string where = absl::StrCat(options_.host, ":", options_.port);
  error_code ec;
  tcp::resolver resolver(*io_);
  const auto endpoints =
      resolver.resolve(options_.host, std::to_string(options_.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serve HTTP on ", where, ": cannot resolve the host: ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  if (acceptor_->open(endpoint.protocol(), ec); !ec) {
    acceptor_->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", where, ": ", ec.message()));
  }
  port_ = acceptor_->local_endpoint().port();
  return absl::OkStatus();
}

void HttpServer::Impl::Run() {
  work_.emplace(net::make_work_guard(*io_));
  net::post(acceptor_->get_executor(), [this] { Accept(); });
  const int threads = std::max(1, options_.threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { io_->run(); });
  }
}

void HttpServer::Impl::Accept() {
  acceptor_->async_accept(net::make_strand(*io_), [this](const error_code& ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(const error_code& ec, tcp::socket socket) {
  if (stopping() || !acceptor_->is_open()) {
    return;
  }
  if (ec) {
    // Out of descriptors, typically: retry shortly rather than spin.
    accept_retry_->expires_after(std::chrono::milliseconds(50));
    accept_retry_->async_wait([this](const error_code&) {
      if (!stopping()) Accept();
    });
    return;
  }
  if (open_connections() >= options_.max_connections) {
    // Over --http_max_connections. The new socket's send buffer is empty, so
    // this short write does not block the acceptor.
    error_code ignored;
    net::write(socket, net::buffer(kTooManyConnections.data(), kTooManyConnections.size()),
               ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    Record("other", 503);
  } else {
    open_.fetch_add(1, std::memory_order_acq_rel);
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<Session>(*this, std::move(socket), next_id_++);
    net::post(session->executor(), [session] { session->Start(); });
  }
  Accept();
}

void HttpServer::Impl::Register(uint64_t id, std::weak_ptr<Session> session) {
  MutexLock lock(sessions_mu_);
  sessions_.emplace(id, std::move(session));
}

void HttpServer::Impl::Unregister(uint64_t id) {
  MutexLock lock(sessions_mu_);
  sessions_.erase(id);
  open_.fetch_sub(1, std::memory_order_acq_rel);
  sessions_cv_.NotifyAll();
}

const HttpHandler* HttpServer::Impl::Find(const HttpRequest& request, std::string* route,
                                          int* status) const {
  *route = "other";
  const auto it = routes_.find(request.path);
  if (it == routes_.end()) {
    *status = 404;
    return nullptr;
  }
  const std::string_view method =
      request.method == "HEAD" ? std::string_view("GET") : std::string_view(request.method);
  *route = it->first;
  for (const Route& candidate : it->second) {
    if (candidate.method == method) {
      return &candidate.handler;
    }
  }
  *status = 405;
  return nullptr;
}

std::string HttpServer::Impl::Allowed(const std::string& path) const {
  std::string allowed;
  const auto it = routes_.find(path);
  if (it == routes_.end()) {
    return allowed;
  }
  for (const Route& route : it->second) {
    absl::StrAppend(&allowed, allowed.empty() ? "" : ", ", route.method);
    if (route.method == "GET") {
      absl::StrAppend(&allowed, ", HEAD");
    }
  }
  return allowed;
}

void HttpServer::Impl::Stop(absl::Time deadline) {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  stopping_.store(true, std::memory_order_release);
  net::post(acceptor_->get_executor(), [this] {
    error_code ignored;
    acceptor_->close(ignored);
    accept_retry_->cancel();
  });
  std::vector<std::shared_ptr<Session>> sessions;
  {
    MutexLock lock(sessions_mu_);
    for (const auto& [id, weak] : sessions_) {
      if (std::shared_ptr<Session> session = weak.lock()) sessions.push_back(std::move(session));
    }
  }
  for (const std::shared_ptr<Session>& session : sessions) {
    net::post(session->executor(), [session] { session->OnServerStop(); });
  }
  sessions.clear();  // outside sessions_mu_: a last reference unregisters
  {
    MutexLock lock(sessions_mu_);
    while (open_connections() > 0) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      sessions_cv_.WaitFor(sessions_mu_, left);
    }
  }
  gate_->Close();
  work_.reset();
  io_->stop();
  for (std::thread& thread : threads_) {
    thread.join();
  }
  accept_retry_.reset();
  acceptor_.reset();
  io_.reset();  // destroys the sessions still open, with their sockets
}

// --- HttpServer ---

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              std::vector<Route> routes,
                                                              HttpRecorder recorder) {
  auto impl = std::make_shared<Impl>(options, std::move(routes), std::move(recorder));
  if (absl::Status listening = impl->Listen(); !listening.ok()) {
    return listening;
  }
  impl->Run();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() { Stop(absl::Now()); }

int HttpServer::port() const { return impl_->port(); }

int64_t HttpServer::open_connections() const { return impl_->open_connections(); }

void HttpServer::Stop(absl::Time deadline) { impl_->Stop(deadline); }

}  // namespace loom
