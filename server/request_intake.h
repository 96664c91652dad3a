// The one door every generation request comes through, whatever its
// transport: the drain check, then validation and request building
// (RequestBuilder). The gRPC service and the OpenAI HTTP front end share one
// intake, so a request is judged by the same rules on either port.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loom/v1/generation.pb.h"
#include "server/api_keys.h"
#include "server/model_frontend.h"
#include "server/request_builder.h"
#include "server/request_validator.h"
#include "types/generation_defaults.h"
#include "types/request_params.h"

namespace loom {

class RequestIntake {
 public:
  // model must outlive the intake.
  explicit RequestIntake(const ModelFrontend& model, const RequestLimits& limits = {},
                         const GenerationDefaults& defaults = {},
                         const StructuredOutputs& outputs = {})
      : builder_(model, limits, defaults, outputs) {}

  // From now on every request gets UNAVAILABLE (the drain has begun).
  void StopAccepting() { accepting_.store(false, std::memory_order_release); }
  absl::Status CheckAccepting() const;

  // The drain check, then RequestBuilder::Build; a rejection is logged. The
  // prefix-cache salt derives from the caller's tenant (DeriveCacheSalt).
  absl::StatusOr<RequestParams> Prepare(const v1::GenerateRequest& request, absl::Time deadline,
                                        const Caller& caller = {});

  // The drain check, then the token ids of a Tokenize request's input.
  absl::StatusOr<std::vector<int32_t>> Tokenize(const v1::TokenizeRequest& request) const;

 private:
  RequestBuilder builder_;
  std::atomic<bool> accepting_{true};
};

}  // namespace loom
