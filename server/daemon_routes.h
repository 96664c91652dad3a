#pragma once

#include <atomic>
#include <vector>

#include "engine/engine.h"
#include "server/api_keys.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_http.h"
#include "server/server_config.h"

namespace loom {

// The HTTP port's routes: the probes, GET /debug/kv_blocks under
// --debug_kv_blocks, then the OpenAI API. /healthz and /readyz stay open;
// with API keys (api_keys not null), /metrics needs one under
// --metrics_require_auth and the debug listing always.
std::vector<HttpServer::Route> HttpRoutes(const ServerConfig& config, Engine& engine,
                                          MetricsRegistry& metrics, const std::atomic<bool>& ready,
                                          OpenAiHttp& openai, const ApiKeyStore* api_keys);

// The --metrics_port's one route: GET /metrics, behind a key under
// --metrics_require_auth.
std::vector<HttpServer::Route> MetricsOnlyRoutes(const ServerConfig& config,
                                                 MetricsRegistry& metrics,
                                                 const ApiKeyStore* api_keys);

}  // namespace loom
