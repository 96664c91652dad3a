#include "server/listen_ports.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/log.h"

namespace loom {
namespace {

// Binds (and closes) a TCP socket on host:port; the errno of the first
// address that fails, 0 when all bind.
int ProbeBind(const std::string& host, int port, std::string& failure) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    failure = gai_strerror(rc);
    return EINVAL;
  }
  int error = 0;
  for (addrinfo* a = found; a != nullptr && error == 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;  // a family this host lacks (IPv6 off)
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      failure = std::strerror(error);
    }
    close(fd);
  }
  freeaddrinfo(found);
  return error;
}

}  // namespace

std::vector<std::pair<std::string, int>> ListenPorts(const ServerConfig& config) {
  std::vector<std::pair<std::string, int>> ports;
  auto add = [&ports](const char* flag, int port) {
    if (port > 0) ports.emplace_back(flag, port);
  };
  add("port", config.port);
  add("http_port", config.http_port);
  add("metrics_port", config.metrics_port);
  if (!config.tls_cert_file.empty()) add("health_port", config.health_port);
  return ports;
}

absl::Status CheckPortsFree(const std::string& host,
                            const std::vector<std::pair<std::string, int>>& ports) {
  for (size_t i = 0; i < ports.size(); ++i) {
    const auto& [flag, port] = ports[i];
    for (size_t j = 0; j < i; ++j) {
      if (ports[j].second == port) {
        return absl::FailedPreconditionError(absl::StrCat("--", flag, " and --", ports[j].first,
                                                          " are both ", port,
                                                          ": each needs its own port"));
      }
    }
    std::string failure;
    if (const int error = ProbeBind(host, port, failure); error != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--", flag, "=", port, ": cannot listen on ", host, ":", port, ": ", failure,
          error == EADDRINUSE ? " (another loomd or another server listens there)" : ""));
    }
  }
  return absl::OkStatus();
}

std::string ExposureWarning(const ServerConfig& config) {
  const std::string& host = config.host;
  const bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
  if (loopback || !config.api_keys_file.empty()) return "";
  return absl::StrCat("warning: --host=", host,
                      host == "0.0.0.0" || host == "::" ? " listens on every interface" : "",
                      " with no --api_keys_file: anyone who can reach its ports can generate; "
                      "--host=127.0.0.1 keeps loomd to this machine, --api_keys_file requires a "
                      "key (docs/security.md)");
}

bool ListenersCanStart(const ServerConfig& config) {
  if (absl::Status ports = CheckPortsFree(config.host, ListenPorts(config)); !ports.ok()) {
    LogLine(absl::StrCat("cannot start: ", ports.message()));
    return false;
  }
  if (const std::string warning = ExposureWarning(config); !warning.empty()) LogLine(warning);
  return true;
}

}  // namespace loom
