#include "server/http_connection.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

// Beast speaks boost::core::string_view and std::string_view; Debian's Abseil
// has its own string_view type.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string ChunkOf(std::string_view data) {
  return absl::StrCat(absl::Hex(data.size()), "\r\n", Absl(data), "\r\n");
}

constexpr std::string_view kLastChunk = "0\r\n\r\n";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kJson = "application/json";

}  // namespace

std::string TransportErrorBody(int status, std::string_view message) {
  const char* type = status >= 500 ? (status == 503 ? "service_unavailable_error" : "server_error")
                                   : "invalid_request_error";
  const nlohmann::json body = {
      {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void Session::Start() {
  server_.Register(id_, weak_from_this());
  if (!socket_.tls()) {
    ReadHead();
    return;
  }
  // The handshake shares the head's deadline.
  ArmTimer(server_.options().header_timeout);
  socket_.async_handshake([self = shared_from_this()](const error_code& ec) {
    if (self->phase_ == Phase::kClosed) {
      return;
    }
    if (ec) {
      self->Close();  // not TLS, no client certificate under mTLS, or a bad one
      return;
    }
    self->ReadHead();
  });
}

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
                             server_.options().max_header_bytes, " bytes"));
    return;
  }
  if (ec == http::error::body_limit) {
    Reject(413, absl::StrCat("the request body is over --http_max_body_bytes=",
                             server_.options().max_body_bytes));
    return;
  }
  if (ec && ec.category() == http::make_error_code(http::error::bad_method).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    Reject(400, absl::StrCat("malformed HTTP request: ", ec.message()));
    return;
  }
  if (ec) {
    Close();  // end of stream, timeout, reset
    return;
  }
  const auto& head = parser_->get();
  // RFC 9112 6.3: a request whose last transfer coding is not chunked has
  // no length a server can read; it reads "chunked, identity" or "gzip" as
  // an empty body and would take the body for the next request (smuggling).
  // Loom accepts only "chunked", alone, on one header line.
  if (head.count(http::field::transfer_encoding) > 1 ||
      (head.count(http::field::transfer_encoding) == 1 &&
       !absl::EqualsIgnoreCase(
           absl::StripAsciiWhitespace(Absl(head[http::field::transfer_encoding])), "chunked"))) {
    Reject(400, "Transfer-Encoding: only \"chunked\" is accepted");
    return;
  }
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
                             server_.options().max_body_bytes));
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
    Respond(status, kJson,
            TransportErrorBody(
                status, absl::StrCat(status == 405 ? "method not allowed for " : "no route for ",
                                     request.path)),
            status == 405 ? server_.Allowed(request.path) : std::string());
    return;
  }
  auto exchange = std::make_shared<SessionExchange>(weak_from_this(), seq_, server_.gate());
  try {
    (*handler)(std::move(request), exchange);
  } catch (const std::exception& e) {
    // Handlers report errors as responses; an exception is a bug, and costs
    // only this request.
    if (!response_started_) {
      Respond(500, kJson, TransportErrorBody(500, absl::StrCat("internal error: ", e.what())));
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
  Respond(status, kJson, TransportErrorBody(status, message));
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
    socket_.lowest_layer().shutdown(tcp::socket::shutdown_send, ignored);
    Close();
    return;
  }
  phase_ = Phase::kFinishing;
  if (watching_) {
    error_code ignored;
    socket_.lowest_layer().cancel(ignored);  // OnWatch then reads the next request
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
  socket_.lowest_layer().close(ignored);
  std::function<void()> on_close = std::move(on_close_);
  on_close_ = nullptr;
  queue_.clear();
  queued_bytes_ = 0;
  if (mid_request && on_close) {
    on_close();
  }
}

// --- SessionExchange ---

std::shared_ptr<Session> SessionExchange::Current() const {
  std::shared_ptr<Session> session = session_.lock();
  return session != nullptr && session->IsCurrent(seq_) ? session : nullptr;
}

void SessionExchange::Respond(int status, std::string_view content_type, std::string body) {
  if (auto session = Current()) session->Respond(status, content_type, std::move(body));
}

void SessionExchange::StartStream(int status, std::string_view content_type) {
  if (auto session = Current()) session->StartStream(status, content_type);
}

void SessionExchange::Write(std::string data) {
  if (auto session = Current()) session->Write(std::move(data));
}

void SessionExchange::End() {
  if (auto session = Current()) session->End();
}

bool SessionExchange::Post(std::function<void()> f) {
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

void SessionExchange::OnClose(std::function<void()> f) {
  if (auto session = Current()) session->SetOnClose(std::move(f));
}

int64_t SessionExchange::queued_bytes() const {
  auto session = Current();
  return session == nullptr ? 0 : session->queued_bytes();
}

bool SessionExchange::closed() const {
  auto session = Current();
  return session == nullptr || session->response_ended();
}

}  // namespace loom
