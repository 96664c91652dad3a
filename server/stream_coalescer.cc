#include "server/stream_coalescer.h"

#include <utility>

#include "server/proto_convert.h"
#include "server/status_mapping.h"

namespace loom {

void AppendDelta(const SampleDelta& delta, v1::GenerateStreamResponse& message) {
  message.set_index(delta.index);
  for (int32_t id : delta.token_ids) {
    message.add_token_ids(id);
  }
  message.mutable_text()->append(delta.text);
  AppendLogprobs(delta.logprobs, *message.mutable_logprobs());
  if (delta.finish_reason != FinishReason::kNone) {
    message.set_finish_reason(ToProtoFinishReason(delta.finish_reason));
    message.set_stop_reason(delta.stop_reason);
  }
}

namespace {

// About what a delta adds to a message on the wire (varints at their widest).
int64_t DeltaBytes(const SampleDelta& delta) {
  int64_t bytes = static_cast<int64_t>(delta.text.size() + delta.stop_reason.size()) +
                  5 * static_cast<int64_t>(delta.token_ids.size());
  for (const TokenLogprobs& logprob : delta.logprobs) {
    bytes += 12 + 12 * static_cast<int64_t>(logprob.top.size());
  }
  return bytes;
}

}  // namespace

v1::GenerateStreamResponse& StreamCoalescer::PendingFor(uint32_t index) {
  // A sample's newest pending message takes more deltas until it carries a
  // finish reason; messages already handed out are no longer in pending_.
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    v1::GenerateStreamResponse& message = *it;
    if (message.index() == index) {
      if (message.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) {
        return message;
      }
      break;
    }
  }
  v1::GenerateStreamResponse& message = pending_.emplace_back();
  message.set_request_id(request_id_);
  message.set_index(index);
  return message;
}

void StreamCoalescer::Add(RequestOutput output) {
  if (finished_) {
    return;
  }
  if (!output.prompt_logprobs.empty() || output.first_prompt_token_id != 0) {
    v1::GenerateStreamResponse& message = PendingFor(0);
    AppendLogprobs(output.prompt_logprobs, *message.mutable_prompt_logprobs());
    message.set_first_prompt_token_id(output.first_prompt_token_id);
    for (const TokenLogprobs& logprob : output.prompt_logprobs) {
      pending_bytes_ += 12 + 12 * static_cast<int64_t>(logprob.top.size());
    }
  }
  for (const SampleDelta& delta : output.samples) {
    const bool empty =
        delta.token_ids.empty() && delta.text.empty() && delta.finish_reason == FinishReason::kNone;
    if (!empty) {
      AppendDelta(delta, PendingFor(delta.index));
      pending_bytes_ += DeltaBytes(delta);
    }
  }
  if (!output.finished) {
    return;
  }
  finished_ = true;
  final_status_ = std::move(output.status);
  usage_ = output.usage;
  if (!final_status_.ok()) {
    return;
  }
  // Usage rides on the request's last message, which is the last one queued.
  if (pending_.empty()) {
    PendingFor(0);
  }
  CopyUsage(output.usage, *pending_.back().mutable_usage());
}

std::optional<v1::GenerateStreamResponse> StreamCoalescer::TakeNext() {
  if (pending_.empty()) {
    return std::nullopt;
  }
  v1::GenerateStreamResponse next = std::move(pending_.front());
  pending_.pop_front();
  pending_bytes_ = 0;
  for (const v1::GenerateStreamResponse& message : pending_) {
    pending_bytes_ += static_cast<int64_t>(message.ByteSizeLong());
  }
  return next;
}

void StreamCoalescer::Clear() {
  pending_.clear();
  pending_bytes_ = 0;
}

}  // namespace loom
