#include "engine/engine_observer.h"

namespace loom {

std::string_view FinishLabelName(FinishLabel label) {
  switch (label) {
    case FinishLabel::kStop:
      return "stop";
    case FinishLabel::kLength:
      return "length";
    case FinishLabel::kAborted:
      return "aborted";
    case FinishLabel::kError:
      return "error";
    case FinishLabel::kDeadline:
      return "deadline";
    case FinishLabel::kRejected:
      return "rejected";
  }
  return "error";
}

FinishLabel FinishLabelFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnavailable:  // ended by a shutdown or drain timeout
      return FinishLabel::kAborted;
    case absl::StatusCode::kDeadlineExceeded:
      return FinishLabel::kDeadline;
    case absl::StatusCode::kResourceExhausted:
      return FinishLabel::kRejected;
    default:
      return FinishLabel::kError;
  }
}

}  // namespace loom
