// A snapshot of the engine's state, published once per step for /metrics,
// health checks and tests. Plain data: copying it never touches the engine.
#pragma once

#include <cstdint>

namespace loom {

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // in the scheduler's queue plus submitted but not yet seen
  // Blocks held by requests / usable blocks (the null block excluded).
  double kv_cache_usage = 0;
  int32_t num_blocks_free = 0;    // free and holding no cached prefix
  int32_t num_blocks_used = 0;    // held by requests
  int32_t num_blocks_cached = 0;  // free but still holding a cached prefix
  // With sliding-window layers, num_blocks_used split by the kind of layer
  // group that holds them (types/kv_cache_layout.h).
  bool kv_groups_by_kind = false;
  int32_t num_blocks_used_full = 0;
  int32_t num_blocks_used_sliding = 0;
  uint64_t prefix_query_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
  uint64_t num_preemptions = 0;
  uint64_t num_steps = 0;
  uint64_t prompt_tokens_total = 0;      // prompt tokens of the requests admitted
  uint64_t generation_tokens_total = 0;  // tokens sampled
  double last_step_seconds = 0;
  // False once the executor has failed; the engine loop has stopped then.
  bool healthy = true;
};

}  // namespace loom
