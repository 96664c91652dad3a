#include "server/http_server.h"

#include <civetweb.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace loom {
namespace {

int Respond(mg_connection* conn, int status, std::string_view content_type, std::string_view body) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type.data(),
                         static_cast<int>(content_type.size()));
  const std::string length = absl::StrCat(body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_send(conn);
  const mg_request_info* info = mg_get_request_info(conn);
  if (std::string_view(info->request_method) != "HEAD") {
    mg_write(conn, body.data(), body.size());
  }
  return status;  // civetweb: a non-zero return means the request was handled
}

bool IsGetOrHead(mg_connection* conn) {
  const std::string_view method = mg_get_request_info(conn)->request_method;
  return method == "GET" || method == "HEAD";
}

int HandleMetrics(mg_connection* conn, void* data) {
  if (!IsGetOrHead(conn)) {
    return Respond(conn, 405, "text/plain", "method not allowed\n");
  }
  const auto* handlers = static_cast<const HttpHandlers*>(data);
  return Respond(conn, 200, "text/plain; version=0.0.4; charset=utf-8", handlers->metrics());
}

int HandleProbe(mg_connection* conn, const std::function<bool()>& probe) {
  if (!IsGetOrHead(conn)) {
    return Respond(conn, 405, "text/plain", "method not allowed\n");
  }
  if (probe()) {
    return Respond(conn, 200, "text/plain", "ok\n");
  }
  return Respond(conn, 503, "text/plain", "unavailable\n");
}

int HandleHealthz(mg_connection* conn, void* data) {
  return HandleProbe(conn, static_cast<const HttpHandlers*>(data)->live);
}

int HandleReadyz(mg_connection* conn, void* data) {
  return HandleProbe(conn, static_cast<const HttpHandlers*>(data)->ready);
}

// civetweb prints to stderr by default; loomd logs through absl instead and
// an HTTP client hanging up is not worth a line.
int SilenceLog(const mg_connection* /*unused*/, const char* /*unused*/) { return 1; }

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandlers handlers) {
  if (!handlers.metrics || !handlers.live || !handlers.ready) {
    return absl::InvalidArgumentError("HttpServer needs metrics, live and ready handlers");
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(handlers)));
  // IPv6 literals need brackets in civetweb's listening_ports.
  const std::string host = options.host.find(':') != std::string::npos
                               ? absl::StrCat("[", options.host, "]")
                               : options.host;
  const std::string ports = absl::StrCat(host, ":", options.port);
  const std::string threads = absl::StrCat(options.num_threads);
  const char* civet_options[] = {"listening_ports",   ports.c_str(), "num_threads", threads.c_str(),
                                 "enable_keep_alive", "yes",         nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = SilenceLog;
  mg_init_library(0);
  server->context_ = mg_start(&callbacks, nullptr, civet_options);
  if (server->context_ == nullptr) {
    mg_exit_library();
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", ports));
  }
  mg_set_request_handler(server->context_, "/metrics$", HandleMetrics, &server->handlers_);
  mg_set_request_handler(server->context_, "/healthz$", HandleHealthz, &server->handlers_);
  mg_set_request_handler(server->context_, "/readyz$", HandleReadyz, &server->handlers_);
  mg_server_port bound[4] = {};
  const int count = mg_get_server_ports(server->context_, 4, bound);
  if (count < 1) {
    return absl::InternalError(absl::StrCat("HTTP server on ", ports, " has no port"));
  }
  server->port_ = bound[0].port;
  return server;
}

HttpServer::~HttpServer() {
  if (context_ != nullptr) {
    mg_stop(context_);
    mg_exit_library();
  }
}

}  // namespace loom
