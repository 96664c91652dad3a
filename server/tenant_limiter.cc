#include "server/tenant_limiter.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace loom {

// Forwards every output and tells the limiter when the request produced its
// first one (it left the waiting queue) and when it finished.
class TenantLimitedBackend::CountingSink final : public OutputSink {
 public:
  CountingSink(TenantLimitedBackend& limiter, std::string tenant, std::shared_ptr<OutputSink> inner)
      : limiter_(limiter), tenant_(std::move(tenant)), inner_(std::move(inner)) {}

  void Push(RequestOutput output) override {
    const bool finished = output.finished;
    if (!started_ && !finished) {
      started_ = true;
      limiter_.Started(tenant_);
    }
    // Released before the client hears of the end, so that a client that
    // sends its next request on completion finds its slot free.
    if (finished) {
      limiter_.Finished(tenant_, started_);
    }
    inner_->Push(std::move(output));
  }

 private:
  TenantLimitedBackend& limiter_;
  const std::string tenant_;
  const std::shared_ptr<OutputSink> inner_;
  bool started_ = false;  // outputs of one request arrive in order, from one thread
};

absl::StatusOr<GenerationBackend::Handle> TenantLimitedBackend::Submit(
    RequestParams params, std::shared_ptr<OutputSink> sink) {
  if (params.tenant.empty() || (limits_.max_concurrent <= 0 && limits_.max_waiting <= 0)) {
    return inner_.Submit(std::move(params), std::move(sink));
  }
  const std::string tenant = params.tenant;
  absl::Status refused;
  {
    MutexLock lock(mu_);
    Counts& counts = counts_[tenant];
    if (limits_.max_concurrent > 0 && counts.in_flight >= limits_.max_concurrent) {
      refused = absl::ResourceExhaustedError(absl::StrCat(
          "tenant ", tenant, " has ", counts.in_flight,
          " requests in flight, the most --tenant_max_concurrent_requests=", limits_.max_concurrent,
          " allows; retry when one finishes"));
    } else if (limits_.max_waiting > 0 && counts.waiting >= limits_.max_waiting) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("tenant ", tenant, " has ", counts.waiting,
                       " requests waiting, its share of the queue (--tenant_max_queue_share) is ",
                       limits_.max_waiting, "; retry later"));
    } else {
      ++counts.in_flight;
      ++counts.waiting;
    }
    if (!refused.ok() && counts.in_flight == 0) {
      counts_.erase(tenant);
    }
  }
  if (!refused.ok()) {
    if (observer_ != nullptr) {
      observer_->OnRequestFinished(FinishLabel::kRejected, Usage{}, tenant);
    }
    return refused;
  }
  absl::StatusOr<Handle> handle = inner_.Submit(
      std::move(params), std::make_shared<CountingSink>(*this, tenant, std::move(sink)));
  if (!handle.ok()) {
    Finished(tenant, /*started=*/false);  // the sink hears nothing of a refused request
  }
  return handle;
}

void TenantLimitedBackend::Started(const std::string& tenant) {
  MutexLock lock(mu_);
  --counts_[tenant].waiting;
}

void TenantLimitedBackend::Finished(const std::string& tenant, bool started) {
  MutexLock lock(mu_);
  auto it = counts_.find(tenant);
  if (it == counts_.end()) {
    return;
  }
  --it->second.in_flight;
  if (!started) {
    --it->second.waiting;
  }
  if (it->second.in_flight == 0) {
    counts_.erase(it);
  }
}

TenantLimitedBackend::Counts TenantLimitedBackend::CountsOf(const std::string& tenant) const {
  MutexLock lock(mu_);
  auto it = counts_.find(tenant);
  return it == counts_.end() ? Counts{} : it->second;
}

}  // namespace loom
