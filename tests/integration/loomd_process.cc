#include "tests/integration/loomd_process.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace loom::testing {
namespace {

constexpr absl::Duration kStartTimeout = absl::Minutes(3);

// Small and fast: a short context, a fixed KV budget, no HTTP port clashes.
const std::vector<std::string> kDefaultArgs = {"--host=127.0.0.1",    "--port=0",
                                               "--http_port=0",       "--threads=2",
                                               "--max_model_len=512", "--kv_cache_bytes=67108864",
                                               "--drain_timeout=60s"};

}  // namespace

LoomdProcess::LoomdProcess(pid_t pid, int log_fd)
    : pid_(pid), reader_([this, log_fd] { ReadLog(log_fd); }) {}

absl::StatusOr<std::unique_ptr<LoomdProcess>> LoomdProcess::Start(
    const std::vector<std::string>& extra_args, const std::vector<std::string>& extra_env) {
  absl::StatusOr<std::unique_ptr<LoomdProcess>> process = Spawn(extra_args, extra_env);
  if (!process.ok()) {
    return process.status();
  }
  if (absl::Status st = (*process)->WaitUntilServing(kStartTimeout); !st.ok()) {
    return st;
  }
  return process;
}

absl::StatusOr<std::unique_ptr<LoomdProcess>> LoomdProcess::Spawn(
    const std::vector<std::string>& extra_args, const std::vector<std::string>& extra_env) {
  const char* binary = std::getenv("LOOMD");
  if (binary == nullptr) {
    return absl::FailedPreconditionError("set LOOMD to the loomd binary");
  }
  std::vector<std::string> args = {binary};
  args.insert(args.end(), kDefaultArgs.begin(), kDefaultArgs.end());
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> env(extra_env);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    envp.push_back(*e);
  }
  for (std::string& e : env) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);

  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    return absl::InternalError(absl::StrCat("cannot start ", binary, ": ", std::strerror(rc)));
  }
  return std::unique_ptr<LoomdProcess>(new LoomdProcess(pid, pipe_fds[0]));
}

absl::Status LoomdProcess::WaitUntilServing(absl::Duration timeout) {
  if (!WaitForLog(" (HTTP)", timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("loomd did not become ready; its log:\n", log()));
  }
  // "serving <model> on 127.0.0.1:<port> (gRPC) and 127.0.0.1:<port> (HTTP); ..."
  const std::string text = log();
  for (auto [marker, port] : {std::pair{" (gRPC)", &port_}, std::pair{" (HTTP)", &http_port_}}) {
    const size_t end = text.find(marker);
    const size_t colon = text.rfind(':', end);
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(text.substr(colon + 1, end - colon - 1), port)) {
      return absl::InternalError(absl::StrCat("no", marker, " port in loomd's log:\n", text));
    }
  }
  return absl::OkStatus();
}

LoomdProcess::~LoomdProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  reader_.join();
}

std::shared_ptr<grpc::Channel> LoomdProcess::NewChannel() const {
  return grpc::CreateChannel(target(), grpc::InsecureChannelCredentials());
}

void LoomdProcess::ReadLog(int fd) {
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    // Echoed so that a failing test shows what the daemon said.
    std::fwrite(buf, 1, static_cast<size_t>(n), stderr);
    std::unique_lock<std::mutex> lock(mu_);
    log_.append(buf, static_cast<size_t>(n));
    changed_.notify_all();
  }
  close(fd);
  std::unique_lock<std::mutex> lock(mu_);
  log_closed_ = true;
  changed_.notify_all();
}

bool LoomdProcess::WaitForLog(const std::string& text, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return log_closed_ || log_.find(text) != std::string::npos;
  });
  return log_.find(text) != std::string::npos;
}

std::string LoomdProcess::log() {
  std::unique_lock<std::mutex> lock(mu_);
  return log_;
}

void LoomdProcess::Signal(int signal) const { kill(pid_, signal); }

absl::StatusOr<int> LoomdProcess::WaitForExit(absl::Duration timeout) {
  // The daemon closes its stderr when it exits, so the log reader's EOF is
  // the exit notification; waitpid then only collects the status.
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                           [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return log_closed_; })) {
      return absl::DeadlineExceededError("loomd did not exit in time");
    }
  }
  int status = 0;
  if (waitpid(pid_, &status, 0) != pid_) {
    return absl::InternalError("waitpid failed");
  }
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

}  // namespace loom::testing
