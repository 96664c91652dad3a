#include "tests/reliability/metrics_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace loom::testing {

absl::StatusOr<std::string> HttpGet(int port, absl::string_view path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, ": ", strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string response;
  char buf[8192];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos || response.find(" 200 ") > response.find("\r\n")) {
    return absl::UnavailableError(absl::StrCat("bad HTTP response: ", response.substr(0, 200)));
  }
  return response.substr(body + 4);
}

std::optional<double> SampleValue(absl::string_view exposition, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.size() <= series.size() || line.substr(0, series.size()) != series ||
        line[series.size()] != ' ') {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return std::nullopt;
}

std::optional<int> HttpPortFromLog(absl::string_view log) {
  const size_t end = log.find(" (HTTP)");
  if (end == absl::string_view::npos) return std::nullopt;
  const size_t colon = log.rfind(':', end);
  int port = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(log.substr(colon + 1, end - colon - 1), &port)) {
    return std::nullopt;
  }
  return port;
}

absl::StatusOr<ServerLoad> ReadLoad(int http_port) {
  absl::StatusOr<std::string> text = HttpGet(http_port, "/metrics");
  if (!text.ok()) return text.status();
  ServerLoad load;
  const std::optional<double> running = SampleValue(*text, "loom_requests_running");
  const std::optional<double> waiting = SampleValue(*text, "loom_requests_waiting");
  const std::optional<double> used = SampleValue(*text, "loom_kv_cache_blocks{state=\"used\"}");
  const std::optional<double> rss = SampleValue(*text, "process_resident_memory_bytes");
  if (!running || !waiting || !used || !rss) {
    return absl::NotFoundError("a load series is missing from /metrics");
  }
  load.running = *running;
  load.waiting = *waiting;
  load.used_blocks = *used;
  load.rss_bytes = *rss;
  return load;
}

absl::StatusOr<ServerLoad> WaitUntilIdle(int http_port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<ServerLoad> load = ReadLoad(http_port);
    if (!load.ok() || load->idle() || absl::Now() > deadline) return load;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

}  // namespace loom::testing
