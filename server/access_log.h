// The access log: one line per finished Generate or GenerateStream call with
// its id, method, status, token counts and timings.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/request_output.h"

namespace loom {

// e.g. "access id=r1 method=GenerateStream status=OK prompt_tokens=5
// output_tokens=16 queue_s=0.000 ttft_s=0.031 total_s=0.412"
std::string AccessLogLine(std::string_view id, std::string_view method, const absl::Status& status,
                          const Usage& usage);

// Logs AccessLogLine(...) when enabled; never blocks (log.h).
void LogAccess(bool enabled, std::string_view id, std::string_view method,
               const absl::Status& status, const Usage& usage);

}  // namespace loom
