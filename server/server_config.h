// loomd's command-line settings as plain data (API.md §3), checked at start-up
// before anything is loaded. main.cc fills it from the absl flags; keeping the
// checks here makes every message testable without a process.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace loom {

struct ServerConfig {
  std::string model;  // resolved path (ResolveModelPath)
  std::string load_format = "auto";
  std::string device = "auto";
  std::string dtype = "auto";
  int32_t port = 50051;  // 0 picks a free port
  int32_t http_port = 8080;
  std::string host = "0.0.0.0";
  int32_t block_size = 16;
  double kv_cache_memory_fraction = 0.9;
  int64_t kv_cache_bytes = 0;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  int32_t max_model_len = 0;  // 0: from the model
  int32_t max_queued_requests = 1024;
  bool enable_prefix_caching = true;
  std::string scheduling_policy = "fcfs";
  std::string admission = "optimistic";  // optimistic (preempt when full) or reserve
  absl::Duration drain_timeout = absl::Seconds(30);
  // Work pending and no engine progress this long: liveness probes fail.
  absl::Duration engine_stall_timeout = absl::Seconds(60);
  int32_t threads = 0;            // 0: all cores
  std::string served_model_name;  // empty: from the model
};

// INVALID_ARGUMENT naming the first bad flag and what it accepts, e.g.
// "block_size must be a power of two between 8 and 256; got 7".
absl::Status ValidateServerConfig(const ServerConfig& config);

// The model to load: the --model flag when given, else $LOOM_MODEL when set,
// else the bundled default. A leading "~/" expands to home.
std::string ResolveModelPath(absl::string_view flag_value, absl::string_view env_value,
                             absl::string_view default_path, absl::string_view home);

}  // namespace loom
