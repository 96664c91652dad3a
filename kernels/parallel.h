// The parallel-for interface the fast CPU kernels run on. The executor owns the
// implementation (a thread pool); kernels only see this interface, and nvcc
// only ever sees the forward declaration.
#pragma once

#include <cstdint>
#include <functional>

namespace loom::kernels {

class ParallelFor {
 public:
  virtual ~ParallelFor() = default;
  // Number of workers Run() spreads over, including the calling thread.
  virtual int NumThreads() const = 0;
  // Calls fn(begin, end) over disjoint ranges covering [0, n), ranges at most
  // `grain` long (grain >= 1), and returns when all calls are done.
  virtual void Run(int64_t n, int64_t grain,
                   const std::function<void(int64_t begin, int64_t end)>& fn) = 0;
};

}  // namespace loom::kernels
