// The plain-HTTP side of loomd (default port 8080): GET /metrics in the
// Prometheus text format, /healthz (liveness) and /readyz (readiness), on a
// small civetweb thread pool that never touches the engine thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct mg_context;

namespace loom {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0 picks a free port (tests)
  int num_threads = 2;
};

// What the endpoints report. Each callback runs on an HTTP thread and must
// only read published state (atomics, the last engine snapshot).
struct HttpHandlers {
  std::function<std::string()> metrics;  // text exposition format 0.0.4
  std::function<bool()> live;            // 200 while the engine loop is alive
  std::function<bool()> ready;           // 200 when loaded, warmed up and not draining
};

class HttpServer {
 public:
  // Binds and starts serving; fails when the address is taken or invalid.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandlers handlers);
  ~HttpServer();  // stops accepting and joins the HTTP threads

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }  // the bound port, also when options.port was 0

 private:
  explicit HttpServer(HttpHandlers handlers) : handlers_(std::move(handlers)) {}

  HttpHandlers handlers_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace loom
