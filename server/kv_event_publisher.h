// Publishes the engine's KV-cache events (types/kv_event.h) over ZeroMQ in
// vLLM's wire format (vllm/distributed/kv_events.py), so that prefix-aware
// routers built for vLLM, such as the llm-d KV-cache indexer behind the
// Inference Extension's endpoint picker, follow Loom's prefix cache unchanged.
//
// Wire format (docs/api.md, "KV-cache events"):
//   PUB, multipart [topic, 8-byte big-endian sequence number, payload]; the
//   payload is a msgpack EventBatch [ts, [event...], data_parallel_rank] with
//   each event a tagged array: ["BlockStored", hashes, parent, token_ids,
//   block_size, lora_id, medium, lora_name(, extra_keys)], ["BlockRemoved",
//   hashes, medium], ["AllBlocksCleared"]. A block hash is msgpack bin 16:
//   Loom's 128-bit key, high 64 bits first, each half big-endian.
//   ROUTER replay: a request [identity, "", 8-byte start] is answered with
//   every buffered batch from start on, [identity, "", seq, payload], then
//   [identity, "", -1 as 8 bytes, ""].
//
// The engine thread only queues (Publish never blocks); encoding and sending
// run on the publisher's own thread. When the queue is full the batch is
// dropped and counted, and the next batch that gets through starts with
// AllBlocksCleared, so that consumers drop what they can no longer trust
// rather than keep blocks that have gone. Sequence numbers start at 0 with
// every process, and batch 0 is a lone AllBlocksCleared.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "engine/kv_event_sink.h"
#include "types/kv_event.h"

namespace loom {

// One EventBatch's msgpack bytes. medium: "GPU" or "CPU", where the blocks live.
std::string EncodeKvEventBatch(double timestamp_seconds, std::span<const KvEvent> events,
                               std::string_view medium);

// The 16 bytes a block hash goes out as (high half first, big-endian).
std::string BlockHashBytes(const BlockHash& hash);

// The publisher's bounded hand-off between the engine thread and its own:
// Push drops a batch when max_batches are waiting and then marks the stream
// for resynchronisation, so that the next batch Push takes starts with
// AllBlocksCleared. Not thread-safe by itself.
class KvEventQueue {
 public:
  explicit KvEventQueue(size_t max_batches) : max_batches_(max_batches) {}

  // False when the batch was dropped.
  bool Push(std::vector<KvEvent> events);
  // Every waiting batch, oldest first.
  std::deque<std::vector<KvEvent>> TakeAll();

  [[nodiscard]] bool empty() const { return batches_.empty(); }
  [[nodiscard]] int64_t dropped() const { return dropped_; }

 private:
  const size_t max_batches_;
  std::deque<std::vector<KvEvent>> batches_;
  bool resync_ = false;
  int64_t dropped_ = 0;
};

struct KvEventPublisherOptions {
  // PUB endpoint: bound when it contains "*" or "::" or is ipc:// or
  // inproc://, otherwise connected (as vLLM does: the router usually binds).
  std::string endpoint;
  // ROUTER endpoint for replay, always bound; empty for none.
  std::string replay_endpoint;
  std::string topic;
  std::string medium = "GPU";
  size_t max_queued_batches = 4096;  // waiting to be sent
  size_t replay_batches = 10000;     // kept for replay once sent
  int send_high_water_mark = 100000;
};

class KvEventPublisher : public KvEventSink {
 public:
  // Creates the sockets (bind or connect errors come back here, with the
  // endpoint) and starts the publisher thread with batch 0, AllBlocksCleared.
  static absl::StatusOr<std::unique_ptr<KvEventPublisher>> Start(
      const KvEventPublisherOptions& options);
  ~KvEventPublisher() override;  // Shutdown()

  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // KvEventSink; from the engine thread. Never blocks on the network.
  void Publish(std::vector<KvEvent> events) override;

  // Sends what is queued, then closes the sockets (waiting at most a second
  // for the network) and joins the thread. Idempotent.
  void Shutdown();

  // The endpoints as bound or connected (a "*" port resolved).
  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
  [[nodiscard]] const std::string& replay_endpoint() const { return replay_endpoint_; }

  // Thread-safe counters.
  [[nodiscard]] int64_t dropped_batches() const;
  [[nodiscard]] int64_t sent_batches() const;

 private:
  KvEventPublisher(const KvEventPublisherOptions& options, void* context, void* pub, void* replay,
                   std::string endpoint, std::string replay_endpoint);

  void Run();
  // On the publisher thread.
  void Send(std::span<const KvEvent> events);
  void ServeReplay();

  const KvEventPublisherOptions options_;
  void* const context_;  // zmq context
  void* const pub_;      // PUB socket; publisher thread only
  void* const replay_;   // ROUTER socket or null; publisher thread only
  const std::string endpoint_;
  const std::string replay_endpoint_;

  mutable Mutex mu_;
  CondVar wake_;
  KvEventQueue queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;

  // Publisher thread only.
  uint64_t next_seq_ = 0;
  std::deque<std::pair<uint64_t, std::string>> replay_buffer_;

  std::thread thread_;  // last: it uses every member above
};

}  // namespace loom
