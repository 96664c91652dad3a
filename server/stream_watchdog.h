// A thread that calls every registered check at a fixed interval, for as long
// as the check says its subject is alive. GenerationService uses it to look
// at each stream's buffered output even when no new output arrives.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace loom {

class StreamWatchdog {
 public:
  // Returns false once its subject is gone; it is then dropped.
  using Check = std::function<bool(absl::Time now)>;

  explicit StreamWatchdog(absl::Duration interval);
  ~StreamWatchdog();

  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  void Watch(Check check);

 private:
  void Run();

  const absl::Duration interval_;
  Mutex mu_;
  CondVar stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Check> checks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: it uses every member above
};

}  // namespace loom
