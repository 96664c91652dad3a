// loomd's lifecycle (DESIGN.md): load the model -> size the KV pool -> warm up
// -> health SERVING; on SIGTERM/SIGINT health NOT_SERVING, new calls
// UNAVAILABLE, in-flight requests finish (or are aborted at drain_timeout),
// exit 0; an engine failure makes health NOT_SERVING and the exit non-zero.
#pragma once

#include "server/server_config.h"
#include "server/signal_watcher.h"

namespace loom {

// Runs the daemon until a signal from watcher or an engine failure; returns
// the process exit code. config must have passed ValidateServerConfig.
int RunDaemon(const ServerConfig& config, SignalWatcher& watcher);

}  // namespace loom
