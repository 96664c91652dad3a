// loomd's HTTP port (default 8080) on Boost.Beast: /metrics, /healthz and
// /readyz next to the OpenAI API, all on one port. Asynchronous I/O on a small
// pool of threads with normal stacks, no thread per connection; HTTP/1.1
// keep-alive; timeouts on the request head (which also bounds an idle
// keep-alive connection) and on the body; size limits on both; a cap on open
// connections; and a graceful stop that lets responses in flight finish.
//
// A handler gets the request and an HttpExchange, through which it answers
// once (Respond) or streams (StartStream, Write..., End), at once or later:
// work that waits on the engine posts back onto the exchange (Post), so each
// exchange is only ever touched from its connection's strand.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace loom {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0 picks a free port (tests)
  int threads = 2;  // I/O threads; handlers run on them and must not block for long
  int max_connections = 4096;
  // From the end of one response (or the connection's start) to the end of
  // the next request's head: a keep-alive connection idle longer is closed.
  absl::Duration header_timeout = absl::Seconds(30);
  absl::Duration body_timeout = absl::Seconds(60);
  // A response write (one chunk of a stream included) that makes no progress
  // for this long means the client stopped reading: the connection is closed.
  absl::Duration write_timeout = absl::Seconds(60);
  int64_t max_header_bytes = 16 << 10;
  int64_t max_body_bytes = int64_t{8} << 20;
  // TLS (PEM files; empty cert_file = plaintext). client_ca_file turns on
  // mTLS: a client without a certificate that CA signed fails the handshake.
  std::string tls_cert_file = {};
  std::string tls_key_file = {};
  std::string tls_client_ca_file = {};
};

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string path;                                          // the target without its query
  std::string query;                                         // after '?', undecoded
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  // The first header of that (lower-case) name; empty when absent.
  std::string_view Header(std::string_view name) const;
};

// One request's response channel. Every method but Post must be called on the
// exchange's strand: from the handler itself or from a function given to Post.
// Calls after the response has ended or the client has gone are ignored.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // A complete response with Content-Length.
  virtual void Respond(int status, std::string_view content_type, std::string body) = 0;
  // Starts a chunked response (an SSE stream); Write sends one chunk, End the last.
  virtual void StartStream(int status, std::string_view content_type) = 0;
  virtual void Write(std::string data) = 0;
  virtual void End() = 0;

  // Runs f on the strand; false (and f dropped) once the connection is gone
  // or the server has stopped.
  // Safe from any thread: the engine's sinks post their outputs through it.
  virtual bool Post(std::function<void()> f) = 0;
  // f runs once, on the strand, if the client disconnects (or the connection
  // fails) before the response has ended.
  virtual void OnClose(std::function<void()> f) = 0;
  // Bytes handed to Write/Respond that the client has not yet taken.
  virtual int64_t queued_bytes() const = 0;
  // True once the client is gone or the response has ended.
  virtual bool closed() const = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<HttpExchange>)>;

// Called once per response with its route label (the registered path, or
// "other") and its status code, for loom_http_requests_total.
using HttpRecorder = std::function<void(std::string_view route, int status)>;

class HttpServer {
 public:
  // Registered routes, by exact path. A path registered for other methods
  // answers 405; an unknown one 404. HEAD is served as GET without the body.
  struct Route {
    std::string method;
    std::string path;
    HttpHandler handler;
  };

  // Binds and starts serving; fails when the address is taken or invalid.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           std::vector<Route> routes,
                                                           HttpRecorder recorder = nullptr);
  ~HttpServer();  // Stop(now)

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port, also when options.port was 0
  // With TLS: re-reads the certificate, key and CA when one of the files
  // changed, so that new connections handshake with the new certificate
  // (connections already open keep theirs). A file that fails to load keeps
  // the one in force, and the error comes back. True when new files took effect.
  absl::StatusOr<bool> ReloadTlsIfChanged();
  int64_t open_connections() const;

  // Stops accepting and closes idle connections; connections with a response
  // in flight close when it ends. At the deadline the rest are cut and the
  // I/O threads joined. Idempotent.
  void Stop(absl::Time deadline);

  class Impl;

 private:
  explicit HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// The HTTP reason phrase of a status code ("OK", "Not Found", ...).
std::string_view HttpReason(int status);

}  // namespace loom
