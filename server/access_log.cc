#include "server/access_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/log.h"

namespace loom {

std::string AccessLogLine(std::string_view id, std::string_view method, const absl::Status& status,
                          const Usage& usage) {
  return absl::StrFormat(
      "access id=%s method=%s status=%s prompt_tokens=%u output_tokens=%u queue_s=%.3f "
      "ttft_s=%.3f total_s=%.3f",
      id.empty() ? "-" : id, method, absl::StatusCodeToString(status.code()), usage.prompt_tokens,
      usage.completion_tokens, usage.queue_seconds, usage.time_to_first_token_seconds,
      usage.total_seconds);
}

void LogAccess(bool enabled, std::string_view id, std::string_view method,
               const absl::Status& status, const Usage& usage) {
  if (enabled) {
    LogLine(AccessLogLine(id, method, status, usage));
  }
}

}  // namespace loom
