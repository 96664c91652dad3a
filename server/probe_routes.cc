#include "server/probe_routes.h"

#include <memory>
#include <utility>

namespace loom {
namespace {

HttpHandler Probe(std::function<bool()> check, const char* ok, const char* failing) {
  return
      [check = std::move(check), ok, failing](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
        const bool passing = check();
        exchange->Respond(passing ? 200 : 503, "text/plain; charset=utf-8", passing ? ok : failing);
      };
}

}  // namespace

std::vector<HttpServer::Route> ProbeRoutes(ProbeHandlers handlers) {
  std::vector<HttpServer::Route> routes;
  routes.push_back({"GET", "/metrics",
                    [metrics = std::move(handlers.metrics)](
                        HttpRequest, std::shared_ptr<HttpExchange> exchange) {
                      exchange->Respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics());
                    }});
  // /health answers as /healthz does, for the probes and clients written for
  // vLLM, TGI and llama.cpp's server, which serve liveness there.
  routes.push_back({"GET", "/health", Probe(handlers.live, "ok\n", "engine not live\n")});
  routes.push_back(
      {"GET", "/healthz", Probe(std::move(handlers.live), "ok\n", "engine not live\n")});
  routes.push_back({"GET", "/readyz", Probe(std::move(handlers.ready), "ready\n", "not ready\n")});
  return routes;
}

}  // namespace loom
