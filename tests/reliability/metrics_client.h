// Reads loomd's Prometheus endpoint over plain HTTP on loopback, so that
// reliability tests can check the server's own view of its state: requests
// running and waiting, KV blocks in use, resident memory.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace loom::testing {

// GET http://127.0.0.1:<port><path>; the body of a 200 response.
absl::StatusOr<std::string> HttpGet(int port, absl::string_view path);

// The value of one sample in a text exposition, e.g.
// SampleValue(text, "loom_kv_cache_blocks{state=\"used\"}"); nullopt when absent.
std::optional<double> SampleValue(absl::string_view exposition, absl::string_view series);

// The HTTP port in loomd's "... (gRPC) and <host>:<port> (HTTP)" log line.
std::optional<int> HttpPortFromLog(absl::string_view log);

// The engine's load as /metrics reports it.
struct ServerLoad {
  double running = -1;
  double waiting = -1;
  double used_blocks = -1;
  double rss_bytes = -1;
  bool idle() const { return running == 0 && waiting == 0 && used_blocks == 0; }
};
absl::StatusOr<ServerLoad> ReadLoad(int http_port);

// Polls until running, waiting and used blocks are all 0 (aborts reach the
// engine asynchronously) or the timeout passes; returns the last reading.
absl::StatusOr<ServerLoad> WaitUntilIdle(int http_port, absl::Duration timeout);

}  // namespace loom::testing
