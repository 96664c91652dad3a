// The KV memory of a long sequence on a Gemma-3-shaped model (dummy weights,
// 12 layers: 10 with a 512-position window, 2 with full attention): the
// scheduler, the cache and the CPU executor together, as the engine drives
// them. A 16k-token sequence must hold about global layers x 16k + local
// layers x (512 + block) positions of KV, and fit in a pool that could not
// hold every layer's 16k.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/kv_cache_manager.h"
#include "gtest/gtest.h"
#include "model/config.h"
#include "model/cpu_executor.h"
#include "model/dummy_weights.h"
#include "model/kv_layout.h"
#include "model/model.h"
#include "scheduler/scheduler.h"

namespace loom {
namespace {

constexpr int32_t kPrompt = 16384;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kWindow = 512;
constexpr int32_t kGlobalLayers = 2, kLocalLayers = 10;

LoadedModel GemmaShaped() {
  absl::StatusOr<ModelConfig> c = ConfigFromJsonString(R"({
      "architectures": ["Gemma3ForCausalLM"], "vocab_size": 300, "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 12, "num_attention_heads": 2,
      "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 32768,
      "query_pre_attn_scalar": 32, "sliding_window": 512})");
  EXPECT_TRUE(c.ok()) << c.status();
  LoadedModel model;
  model.config = *c;
  model.weights = MakeDummyWeights(model.config, DType::kF32, 11);
  model.max_model_len = kPrompt + 64;
  return model;
}

TEST(SlidingWindowMemoryTest, LongSequenceHoldsTheWindowOfLocalLayers) {
  const LoadedModel model = GemmaShaped();
  // Bytes of one position of one layer's K and V (float32).
  const int64_t position_bytes = 2 * 1 * 32 * 4;
  const int64_t all_layers = int64_t{12} * kPrompt * position_bytes;
  ExecutorOptions options;
  options.device = "cpu";
  options.dtype = "float32";
  options.block_size = kBlockSize;
  options.threads = 2;
  options.kv_cache_bytes = all_layers / 3;  // a third of what full attention everywhere needs
  absl::StatusOr<std::unique_ptr<CpuExecutor>> executor = CpuExecutor::Create(model, options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const ExecutorGeometry geometry = (*executor)->Geometry();
  const int32_t layers_per_page = KvLayoutOf(model.config).layers_per_page;
  ASSERT_EQ(layers_per_page, 2);
  ASSERT_EQ(geometry.kv_layout.stride(), 6);  // 1 full page + 5 sliding pages

  KvCacheManager cache(KvCacheConfig{.num_blocks = geometry.num_blocks,
                                     .block_size = kBlockSize,
                                     .enable_prefix_caching = true,
                                     .layout = geometry.kv_layout});
  SchedulerConfig config;
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = 512;
  config.max_model_len = geometry.max_model_len;
  Scheduler scheduler(config, &cache);
  ASSERT_GE(scheduler.max_model_len(), kPrompt + 32);
  RequestParams params;
  for (int32_t i = 0; i < kPrompt; ++i) params.prompt_token_ids.push_back(1 + (i * 7919) % 299);
  params.stopping.max_tokens = 32;
  params.stopping.ignore_eos = true;
  params.sampling.temperature = 0;
  ASSERT_TRUE(scheduler.AddRequest(std::move(params)).ok());

  int64_t steps = 0, peak_sliding = 0;
  KvCacheStats last{};
  while (scheduler.HasUnfinished()) {
    const StepPlan plan = scheduler.Schedule(absl::UnixEpoch());
    ASSERT_FALSE(plan.seqs.empty());
    absl::StatusOr<StepResult> result = (*executor)->Execute(plan);
    ASSERT_TRUE(result.ok()) << result.status();
    const UpdateOutput out = scheduler.Update(*result);
    ASSERT_EQ(scheduler.num_preemptions(), 0);
    if (!out.finished.empty()) break;
    last = cache.Stats();
    peak_sliding = std::max<int64_t>(peak_sliding, last.num_used_sliding);
    ++steps;
  }
  cache.CheckInvariants();
  // 32 prefill chunks of 512 (the last samples the first token), then the
  // decodes of tokens 2 to 31; the 32nd token's step finishes.
  EXPECT_EQ(steps, 32 + 30);
  // Positions of KV held per kind of layer before the last step, when the
  // sequence has the prompt and 31 sampled tokens.
  const int64_t global = last.num_used_full * int64_t{layers_per_page} * kBlockSize;
  const int64_t local = last.num_used_sliding * int64_t{layers_per_page} * kBlockSize;
  const int64_t length = kPrompt + 31;
  EXPECT_EQ(global, kGlobalLayers * ((length + kBlockSize - 1) / kBlockSize) * kBlockSize);
  EXPECT_GE(local, kLocalLayers * kWindow);
  EXPECT_LE(local, kLocalLayers * (kWindow + 2 * kBlockSize));
  std::printf(
      "KV held at %ld tokens: %ld positions in 2 global layers, %ld in 10 local layers "
      "(%.1f per local layer; the window is %d); a prefill chunk peaked at %ld local\n",
      static_cast<long>(length), static_cast<long>(global), static_cast<long>(local),
      static_cast<double>(local) / kLocalLayers, kWindow,
      static_cast<long>(peak_sliding * layers_per_page * kBlockSize));
}

}  // namespace
}  // namespace loom
