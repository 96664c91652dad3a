// The plain-HTTP side of loomd (default port 8080): GET /metrics in the
// Prometheus text format, /healthz (liveness) and /readyz (readiness), served
// by one thread of its own that never touches the engine thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace loom {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0 picks a free port (tests)
};

// What the endpoints report. Each callback runs on the HTTP thread and must
// only read published state (atomics, the last engine snapshot).
struct HttpHandlers {
  std::function<std::string()> metrics;  // text exposition format 0.0.4
  std::function<bool()> live;            // 200 while the engine loop is alive
  std::function<bool()> ready;           // 200 when loaded, warmed up and not draining
};

// A deliberately small HTTP/1.1 server: one request per connection
// (Connection: close), GET and HEAD only, requests up to 8 KiB, and a few
// seconds per connection so that a stalled client cannot hold the endpoint.
// Scrapes and probes are rare and cheap, so one thread serves them in turn.
// (An embedded web server with a worker pool sets its threads' stack sizes,
// which fails once large CUDA libraries bring their thread-local storage.)
class HttpServer {
 public:
  // Binds and starts serving; fails when the address is taken or invalid.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandlers handlers);
  ~HttpServer();  // stops accepting and joins the HTTP thread

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }  // the bound port, also when options.port was 0

 private:
  HttpServer(HttpHandlers handlers, int listen_fd, int wake_fd, int port);
  void Serve();
  void HandleConnection(int fd) const;

  const HttpHandlers handlers_;
  const int listen_fd_;
  const int wake_fd_;  // an eventfd written by the destructor to end Serve()
  const int port_;
  std::thread thread_;
};

}  // namespace loom
