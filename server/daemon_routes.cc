#include "server/daemon_routes.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "server/probe_routes.h"

namespace loom {
namespace {
// How long GET /debug/kv_blocks waits for the engine thread's listing.
constexpr absl::Duration kKvBlocksListingTimeout = absl::Seconds(10);

// GET /debug/kv_blocks: the prefix index's block hashes as the KV-cache
// events name them (32 hex digits, high half first), sorted, so that a test
// or an operator can compare a router's view with the replica's.
HttpServer::Route DebugKvBlocksRoute(Engine& engine) {
  return {"GET", "/debug/kv_blocks",
          [&engine](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
            absl::StatusOr<std::vector<BlockHash>> hashes =
                engine.CachedBlockHashes(kKvBlocksListingTimeout);
            if (!hashes.ok()) {
              exchange->Respond(503, "text/plain; charset=utf-8",
                                absl::StrCat(hashes.status().message(), "\n"));
              return;
            }
            std::vector<std::string> hex;
            hex.reserve(hashes->size());
            for (const BlockHash& hash : *hashes) {
              hex.push_back(absl::StrFormat("%016x%016x", hash.hi, hash.lo));
            }
            std::sort(hex.begin(), hex.end());
            std::string body = absl::StrCat("{\"block_size\":", engine.geometry().block_size,
                                            ",\"num_blocks\":", hex.size(), ",\"block_hashes\":[");
            for (size_t i = 0; i < hex.size(); ++i) {
              absl::StrAppend(&body, i == 0 ? "\"" : ",\"", hex[i], "\"");
            }
            absl::StrAppend(&body, "]}\n");
            exchange->Respond(200, "application/json", std::move(body));
          }};
}

// handler behind an API key check (401 with OpenAI's error body).
HttpHandler RequireKey(const ApiKeyStore& keys, HttpHandler handler) {
  return [&keys, handler = std::move(handler)](HttpRequest request,
                                               std::shared_ptr<HttpExchange> exchange) {
    if (absl::StatusOr<Caller> caller = keys.Authenticate(request.Header("authorization"));
        !caller.ok()) {
      return RespondOpenAiError(*exchange, caller.status(), openai::Endpoint::kCompletions);
    }
    handler(std::move(request), std::move(exchange));
  };
}

}  // namespace

std::vector<HttpServer::Route> HttpRoutes(const ServerConfig& config, Engine& engine,
                                          MetricsRegistry& metrics, const std::atomic<bool>& ready,
                                          OpenAiHttp& openai, const ApiKeyStore* api_keys) {
  // Liveness lives here, in the engine's heartbeat; the HTTP layer only reads it.
  auto live = [&engine, stall_timeout = config.engine_stall_timeout] {
    return engine.healthy() && !engine.Stalled(stall_timeout);
  };
  std::vector<HttpServer::Route> routes =
      ProbeRoutes(ProbeHandlers{.metrics = [&metrics] { return metrics.Scrape(); },
                                .live = live,
                                .ready = [&ready] { return ready.load(); }});
  if (config.debug_kv_blocks) {
    routes.push_back(DebugKvBlocksRoute(engine));
  }
  if (api_keys != nullptr) {
    for (HttpServer::Route& route : routes) {
      if (route.path == "/debug/kv_blocks" ||
          (route.path == "/metrics" && config.metrics_require_auth)) {
        route.handler = RequireKey(*api_keys, std::move(route.handler));
      }
    }
  }
  for (HttpServer::Route& route : openai.Routes()) {
    routes.push_back(std::move(route));
  }
  return routes;
}

std::vector<HttpServer::Route> MetricsOnlyRoutes(const ServerConfig& config,
                                                 MetricsRegistry& metrics,
                                                 const ApiKeyStore* api_keys) {
  std::vector<HttpServer::Route> routes;
  for (HttpServer::Route& route :
       ProbeRoutes(ProbeHandlers{.metrics = [&metrics] { return metrics.Scrape(); },
       .live = [] { return true; },
       .ready = [] { return true; }})) {
    if (route.path != "/metrics") continue;
    if (api_keys != nullptr && config.metrics_require_auth) {
      route.handler = RequireKey(*api_keys, std::move(route.handler));
    }
    routes.push_back(std::move(route));
  }
  return routes;
}

}  // namespace loom
