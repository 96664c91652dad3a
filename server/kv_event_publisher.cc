#include "server/kv_event_publisher.h"

#include <zmq.h>

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "msgpack.hpp"

namespace loom {
namespace {

// How often the publisher thread looks at the replay socket while no batch
// arrives: a replay request waits at most this long.
constexpr absl::Duration kReplayPollInterval = absl::Milliseconds(10);
// How long Shutdown lets the PUB socket deliver what it still holds.
constexpr int kPubLingerMs = 1000;

using Packer = msgpack::packer<msgpack::sbuffer>;

void PackString(Packer& packer, std::string_view s) {
  packer.pack_str(static_cast<uint32_t>(s.size()));
  packer.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void PackHash(Packer& packer, const BlockHash& hash) {
  const std::string bytes = BlockHashBytes(hash);
  packer.pack_bin(static_cast<uint32_t>(bytes.size()));
  packer.pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
}

void PackHashes(Packer& packer, const std::vector<BlockHash>& hashes) {
  packer.pack_array(static_cast<uint32_t>(hashes.size()));
  for (const BlockHash& hash : hashes) {
    PackHash(packer, hash);
  }
}

// vLLM's BlockStored, as an array after its tag: block_hashes,
// parent_block_hash, token_ids, block_size, lora_id, medium, lora_name and,
// with a cache salt, extra_keys (one [salt] per block).
void PackBlockStored(Packer& packer, const KvEvent& event, std::string_view medium) {
  const bool salted = !event.cache_salt.empty();
  packer.pack_array(salted ? 9 : 8);
  PackString(packer, "BlockStored");
  PackHashes(packer, event.block_hashes);
  if (event.parent_block_hash.has_value()) {
    PackHash(packer, *event.parent_block_hash);
  } else {
    packer.pack_nil();
  }
  packer.pack_array(static_cast<uint32_t>(event.token_ids.size()));
  for (const int32_t token : event.token_ids) {
    packer.pack_int32(token);
  }
  packer.pack_int32(event.block_size);
  packer.pack_nil();  // lora_id
  PackString(packer, medium);
  packer.pack_nil();  // lora_name
  if (salted) {
    packer.pack_array(static_cast<uint32_t>(event.block_hashes.size()));
    for (size_t i = 0; i < event.block_hashes.size(); ++i) {
      packer.pack_array(1);
      PackString(packer, event.cache_salt);
    }
  }
}

// zmq's last error, with what was being done.
absl::Status ZmqError(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", zmq_strerror(zmq_errno())));
}

bool BindsEndpoint(const std::string& endpoint) {
  return absl::StrContains(endpoint, "*") || absl::StrContains(endpoint, "::") ||
         absl::StartsWith(endpoint, "ipc://") || absl::StartsWith(endpoint, "inproc://");
}

std::string LastEndpoint(void* socket, std::string fallback) {
  std::array<char, 256> buffer{};
  size_t size = buffer.size();
  if (zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, buffer.data(), &size) != 0 || size <= 1) {
    return fallback;
  }
  return std::string(buffer.data());
}

void Put64(uint64_t value, std::array<char, 8>& out) {
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
}

bool SendFrames(void* socket, std::span<const std::string_view> frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const int flags = i + 1 < frames.size() ? ZMQ_SNDMORE : 0;
    if (zmq_send(socket, frames[i].data(), frames[i].size(), flags | ZMQ_DONTWAIT) < 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string BlockHashBytes(const BlockHash& hash) {
  std::string bytes(16, '\0');
  for (int i = 0; i < 8; ++i) {
    const int shift = 56 - 8 * i;
    bytes[static_cast<size_t>(i)] = static_cast<char>((hash.hi >> shift) & 0xff);
    bytes[static_cast<size_t>(8 + i)] = static_cast<char>((hash.lo >> shift) & 0xff);
  }
  return bytes;
}

std::string EncodeKvEventBatch(double timestamp_seconds, std::span<const KvEvent> events,
                               std::string_view medium) {
  msgpack::sbuffer buffer;
  Packer packer(&buffer);
  packer.pack_array(3);
  packer.pack_double(timestamp_seconds);
  packer.pack_array(static_cast<uint32_t>(events.size()));
  for (const KvEvent& event : events) {
    switch (event.kind) {
      case KvEvent::Kind::kBlockStored:
        PackBlockStored(packer, event, medium);
        break;
      case KvEvent::Kind::kBlockRemoved:
        packer.pack_array(3);
        PackString(packer, "BlockRemoved");
        PackHashes(packer, event.block_hashes);
        PackString(packer, medium);
        break;
      case KvEvent::Kind::kAllBlocksCleared:
        packer.pack_array(1);
        PackString(packer, "AllBlocksCleared");
        break;
    }
  }
  packer.pack_int32(0);  // data_parallel_rank: one engine per process
  return std::string(buffer.data(), buffer.size());
}

bool KvEventQueue::Push(std::vector<KvEvent> events) {
  if (batches_.size() >= max_batches_) {
    ++dropped_;
    resync_ = true;
    return false;
  }
  if (resync_) {
    events.insert(events.begin(), KvEvent{.kind = KvEvent::Kind::kAllBlocksCleared,
                                          .block_hashes = {},
                                          .parent_block_hash = std::nullopt,
                                          .token_ids = {},
                                          .block_size = 0,
                                          .cache_salt = {}});
    resync_ = false;
  }
  batches_.push_back(std::move(events));
  return true;
}

std::deque<std::vector<KvEvent>> KvEventQueue::TakeAll() {
  std::deque<std::vector<KvEvent>> out;
  out.swap(batches_);
  return out;
}

absl::StatusOr<std::unique_ptr<KvEventPublisher>> KvEventPublisher::Start(
    const KvEventPublisherOptions& options) {
  void* context = zmq_ctx_new();
  if (context == nullptr) {
    return ZmqError("cannot create a ZeroMQ context");
  }
  void* pub = zmq_socket(context, ZMQ_PUB);
  void* replay = nullptr;
  auto fail = [&](absl::Status status) {
    for (void* socket : {pub, replay}) {
      if (socket != nullptr) {
        const int linger = 0;
        zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger));
        zmq_close(socket);
      }
    }
    zmq_ctx_term(context);
    return status;
  };
  if (pub == nullptr) {
    return fail(ZmqError("cannot create the KV-events PUB socket"));
  }
  const int hwm = options.send_high_water_mark;
  const int linger = kPubLingerMs;
  zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
  zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof(linger));
  const bool bind = BindsEndpoint(options.endpoint);
  if ((bind ? zmq_bind(pub, options.endpoint.c_str())
            : zmq_connect(pub, options.endpoint.c_str())) != 0) {
    return fail(ZmqError(absl::StrCat("--kv_events_endpoint=", options.endpoint, ": cannot ",
                                      bind ? "bind" : "connect")));
  }
  std::string endpoint = bind ? LastEndpoint(pub, options.endpoint) : options.endpoint;
  std::string replay_endpoint;
  if (!options.replay_endpoint.empty()) {
    replay = zmq_socket(context, ZMQ_ROUTER);
    if (replay == nullptr) {
      return fail(ZmqError("cannot create the KV-events replay socket"));
    }
    const int no_linger = 0;
    // Room for a whole replay: past its high-water mark a ROUTER drops.
    const int replay_hwm = static_cast<int>(options.replay_batches) + 2;
    zmq_setsockopt(replay, ZMQ_LINGER, &no_linger, sizeof(no_linger));
    zmq_setsockopt(replay, ZMQ_SNDHWM, &replay_hwm, sizeof(replay_hwm));
    if (zmq_bind(replay, options.replay_endpoint.c_str()) != 0) {
      return fail(ZmqError(
          absl::StrCat("--kv_events_replay_endpoint=", options.replay_endpoint, ": cannot bind")));
    }
    replay_endpoint = LastEndpoint(replay, options.replay_endpoint);
  }
  return std::unique_ptr<KvEventPublisher>(new KvEventPublisher(
      options, context, pub, replay, std::move(endpoint), std::move(replay_endpoint)));
}

KvEventPublisher::KvEventPublisher(const KvEventPublisherOptions& options, void* context, void* pub,
                                   void* replay, std::string endpoint, std::string replay_endpoint)
    : options_(options),
      context_(context),
      pub_(pub),
      replay_(replay),
      endpoint_(std::move(endpoint)),
      replay_endpoint_(std::move(replay_endpoint)),
      queue_(options.max_queued_batches) {
  {
    MutexLock lock(mu_);
    // Batch 0: consumers forget what they held for this pod before.
    queue_.Push({KvEvent{.kind = KvEvent::Kind::kAllBlocksCleared,
                         .block_hashes = {},
                         .parent_block_hash = std::nullopt,
                         .token_ids = {},
                         .block_size = 0,
                         .cache_salt = {}}});
  }
  thread_ = std::thread([this] { Run(); });
}

KvEventPublisher::~KvEventPublisher() { Shutdown(); }

void KvEventPublisher::Publish(std::vector<KvEvent> events) {
  if (events.empty()) {
    return;
  }
  MutexLock lock(mu_);
  if (stopping_) {
    return;
  }
  queue_.Push(std::move(events));
  wake_.NotifyOne();
}

void KvEventPublisher::Shutdown() {
  {
    MutexLock lock(mu_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
    wake_.NotifyOne();
  }
  thread_.join();
  zmq_close(pub_);
  if (replay_ != nullptr) {
    zmq_close(replay_);
  }
  zmq_ctx_term(context_);
}

int64_t KvEventPublisher::dropped_batches() const {
  MutexLock lock(mu_);
  return queue_.dropped();
}

int64_t KvEventPublisher::sent_batches() const {
  MutexLock lock(mu_);
  return sent_;
}

void KvEventPublisher::Run() {
  while (true) {
    std::deque<std::vector<KvEvent>> batches;
    bool stopping = false;
    {
      MutexLock lock(mu_);
      if (queue_.empty() && !stopping_) {
        if (replay_ != nullptr) {
          wake_.WaitFor(mu_, kReplayPollInterval);
        } else {
          wake_.Wait(mu_);
        }
      }
      batches = queue_.TakeAll();
      stopping = stopping_;
    }
    for (const std::vector<KvEvent>& events : batches) {
      Send(events);
    }
    if (replay_ != nullptr) {
      ServeReplay();
    }
    if (stopping) {
      return;  // Publish refuses batches once stopping_ is set: none is left
    }
  }
}

void KvEventPublisher::Send(std::span<const KvEvent> events) {
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  std::string payload = EncodeKvEventBatch(now, events, options_.medium);
  const uint64_t seq = next_seq_++;
  std::array<char, 8> seq_bytes{};
  Put64(seq, seq_bytes);
  const std::array<std::string_view, 3> frames = {
      options_.topic, std::string_view(seq_bytes.data(), seq_bytes.size()), payload};
  // PUB never blocks: past the high-water mark a subscriber's copy is dropped
  // by ZeroMQ, and that subscriber sees the gap in the sequence numbers.
  SendFrames(pub_, frames);
  replay_buffer_.emplace_back(seq, std::move(payload));
  while (replay_buffer_.size() > options_.replay_batches) {
    replay_buffer_.pop_front();
  }
  MutexLock lock(mu_);
  ++sent_;
}

void KvEventPublisher::ServeReplay() {
  while (true) {
    // [identity, "", start]
    std::vector<std::string> frames;
    int more = 1;
    while (more != 0) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, replay_, frames.empty() ? ZMQ_DONTWAIT : 0) < 0) {
        zmq_msg_close(&msg);
        return;  // no request waiting (EAGAIN), or the context is closing
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    }
    if (frames.size() != 3 || !frames[1].empty() || frames[2].size() != 8) {
      continue;  // not a replay request; ignored, as vLLM does
    }
    uint64_t start = 0;
    for (const char c : frames[2]) {
      start = (start << 8) | static_cast<uint8_t>(c);
    }
    std::array<char, 8> seq_bytes{};
    for (const auto& [seq, payload] : replay_buffer_) {
      if (seq < start) {
        continue;
      }
      Put64(seq, seq_bytes);
      const std::array<std::string_view, 4> reply = {
          frames[0], "", std::string_view(seq_bytes.data(), seq_bytes.size()), payload};
      if (!SendFrames(replay_, reply)) {
        break;  // the requester's queue is full or it has gone
      }
    }
    Put64(~uint64_t{0}, seq_bytes);  // -1, the end of the replay
    const std::array<std::string_view, 4> end = {
        frames[0], "", std::string_view(seq_bytes.data(), seq_bytes.size()), ""};
    SendFrames(replay_, end);
  }
}

}  // namespace loom
