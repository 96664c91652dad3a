// The HTTP/1.1 client of `loom bench`'s OpenAI backends, on Boost.Beast: one
// I/O thread runs every request asynchronously (no thread per request), and a
// streaming request hands its body to the caller piece by piece as it arrives,
// so that token times are read off the socket, not off a buffered response.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace loom::bench {

// "http://host:port/base" (the scheme and port optional: http, 80). The base
// path is put in front of every request's path; a trailing "/v1" is dropped,
// so the OpenAI SDK's base_url works as a target too.
struct HttpTarget {
  std::string host;
  std::string port;
  std::string base_path;  // "" or "/prefix", without a trailing slash
};
absl::StatusOr<HttpTarget> ParseHttpTarget(absl::string_view url);

class HttpClient {
 public:
  struct Response {
    int status = 0;
    std::string body;
  };
  // What a streaming request reports, all on the I/O thread: the status line,
  // each body piece as read (chunked framing removed), and the end (OK when
  // the whole response arrived).
  struct StreamHandlers {
    std::function<void(int status)> on_status;
    std::function<void(absl::string_view piece)> on_body;
    std::function<void(absl::Status status)> on_done;
  };

  // Resolves the host once; every request connects anew.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(const HttpTarget& target);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // A request with a JSON body when body is set (POST) or none (GET); blocks
  // until the response arrived or the timeout passed.
  absl::StatusOr<Response> Fetch(absl::string_view method, absl::string_view path, std::string body,
                                 absl::Duration timeout);
  // POSTs a JSON body and returns at once; handlers run on the I/O thread.
  void Stream(absl::string_view path, std::string body, StreamHandlers handlers);

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::bench
