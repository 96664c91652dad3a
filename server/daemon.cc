#include "server/daemon.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine.h"
#include "engine/fault_injecting_executor.h"
#include "model/executor_factory.h"
#include "model/generation_config.h"
#include "model/model.h"
#include "server/api_keys.h"
#include "server/daemon_routes.h"
#include "server/engine_backend.h"
#include "server/generation_service.h"
#include "server/grpc_server.h"
#include "server/http_server.h"
#include "server/kv_event_publisher.h"
#include "server/listen_ports.h"
#include "server/loaded_model_frontend.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/openai_http.h"
#include "server/request_validator.h"
#include "server/structured_outputs_setup.h"
#include "server/tenant_limiter.h"
#include "tokenizer/tokenizer_detokenizer.h"

#ifndef LOOM_VERSION
#define LOOM_VERSION "dev"
#endif

namespace loom {
namespace {

// How often the main thread looks at the engine's health while it waits for
// a signal: an engine failure is noticed within this long.
constexpr absl::Duration kHealthPollInterval = absl::Milliseconds(200);
// After the engine has gone idle, what remains are final writes and health
// Watch streams; these get this long before the listener cancels them.
constexpr absl::Duration kListenerGrace = absl::Seconds(2);

DType DummyDType(const std::string& dtype) {
  return dtype == "float32" ? DType::kF32 : dtype == "float16" ? DType::kF16 : DType::kBF16;
}

EngineConfig MakeEngineConfig(const ServerConfig& config, const LoadedModel& model,
                              const std::string& device) {
  EngineConfig engine;
  SchedulerConfig& s = engine.scheduler;
  s.max_num_seqs = config.max_num_seqs;
  s.max_num_batched_tokens = ResolvedMaxNumBatchedTokens(config, device);
  s.max_model_len = model.max_model_len;
  s.max_queued_requests = config.max_queued_requests;
  s.policy = config.scheduling_policy == "priority"          ? SchedulingPolicy::kPriority
             : config.scheduling_policy == "shortest_prompt" ? SchedulingPolicy::kShortestPrompt
                                                             : SchedulingPolicy::kFcfs;
  ResolvedPrefillChunking(config, device).ApplyTo(s);
  s.admission =
      config.admission == "reserve" ? AdmissionPolicy::kReserve : AdmissionPolicy::kOptimistic;
  s.eos_token_ids =
      model.config.eos_token_ids.empty() ? model.tokenizer->eos_ids() : model.config.eos_token_ids;
  engine.enable_prefix_caching = config.enable_prefix_caching;
  engine.warmup = true;
  return engine;
}

ExecutorOptions MakeExecutorOptions(const ServerConfig& config, const LoadedModel& model) {
  ExecutorOptions options;
  options.device = config.device;
  options.dtype = config.dtype;
  options.attention_kernel = config.attention_kernel;
  options.cpu_prefill_precision = config.cpu_prefill_precision;
  options.cpu_decode_precision = config.cpu_decode_precision;
  options.cpu_greedy_head = config.cpu_greedy_head;
  options.block_size = config.block_size;
  options.kv_cache_bytes = config.kv_cache_bytes;
  options.kv_cache_memory_fraction = config.kv_cache_memory_fraction;
  options.threads = config.threads;
  options.max_model_len = model.max_model_len;
  options.max_num_seqs = config.max_num_seqs;
  // Sizes the CUDA executor's buffers; the CPU executor has none to size.
  options.max_num_batched_tokens = ResolvedMaxNumBatchedTokens(config, "cuda");
  options.max_logit_bias = config.max_logit_bias;
  return options;
}

ServiceOptions MakeServiceOptions(const ServerConfig& config,
                                  const GenerationDefaults& generation_defaults,
                                  const ApiKeyStore* api_keys,
                                  const StructuredOutputsSetup& structured) {
  ServiceOptions options;
  options.api_keys = api_keys;
  options.structured_outputs = {structured.compiler.get(), structured.tool_call_format};
  options.limits.max_constraint_bytes = config.max_constraint_bytes;
  options.generation_defaults = generation_defaults;
  options.limits.max_logit_bias = config.max_logit_bias;
  options.limits.max_stop_token_ids = config.max_stop_token_ids;
  options.limits.max_cache_salt_bytes = config.max_cache_salt_bytes;
  options.limits.max_prompt_bytes = config.max_prompt_bytes;
  options.limits.max_prompt_tokens = config.max_prompt_tokens;
  options.max_stream_buffer_bytes = config.max_stream_buffer_bytes;
  options.stream_buffer_grace = config.stream_buffer_grace;
  options.access_log = config.access_log;
  return options;
}

GrpcServerOptions MakeGrpcServerOptions(const ServerConfig& config, const ApiKeyStore* api_keys) {
  GrpcServerOptions options;
  options.max_receive_bytes = config.grpc_max_receive_bytes;
  options.keepalive_time = config.grpc_keepalive_time;
  options.keepalive_timeout = config.grpc_keepalive_timeout;
  options.keepalive_permit_without_calls = config.grpc_keepalive_permit_without_calls;
  options.max_concurrent_streams = config.grpc_max_concurrent_streams;
  using Reflection = GrpcServerOptions::Reflection;
  options.reflection = config.reflection == "off"    ? Reflection::kOff
                       : config.reflection == "auth" ? Reflection::kAuth
                                                     : Reflection::kOpen;
  options.api_keys = api_keys;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.tls_client_ca_file = config.tls_client_ca_file;
  options.health_port = config.health_port == 0 ? -1 : config.health_port;
  return options;
}

// --override_generation_config, parsed and checked before the model loads,
// so that a typo fails at once.
absl::StatusOr<GenerationDefaults> OverrideGenerationDefaults(const ServerConfig& config) {
  if (config.override_generation_config.empty()) return GenerationDefaults{};
  absl::StatusOr<GenerationDefaults> over =
      GenerationDefaultsFromJson(config.override_generation_config, /*strict=*/true);
  absl::Status status = over.ok() ? ValidateGenerationDefaults(*over) : over.status();
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("override_generation_config: ", status.message()));
  }
  return over;
}

// What --generation_config takes the defaults from: the model (auto), nothing
// (none), or a folder's generation_config.json; checked like the override.
absl::StatusOr<GenerationDefaults> BaseGenerationDefaults(const ServerConfig& config,
                                                          const LoadedModel& model) {
  GenerationDefaults base;
  std::string source = "the model's";
  if (config.generation_config == "auto") {
    base = model.generation_defaults;
  } else if (config.generation_config != "none") {
    const std::filesystem::path file =
        std::filesystem::path(config.generation_config) / "generation_config.json";
    std::ifstream in(file);
    if (!in)
      return absl::NotFoundError(absl::StrCat("--generation_config: cannot read ", file.string()));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    absl::StatusOr<GenerationDefaults> read = GenerationDefaultsFromJson(text, /*strict=*/false);
    if (!read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", read.status().message()));
    }
    base = *read;
    source = file.string() + "'s";
  }
  if (absl::Status st = ValidateGenerationDefaults(base); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, " generation defaults are out of range (--generation_config=none ignores them): ",
        st.message()));
  }
  return base;
}

std::string ServedName(const ServerConfig& config, const LoadedModel& model) {
  return config.served_model_name.empty() ? model.name : config.served_model_name;
}

// Waits for the end of the run: a signal (true) or an engine failure (false).
// Meanwhile gRPC health follows liveness: NOT_SERVING while the engine is
// stalled, SERVING again once it progresses.
// Reloads --api_keys_file after a SIGHUP, or when the file changed; the
// keys in force stay when the new file is bad.
void ReloadApiKeys(ApiKeyStore& keys, bool force) {
  absl::StatusOr<bool> reloaded = keys.Reload(force);
  if (!reloaded.ok()) {
    LogLine(absl::StrCat("cannot reload the API keys, keeping the previous ones: ",
                         reloaded.status().message()));
  } else if (*reloaded) {
    const std::shared_ptr<const ApiKeySet> set = keys.keys();
    LogLine(absl::StrCat("reloaded --api_keys_file=", keys.path(), ": ", set->size(), " keys, ",
                         set->Tenants().size(), " tenants"));
  }
}

bool WaitForSignalOrFailure(SignalWatcher& watcher, const Engine& engine,
                            absl::Duration stall_timeout, GrpcServer& grpc_server,
                            HttpServer& http_server, ApiKeyStore* api_keys) {
  bool serving = true;
  int64_t hangups = watcher.hangups();
  while (!watcher.WaitForSignal(kHealthPollInterval)) {
    if (!engine.healthy()) {
      return false;
    }
    if (api_keys != nullptr) {
      const int64_t now = watcher.hangups();
      ReloadApiKeys(*api_keys, now != hangups);
      hangups = now;
    }
    // gRPC watches its own TLS files (GrpcServerOptions::tls_refresh).
    if (absl::StatusOr<bool> tls = http_server.ReloadTlsIfChanged(); !tls.ok()) {
      LogLine(absl::StrCat("cannot reload the HTTP port's TLS files, keeping the previous ones: ",
                           tls.status().message()));
    } else if (*tls) {
      LogLine("reloaded the HTTP port's TLS certificate");
    }
    const bool live = !engine.Stalled(stall_timeout);
    if (live == serving) {
      continue;
    }
    serving = live;
    grpc_server.SetServing(live);
    LogLine(live ? "engine progressing again; health SERVING"
                 : absl::StrCat("engine stalled: work pending and no progress for over ",
                                absl::FormatDuration(stall_timeout), "; health NOT_SERVING"));
  }
  return true;
}

// A SIGTERM or SIGINT while loading or warming up ends start-up without serving.
int StartupInterrupted(SignalWatcher& watcher) {
  LogLine(absl::StrCat("received ", strsignal(watcher.signal()), " during start-up; exiting"));
  return 0;
}

// LOOM_TEST_FAULT's fault (docs/api.md, test-only), or nullptr when unset. A
// stall ends at SIGTERM/SIGINT so that the drain can run.
absl::StatusOr<std::shared_ptr<TestFault>> TestFaultFromEnvironment(SignalWatcher& watcher) {
  absl::StatusOr<std::shared_ptr<TestFault>> fault = TestFault::FromEnvironment();
  if (!fault.ok() || *fault == nullptr) {
    return fault;
  }
  (*fault)->set_log([](absl::string_view line) { LogLine(line); });
  watcher.OnSignal([fault = *fault] { fault->Release(); });
  LogLine(absl::StrCat(
      "test fault injection is on: ", kTestFaultEnv, "=",
      (*fault)->kind() == TestFault::Kind::kFail ? "fail_at:" : "stall_at:", (*fault)->step()));
  return fault;
}

// The executor for the loaded model, wrapped when a test fault is set.
absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(const ServerConfig& config,
                                                       const LoadedModel& model,
                                                       std::shared_ptr<TestFault> fault) {
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      CreateExecutor(model, MakeExecutorOptions(config, model));
  if (!executor.ok() || fault == nullptr) {
    return executor;
  }
  return std::make_unique<FaultInjectingExecutor>(*std::move(executor), std::move(fault));
}

// After SIGTERM/SIGINT: requests in flight get drain_timeout to finish, the
// rest end with UNAVAILABLE; then the listener closes.
int Drain(const ServerConfig& config, int signal, Engine& engine, GrpcServer& grpc_server) {
  LogLine(absl::StrCat("received ", strsignal(signal), ": draining for up to ",
                       absl::FormatDuration(config.drain_timeout)));
  engine.StopAccepting();
  if (!engine.WaitUntilIdle(config.drain_timeout)) {
    LogLine(absl::StrCat("drain timeout: ending the ", engine.Heartbeat().num_in_flight,
                         " requests still in flight with UNAVAILABLE"));
  }
  engine.Shutdown(absl::UnavailableError("the server shut down before the request finished"));
  grpc_server.Shutdown(absl::Now() + kListenerGrace);
  const EngineStats stats = engine.Stats();
  LogLine(absl::StrCat("drained; exiting with ", stats.num_running, " requests running, ",
                       stats.num_waiting, " waiting, ", stats.num_blocks_used,
                       " KV blocks in use"));
  return engine.healthy() ? 0 : 2;
}

HttpServerOptions MakeHttpServerOptions(const ServerConfig& config) {
  HttpServerOptions options;
  options.host = config.host;
  options.port = config.http_port;
  options.threads = config.http_threads;
  options.max_connections = config.http_max_connections;
  options.header_timeout = config.http_header_timeout;
  options.body_timeout = config.http_body_timeout;
  options.max_body_bytes = config.http_max_body_bytes;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.tls_client_ca_file = config.tls_client_ca_file;
  return options;
}

OpenAiHttpOptions MakeOpenAiHttpOptions(const ServerConfig& config, const ApiKeyStore* api_keys,
                                        ToolCallFormat tool_call_format) {
  OpenAiHttpOptions options;
  options.api_keys = api_keys;
  options.tool_call_format = tool_call_format;
  options.limits.max_stream_buffer_bytes = config.max_stream_buffer_bytes;
  options.limits.stream_buffer_grace = config.stream_buffer_grace;
  options.limits.access_log = config.access_log;
  options.version = LOOM_VERSION;
  options.created = absl::ToUnixSeconds(absl::Now());
  return options;
}

// Every connection holds a descriptor: the soft open-files limit (often 1024)
// is raised towards the hard one so that --http_max_connections can be met.
void RaiseOpenFilesLimit(const ServerConfig& config) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return;
  }
  // Room for the connections plus the model files, gRPC and the log.
  const rlim_t wanted = static_cast<rlim_t>(config.http_max_connections) + 1024;
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    limit.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      LogLine(absl::StrCat("cannot raise the open-files limit: ", strerror(errno)));
    }
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    LogLine(absl::StrCat("the open-files limit is ", limit.rlim_cur, " (hard limit ",
                         limit.rlim_max, "): fewer than --http_max_connections=",
                         config.http_max_connections, " connections can be open"));
  }
}

// The KV-event publisher when --kv_events_endpoint asks for one, else null.
absl::StatusOr<std::unique_ptr<KvEventPublisher>> StartKvEvents(const ServerConfig& config,
                                                                const std::string& device) {
  if (config.kv_events_endpoint.empty()) {
    return nullptr;
  }
  KvEventPublisherOptions options;
  options.endpoint = config.kv_events_endpoint;
  options.replay_endpoint = config.kv_events_replay_endpoint;
  options.topic = config.kv_events_topic;
  options.medium = device == "cuda" ? "GPU" : "CPU";
  absl::StatusOr<std::unique_ptr<KvEventPublisher>> publisher = KvEventPublisher::Start(options);
  if (publisher.ok()) {
    LogLine(absl::StrCat("publishing KV-cache events on ", (*publisher)->endpoint(), " (topic \"",
                         config.kv_events_topic, "\", medium ", options.medium, ")",
                         (*publisher)->replay_endpoint().empty()
                             ? ""
                             : absl::StrCat("; replay on ", (*publisher)->replay_endpoint())));
  }
  return publisher;
}

// The --metrics_port listener (plaintext, /metrics alone); null without one.
absl::StatusOr<std::unique_ptr<HttpServer>> StartMetricsPort(const ServerConfig& config,
                                                             MetricsRegistry& metrics,
                                                             const ApiKeyStore* api_keys) {
  if (config.metrics_port == 0) {
    return nullptr;
  }
  HttpServerOptions options = MakeHttpServerOptions(config);
  options.port = config.metrics_port;
  options.threads = 1;
  options.max_connections = 64;
  options.tls_cert_file.clear();
  options.tls_key_file.clear();
  options.tls_client_ca_file.clear();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      options, MetricsOnlyRoutes(config, metrics, api_keys),
      [&metrics](std::string_view route, int status) { metrics.RecordHttpRequest(route, status); });
  if (server.ok()) {
    LogLine(absl::StrCat("metrics alone on ", config.host, ":", (*server)->port(), " (HTTP)"));
  }
  return server;
}

// Serves until a signal or an engine failure; the exit code.
int Serve(const ServerConfig& config, SignalWatcher& watcher, const LoadedModel& model,
          const GenerationDefaults& generation_defaults, const StructuredOutputsSetup& structured,
          Engine& engine, MetricsRegistry& metrics, ApiKeyStore* api_keys, absl::Time start) {
  const ExecutorGeometry& geometry = engine.geometry();
  const std::string served_name = ServedName(config, model);
  LoadedModelFrontend frontend(model, DescribeModel(model, geometry, engine.max_model_len(),
                                                    served_name, config.enable_prefix_caching));
  EngineBackend engine_backend(engine);
  TenantLimitedBackend backend(engine_backend,
                               {.max_concurrent = config.tenant_max_concurrent_requests,
                                .max_waiting = TenantMaxWaiting(config)},
                               &metrics);
  GenerationService service(
      frontend, backend,
      [&metrics](std::string_view method, absl::StatusCode code) {
        metrics.RecordGrpcRequest(method, code);
      },
      MakeServiceOptions(config, generation_defaults, api_keys, structured));
  OpenAiHttp openai(frontend, service.intake(), backend,
                    MakeOpenAiHttpOptions(config, api_keys, structured.tool_call_format));

  std::atomic<bool> ready{false};
  absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start(
      MakeHttpServerOptions(config), HttpRoutes(config, engine, metrics, ready, openai, api_keys),
      [&metrics](std::string_view route, int status) { metrics.RecordHttpRequest(route, status); });
  if (!http.ok()) {
    LogLine(http.status().message());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<HttpServer>> metrics_http =
      StartMetricsPort(config, metrics, api_keys);
  if (!metrics_http.ok()) {
    LogLine(metrics_http.status().message());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<GrpcServer>> grpc_server =
      GrpcServer::Start(config.host, config.port, service, MakeGrpcServerOptions(config, api_keys));
  if (!grpc_server.ok()) {
    LogLine(grpc_server.status().ToString());
    return 1;
  }
  if (!config.tls_cert_file.empty()) {
    LogLine(absl::StrCat(
        "TLS on both ports",
        config.tls_client_ca_file.empty() ? "" : " with client certificates (mTLS)",
        (*grpc_server)->health_port() > 0 ? absl::StrCat("; plaintext gRPC health on ", config.host,
                                                         ":", (*grpc_server)->health_port())
                                          : ""));
  }
  (*grpc_server)->SetServing(true);
  ready.store(true);
  LogLine(absl::StrCat(
      "serving ", served_name, " on ", config.host, ":", (*grpc_server)->port(), " (gRPC) and ",
      config.host, ":", (*http)->port(), " (HTTP); device ", geometry.device, ", dtype ",
      geometry.dtype,
      geometry.weight_formats.empty() ? "" : absl::StrCat(" (", geometry.weight_formats, ")"), ", ",
      frontend.Info().num_kv_blocks(), " KV blocks of ", geometry.block_size,
      " tokens, max_model_len ", engine.max_model_len(),
      geometry.kv_pool.empty() ? "" : absl::StrCat(" (", geometry.kv_pool, ")"), "; ready in ",
      absl::FormatDuration(absl::Now() - start)));

  const bool signalled = WaitForSignalOrFailure(watcher, engine, config.engine_stall_timeout,
                                                **grpc_server, **http, api_keys);
  // Refuse new calls before health says so: a client that sees NOT_SERVING
  // (or a 503 from /readyz) must also see UNAVAILABLE.
  service.StopAccepting();
  ready.store(false);
  (*grpc_server)->SetServing(false);
  if (!signalled) {
    LogLine("engine failed: requests in flight end with INTERNAL; exiting");
    engine.Shutdown(absl::InternalError("engine failure"));
    (*grpc_server)->Shutdown(absl::Now() + kListenerGrace);
    (*http)->Stop(absl::Now() + kListenerGrace);
    return 2;
  }
  const int code = Drain(config, watcher.signal(), engine, **grpc_server);
  // After the engine: the streams it ended still write their last events.
  (*http)->Stop(absl::Now() + kListenerGrace);
  return code;
}

}  // namespace

int RunDaemon(const ServerConfig& config, SignalWatcher& watcher) {
  const absl::Time start = absl::Now();
  RaiseOpenFilesLimit(config);
  absl::StatusOr<std::shared_ptr<TestFault>> fault = TestFaultFromEnvironment(watcher);
  if (!fault.ok()) {
    LogLine(fault.status().message());
    return 2;
  }
  absl::StatusOr<GenerationDefaults> override_defaults = OverrideGenerationDefaults(config);
  if (!override_defaults.ok()) {
    LogLine(absl::StrCat("invalid flags: --", override_defaults.status().message()));
    return 2;
  }
  std::unique_ptr<ApiKeyStore> api_keys;
  if (!config.api_keys_file.empty()) {
    absl::StatusOr<std::unique_ptr<ApiKeyStore>> loaded_keys =
        ApiKeyStore::Load(config.api_keys_file);
    if (!loaded_keys.ok()) {
      LogLine(absl::StrCat("invalid flags: ", loaded_keys.status().message()));
      return 2;
    }
    api_keys = *std::move(loaded_keys);
    const std::shared_ptr<const ApiKeySet> set = api_keys->keys();
    LogLine(absl::StrCat("API keys from ", config.api_keys_file, ": ", set->size(), " keys, ",
                         set->Tenants().size(), " tenants",
                         set->has_tenants() ? " (prefix-cache salts derive from the tenant)" : ""));
  }
  if (!ListenersCanStart(config)) return 1;
  LogLine(absl::StrCat("loading ", config.model));
  ModelLoadOptions load;
  load.path = config.model;
  load.load_format = config.load_format;
  load.max_model_len = config.max_model_len;
  load.dummy_dtype = DummyDType(config.dtype);
  absl::StatusOr<std::unique_ptr<LoadedModel>> loaded = LoadModel(load);
  if (!loaded.ok()) {
    LogLine(absl::StrCat("cannot load model ", config.model, ": ", loaded.status().ToString()));
    return 1;
  }
  if (absl::Status st = OverrideChatTemplate(config.chat_template, **loaded); !st.ok()) {
    LogLine(absl::StrCat("invalid flags: --", st.message()));
    return 2;
  }
  if (watcher.signal() != 0) {
    return StartupInterrupted(watcher);
  }
  // Shared so that the detokenizer can alias the tokenizer the model owns.
  const std::shared_ptr<const LoadedModel> model = *std::move(loaded);
  LogLine(absl::StrCat("loaded ", model->name, " (", model->config.architecture, ", ",
                       model->config.num_layers, " layers, vocab ", model->config.vocab_size,
                       ") from ", config.model));

  absl::StatusOr<GenerationDefaults> generation_defaults = BaseGenerationDefaults(config, *model);
  if (!generation_defaults.ok()) {
    LogLine(generation_defaults.status().message());
    return 2;
  }
  generation_defaults->MergeFrom(*override_defaults);
  absl::StatusOr<StructuredOutputsSetup> structured = SetUpStructuredOutputs(config, *model);
  if (!structured.ok()) {
    LogLine(absl::StrCat("structured outputs: ", structured.status().ToString()));
    return 1;
  }
  LogLine(absl::StrCat("generation defaults: ", generation_defaults->ToString(),
                       " (--generation_config=", config.generation_config,
                       ", --override_generation_config: ", override_defaults->ToString(), ")"));

  absl::StatusOr<std::unique_ptr<Executor>> executor = MakeExecutor(config, *model, *fault);
  if (!executor.ok()) {
    LogLine(absl::StrCat("cannot create the executor: ", executor.status().ToString()));
    return 1;
  }
  auto detokenizer = std::make_shared<TokenizerDetokenizer>(
      std::shared_ptr<const Tokenizer>(model, model->tokenizer.get()));
  const std::string device = (*executor)->Geometry().device;
  const EngineConfig engine_config = MakeEngineConfig(config, *model, device);
  const SchedulerConfig& sched = engine_config.scheduler;
  LogLine(absl::StrCat("scheduler (", device, "): max_num_batched_tokens ",
                       sched.max_num_batched_tokens, ", long_prefill_token_threshold ",
                       sched.long_prefill_token_threshold, ", max_num_partial_prefills ",
                       sched.max_num_partial_prefills, ", max_step_ms ", sched.max_step_ms,
                       ", scheduling_policy ", config.scheduling_policy,
                       sched.policy == SchedulingPolicy::kShortestPrompt
                           ? absl::StrCat(" (prompt_token_aging ",
                                          absl::FormatDuration(sched.prompt_token_aging), ")")
                           : ""));
  Engine engine(engine_config, *std::move(executor), std::move(detokenizer));

  const ExecutorGeometry& geometry = engine.geometry();
  const std::string served_name = ServedName(config, *model);
  MetricsRegistry metrics(
      BuildInfo{.version = LOOM_VERSION,
                .backend = geometry.device,
                .model = served_name,
                .block_size = geometry.block_size,
                // Block 0 is the null block: it never holds tokens.
                .num_kv_blocks = geometry.num_blocks > 0 ? geometry.num_blocks - 1 : 0},
      [&engine] { return engine.Stats(); });
  engine.SetObserver(&metrics);
  absl::StatusOr<std::unique_ptr<KvEventPublisher>> kv_events = StartKvEvents(config, device);
  if (!kv_events.ok()) {
    LogLine(kv_events.status().message());
    return 1;
  }
  if (*kv_events != nullptr) {
    engine.SetKvEventSink(kv_events->get());
    metrics.SetKvEventsDropped([publisher = kv_events->get()] {
      return static_cast<double>(publisher->dropped_batches());
    });
  }
  // Start() sizes the pool from the executor and runs the warm-up step.
  if (absl::Status st = engine.Start(); !st.ok()) {
    LogLine(absl::StrCat("engine start-up failed: ", st.ToString()));
    return 1;
  }
  // Every way out stops the engine thread while the observer it calls lives.
  const absl::Cleanup stop_engine = [&engine] { engine.Shutdown(); };
  if (watcher.signal() != 0) {
    return StartupInterrupted(watcher);
  }
  return Serve(config, watcher, *model, *generation_defaults, *structured, engine, metrics,
               api_keys.get(), start);
}

}  // namespace loom
