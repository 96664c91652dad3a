#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "boost/asio/post.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "openssl/ssl.h"
#include "server/http_connection.h"

namespace loom {
namespace {

// What a connection over --http_max_connections gets before it is closed.
const std::string& TooManyConnections() {
  static const std::string* response = [] {
    const std::string body = TransportErrorBody(503, "too many connections");
    return new std::string(absl::StrCat(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: ",
        body.size(), "\r\nConnection: close\r\n\r\n", body));
  }();
  return *response;
}

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

namespace {

// A TLS server context from the PEM files; the error names the flag.
absl::StatusOr<std::shared_ptr<net::ssl::context>> MakeTlsContext(
    const HttpServerOptions& options) {
  auto context = std::make_shared<net::ssl::context>(net::ssl::context::tls_server);
  context->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                       net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                       net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use);
  // TLS 1.2: ECDHE key exchange (forward secrecy) and AEAD ciphers only, the
  // gRPC port's list; no CBC-SHA suites and no static-RSA key exchange. TLS
  // 1.3's suites are all of that kind already.
  SSL_CTX_set_cipher_list(context->native_handle(),
                          "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                          "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                          "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
  SSL_CTX_set_options(context->native_handle(), SSL_OP_CIPHER_SERVER_PREFERENCE);
  error_code ec;
  context->use_certificate_chain_file(options.tls_cert_file, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert_file=", options.tls_cert_file, ": ", ec.message()));
  }
  context->use_private_key_file(options.tls_key_file, net::ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key_file=", options.tls_key_file, ": ", ec.message()));
  }
  if (!options.tls_client_ca_file.empty()) {
    context->load_verify_file(options.tls_client_ca_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_client_ca_file=", options.tls_client_ca_file, ": ", ec.message()));
    }
    context->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
  }
  return context;
}

}  // namespace

absl::StatusOr<bool> HttpServer::Impl::ReloadTls(bool force) {
  if (options_.tls_cert_file.empty()) {
    return false;
  }
  std::vector<std::optional<FileStamp>> stamps;
  for (const std::string* path :
       {&options_.tls_cert_file, &options_.tls_key_file, &options_.tls_client_ca_file}) {
    stamps.push_back(path->empty() ? std::nullopt : StampOf(*path));
  }
  {
    MutexLock lock(tls_mu_);
    if (!force && stamps == tls_stamps_) {
      return false;
    }
    tls_stamps_ = stamps;  // a bad file is reported once, not at every look
  }
  absl::StatusOr<std::shared_ptr<net::ssl::context>> context = MakeTlsContext(options_);
  if (!context.ok()) {
    return context.status();
  }
  MutexLock lock(tls_mu_);
  tls_ = *std::move(context);
  return true;
}

absl::Status HttpServer::Impl::Listen() {
  const std::string where = absl::StrCat(options_.host, ":", options_.port);
  if (absl::StatusOr<bool> tls = ReloadTls(true); !tls.ok()) {
    return tls.status();
  }
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
    const std::string& refusal = TooManyConnections();
    net::write(socket, net::buffer(refusal.data(), refusal.size()), ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    Record("other", 503);
  } else {
    open_.fetch_add(1, std::memory_order_acq_rel);
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::shared_ptr<net::ssl::context> tls;
    {
      MutexLock lock(tls_mu_);
      tls = tls_;
    }
    auto session = std::make_shared<Session>(
        *this,
        tls ? SessionStream(std::move(socket), std::move(tls)) : SessionStream(std::move(socket)),
        next_id_++);
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

absl::StatusOr<bool> HttpServer::ReloadTlsIfChanged() { return impl_->ReloadTls(false); }

int64_t HttpServer::open_connections() const { return impl_->open_connections(); }

void HttpServer::Stop(absl::Time deadline) { impl_->Stop(deadline); }

}  // namespace loom
