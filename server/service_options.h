// The operator's settings for GenerationService (docs/api.md): request field
// limits, generation defaults, the per-stream output buffer cap and the access log.
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "server/api_keys.h"
#include "server/request_constraint.h"
#include "server/request_validator.h"
#include "types/generation_defaults.h"

namespace loom {

struct ServiceOptions {
  RequestLimits limits;
  // What unset sampling fields and max_tokens become (--generation_config).
  GenerationDefaults generation_defaults;
  // The constraint compiler (outlives the service) and the tool-call format.
  StructuredOutputs structured_outputs;
  // A stream whose unsent output stays above this many bytes for
  // stream_buffer_grace is aborted with RESOURCE_EXHAUSTED.
  int64_t max_stream_buffer_bytes = int64_t{4} << 20;
  absl::Duration stream_buffer_grace = absl::Seconds(10);
  // One line per finished Generate/GenerateStream call.
  bool access_log = true;
  // --api_keys_file: every generation RPC needs a key; null when auth is off.
  // Outlives the service.
  const ApiKeyStore* api_keys = nullptr;
};

}  // namespace loom
