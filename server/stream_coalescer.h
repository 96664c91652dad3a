// Buffers a streaming request's engine outputs between writes. The reactor
// keeps at most one write in flight; whatever the engine pushes meanwhile is
// merged here into one pending message per sample, so a slow client costs
// memory proportional to its backlog of text, never a blocked engine.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "engine/request_output.h"
#include "loom/v1/generation.pb.h"

namespace loom {

class StreamCoalescer {
 public:
  explicit StreamCoalescer(std::string request_id) : request_id_(std::move(request_id)) {}

  // Merges one engine output into the pending messages. Outputs after the
  // final one are ignored.
  void Add(RequestOutput output);

  // The next message to write, oldest first; nullopt when nothing is pending.
  std::optional<v1::GenerateStreamResponse> TakeNext();

  bool has_pending() const { return !pending_.empty(); }
  // Bytes of output waiting to be written: counted as it arrives, and
  // measured exactly on what is left whenever a message is taken.
  int64_t pending_bytes() const { return pending_bytes_; }
  // Drops everything pending (the stream is being abandoned).
  void Clear();
  // True once the engine's final output has been added.
  bool finished() const { return finished_; }
  // How the request ended; meaningful once finished().
  const absl::Status& final_status() const { return final_status_; }
  // The request's usage; meaningful once finished().
  const Usage& usage() const { return usage_; }

 private:
  v1::GenerateStreamResponse& PendingFor(uint32_t index);

  std::string request_id_;
  std::deque<v1::GenerateStreamResponse> pending_;
  int64_t pending_bytes_ = 0;
  bool finished_ = false;
  absl::Status final_status_;
  Usage usage_;
};

// Copies a delta's fields into a message, appending to what it already holds.
void AppendDelta(const SampleDelta& delta, v1::GenerateStreamResponse& message);

}  // namespace loom
