#include "server/server_config.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace loom {
namespace {

absl::Status CheckOneOf(absl::string_view flag, const std::string& value,
                        std::initializer_list<absl::string_view> allowed) {
  for (absl::string_view a : allowed) {
    if (value == a) {
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " must be one of ", absl::StrJoin(allowed, ", "), "; got \"", value, "\""));
}

absl::Status Invalid(absl::string_view flag, absl::string_view rule, absl::string_view got) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " must be ", rule, "; got ", got));
}

absl::Status CheckPort(absl::string_view flag, int32_t port) {
  if (0 <= port && port <= 65535) {
    return absl::OkStatus();
  }
  return Invalid(flag, "in [0, 65535] (0 picks a free port)", absl::StrCat(port));
}

std::string ExpandHome(absl::string_view path, absl::string_view home) {
  if (!home.empty() && (path == "~" || absl::StartsWith(path, "~/"))) {
    return absl::StrCat(home, path.substr(1));
  }
  return {path.data(), path.size()};
}

absl::Status CheckAtLeast(absl::string_view flag, int64_t value, int64_t min) {
  if (value >= min) {
    return absl::OkStatus();
  }
  return Invalid(flag, absl::StrCat(">= ", min), absl::StrCat(value));
}

absl::Status CheckPositive(absl::string_view flag, absl::Duration value) {
  if (value > absl::ZeroDuration()) {
    return absl::OkStatus();
  }
  return Invalid(flag, "> 0s", absl::FormatDuration(value));
}

absl::Status CheckZmqEndpoint(absl::string_view flag, const std::string& endpoint) {
  for (absl::string_view scheme : {"tcp://", "ipc://", "inproc://"}) {
    if (absl::StartsWith(endpoint, scheme) && endpoint.size() > scheme.size()) {
      return absl::OkStatus();
    }
  }
  return Invalid(
      flag,
      "a ZeroMQ endpoint such as tcp://*:5557 or tcp://host:5557 (tcp://, ipc:// or inproc://)",
      absl::StrCat("\"", endpoint, "\""));
}

absl::Status ValidateKvEvents(const ServerConfig& c) {
  if (c.kv_events_endpoint.empty()) {
    if (!c.kv_events_replay_endpoint.empty() || !c.kv_events_topic.empty()) {
      return absl::InvalidArgumentError(
          "kv_events_topic and kv_events_replay_endpoint need --kv_events_endpoint");
    }
    return absl::OkStatus();
  }
  if (!c.enable_prefix_caching) {
    return absl::InvalidArgumentError(
        "kv_events_endpoint needs --enable_prefix_caching: without the prefix index there are no "
        "KV-cache events");
  }
  LOOM_RETURN_IF_ERROR(CheckZmqEndpoint("kv_events_endpoint", c.kv_events_endpoint));
  if (!c.kv_events_replay_endpoint.empty()) {
    LOOM_RETURN_IF_ERROR(
        CheckZmqEndpoint("kv_events_replay_endpoint", c.kv_events_replay_endpoint));
  }
  return absl::OkStatus();
}

absl::Status ValidateLimits(const ServerConfig& c) {
  const std::pair<absl::string_view, int64_t> at_least_one[] = {
      {"max_stop_token_ids", c.max_stop_token_ids},
      {"max_cache_salt_bytes", c.max_cache_salt_bytes},
      {"max_prompt_bytes", c.max_prompt_bytes},
      {"max_prompt_tokens", c.max_prompt_tokens},
      {"grpc_max_receive_bytes", c.grpc_max_receive_bytes},
      {"grpc_max_concurrent_streams", c.grpc_max_concurrent_streams},
      {"max_stream_buffer_bytes", c.max_stream_buffer_bytes},
      {"http_threads", c.http_threads},
      {"http_max_connections", c.http_max_connections},
      {"http_max_body_bytes", c.http_max_body_bytes},
      {"max_constraint_bytes", c.max_constraint_bytes},
      {"max_constraint_states", c.max_constraint_states}};
  for (const auto& [flag, value] : at_least_one) {
    LOOM_RETURN_IF_ERROR(CheckAtLeast(flag, value, 1));
  }
  const std::pair<absl::string_view, absl::Duration> positive[] = {
      {"grpc_keepalive_time", c.grpc_keepalive_time},
      {"grpc_keepalive_timeout", c.grpc_keepalive_timeout},
      {"stream_buffer_grace", c.stream_buffer_grace},
      {"http_header_timeout", c.http_header_timeout},
      {"http_body_timeout", c.http_body_timeout},
      {"constraint_compile_timeout", c.constraint_compile_timeout}};
  for (const auto& [flag, value] : positive) {
    LOOM_RETURN_IF_ERROR(CheckPositive(flag, value));
  }
  return CheckOneOf("tool_call_parser", c.tool_call_parser,
                    {"auto", "none", "hermes", "llama3_json"});
}

}  // namespace

int32_t TenantMaxWaiting(const ServerConfig& c) {
  if (c.tenant_max_queue_share >= 1) {
    return 0;
  }
  return std::max(1, static_cast<int32_t>(c.tenant_max_queue_share * c.max_queued_requests));
}

absl::Status ValidateServerConfig(const ServerConfig& c) {
  if (c.model.empty()) {
    return absl::InvalidArgumentError("model must be a path; got \"\"");
  }
  LOOM_RETURN_IF_ERROR(
      CheckOneOf("load_format", c.load_format, {"auto", "gguf", "safetensors", "dummy"}));
  LOOM_RETURN_IF_ERROR(CheckOneOf("device", c.device, {"auto", "cpu", "cuda"}));
  LOOM_RETURN_IF_ERROR(CheckOneOf("dtype", c.dtype, {"auto", "float32", "bfloat16", "float16"}));
  LOOM_RETURN_IF_ERROR(CheckOneOf("attention_kernel", c.attention_kernel, {"auto", "v1", "v2"}));
  LOOM_RETURN_IF_ERROR(
      CheckOneOf("cpu_prefill_precision", c.cpu_prefill_precision, {"float32", "int16", "int8"}));
  LOOM_RETURN_IF_ERROR(
      CheckOneOf("cpu_decode_precision", c.cpu_decode_precision, {"float32", "int16", "int8"}));
  LOOM_RETURN_IF_ERROR(CheckOneOf("cpu_greedy_head", c.cpu_greedy_head, {"screened", "full"}));
  LOOM_RETURN_IF_ERROR(CheckPort("port", c.port));
  LOOM_RETURN_IF_ERROR(CheckPort("http_port", c.http_port));
  if (c.host.empty()) {
    return absl::InvalidArgumentError("host must not be empty");
  }
  const bool power_of_two = c.block_size > 0 && (c.block_size & (c.block_size - 1)) == 0;
  if (!power_of_two || c.block_size < 8 || c.block_size > 256) {
    return Invalid("block_size", "a power of two between 8 and 256", absl::StrCat(c.block_size));
  }
  if (!(c.kv_cache_memory_fraction > 0 && c.kv_cache_memory_fraction <= 1)) {
    return Invalid("kv_cache_memory_fraction", "in (0, 1]",
                   absl::StrCat(c.kv_cache_memory_fraction));
  }
  if (c.kv_cache_bytes < 0) {
    return Invalid("kv_cache_bytes", ">= 0 (0 = sized automatically)",
                   absl::StrCat(c.kv_cache_bytes));
  }
  if (c.max_num_seqs < 1) {
    return Invalid("max_num_seqs", ">= 1", absl::StrCat(c.max_num_seqs));
  }
  if (c.max_num_batched_tokens != 0 && c.max_num_batched_tokens < c.max_num_seqs) {
    return Invalid("max_num_batched_tokens",
                   absl::StrCat("0 (by device) or >= max_num_seqs (", c.max_num_seqs, ")"),
                   absl::StrCat(c.max_num_batched_tokens));
  }
  if (c.max_logit_bias < 0) {
    return Invalid("max_logit_bias", ">= 0", absl::StrCat(c.max_logit_bias));
  }
  if (c.max_model_len < 0) {
    return Invalid("max_model_len", ">= 0 (0 = from the model)", absl::StrCat(c.max_model_len));
  }
  if (c.max_queued_requests < 1) {
    return Invalid("max_queued_requests", ">= 1", absl::StrCat(c.max_queued_requests));
  }
  if (c.generation_config.empty()) {
    return absl::InvalidArgumentError(
        "generation_config must be auto, none or a folder holding generation_config.json");
  }
  LOOM_RETURN_IF_ERROR(CheckOneOf("scheduling_policy", c.scheduling_policy,
                                  {"fcfs", "priority", "shortest_prompt"}));
  if (c.long_prefill_token_threshold < -1) {
    return Invalid("long_prefill_token_threshold", ">= 0 (0 = no cap), or -1 (by device)",
                   absl::StrCat(c.long_prefill_token_threshold));
  }
  if (c.max_num_partial_prefills < -1) {
    return Invalid("max_num_partial_prefills", ">= 0 (0 = no limit), or -1 (by device)",
                   absl::StrCat(c.max_num_partial_prefills));
  }
  if (!(c.max_step_ms >= 0.0 && c.max_step_ms <= 3.6e6)) {
    return Invalid("max_step_ms", "in [0, 3600000] (0 = no target)",
                   absl::StrFormat("%.15g", c.max_step_ms));
  }
  if (c.prompt_token_aging < absl::ZeroDuration()) {
    return Invalid("prompt_token_aging", ">= 0 (0 = by device)",
                   absl::FormatDuration(c.prompt_token_aging));
  }
  LOOM_RETURN_IF_ERROR(CheckOneOf("admission", c.admission, {"optimistic", "reserve"}));
  if (c.drain_timeout < absl::ZeroDuration()) {
    return Invalid("drain_timeout", ">= 0s", absl::FormatDuration(c.drain_timeout));
  }
  if (c.engine_stall_timeout <= absl::ZeroDuration()) {
    return Invalid("engine_stall_timeout", "> 0s", absl::FormatDuration(c.engine_stall_timeout));
  }
  if (c.threads < 0) {
    return Invalid("threads", ">= 0 (0 = all cores)", absl::StrCat(c.threads));
  }
  LOOM_RETURN_IF_ERROR(ValidateKvEvents(c));
  LOOM_RETURN_IF_ERROR(CheckOneOf("reflection", c.reflection, {"open", "auth", "off"}));
  if (c.reflection == "auth" && c.api_keys_file.empty()) {
    return absl::InvalidArgumentError("reflection=auth needs --api_keys_file");
  }
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert_file and tls_key_file go together");
  }
  if (c.tls_cert_file.empty() && !c.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_client_ca_file needs --tls_cert_file and --tls_key_file");
  }
  if (c.health_port != 0) {
    if (c.tls_cert_file.empty()) {
      return absl::InvalidArgumentError(
          "health_port needs --tls_cert_file: without TLS, probes use --port");
    }
    if (c.health_port < 1 || c.health_port > 65535 || c.health_port == c.port ||
        c.health_port == c.http_port) {
      return Invalid("health_port", "in [1, 65535] and apart from --port and --http_port",
                     absl::StrCat(c.health_port));
    }
  }
  if (c.metrics_port != 0 &&
      (c.metrics_port < 1 || c.metrics_port > 65535 || c.metrics_port == c.port ||
       c.metrics_port == c.http_port || c.metrics_port == c.health_port)) {
    return Invalid("metrics_port",
                   "0 (none) or in [1, 65535] and apart from --port, --http_port and --health_port",
                   absl::StrCat(c.metrics_port));
  }
  if (c.metrics_require_auth && c.api_keys_file.empty()) {
    return absl::InvalidArgumentError("metrics_require_auth needs --api_keys_file");
  }
  if (c.tenant_max_concurrent_requests < 0) {
    return Invalid("tenant_max_concurrent_requests", ">= 0 (0 = no cap)",
                   absl::StrCat(c.tenant_max_concurrent_requests));
  }
  if (!(c.tenant_max_queue_share > 0 && c.tenant_max_queue_share <= 1)) {
    return Invalid("tenant_max_queue_share", "in (0, 1]", absl::StrCat(c.tenant_max_queue_share));
  }
  if ((c.tenant_max_concurrent_requests != 0 || c.tenant_max_queue_share != 1) &&
      c.api_keys_file.empty()) {
    return absl::InvalidArgumentError(
        "tenant_max_concurrent_requests and tenant_max_queue_share need --api_keys_file with "
        "tenants");
  }
  return ValidateLimits(c);
}

std::string ResolveModelPath(absl::string_view flag_value, absl::string_view env_value,
                             absl::string_view default_path, absl::string_view home) {
  if (!flag_value.empty()) {
    return ExpandHome(flag_value, home);
  }
  if (!env_value.empty()) {
    return ExpandHome(env_value, home);
  }
  return ExpandHome(default_path, home);
}

PrefillChunking ResolvedPrefillChunking(const ServerConfig& config, absl::string_view device) {
  const bool cpu = device == "cpu";
  PrefillChunking c;
  c.long_prefill_token_threshold = config.long_prefill_token_threshold >= 0
                                       ? config.long_prefill_token_threshold
                                       : (cpu ? kCpuLongPrefillTokenThreshold : 0);
  c.max_num_partial_prefills = config.max_num_partial_prefills >= 0
                                   ? config.max_num_partial_prefills
                                   : (cpu ? kCpuMaxNumPartialPrefills : 0);
  c.prompt_token_aging = config.prompt_token_aging > absl::ZeroDuration()
                             ? config.prompt_token_aging
                             : (cpu ? absl::Milliseconds(2) : absl::Microseconds(100));
  c.max_step_ms = config.max_step_ms;
  return c;
}

void PrefillChunking::ApplyTo(SchedulerConfig& s) const {
  s.long_prefill_token_threshold = long_prefill_token_threshold;
  s.max_num_partial_prefills = max_num_partial_prefills;
  s.prompt_token_aging = prompt_token_aging;
  s.max_step_ms = max_step_ms;
}

int32_t ResolvedMaxNumBatchedTokens(const ServerConfig& config, absl::string_view device) {
  if (config.max_num_batched_tokens > 0) return config.max_num_batched_tokens;
  if (device == "cpu") return std::max(kCpuMaxNumBatchedTokens, config.max_num_seqs);
  return std::max(kGpuMaxNumBatchedTokens, config.max_num_seqs);
}

}  // namespace loom
