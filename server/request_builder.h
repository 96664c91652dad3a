// Turns a validated GenerateRequest into the engine's RequestParams: resolves
// the input to token ids (tokenizer or chat template), enforces max_model_len
// (rejecting or truncating), applies the defaults (the API's, under the
// server's generation defaults), assigns a request id and seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "loom/v1/generation.pb.h"
#include "server/model_frontend.h"
#include "server/request_constraint.h"
#include "server/request_validator.h"
#include "types/generation_defaults.h"
#include "types/request_params.h"

namespace loom {

inline constexpr int32_t kDefaultMaxTokens = 256;

class RequestBuilder {
 public:
  // defaults fill the sampling fields and max_tokens a request leaves unset
  // (validated by the caller: ValidateGenerationDefaults); outputs compiles
  // constraints (its compiler outlives the builder).
  explicit RequestBuilder(const ModelFrontend& model, const RequestLimits& limits = {},
                          const GenerationDefaults& defaults = {},
                          const StructuredOutputs& outputs = {})
      : model_(model), limits_(limits), defaults_(defaults), outputs_(outputs) {}

  // Validates every field (request_validator.h), compiles the constraint
  // (request_constraint.h) and builds the params; the deadline is the gRPC
  // deadline (InfiniteFuture when the client set none). cache_scope keys the
  // constraint cache (ConstraintCompiler::Compile).
  absl::StatusOr<RequestParams> Build(const v1::GenerateRequest& request, absl::Time now,
                                      absl::Time deadline, std::string_view cache_scope = "");

  // The token ids of a Tokenize request's input.
  absl::StatusOr<std::vector<int32_t>> Tokenize(const v1::TokenizeRequest& request) const;

  // A random RFC 4122 version 4 UUID string.
  std::string NewRequestId();

 private:
  absl::StatusOr<std::vector<int32_t>> PromptIds(const v1::GenerateRequest& request) const;
  uint64_t NewSeed();

  const ModelFrontend& model_;
  const RequestLimits limits_;
  const GenerationDefaults defaults_;
  const StructuredOutputs outputs_;
  Mutex mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom
