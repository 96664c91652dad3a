// loomd: serves a Llama-family model over gRPC (API.md). Flags are API.md §3;
// they are validated before anything is loaded.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/model.h"
#include "server/daemon.h"
#include "server/log.h"
#include "server/server_config.h"
#include "server/signal_watcher.h"
#include "server/usage.h"

ABSL_FLAG(std::string, model, "",
          "A .gguf file or a Hugging Face model directory. Default: $LOOM_MODEL when set, else "
          "the bundled SmolLM2-135M-Instruct GGUF under ~/.cache/loom.");
ABSL_FLAG(std::string, load_format, "auto", "auto, gguf, safetensors or dummy (random weights).");
ABSL_FLAG(std::string, device, "auto", "auto (cuda when usable, else cpu), cpu or cuda.");
ABSL_FLAG(std::string, dtype, "auto", "auto, float32, bfloat16 or float16.");
ABSL_FLAG(std::string, attention_kernel, "auto",
          "CUDA paged decode attention: auto (v1 until v2 is verified on a GPU), v1 or v2.");
ABSL_FLAG(std::string, cpu_prefill_precision, "int16",
          "CPU prefill matmuls on quantized weights: int16 activations per block of 32 (with "
          "AVX-512 VNNI, else float32), float32, or int8 (llama.cpp's precision, on Q8_0, "
          "Q4_0/Q4_1 and Q5_0/Q5_1).");
ABSL_FLAG(std::string, cpu_decode_precision, "int16",
          "CPU decode batches (up to 32 tokens a step) on quantized weights: int16 (from 8 "
          "tokens with AVX-512 VNNI; on AVX2-only CPUs every step on K-quants, up to 3 tokens "
          "on the other blocks), float32 or int8 (K-quants from 1 token, the others from 4), "
          "as --cpu_prefill_precision.");
ABSL_FLAG(std::string, cpu_greedy_head, "screened",
          "How a CPU greedy row (no logprobs, penalties, logit_bias or constraint) finds its "
          "token: screened (the float32 logits of only the head rows that can hold the argmax; "
          "the same token as full, faster on large vocabularies) or full (every logit).");
ABSL_FLAG(int32_t, port, 50051, "gRPC port (0 picks a free one).");
ABSL_FLAG(int32_t, http_port, 8080,
          "HTTP port for the OpenAI API, /metrics, /healthz and /readyz (0: a free one).");
ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on.");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV block: a power of two in [8, 256].");
ABSL_FLAG(double, kv_cache_memory_fraction, 0.9,
          "Share of free device memory that weights + KV may take (cuda).");
ABSL_FLAG(int64_t, kv_cache_bytes, 0, "Explicit KV budget in bytes (0: sized automatically).");
ABSL_FLAG(int32_t, max_num_seqs, 256, "Sequences per step.");
ABSL_FLAG(int32_t, max_num_batched_tokens, 0,
          "Tokens per step, decodes and prefill chunks together (0: 512 on the CPU, 8192 on a "
          "GPU, and at least --max_num_seqs).");
ABSL_FLAG(int32_t, max_logit_bias, 1024, "logit_bias entries a request may carry.");
ABSL_FLAG(int32_t, max_model_len, 0, "Context length (0: from the model).");
ABSL_FLAG(int32_t, max_queued_requests, 1024,
          "Waiting requests beyond this get RESOURCE_EXHAUSTED.");
ABSL_FLAG(bool, enable_prefix_caching, true, "Share KV blocks of common prompt prefixes.");
ABSL_FLAG(std::string, scheduling_policy, "fcfs",
          "fcfs, priority or shortest_prompt (shorter prompts first, aged by "
          "--prompt_token_aging).");
ABSL_FLAG(int32_t, long_prefill_token_threshold, -1,
          "Most tokens of one prefill chunk (0: no cap; -1: by device, 128 on the CPU, no cap on "
          "a GPU).");
ABSL_FLAG(int32_t, max_num_partial_prefills, -1,
          "Most sequences given a prefill chunk that leaves part of their prompt for later, in "
          "one step (0: no limit; -1: by device, 1 on the CPU, no limit on a GPU).");
ABSL_FLAG(double, max_step_ms, 0,
          "Step-time target in ms when prompt chunks share a step with running decodes: the "
          "chunks shrink to what the measured step cost fits in it, less the decodes, at least "
          "32 tokens a step (0: no target).");
ABSL_FLAG(std::string, admission, "optimistic",
          "optimistic (admit while blocks exist, preempt when full) or reserve (admit only "
          "when prompt + max_tokens fit, never preempt).");
// A string, parsed with absl::ParseDuration: reading a Duration-typed flag takes
// a sequence lock whose fences GCC rejects under -fsanitize=thread.
ABSL_FLAG(std::string, prompt_token_aging, "0",
          "shortest_prompt: waiting this long is worth one prompt token (0: by device, 2ms on "
          "the CPU, 100us on a GPU).");
ABSL_FLAG(std::string, drain_timeout, "30s",
          "On SIGTERM/SIGINT: how long requests in flight may run before they are aborted.");
ABSL_FLAG(std::string, engine_stall_timeout, "60s",
          "Work pending and no engine progress for this long: /healthz answers 503 and gRPC "
          "health NOT_SERVING.");
ABSL_FLAG(int32_t, threads, 0, "CPU backend threads (0: all cores).");
ABSL_FLAG(std::string, generation_config, "auto",
          "Defaults for the sampling fields a request leaves unset: auto (what the model ships: "
          "generation_config.json beside safetensors, or GGUF general.sampling.* keys), none (the "
          "API defaults), or a folder holding a generation_config.json.");
ABSL_FLAG(std::string, override_generation_config, "",
          "JSON object of server-wide defaults over --generation_config, e.g. "
          "'{\"temperature\": 0.7, \"top_p\": 0.9}'; keys: temperature, top_p, top_k, min_p, "
          "repetition_penalty, presence_penalty, frequency_penalty, max_tokens.");
ABSL_FLAG(std::string, served_model_name, "",
          "Model name reported to clients (default: the "
          "model's).");

ABSL_FLAG(int32_t, max_stop_token_ids, 128,
          "Most stopping.stop_token_ids entries a request may have.");
ABSL_FLAG(int32_t, max_cache_salt_bytes, 256, "Longest cache_salt a request may have, in bytes.");
ABSL_FLAG(int64_t, max_prompt_bytes, 1 << 20,
          "Longest prompt text (or all chat messages together) a request may have, in bytes.");
ABSL_FLAG(int32_t, max_prompt_tokens, 1 << 20,
          "Most prompt_token_ids entries a request may have (prompts must also fit max_model_len "
          "unless truncated).");
ABSL_FLAG(int32_t, grpc_max_receive_bytes, 16 << 20,
          "Largest gRPC request message; larger ones get RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, grpc_keepalive_time, "60s", "How often loomd pings an idle connection.");
ABSL_FLAG(std::string, grpc_keepalive_timeout, "20s",
          "A connection whose ping is unanswered this long is closed.");
ABSL_FLAG(bool, grpc_keepalive_permit_without_calls, true,
          "Keepalive pings also on connections without calls in flight.");
ABSL_FLAG(int32_t, grpc_max_concurrent_streams, 1024,
          "Calls one gRPC connection may have open (the default fills --max_queued_requests).");
ABSL_FLAG(int64_t, max_stream_buffer_bytes, 4 << 20,
          "Unsent output a GenerateStream call may hold for a client that does not read.");
ABSL_FLAG(std::string, stream_buffer_grace, "10s",
          "A stream over --max_stream_buffer_bytes this long is aborted (RESOURCE_EXHAUSTED).");
ABSL_FLAG(int32_t, http_threads, 2,
          "I/O threads of the HTTP port (asynchronous: not per connection).");
ABSL_FLAG(int32_t, http_max_connections, 4096,
          "Open HTTP connections beyond this are closed at once; the open-files limit is raised "
          "to fit.");
ABSL_FLAG(std::string, http_header_timeout, "30s",
          "An HTTP request head (or an idle keep-alive connection) must arrive within this.");
ABSL_FLAG(std::string, http_body_timeout, "60s", "An HTTP request body must arrive within this.");
ABSL_FLAG(int64_t, http_max_body_bytes, 8 << 20, "Largest HTTP request body; larger ones get 413.");
ABSL_FLAG(bool, access_log, true, "Log one line per finished Generate/GenerateStream call.");
ABSL_FLAG(std::string, kv_events_endpoint, "",
          "Publish KV-cache events (vLLM's ZeroMQ format) on this endpoint: bound when it "
          "contains * (tcp://*:5557), else connected (tcp://router:5557). Empty: off.");
ABSL_FLAG(std::string, kv_events_topic, "",
          "The topic of every KV-event message, e.g. kv@<pod ip>@<model> for the llm-d indexer.");
ABSL_FLAG(std::string, kv_events_replay_endpoint, "",
          "Bind a ROUTER here that replays buffered KV-event batches from a sequence number.");
ABSL_FLAG(std::string, api_keys_file, "",
          "One API key per line (optionally followed by a tenant name); every generation RPC "
          "and OpenAI route then needs \"Authorization: Bearer <key>\". Reloaded on SIGHUP and "
          "when the file changes. Empty: no auth.");
ABSL_FLAG(bool, metrics_require_auth, false, "GET /metrics needs an API key too.");
ABSL_FLAG(std::string, reflection, "open",
          "gRPC server reflection: open, auth (needs a key of --api_keys_file) or off.");
ABSL_FLAG(int32_t, tenant_max_concurrent_requests, 0,
          "Requests one tenant (of --api_keys_file) may have in flight; more get "
          "RESOURCE_EXHAUSTED / 429. 0: no cap.");
ABSL_FLAG(double, tenant_max_queue_share, 1.0,
          "Share of --max_queued_requests one tenant's waiting requests may take, in (0, 1].");
ABSL_FLAG(std::string, tls_cert_file, "",
          "TLS certificate chain (PEM) for both ports; re-read when it changes.");
ABSL_FLAG(std::string, tls_key_file, "", "TLS private key (PEM) for --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "Require client certificates signed by this CA (PEM): mutual TLS.");
ABSL_FLAG(int32_t, metrics_port, 0,
          "Serve GET /metrics alone on this plaintext port too (0: none), for a NetworkPolicy "
          "that admits Prometheus to metrics only.");
ABSL_FLAG(int32_t, health_port, 0,
          "With TLS: serve gRPC health alone on this plaintext port, for kubelet probes.");
ABSL_FLAG(std::string, chat_template, "",
          "A Jinja chat template file that replaces the model's (e.g. one with a tools section).");
ABSL_FLAG(std::string, tool_call_parser, "auto",
          "How the model writes tool calls: auto (detected from the chat template), none, hermes "
          "or llama3_json.");
ABSL_FLAG(int64_t, max_constraint_bytes, 256 << 10,
          "Longest constraint text (json_schema, regex, grammar, choices) or tool parameter "
          "schema, in bytes.");
ABSL_FLAG(int32_t, max_constraint_states, 50000,
          "Most automaton states one compiled constraint may have.");
ABSL_FLAG(std::string, constraint_compile_timeout, "5s",
          "Longest time one constraint may take to compile; a slower one is refused.");
ABSL_FLAG(bool, debug_kv_blocks, false,
          "Serve GET /debug/kv_blocks on the HTTP port: the prefix index's block hashes.");

namespace {

// Duration flags are strings (see --drain_timeout); false and a logged
// message when one does not parse.
bool ParseDurationFlag(const char* name, const std::string& text, absl::Duration* out) {
  if (absl::ParseDuration(text, out)) {
    return true;
  }
  loom::LogLine(absl::StrCat("invalid flags: --", name, " must be a duration such as 30s; got \"",
                             text, "\""));
  return false;
}

// The limit flags of docs/api.md; false when a duration does not parse.
bool ReadLimitFlags(loom::ServerConfig& config) {
  config.max_stop_token_ids = absl::GetFlag(FLAGS_max_stop_token_ids);
  config.max_cache_salt_bytes = absl::GetFlag(FLAGS_max_cache_salt_bytes);
  config.max_prompt_bytes = absl::GetFlag(FLAGS_max_prompt_bytes);
  config.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  config.grpc_max_receive_bytes = absl::GetFlag(FLAGS_grpc_max_receive_bytes);
  config.grpc_keepalive_permit_without_calls =
      absl::GetFlag(FLAGS_grpc_keepalive_permit_without_calls);
  config.grpc_max_concurrent_streams = absl::GetFlag(FLAGS_grpc_max_concurrent_streams);
  config.max_stream_buffer_bytes = absl::GetFlag(FLAGS_max_stream_buffer_bytes);
  config.access_log = absl::GetFlag(FLAGS_access_log);
  config.kv_events_endpoint = absl::GetFlag(FLAGS_kv_events_endpoint);
  config.kv_events_topic = absl::GetFlag(FLAGS_kv_events_topic);
  config.kv_events_replay_endpoint = absl::GetFlag(FLAGS_kv_events_replay_endpoint);
  config.debug_kv_blocks = absl::GetFlag(FLAGS_debug_kv_blocks);
  config.api_keys_file = absl::GetFlag(FLAGS_api_keys_file);
  config.metrics_require_auth = absl::GetFlag(FLAGS_metrics_require_auth);
  config.tenant_max_concurrent_requests = absl::GetFlag(FLAGS_tenant_max_concurrent_requests);
  config.tenant_max_queue_share = absl::GetFlag(FLAGS_tenant_max_queue_share);
  config.reflection = absl::GetFlag(FLAGS_reflection);
  config.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  config.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  config.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  config.health_port = absl::GetFlag(FLAGS_health_port);
  config.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  config.http_threads = absl::GetFlag(FLAGS_http_threads);
  config.http_max_connections = absl::GetFlag(FLAGS_http_max_connections);
  config.http_max_body_bytes = absl::GetFlag(FLAGS_http_max_body_bytes);
  config.chat_template = absl::GetFlag(FLAGS_chat_template);
  config.tool_call_parser = absl::GetFlag(FLAGS_tool_call_parser);
  config.max_constraint_bytes = absl::GetFlag(FLAGS_max_constraint_bytes);
  config.max_constraint_states = absl::GetFlag(FLAGS_max_constraint_states);
  return ParseDurationFlag("constraint_compile_timeout",
                           absl::GetFlag(FLAGS_constraint_compile_timeout),
                           &config.constraint_compile_timeout) &&
         ParseDurationFlag("http_header_timeout", absl::GetFlag(FLAGS_http_header_timeout),
                           &config.http_header_timeout) &&
         ParseDurationFlag("http_body_timeout", absl::GetFlag(FLAGS_http_body_timeout),
                           &config.http_body_timeout) &&
         ParseDurationFlag("grpc_keepalive_time", absl::GetFlag(FLAGS_grpc_keepalive_time),
                           &config.grpc_keepalive_time) &&
         ParseDurationFlag("grpc_keepalive_timeout", absl::GetFlag(FLAGS_grpc_keepalive_timeout),
                           &config.grpc_keepalive_timeout) &&
         ParseDurationFlag("stream_buffer_grace", absl::GetFlag(FLAGS_stream_buffer_grace),
                           &config.stream_buffer_grace);
}

// Runs the daemon; every exit path lets the log reach stderr first.
int Run(int argc, char** argv) {
  // Before any thread exists, so that only the watcher thread takes them.
  loom::SignalWatcher::BlockSignals();
  loom::ConfigureUsage();
  if (loom::WantsShortUsage(argc, argv)) {
    std::fputs(loom::ShortUsage().c_str(), stdout);
    return 0;
  }
  absl::ParseCommandLine(argc, argv);

  const char* env_model = std::getenv("LOOM_MODEL");
  const char* home = std::getenv("HOME");
  loom::ServerConfig config;
  config.model =
      loom::ResolveModelPath(absl::GetFlag(FLAGS_model), env_model != nullptr ? env_model : "",
                             loom::DefaultModelPath(), home != nullptr ? home : "");
  config.load_format = absl::GetFlag(FLAGS_load_format);
  config.device = absl::GetFlag(FLAGS_device);
  config.dtype = absl::GetFlag(FLAGS_dtype);
  config.attention_kernel = absl::GetFlag(FLAGS_attention_kernel);
  config.cpu_prefill_precision = absl::GetFlag(FLAGS_cpu_prefill_precision);
  config.cpu_decode_precision = absl::GetFlag(FLAGS_cpu_decode_precision);
  config.cpu_greedy_head = absl::GetFlag(FLAGS_cpu_greedy_head);
  config.port = absl::GetFlag(FLAGS_port);
  config.http_port = absl::GetFlag(FLAGS_http_port);
  config.host = absl::GetFlag(FLAGS_host);
  config.block_size = absl::GetFlag(FLAGS_block_size);
  config.kv_cache_memory_fraction = absl::GetFlag(FLAGS_kv_cache_memory_fraction);
  config.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_bytes);
  config.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  config.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  config.max_logit_bias = absl::GetFlag(FLAGS_max_logit_bias);
  config.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  config.max_queued_requests = absl::GetFlag(FLAGS_max_queued_requests);
  config.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  config.scheduling_policy = absl::GetFlag(FLAGS_scheduling_policy);
  config.long_prefill_token_threshold = absl::GetFlag(FLAGS_long_prefill_token_threshold);
  config.max_step_ms = absl::GetFlag(FLAGS_max_step_ms);
  config.max_num_partial_prefills = absl::GetFlag(FLAGS_max_num_partial_prefills);
  config.admission = absl::GetFlag(FLAGS_admission);
  if (!ParseDurationFlag("prompt_token_aging", absl::GetFlag(FLAGS_prompt_token_aging),
                         &config.prompt_token_aging) ||
      !ParseDurationFlag("drain_timeout", absl::GetFlag(FLAGS_drain_timeout),
                         &config.drain_timeout) ||
      !ReadLimitFlags(config)) {
    return 2;
  }
  if (!absl::ParseDuration(absl::GetFlag(FLAGS_engine_stall_timeout),
                           &config.engine_stall_timeout)) {
    loom::LogLine(
        absl::StrCat("invalid flags: --engine_stall_timeout must be a duration such as 60s; got \"",
                     absl::GetFlag(FLAGS_engine_stall_timeout), "\""));
    return 2;
  }
  config.threads = absl::GetFlag(FLAGS_threads);
  config.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  config.generation_config = absl::GetFlag(FLAGS_generation_config);
  config.override_generation_config = absl::GetFlag(FLAGS_override_generation_config);
  if (absl::Status st = loom::ValidateServerConfig(config); !st.ok()) {
    loom::LogLine(absl::StrCat("invalid flags: --", st.message()));
    return 2;
  }
  loom::SignalWatcher watcher;
  return loom::RunDaemon(config, watcher);
}

}  // namespace

int main(int argc, char** argv) {
  const int code = Run(argc, argv);
  loom::FlushLog();
  return code;
}
