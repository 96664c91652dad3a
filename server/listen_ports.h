// Start-up check that every port loomd will listen on is free, before the
// model loads: a second loomd on a taken port fails in a second with the flag
// and the port, instead of loading a model and then failing (HTTP), or worse,
// serving beside the first (gRPC's SO_REUSEPORT, which GrpcServer now turns
// off too, would have split the calls between two servers).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/server_config.h"

namespace loom {

// The (flag, port) pairs a config listens on: --port, --http_port,
// --metrics_port, and --health_port with TLS; ports of 0 (a free one is
// picked) left out.
std::vector<std::pair<std::string, int>> ListenPorts(const ServerConfig& config);

// OK when each port can be bound on host (SO_REUSEADDR, as the listeners
// set it, so a port in TIME_WAIT is free); else FAILED_PRECONDITION naming
// the first taken one's flag, address and the reason. The probe sockets are
// closed before it returns.
absl::Status CheckPortsFree(const std::string& host,
                            const std::vector<std::pair<std::string, int>>& ports);

// A warning for the start-up log when loomd listens beyond loopback
// (--host is not 127.x, ::1 or localhost) with no --api_keys_file: anyone
// who reaches the ports may generate. Empty otherwise.
std::string ExposureWarning(const ServerConfig& config);

// Start-up's use of the two above: logs "cannot start: ..." and returns
// false when a port is taken; logs the exposure warning, if any.
bool ListenersCanStart(const ServerConfig& config);

}  // namespace loom
