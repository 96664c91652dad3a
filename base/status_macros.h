#pragma once

// Status propagation for functions that return absl::Status or absl::StatusOr<T>.
//
//   LOOM_RETURN_IF_ERROR(file.Read(&header));
//   LOOM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
//   LOOM_ASSIGN_OR_RETURN(auto config, ParseConfig(json));
//
// Both return the non-OK status unchanged (code and message), so the error a
// caller sees names the field or file where the check failed.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom::status_internal {

inline const absl::Status& AsStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& AsStatus(const absl::StatusOr<T>& result) {
  return result.status();
}

}  // namespace loom::status_internal

#define LOOM_STATUS_CONCAT_INNER_(a, b) a##b
#define LOOM_STATUS_CONCAT_(a, b) LOOM_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` (an absl::Status or absl::StatusOr) when it is not OK.
#define LOOM_RETURN_IF_ERROR(expr)                               \
  do {                                                           \
    if (const auto& loom_status_ = (expr); !loom_status_.ok()) { \
      return ::loom::status_internal::AsStatus(loom_status_);    \
    }                                                            \
  } while (0)

// Evaluates `expr` (an absl::StatusOr<T>); returns its status when it is not OK,
// otherwise moves the value into `lhs`, which may be a declaration.
#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  LOOM_ASSIGN_OR_RETURN_IMPL_(LOOM_STATUS_CONCAT_(loom_statusor_, __LINE__), lhs, expr)

#define LOOM_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                \
  if (!result.ok()) {                                  \
    return std::move(result).status();                 \
  }                                                    \
  lhs = *std::move(result)
