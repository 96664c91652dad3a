#include "server/request_intake.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "server/log.h"
#include "server/status_mapping.h"

namespace loom {

absl::Status RequestIntake::CheckAccepting() const {
  if (accepting_.load(std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  return DrainingStatus();
}

absl::StatusOr<RequestParams> RequestIntake::Prepare(const v1::GenerateRequest& request,
                                                     absl::Time deadline, const Caller& caller) {
  LOOM_RETURN_IF_ERROR(CheckAccepting());
  absl::StatusOr<RequestParams> params =
      builder_.Build(request, absl::Now(), deadline, caller.tenant);
  if (!params.ok()) {
    LogLine(absl::StrCat("request ", request.request_id().empty() ? "-" : request.request_id(),
                         " rejected: ", params.status().ToString()));
    return params;
  }
  params->cache_salt = DeriveCacheSalt(caller, params->cache_salt);
  params->tenant = caller.tenant;
  return params;
}

absl::StatusOr<std::vector<int32_t>> RequestIntake::Tokenize(
    const v1::TokenizeRequest& request) const {
  LOOM_RETURN_IF_ERROR(CheckAccepting());
  return builder_.Tokenize(request);
}

}  // namespace loom
