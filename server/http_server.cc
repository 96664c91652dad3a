#include "server/http_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace loom {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr auto kConnectionBudget = std::chrono::seconds(5);

using Clock = std::chrono::steady_clock;

// Waits for `events` on fd until the deadline; false on timeout or error.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return false;
    }
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) {
      return (p.revents & events) != 0;
    }
    if (n < 0 && errno != EINTR) {
      return false;
    }
  }
}

// Reads until the end of the request head; returns "" when the client sent
// too much, too little or nothing in time.
std::string ReadRequestHead(int fd, Clock::time_point deadline) {
  std::string head;
  char buffer[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < kMaxRequestBytes) {
    if (!WaitFor(fd, POLLIN, deadline)) {
      return "";
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      return n < 0 && errno == EINTR ? head : "";
    }
    head.append(buffer, static_cast<size_t>(n));
  }
  return head.find("\r\n\r\n") == std::string::npos ? "" : head;
}

void SendAll(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    if (!WaitFor(fd, POLLOUT, deadline)) {
      return;
    }
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Service Unavailable";
  }
}

std::string Response(int status, const char* content_type, std::string_view body,
                     bool include_body) {
  std::string response =
      absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status),
                   "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                   "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  if (include_body) {
    response.append(body);
  }
  return response;
}

absl::StatusOr<int> Listen(const HttpServerOptions& options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(options.port);
  const std::string where = absl::StrCat(options.host, ":", options.port);
  if (const int rc = getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serve HTTP on ", where, ": ", gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", where, ": ", error));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandlers handlers) {
  if (!handlers.metrics || !handlers.live || !handlers.ready) {
    return absl::InvalidArgumentError("HttpServer needs metrics, live and ready handlers");
  }
  absl::StatusOr<int> listen_fd = Listen(options);
  if (!listen_fd.ok()) {
    return listen_fd.status();
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC);
  if (wake_fd < 0) {
    close(*listen_fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(handlers), *listen_fd, wake_fd, BoundPort(*listen_fd)));
  server->thread_ = std::thread([raw = server.get()] { raw->Serve(); });
  return server;
}

HttpServer::HttpServer(HttpHandlers handlers, int listen_fd, int wake_fd, int port)
    : handlers_(std::move(handlers)), listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port) {}

HttpServer::~HttpServer() {
  const uint64_t one = 1;
  ssize_t written = 0;
  do {
    written = write(wake_fd_, &one, sizeof(one));
  } while (written < 0 && errno == EINTR);
  if (thread_.joinable()) {
    thread_.join();
  }
  close(listen_fd_);
  close(wake_fd_);
}

void HttpServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return;
    }
    if (fds[1].revents != 0) {
      return;
    }
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      HandleConnection(fd);
      close(fd);
    }
  }
}

void HttpServer::HandleConnection(int fd) const {
  const Clock::time_point deadline = Clock::now() + kConnectionBudget;
  const std::string head = ReadRequestHead(fd, deadline);
  const size_t method_end = head.find(' ');
  const size_t target_end =
      method_end == std::string::npos ? std::string::npos : head.find(' ', method_end + 1);
  if (target_end == std::string::npos) {
    SendAll(fd, Response(400, "text/plain", "bad request\n", true), deadline);
    return;
  }
  const std::string_view method(head.data(), method_end);
  std::string_view path(head.data() + method_end + 1, target_end - method_end - 1);
  path = path.substr(0, path.find('?'));
  const bool is_head = method == "HEAD";
  if (method != "GET" && !is_head) {
    SendAll(fd, Response(405, "text/plain", "method not allowed\n", true), deadline);
    return;
  }
  std::string response;
  if (path == "/metrics") {
    response =
        Response(200, "text/plain; version=0.0.4; charset=utf-8", handlers_.metrics(), !is_head);
  } else if (path == "/healthz" || path == "/readyz") {
    const bool ok = path == "/healthz" ? handlers_.live() : handlers_.ready();
    response = ok ? Response(200, "text/plain", "ok\n", !is_head)
                  : Response(503, "text/plain", "unavailable\n", !is_head);
  } else {
    response = Response(404, "text/plain", "not found\n", !is_head);
  }
  SendAll(fd, response, deadline);
}

}  // namespace loom
