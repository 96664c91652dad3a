// The standard process_* metrics (resident and virtual memory, CPU time, start
// time, open file descriptors) that prometheus-cpp leaves to the application,
// read from /proc/self at scrape time.
#pragma once

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace loom {

class ProcessCollector : public prometheus::Collectable {
 public:
  ProcessCollector();

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  double start_time_seconds_ = 0;  // since the epoch; fixed for the process
};

}  // namespace loom
