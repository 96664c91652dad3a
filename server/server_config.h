// loomd's command-line settings as plain data (API.md §3), checked at start-up
// before anything is loaded. main.cc fills it from the absl flags; keeping the
// checks here makes every message testable without a process.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "types/scheduler_config.h"

namespace loom {

struct ServerConfig {
  std::string model;  // resolved path (ResolveModelPath)
  std::string load_format = "auto";
  std::string device = "auto";
  std::string dtype = "auto";
  // CUDA decode attention kernel: auto (= v1), v1, v2
  std::string attention_kernel = "auto";
  // CPU prefill matmuls on quantized weights: int16 activations (with AVX-512
  // VNNI; else float32), float32, or int8 (llama.cpp's precision).
  std::string cpu_prefill_precision = "int16";
  // The same for decode steps of up to 32 tokens (int16 from 8, int8 from 4).
  std::string cpu_decode_precision = "int16";
  // How greedy rows find their token on the CPU: screened or full.
  std::string cpu_greedy_head = "screened";
  int32_t port = 50051;  // 0 picks a free port
  int32_t http_port = 8080;
  std::string host = "0.0.0.0";
  int32_t block_size = 16;
  double kv_cache_memory_fraction = 0.9;
  int64_t kv_cache_bytes = 0;
  int32_t max_num_seqs = 256;
  // 0 = by device (ResolvedMaxNumBatchedTokens).
  int32_t max_num_batched_tokens = 0;
  // Prefill chunking (SchedulerConfig); -1 = by device (ResolvedPrefillChunking).
  int32_t long_prefill_token_threshold = -1;  // 0 = no cap
  int32_t max_num_partial_prefills = -1;      // 0 = no limit
  // shortest_prompt's aging per prompt token; 0 = by device.
  absl::Duration prompt_token_aging = absl::ZeroDuration();
  // Step-time target for steps mixing prompt chunks and decodes, in ms;
  // 0 = none.
  double max_step_ms = 0.0;
  int32_t max_logit_bias = 1024;  // logit_bias entries per request
  int32_t max_model_len = 0;      // 0: from the model
  int32_t max_queued_requests = 1024;
  bool enable_prefix_caching = true;
  std::string scheduling_policy = "fcfs";  // fcfs, priority or shortest_prompt
  std::string admission = "optimistic";    // optimistic (preempt when full) or reserve
  absl::Duration drain_timeout = absl::Seconds(30);
  // Work pending and no engine progress this long: liveness probes fail.
  absl::Duration engine_stall_timeout = absl::Seconds(60);
  int32_t threads = 0;            // 0: all cores
  std::string served_model_name;  // empty: from the model
  // auto | none | a folder with generation_config.json (GenerationDefaults).
  std::string generation_config = "auto";
  std::string override_generation_config;  // a JSON object; empty: none
  // Request field limits (request_validator.h, RequestLimits).
  int32_t max_stop_token_ids = 128;
  int32_t max_cache_salt_bytes = 256;
  int64_t max_prompt_bytes = int64_t{1} << 20;
  int32_t max_prompt_tokens = int32_t{1} << 20;
  // Transport and per-stream limits (GrpcServerOptions, ServiceOptions).
  int32_t grpc_max_receive_bytes = 16 << 20;
  absl::Duration grpc_keepalive_time = absl::Seconds(60);
  absl::Duration grpc_keepalive_timeout = absl::Seconds(20);
  bool grpc_keepalive_permit_without_calls = true;
  int32_t grpc_max_concurrent_streams = 1024;
  int64_t max_stream_buffer_bytes = int64_t{4} << 20;
  absl::Duration stream_buffer_grace = absl::Seconds(10);
  // The HTTP port (HttpServerOptions).
  int32_t http_threads = 2;
  int32_t http_max_connections = 4096;
  absl::Duration http_header_timeout = absl::Seconds(30);
  absl::Duration http_body_timeout = absl::Seconds(60);
  int64_t http_max_body_bytes = int64_t{8} << 20;
  bool access_log = true;
  // KV-cache events (server/kv_event_publisher.h): the ZeroMQ PUB endpoint
  // (empty: off), the topic every message carries, and the ROUTER endpoint
  // that replays buffered batches (empty: none).
  std::string kv_events_endpoint;
  std::string kv_events_topic;
  std::string kv_events_replay_endpoint;
  // GET /debug/kv_blocks on the HTTP port: the prefix index's block hashes.
  bool debug_kv_blocks = false;
  // API keys (server/api_keys.h): empty = auth off.
  std::string api_keys_file;
  bool metrics_require_auth = false;  // /metrics needs a key too
  std::string reflection = "open";    // gRPC server reflection: open, auth or off
  // Per-tenant admission (server/tenant_limiter.h), for keys that name a
  // tenant: requests in flight at most (0 = no cap), and the share of
  // --max_queued_requests one tenant's waiting requests may take (1 = all).
  int32_t tenant_max_concurrent_requests = 0;
  double tenant_max_queue_share = 1.0;
  // TLS on both ports (PEM files; empty = plaintext); a client CA = mTLS.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // With TLS: gRPC health alone on this plaintext port, for kubelet probes
  // (0 = none).
  int32_t health_port = 0;
  // A plaintext port serving GET /metrics alone (0 = none), so that a
  // NetworkPolicy can admit Prometheus to metrics without the API.
  int32_t metrics_port = 0;
  // Structured outputs and tools (server/structured_outputs_setup.h): a Jinja
  // file replacing the model's chat template (empty: the model's); the
  // tool-call format (auto: detected from the template, none, hermes,
  // llama3_json); the limits on one constraint's text, automaton and
  // compile time.
  std::string chat_template;
  std::string tool_call_parser = "auto";
  int64_t max_constraint_bytes = int64_t{256} << 10;
  int32_t max_constraint_states = 50000;
  absl::Duration constraint_compile_timeout = absl::Seconds(5);
};

// INVALID_ARGUMENT naming the first bad flag and what it accepts, e.g.
// "block_size must be a power of two between 8 and 256; got 7".
absl::Status ValidateServerConfig(const ServerConfig& config);

// The most waiting requests one tenant may have under
// --tenant_max_queue_share (0: no cap).
int32_t TenantMaxWaiting(const ServerConfig& config);

// The per-step token budget when --max_num_batched_tokens is 0: on the CPU
// kCpuMaxNumBatchedTokens (but at least max_num_seqs), which keeps a wave of
// long prompts from holding every stream's first token and every decode for
// one long step (docs/benchmarks.md, the sweep); elsewhere 8192.
inline constexpr int32_t kCpuMaxNumBatchedTokens = 512;
inline constexpr int32_t kGpuMaxNumBatchedTokens = 8192;
int32_t ResolvedMaxNumBatchedTokens(const ServerConfig& config, absl::string_view device);

// Prefill chunking by device where a flag is left at -1 (0 for the aging). On
// the CPU a step adds at most one chunk of kCpuLongPrefillTokenThreshold
// prompt tokens to its decodes: their inter-token latency stays within a few
// decode steps, and prompts are prefilled one after another, the first ones
// finished early (docs/benchmarks.md, the sweep). GPUs keep vLLM's defaults
// (no cap, no limit). The shortest-prompt policy ages a request by about one
// token's prefill time per prompt token.
struct PrefillChunking {
  int32_t long_prefill_token_threshold;
  int32_t max_num_partial_prefills;
  absl::Duration prompt_token_aging;
  double max_step_ms;
  void ApplyTo(SchedulerConfig& s) const;
};
inline constexpr int32_t kCpuLongPrefillTokenThreshold = 128;
inline constexpr int32_t kCpuMaxNumPartialPrefills = 1;

PrefillChunking ResolvedPrefillChunking(const ServerConfig& config, absl::string_view device);

// The model to load: the --model flag when given, else $LOOM_MODEL when set,
// else the bundled default. A leading "~/" expands to home.
std::string ResolveModelPath(absl::string_view flag_value, absl::string_view env_value,
                             absl::string_view default_path, absl::string_view home);

}  // namespace loom
