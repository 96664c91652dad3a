// Runs the real loomd binary for integration tests: on loopback, on a port it
// picks itself (--port=0, read back from its log), with its stderr and stdout
// captured so that tests can wait for log lines without sleeping.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace loom::testing {

class LoomdProcess {
 public:
  // Starts $LOOMD (the binary under test) with small-footprint defaults plus
  // extra_args, and waits until it logs that it is serving.
  // extra_env entries ("NAME=value") are added to the inherited environment.
  static absl::StatusOr<std::unique_ptr<LoomdProcess>> Start(
      const std::vector<std::string>& extra_args = {},
      const std::vector<std::string>& extra_env = {});
  // Like Start, but returns as soon as the process exists; target() and
  // http_port() are known only after WaitUntilServing().
  static absl::StatusOr<std::unique_ptr<LoomdProcess>> Spawn(
      const std::vector<std::string>& extra_args = {},
      const std::vector<std::string>& extra_env = {});
  absl::Status WaitUntilServing(absl::Duration timeout);
  ~LoomdProcess();  // SIGKILLs the daemon if it still runs

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  std::shared_ptr<grpc::Channel> NewChannel() const;
  int http_port() const { return http_port_; }

  // True once the log holds text; false after timeout or when loomd exited.
  bool WaitForLog(const std::string& text, absl::Duration timeout);
  std::string log();

  void Signal(int signal) const;
  // Waits for loomd to exit; its exit code, or 128 + signal when killed.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout);

 private:
  LoomdProcess(pid_t pid, int log_fd);
  void ReadLog(int fd);

  pid_t pid_;
  int port_ = 0;
  int http_port_ = 0;
  bool exited_ = false;
  int exit_code_ = 0;
  // std::mutex rather than absl::Mutex: ThreadSanitizer sees its ordering.
  std::mutex mu_;
  std::condition_variable changed_;
  std::string log_ ABSL_GUARDED_BY(mu_);
  bool log_closed_ ABSL_GUARDED_BY(mu_) = false;
  // Last: it starts in the constructor and uses every member above.
  std::thread reader_;
};

}  // namespace loom::testing
