// The KV-event publisher: vLLM's msgpack encoding, the bounded queue's drop
// and resynchronisation, and the live PUB and ROUTER replay sockets read by a
// real ZeroMQ subscriber and requester.
#include "server/kv_event_publisher.h"

#include <zmq.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "msgpack.hpp"

namespace loom {
namespace {

using ::testing::HasSubstr;

KvEvent Stored(std::vector<BlockHash> hashes, std::optional<BlockHash> parent,
               std::vector<int32_t> tokens, int32_t block_size, std::string salt = "") {
  return KvEvent{.kind = KvEvent::Kind::kBlockStored,
                 .block_hashes = std::move(hashes),
                 .parent_block_hash = parent,
                 .token_ids = std::move(tokens),
                 .block_size = block_size,
                 .cache_salt = std::move(salt)};
}

KvEvent Removed(std::vector<BlockHash> hashes) {
  KvEvent event;
  event.kind = KvEvent::Kind::kBlockRemoved;
  event.block_hashes = std::move(hashes);
  return event;
}

KvEvent Cleared() {
  KvEvent event;
  event.kind = KvEvent::Kind::kAllBlocksCleared;
  return event;
}

std::string Bin(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::BIN);
  return std::string(o.via.bin.ptr, o.via.bin.size);
}

std::string Str(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::STR);
  return std::string(o.via.str.ptr, o.via.str.size);
}

TEST(BlockHashBytesTest, HighHalfFirstEachBigEndian) {
  const std::string bytes =
      BlockHashBytes(BlockHash{.lo = 0x1112131415161718ULL, .hi = 0x0102030405060708ULL});
  ASSERT_EQ(bytes.size(), 16u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(static_cast<uint8_t>(bytes[i]), 0x01 + i) << i;
    EXPECT_EQ(static_cast<uint8_t>(bytes[8 + i]), 0x11 + i) << i;
  }
}

TEST(EncodeKvEventBatchTest, VllmArrayLayout) {
  const BlockHash a{.lo = 1, .hi = 2};
  const BlockHash b{.lo = 3, .hi = 4};
  const BlockHash parent{.lo = 5, .hi = 6};
  const std::vector<KvEvent> events = {Stored({a, b}, parent, {10, 11, 12, 13}, 2),
                                       Stored({a}, std::nullopt, {7, 8}, 2, "tenant-1"),
                                       Removed({b}), Cleared()};
  const std::string payload = EncodeKvEventBatch(1234.5, events, "CPU");
  const msgpack::object_handle handle = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& batch = handle.get();
  ASSERT_EQ(batch.type, msgpack::type::ARRAY);
  ASSERT_EQ(batch.via.array.size, 3u);
  EXPECT_DOUBLE_EQ(batch.via.array.ptr[0].as<double>(), 1234.5);
  EXPECT_EQ(batch.via.array.ptr[2].as<int>(), 0);  // data_parallel_rank
  const msgpack::object& list = batch.via.array.ptr[1];
  ASSERT_EQ(list.via.array.size, 4u);

  // BlockStored without a salt: 8 fields, no extra_keys.
  const msgpack::object& stored = list.via.array.ptr[0];
  ASSERT_EQ(stored.via.array.size, 8u);
  const msgpack::object* f = stored.via.array.ptr;
  EXPECT_EQ(Str(f[0]), "BlockStored");
  ASSERT_EQ(f[1].via.array.size, 2u);
  EXPECT_EQ(Bin(f[1].via.array.ptr[0]), BlockHashBytes(a));
  EXPECT_EQ(Bin(f[1].via.array.ptr[1]), BlockHashBytes(b));
  EXPECT_EQ(Bin(f[2]), BlockHashBytes(parent));
  EXPECT_EQ(f[3].as<std::vector<int32_t>>(), (std::vector<int32_t>{10, 11, 12, 13}));
  EXPECT_EQ(f[4].as<int>(), 2);
  EXPECT_TRUE(f[5].is_nil());  // lora_id
  EXPECT_EQ(Str(f[6]), "CPU");
  EXPECT_TRUE(f[7].is_nil());  // lora_name

  // A salted one: a first block has no parent; extra_keys is [[salt]] per block.
  const msgpack::object& salted = list.via.array.ptr[1];
  ASSERT_EQ(salted.via.array.size, 9u);
  EXPECT_TRUE(salted.via.array.ptr[2].is_nil());
  const msgpack::object& extra = salted.via.array.ptr[8];
  ASSERT_EQ(extra.via.array.size, 1u);
  ASSERT_EQ(extra.via.array.ptr[0].via.array.size, 1u);
  EXPECT_EQ(Str(extra.via.array.ptr[0].via.array.ptr[0]), "tenant-1");

  const msgpack::object& removed = list.via.array.ptr[2];
  ASSERT_EQ(removed.via.array.size, 3u);
  EXPECT_EQ(Str(removed.via.array.ptr[0]), "BlockRemoved");
  ASSERT_EQ(removed.via.array.ptr[1].via.array.size, 1u);
  EXPECT_EQ(Bin(removed.via.array.ptr[1].via.array.ptr[0]), BlockHashBytes(b));
  EXPECT_EQ(Str(removed.via.array.ptr[2]), "CPU");

  const msgpack::object& cleared = list.via.array.ptr[3];
  ASSERT_EQ(cleared.via.array.size, 1u);
  EXPECT_EQ(Str(cleared.via.array.ptr[0]), "AllBlocksCleared");
}

TEST(KvEventQueueTest, DropsWhenFullAndResynchronisesWithAllBlocksCleared) {
  KvEventQueue queue(2);
  EXPECT_TRUE(queue.Push({Removed({BlockHash{.lo = 1, .hi = 0}})}));
  EXPECT_TRUE(queue.Push({Removed({BlockHash{.lo = 2, .hi = 0}})}));
  EXPECT_FALSE(queue.Push({Removed({BlockHash{.lo = 3, .hi = 0}})}));
  EXPECT_FALSE(queue.Push({Removed({BlockHash{.lo = 4, .hi = 0}})}));
  EXPECT_EQ(queue.dropped(), 2);
  EXPECT_EQ(queue.TakeAll().size(), 2u);
  EXPECT_TRUE(queue.empty());

  ASSERT_TRUE(queue.Push({Removed({BlockHash{.lo = 5, .hi = 0}})}));
  std::deque<std::vector<KvEvent>> batches = queue.TakeAll();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].size(), 2u);
  EXPECT_EQ(batches[0][0].kind, KvEvent::Kind::kAllBlocksCleared);
  EXPECT_EQ(batches[0][1].block_hashes[0].lo, 5u);

  // Resynchronised once: the next batch goes as it is.
  ASSERT_TRUE(queue.Push({Removed({BlockHash{.lo = 6, .hi = 0}})}));
  EXPECT_EQ(queue.TakeAll()[0].size(), 1u);
  EXPECT_EQ(queue.dropped(), 2);
}

// A ZeroMQ socket the test owns.
class Socket {
 public:
  Socket(void* context, int type) : socket_(zmq_socket(context, type)) {
    const int linger = 0;
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
  }
  ~Socket() { zmq_close(socket_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  void* get() const { return socket_; }

  // The frames of one message, or none within timeout.
  std::vector<std::string> Receive(absl::Duration timeout) {
    zmq_pollitem_t item{.socket = socket_, .fd = 0, .events = ZMQ_POLLIN, .revents = 0};
    if (zmq_poll(&item, 1, absl::ToInt64Milliseconds(timeout)) <= 0) {
      return {};
    }
    std::vector<std::string> frames;
    int more = 1;
    while (more != 0) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      EXPECT_GE(zmq_msg_recv(&msg, socket_, 0), 0);
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    }
    return frames;
  }

 private:
  void* socket_;
};

int64_t Seq(const std::string& bytes) {
  EXPECT_EQ(bytes.size(), 8u);
  uint64_t value = 0;
  for (const char c : bytes) {
    value = (value << 8) | static_cast<uint8_t>(c);
  }
  return static_cast<int64_t>(value);
}

// The events in one payload: their tags.
std::vector<std::string> Tags(const std::string& payload) {
  const msgpack::object_handle handle = msgpack::unpack(payload.data(), payload.size());
  std::vector<std::string> tags;
  const msgpack::object& list = handle.get().via.array.ptr[1];
  for (uint32_t i = 0; i < list.via.array.size; ++i) {
    tags.push_back(Str(list.via.array.ptr[i].via.array.ptr[0]));
  }
  return tags;
}

KvEventPublisherOptions Options(std::string endpoint, std::string replay_endpoint) {
  return KvEventPublisherOptions{.endpoint = std::move(endpoint),
                                 .replay_endpoint = std::move(replay_endpoint),
                                 .topic = "kv@pod@model",
                                 .medium = "CPU",
                                 .max_queued_batches = 64,
                                 .replay_batches = 4,
                                 .send_high_water_mark = 1000};
}

class KvEventPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KvEventPublisher>> publisher =
        KvEventPublisher::Start(Options("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"));
    ASSERT_TRUE(publisher.ok()) << publisher.status();
    publisher_ = *std::move(publisher);
  }
  void TearDown() override {
    publisher_.reset();
    zmq_ctx_term(context_);
  }

  // Waits until the publisher has sent n batches in all.
  void WaitUntilSent(int64_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (publisher_->sent_batches() < n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_EQ(publisher_->sent_batches(), n);
  }

  void* context_ = zmq_ctx_new();
  std::unique_ptr<KvEventPublisher> publisher_;
};

TEST_F(KvEventPublisherTest, SubscriberReadsTopicSequenceAndPayload) {
  ASSERT_THAT(publisher_->endpoint(), ::testing::StartsWith("tcp://127.0.0.1:"));
  ASSERT_NE(publisher_->endpoint(), "tcp://127.0.0.1:*");
  // Batch 0 (AllBlocksCleared) goes out before anyone subscribes; a slow
  // start of the publisher's thread could otherwise send it to this one.
  WaitUntilSent(1);
  Socket sub(context_, ZMQ_SUB);
  ASSERT_EQ(zmq_setsockopt(sub.get(), ZMQ_SUBSCRIBE, "kv@", 3), 0);
  ASSERT_EQ(zmq_connect(sub.get(), publisher_->endpoint().c_str()), 0);
  // A subscription takes a moment to reach the PUB: publish until one arrives.
  std::vector<std::string> frames;
  for (int i = 0; i < 1000 && frames.empty(); ++i) {
    publisher_->Publish({Removed({BlockHash{.lo = static_cast<uint64_t>(i), .hi = 0}})});
    frames = sub.Receive(absl::Milliseconds(20));
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], "kv@pod@model");
  int64_t seq = Seq(frames[1]);
  EXPECT_GE(seq, 1);  // batch 0 went before the subscription arrived
  EXPECT_THAT(Tags(frames[2]), ::testing::ElementsAre("BlockRemoved"));
  // From here on nothing is lost and the numbers run on without a gap.
  for (int i = 0; i < 20; ++i) {
    publisher_->Publish({Cleared()});
  }
  for (int i = 1; i <= 20; ++i) {
    std::vector<std::string> next = sub.Receive(absl::Seconds(30));
    ASSERT_EQ(next.size(), 3u);
    EXPECT_EQ(Seq(next[1]), seq + i);
    EXPECT_THAT(Tags(next[2]), ::testing::ElementsAre("AllBlocksCleared"));
  }
}

TEST_F(KvEventPublisherTest, ReplayStreamsBufferedBatchesFromTheRequestedNumber) {
  for (uint64_t i = 1; i <= 5; ++i) {
    publisher_->Publish({Removed({BlockHash{.lo = i, .hi = 0}})});
  }
  WaitUntilSent(6);  // batch 0 (AllBlocksCleared) and the five
  Socket dealer(context_, ZMQ_DEALER);
  ASSERT_EQ(zmq_connect(dealer.get(), publisher_->replay_endpoint().c_str()), 0);
  const std::array<char, 8> start = {0, 0, 0, 0, 0, 0, 0, 3};
  ASSERT_EQ(zmq_send(dealer.get(), "", 0, ZMQ_SNDMORE), 0);
  ASSERT_EQ(zmq_send(dealer.get(), start.data(), start.size(), 0), 8);
  // The buffer keeps the last 4 (2..5); 3, 4 and 5 are asked for.
  std::vector<int64_t> seqs;
  while (true) {
    std::vector<std::string> frames = dealer.Receive(absl::Seconds(30));
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0], "");
    if (Seq(frames[1]) == -1) {
      EXPECT_EQ(frames[2], "");
      break;
    }
    const msgpack::object_handle handle = msgpack::unpack(frames[2].data(), frames[2].size());
    const msgpack::object& event = handle.get().via.array.ptr[1].via.array.ptr[0];
    EXPECT_EQ(Bin(event.via.array.ptr[1].via.array.ptr[0]),
              BlockHashBytes(BlockHash{.lo = static_cast<uint64_t>(Seq(frames[1])), .hi = 0}));
    seqs.push_back(Seq(frames[1]));
  }
  EXPECT_THAT(seqs, ::testing::ElementsAre(3, 4, 5));
}

TEST_F(KvEventPublisherTest, ReplayFromZeroStartsWithAllBlocksCleared) {
  WaitUntilSent(1);
  Socket dealer(context_, ZMQ_DEALER);
  ASSERT_EQ(zmq_connect(dealer.get(), publisher_->replay_endpoint().c_str()), 0);
  const std::array<char, 8> start{};
  ASSERT_EQ(zmq_send(dealer.get(), "", 0, ZMQ_SNDMORE), 0);
  ASSERT_EQ(zmq_send(dealer.get(), start.data(), start.size(), 0), 8);
  std::vector<std::string> first = dealer.Receive(absl::Seconds(30));
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(Seq(first[1]), 0);
  EXPECT_THAT(Tags(first[2]), ::testing::ElementsAre("AllBlocksCleared"));
  EXPECT_EQ(Seq(dealer.Receive(absl::Seconds(30))[1]), -1);
}

TEST_F(KvEventPublisherTest, TakenEndpointIsAnErrorNamingTheFlag) {
  absl::StatusOr<std::unique_ptr<KvEventPublisher>> second =
      KvEventPublisher::Start(Options(publisher_->endpoint(), ""));
  // A concrete tcp address without "*" is connected to, which succeeds; the
  // bound form of the same port is taken.
  ASSERT_TRUE(second.ok()) << second.status();
  const std::string port = publisher_->endpoint().substr(publisher_->endpoint().rfind(':') + 1);
  absl::StatusOr<std::unique_ptr<KvEventPublisher>> taken =
      KvEventPublisher::Start(Options("tcp://*:" + port, ""));
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(taken.status().message(), HasSubstr("--kv_events_endpoint=tcp://*:" + port));
  EXPECT_THAT(taken.status().message(), HasSubstr("cannot bind"));
}

}  // namespace
}  // namespace loom
