// The operational routes of the HTTP port: GET /metrics in the Prometheus
// text format, /healthz (liveness) and /readyz (readiness). They never touch
// the engine thread: each callback reads published state only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "server/http_server.h"

namespace loom {

struct ProbeHandlers {
  std::function<std::string()> metrics;  // text exposition format 0.0.4
  std::function<bool()> live;            // 200 while the engine loop is alive
  std::function<bool()> ready;           // 200 when loaded, warmed up and not draining
};

std::vector<HttpServer::Route> ProbeRoutes(ProbeHandlers handlers);

}  // namespace loom
