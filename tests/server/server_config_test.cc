// Start-up validation of loomd's flags and the model path resolution.
#include "server/server_config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

ServerConfig Valid() {
  ServerConfig c;
  c.model = "/models/m.gguf";
  return c;
}

void ExpectInvalid(const ServerConfig& config, const std::string& message) {
  absl::Status status = ValidateServerConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), message);
}

TEST(ServerConfigTest, DefaultsAreValid) { EXPECT_TRUE(ValidateServerConfig(Valid()).ok()); }

TEST(ServerConfigTest, AttentionKernelTakesAutoV1OrV2) {
  for (const char* kernel : {"auto", "v1", "v2"}) {
    ServerConfig c = Valid();
    c.attention_kernel = kernel;
    EXPECT_TRUE(ValidateServerConfig(c).ok()) << kernel;
  }
  ServerConfig c = Valid();
  c.attention_kernel = "V2";
  ExpectInvalid(c, "attention_kernel must be one of auto, v1, v2; got \"V2\"");
}

TEST(ServerConfigTest, CpuPrefillPrecisionTakesFloat32Int16OrInt8) {
  for (const char* precision : {"float32", "int16", "int8"}) {
    ServerConfig c = Valid();
    c.cpu_prefill_precision = precision;
    EXPECT_TRUE(ValidateServerConfig(c).ok()) << precision;
  }
  ServerConfig c = Valid();
  c.cpu_prefill_precision = "bfloat16";
  ExpectInvalid(c, "cpu_prefill_precision must be one of float32, int16, int8; got \"bfloat16\"");
  c = Valid();
  c.cpu_decode_precision = "int8";
  EXPECT_TRUE(ValidateServerConfig(c).ok());
  c.cpu_decode_precision = "int4";
  ExpectInvalid(c, "cpu_decode_precision must be one of float32, int16, int8; got \"int4\"");
  c = Valid();
  c.cpu_greedy_head = "full";
  EXPECT_TRUE(ValidateServerConfig(c).ok());
  c.cpu_greedy_head = "int8";
  ExpectInvalid(c, "cpu_greedy_head must be one of screened, full; got \"int8\"");
}

TEST(ServerConfigTest, BlockSizeMustBeAPowerOfTwoBetween8And256) {
  for (int ok : {8, 16, 32, 256}) {
    ServerConfig c = Valid();
    c.block_size = ok;
    EXPECT_TRUE(ValidateServerConfig(c).ok()) << ok;
  }
  for (int bad : {7, 4, 0, -16, 24, 512}) {
    ServerConfig c = Valid();
    c.block_size = bad;
    ExpectInvalid(c,
                  absl::StrCat("block_size must be a power of two between 8 and 256; got ", bad));
  }
}

TEST(ServerConfigTest, MetricsPortAndTenantLimits) {
  ServerConfig c = Valid();
  c.metrics_port = 9090;
  EXPECT_TRUE(ValidateServerConfig(c).ok());
  for (int bad : {-1, 65536, 8080, 50051}) {
    c.metrics_port = bad;
    ExpectInvalid(c, absl::StrCat("metrics_port must be 0 (none) or in [1, 65535] and apart from "
                                  "--port, --http_port and --health_port; got ",
                                  bad));
  }
  c = Valid();
  c.api_keys_file = "/etc/loom/keys";
  c.tenant_max_concurrent_requests = 8;
  c.tenant_max_queue_share = 0.25;
  EXPECT_TRUE(ValidateServerConfig(c).ok());
  EXPECT_EQ(TenantMaxWaiting(c), 256);  // a quarter of the default 1024
  c.tenant_max_queue_share = 0.0001;
  EXPECT_EQ(TenantMaxWaiting(c), 1);
  c.tenant_max_queue_share = 1;
  EXPECT_EQ(TenantMaxWaiting(c), 0);
  c.tenant_max_queue_share = 1.5;
  ExpectInvalid(c, "tenant_max_queue_share must be in (0, 1]; got 1.5");
  c.tenant_max_queue_share = 1;
  c.tenant_max_concurrent_requests = -1;
  ExpectInvalid(c, "tenant_max_concurrent_requests must be >= 0 (0 = no cap); got -1");
  c = Valid();
  c.tenant_max_concurrent_requests = 4;
  ExpectInvalid(c,
                "tenant_max_concurrent_requests and tenant_max_queue_share need --api_keys_file "
                "with tenants");
}

TEST(ServerConfigTest, ReflectionIsOpenAuthOrOffAndAuthNeedsKeys) {
  ServerConfig c = Valid();
  for (const char* mode : {"open", "off"}) {
    c.reflection = mode;
    EXPECT_TRUE(ValidateServerConfig(c).ok()) << mode;
  }
  c.reflection = "auth";
  ExpectInvalid(c, "reflection=auth needs --api_keys_file");
  c.api_keys_file = "/etc/loom/keys";
  EXPECT_TRUE(ValidateServerConfig(c).ok());
  c.reflection = "keys";
  ExpectInvalid(c, "reflection must be one of open, auth, off; got \"keys\"");
}

TEST(ServerConfigTest, RejectsEachBadFlagWithItsName) {
  ServerConfig c = Valid();
  c.model = "";
  ExpectInvalid(c, "model must be a path; got \"\"");
  c = Valid();
  c.load_format = "onnx";
  ExpectInvalid(c, "load_format must be one of auto, gguf, safetensors, dummy; got \"onnx\"");
  c = Valid();
  c.device = "tpu";
  ExpectInvalid(c, "device must be one of auto, cpu, cuda; got \"tpu\"");
  c = Valid();
  c.dtype = "int4";
  ExpectInvalid(c, "dtype must be one of auto, float32, bfloat16, float16; got \"int4\"");
  c = Valid();
  c.attention_kernel = "v3";
  ExpectInvalid(c, "attention_kernel must be one of auto, v1, v2; got \"v3\"");
  c = Valid();
  c.port = 70000;
  ExpectInvalid(c, "port must be in [0, 65535] (0 picks a free port); got 70000");
  c = Valid();
  c.http_port = -1;
  ExpectInvalid(c, "http_port must be in [0, 65535] (0 picks a free port); got -1");
  c = Valid();
  c.host = "";
  ExpectInvalid(c, "host must not be empty");
  c = Valid();
  c.kv_cache_memory_fraction = 0;
  ExpectInvalid(c, "kv_cache_memory_fraction must be in (0, 1]; got 0");
  c = Valid();
  c.kv_cache_bytes = -5;
  ExpectInvalid(c, "kv_cache_bytes must be >= 0 (0 = sized automatically); got -5");
  c = Valid();
  c.max_num_seqs = 0;
  ExpectInvalid(c, "max_num_seqs must be >= 1; got 0");
  c = Valid();
  c.max_num_batched_tokens = 100;
  ExpectInvalid(c,
                "max_num_batched_tokens must be 0 (by device) or >= max_num_seqs (256); got 100");
  c = Valid();
  c.max_logit_bias = -1;
  ExpectInvalid(c, "max_logit_bias must be >= 0; got -1");
  c = Valid();
  c.max_model_len = -1;
  ExpectInvalid(c, "max_model_len must be >= 0 (0 = from the model); got -1");
  c = Valid();
  c.max_queued_requests = 0;
  ExpectInvalid(c, "max_queued_requests must be >= 1; got 0");
  c = Valid();
  c.scheduling_policy = "lifo";
  ExpectInvalid(c,
                "scheduling_policy must be one of fcfs, priority, shortest_prompt; got \"lifo\"");
  c = Valid();
  c.long_prefill_token_threshold = -2;
  ExpectInvalid(
      c, "long_prefill_token_threshold must be >= 0 (0 = no cap), or -1 (by device); got -2");
  c = Valid();
  c.max_num_partial_prefills = -3;
  ExpectInvalid(c,
                "max_num_partial_prefills must be >= 0 (0 = no limit), or -1 (by device); got -3");
  c = Valid();
  c.prompt_token_aging = absl::Milliseconds(-1);
  ExpectInvalid(c, "prompt_token_aging must be >= 0 (0 = by device); got -1ms");
  c = Valid();
  c.max_step_ms = -1;
  ExpectInvalid(c, "max_step_ms must be in [0, 3600000] (0 = no target); got -1");
  c.max_step_ms = 4e6;
  ExpectInvalid(c, "max_step_ms must be in [0, 3600000] (0 = no target); got 4000000");
  c = Valid();
  c.admission = "greedy";
  ExpectInvalid(c, "admission must be one of optimistic, reserve; got \"greedy\"");
  c = Valid();
  c.drain_timeout = absl::Seconds(-1);
  ExpectInvalid(c, "drain_timeout must be >= 0s; got -1s");
  c = Valid();
  c.engine_stall_timeout = absl::ZeroDuration();
  ExpectInvalid(c, "engine_stall_timeout must be > 0s; got 0");
  c = Valid();
  c.threads = -2;
  ExpectInvalid(c, "threads must be >= 0 (0 = all cores); got -2");
}

TEST(ServerConfigTest, PrefillChunkingByDeviceUnlessSet) {
  ServerConfig c = Valid();
  const PrefillChunking cpu = ResolvedPrefillChunking(c, "cpu");
  EXPECT_EQ(cpu.long_prefill_token_threshold, kCpuLongPrefillTokenThreshold);
  EXPECT_EQ(cpu.max_num_partial_prefills, kCpuMaxNumPartialPrefills);
  EXPECT_EQ(cpu.prompt_token_aging, absl::Milliseconds(2));
  EXPECT_EQ(cpu.max_step_ms, 0.0);
  const PrefillChunking gpu = ResolvedPrefillChunking(c, "cuda");
  EXPECT_EQ(gpu.long_prefill_token_threshold, 0);
  EXPECT_EQ(gpu.max_num_partial_prefills, 0);
  EXPECT_EQ(gpu.prompt_token_aging, absl::Microseconds(100));
  EXPECT_EQ(gpu.max_step_ms, 0.0);
  c.long_prefill_token_threshold = 0;
  c.max_num_partial_prefills = 3;
  c.prompt_token_aging = absl::Milliseconds(7);
  c.max_step_ms = 250;
  for (const char* device : {"cpu", "cuda"}) {
    const PrefillChunking set = ResolvedPrefillChunking(c, device);
    EXPECT_EQ(set.long_prefill_token_threshold, 0) << device;
    EXPECT_EQ(set.max_num_partial_prefills, 3) << device;
    EXPECT_EQ(set.prompt_token_aging, absl::Milliseconds(7)) << device;
    EXPECT_EQ(set.max_step_ms, 250.0) << device;
    SchedulerConfig s;
    set.ApplyTo(s);
    EXPECT_EQ(s.max_step_ms, 250.0) << device;
    EXPECT_EQ(s.max_num_partial_prefills, 3) << device;
  }
  c.scheduling_policy = "shortest_prompt";
  EXPECT_TRUE(ValidateServerConfig(c).ok());
}

TEST(ServerConfigTest, RejectsNonPositiveLimits) {
  ServerConfig c = Valid();
  c.max_stop_token_ids = 0;
  EXPECT_EQ(ValidateServerConfig(c).message(), "max_stop_token_ids must be >= 1; got 0");
  c = Valid();
  c.grpc_max_receive_bytes = -1;
  EXPECT_EQ(ValidateServerConfig(c).message(), "grpc_max_receive_bytes must be >= 1; got -1");
  c = Valid();
  c.max_stream_buffer_bytes = 0;
  EXPECT_EQ(ValidateServerConfig(c).message(), "max_stream_buffer_bytes must be >= 1; got 0");
  c = Valid();
  c.stream_buffer_grace = absl::ZeroDuration();
  EXPECT_EQ(ValidateServerConfig(c).message(), "stream_buffer_grace must be > 0s; got 0");
  c = Valid();
  c.grpc_keepalive_timeout = absl::Seconds(-1);
  EXPECT_EQ(ValidateServerConfig(c).message(), "grpc_keepalive_timeout must be > 0s; got -1s");
}

TEST(ServerConfigTest, RejectsNonPositiveHttpLimits) {
  ServerConfig c = Valid();
  c.http_threads = 0;
  EXPECT_EQ(ValidateServerConfig(c).message(), "http_threads must be >= 1; got 0");
  c = Valid();
  c.http_max_connections = -5;
  EXPECT_EQ(ValidateServerConfig(c).message(), "http_max_connections must be >= 1; got -5");
  c = Valid();
  c.http_max_body_bytes = 0;
  EXPECT_EQ(ValidateServerConfig(c).message(), "http_max_body_bytes must be >= 1; got 0");
  c = Valid();
  c.http_header_timeout = absl::ZeroDuration();
  EXPECT_EQ(ValidateServerConfig(c).message(), "http_header_timeout must be > 0s; got 0");
  c = Valid();
  c.http_body_timeout = absl::Seconds(-2);
  EXPECT_EQ(ValidateServerConfig(c).message(), "http_body_timeout must be > 0s; got -2s");
}

TEST(ServerConfigTest, ModelPathPrefersFlagThenEnvThenDefault) {
  EXPECT_EQ(ResolveModelPath("/a.gguf", "/b.gguf", "~/c.gguf", "/home/u"), "/a.gguf");
  EXPECT_EQ(ResolveModelPath("", "/b.gguf", "~/c.gguf", "/home/u"), "/b.gguf");
  EXPECT_EQ(ResolveModelPath("", "", "~/c.gguf", "/home/u"), "/home/u/c.gguf");
  EXPECT_EQ(ResolveModelPath("~/x/y.gguf", "", "", "/root"), "/root/x/y.gguf");
  EXPECT_EQ(ResolveModelPath("~user/y.gguf", "", "", "/root"), "~user/y.gguf");
}

TEST(ServerConfigTest, KvEventsTakeZeroMqEndpointsAndNeedThePrefixIndex) {
  ServerConfig c = Valid();
  c.kv_events_endpoint = "tcp://*:5557";
  c.kv_events_replay_endpoint = "tcp://*:5558";
  c.kv_events_topic = "kv@10.0.0.1@m";
  EXPECT_TRUE(ValidateServerConfig(c).ok());
  c.kv_events_endpoint = "ipc:///run/loom/kv";
  EXPECT_TRUE(ValidateServerConfig(c).ok());

  c.kv_events_endpoint = "localhost:5557";
  ExpectInvalid(c,
                "kv_events_endpoint must be a ZeroMQ endpoint such as tcp://*:5557 or "
                "tcp://host:5557 (tcp://, ipc:// or inproc://); got \"localhost:5557\"");
  c.kv_events_endpoint = "tcp://*:5557";
  c.kv_events_replay_endpoint = "tcp://";
  ExpectInvalid(c,
                "kv_events_replay_endpoint must be a ZeroMQ endpoint such as tcp://*:5557 or "
                "tcp://host:5557 (tcp://, ipc:// or inproc://); got \"tcp://\"");
  c.kv_events_replay_endpoint = "";
  c.enable_prefix_caching = false;
  ExpectInvalid(c,
                "kv_events_endpoint needs --enable_prefix_caching: without the prefix index there "
                "are no KV-cache events");

  ServerConfig off = Valid();
  off.kv_events_topic = "kv@pod@m";
  ExpectInvalid(off, "kv_events_topic and kv_events_replay_endpoint need --kv_events_endpoint");
}

}  // namespace
}  // namespace loom
