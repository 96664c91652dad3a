#!/usr/bin/env python3
"""KV-cache events as a router follows them: a real ZeroMQ subscriber (pyzmq,
msgpack) binds, as the llm-d indexer does, and loomd connects to it. A
randomized workload over the OpenAI HTTP port (token-id prompts that share
prefixes, cache salts, a KV cache small enough to evict) runs in waves. The
follower rebuilds the replica's block set from the events alone and must:
  - equal the server's own listing (GET /debug/kv_blocks) at every quiet point;
  - see sequence numbers without gaps, filling the ones it misses (the slow
    joiner's first batches, and a range it drops on purpose) from the replay
    socket;
  - after a SIGTERM and restart, see the numbers start again at 0 with a lone
    AllBlocksCleared, and follow the new process.
Every event is checked against vLLM's wire format as it is applied. The event
counts are printed for the record.
"""
import argparse
import concurrent.futures
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import msgpack
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_proc import LoomdProcess  # noqa: E402

ARGS = None
BLOCK_SIZE = 8
TOPIC = "kv@test-pod@smollm2"
END_SEQ = -1
QUIET_DEADLINE = 60  # seconds for the follower to catch up at a quiet point
SALTS = ("", "", "tenant-a", "tenant-b")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Follower(threading.Thread):
    """Rebuilds one replica's cached-block set from its KV events, as a
    router's indexer does, checking the format and the sequence as it goes."""

    def __init__(self, context, replay_endpoint):
        super().__init__(daemon=True)
        self.sub = context.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt_string(zmq.SUBSCRIBE, "kv@")
        self.port = self.sub.bind_to_random_port("tcp://127.0.0.1")
        self.context = context
        self.replay_endpoint = replay_endpoint
        self.lock = threading.Lock()
        self.blocks = set()        # 16-byte hashes
        self.next_seq = 0          # of the current process
        self.processes = 0         # publisher restarts seen, counting the first
        self.first_batches = []    # the decoded batch 0 of every process
        self.drop_next = 0         # live messages to lose on purpose
        self.errors = []
        self.counts = dict(batches=0, live=0, replayed=0, dropped_on_purpose=0, replays=0,
                           stored_events=0, stored_blocks=0, salted_events=0,
                           removed_events=0, removed_blocks=0, cleared=0, restarts=0)
        self.stopping = threading.Event()

    # --- the wire format ---------------------------------------------------
    def check(self, condition, message):
        if not condition:
            self.errors.append(message)
            raise AssertionError(message)

    def apply(self, seq, payload):
        batch = msgpack.unpackb(payload, raw=False)
        self.check(isinstance(batch, list) and len(batch) == 3, f"batch {seq}: {batch!r}")
        ts, events, rank = batch
        self.check(isinstance(ts, float) and abs(ts - time.time()) < 600, f"batch {seq} ts {ts}")
        self.check(rank == 0, f"batch {seq} data_parallel_rank {rank}")
        if seq == 0:
            self.first_batches.append(events)
        for event in events:
            tag = event[0]
            if tag == "BlockStored":
                self.check(len(event) in (8, 9), f"BlockStored fields: {event!r}")
                _, hashes, parent, tokens, block_size, lora_id, medium, lora_name = event[:8]
                self.check(block_size == BLOCK_SIZE, f"block_size {block_size}")
                self.check(len(hashes) >= 1 and len(tokens) == block_size * len(hashes),
                           f"{len(hashes)} hashes, {len(tokens)} tokens")
                self.check(all(isinstance(h, bytes) and len(h) == 16 for h in hashes),
                           f"hashes are not bin 16: {hashes!r}")
                self.check(lora_id is None and lora_name is None and medium == "CPU",
                           f"lora_id {lora_id}, lora_name {lora_name}, medium {medium}")
                # The parent is held by the request that stored its child.
                self.check(parent is None or parent in self.blocks,
                           f"batch {seq}: parent {parent!r} is not cached")
                if len(event) == 9:
                    salt = event[8]
                    self.check(len(salt) == len(hashes) and len(set(map(tuple, salt))) == 1
                               and salt[0][0] in SALTS[2:],
                               f"extra_keys {salt!r}")
                    self.counts["salted_events"] += 1
                for h in hashes:
                    self.check(h not in self.blocks, f"batch {seq}: {h.hex()} stored twice")
                    self.blocks.add(h)
                self.counts["stored_events"] += 1
                self.counts["stored_blocks"] += len(hashes)
            elif tag == "BlockRemoved":
                self.check(len(event) == 3 and event[2] == "CPU", f"BlockRemoved: {event!r}")
                for h in event[1]:
                    self.check(h in self.blocks, f"batch {seq}: removed {h.hex()} was not cached")
                    self.blocks.discard(h)
                self.counts["removed_events"] += 1
                self.counts["removed_blocks"] += len(event[1])
            elif tag == "AllBlocksCleared":
                self.check(len(event) == 1, f"AllBlocksCleared: {event!r}")
                self.blocks.clear()
                self.counts["cleared"] += 1
            else:
                self.check(False, f"unknown event {event!r}")
        self.counts["batches"] += 1
        self.next_seq = seq + 1

    # --- the sequence ------------------------------------------------------
    def replay(self, start):
        """Every buffered batch from start on, from the ROUTER."""
        dealer = self.context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(self.replay_endpoint)
        dealer.send_multipart([b"", start.to_bytes(8, "big")])
        batches = []
        poller = zmq.Poller()
        poller.register(dealer, zmq.POLLIN)
        while True:
            self.check(poller.poll(30000), f"replay from {start}: no answer")
            empty, seq_bytes, payload = dealer.recv_multipart()
            self.check(empty == b"" and len(seq_bytes) == 8, "replay frame layout")
            seq = int.from_bytes(seq_bytes, "big", signed=True)
            if seq == END_SEQ:
                self.check(payload == b"", "replay end marker carries a payload")
                break
            batches.append((seq, payload))
        dealer.close()
        self.counts["replays"] += 1
        return batches

    def fill(self, upto):
        """Applies the replayed batches [next_seq, upto)."""
        for seq, payload in self.replay(self.next_seq):
            if seq == self.next_seq and seq < upto:
                self.apply(seq, payload)
                self.counts["replayed"] += 1
        self.check(self.next_seq == upto, f"replay left a gap: at {self.next_seq}, want {upto}")

    def on_message(self, topic, seq_bytes, payload):
        self.check(topic == TOPIC.encode(), f"topic {topic!r}")
        self.check(len(seq_bytes) == 8, f"sequence frame of {len(seq_bytes)} bytes")
        seq = int.from_bytes(seq_bytes, "big")
        if self.drop_next > 0:
            self.drop_next -= 1
            self.counts["dropped_on_purpose"] += 1
            return
        if seq < self.next_seq or self.processes == 0:
            # A new publisher (or the first): its numbers start at 0 again.
            if self.processes > 0:
                self.counts["restarts"] += 1
            self.processes += 1
            self.next_seq = 0
        if seq > self.next_seq:
            self.fill(seq)
        self.apply(seq, payload)
        self.counts["live"] += 1

    def run(self):
        poller = zmq.Poller()
        poller.register(self.sub, zmq.POLLIN)
        while not self.stopping.is_set():
            if not poller.poll(50):
                continue
            frames = self.sub.recv_multipart()
            with self.lock:
                try:
                    self.check(len(frames) == 3, f"{len(frames)} frames")
                    self.on_message(*frames)
                except AssertionError:
                    return
                except Exception as e:  # noqa: BLE001 - recorded for the test to report
                    self.errors.append(repr(e))
                    return

    def snapshot(self):
        with self.lock:
            return set(self.blocks), list(self.errors)


class Server(LoomdProcess):
    def __init__(self, log_dir, sub_port, replay_port, kv_cache_bytes):
        super().__init__(ARGS.loomd, [
            "--threads=1", "--access_log=false", "--max_model_len=512",
            f"--block_size={BLOCK_SIZE}", f"--kv_cache_bytes={kv_cache_bytes}",
            f"--kv_events_endpoint=tcp://127.0.0.1:{sub_port}", f"--kv_events_topic={TOPIC}",
            f"--kv_events_replay_endpoint=tcp://127.0.0.1:{replay_port}", "--debug_kv_blocks"],
            log_dir)

    def get(self, path):
        with urllib.request.urlopen(self.http + path, timeout=60) as r:
            return json.loads(r.read())

    def complete(self, prompt, max_tokens, salt):
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        if salt:
            body["cache_salt"] = salt
        req = urllib.request.Request(self.http + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())


class KvEventsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.context = zmq.Context()
        self.replay_port = free_port()
        self.follower = Follower(self.context, f"tcp://127.0.0.1:{self.replay_port}")
        self.follower.start()
        # About 40 blocks of 8 tokens: the workload below needs several times that.
        self.server = Server(self.tmp.name, self.follower.port, self.replay_port,
                             kv_cache_bytes=8 << 20)
        self.rng = random.Random(ARGS.seed)
        self.prefixes = [[self.rng.randrange(100, 20000) for _ in range(self.rng.choice((8, 16, 24, 40)))]
                         for _ in range(6)]

    def tearDown(self):
        self.server.kill()
        self.follower.stopping.set()
        self.follower.join(10)
        self.follower.sub.close()
        self.context.term()
        self.tmp.cleanup()

    def wave(self, requests):
        """Sends requests, four at a time, and waits for all of them."""
        jobs = []
        for _ in range(requests):
            prompt = list(self.rng.choice(self.prefixes))
            prompt += [self.rng.randrange(100, 20000) for _ in range(self.rng.randrange(0, 30))]
            jobs.append((prompt, self.rng.randrange(1, 9), self.rng.choice(SALTS)))
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            for reply in pool.map(lambda j: self.server.complete(*j), jobs):
                self.assertEqual(reply["object"], "text_completion")

    def assert_follower_matches_server(self, where):
        deadline = time.monotonic() + QUIET_DEADLINE
        while True:
            listing = self.server.get("/debug/kv_blocks")
            server_blocks = {bytes.fromhex(h) for h in listing["block_hashes"]}
            self.assertEqual(listing["block_size"], BLOCK_SIZE)
            self.assertEqual(listing["num_blocks"], len(server_blocks))
            blocks, errors = self.follower.snapshot()
            self.assertEqual(errors, [], where)
            if blocks == server_blocks:
                return len(blocks)
            if time.monotonic() > deadline:
                self.fail(f"{where}: the follower holds {len(blocks)} blocks, the server "
                          f"{len(server_blocks)}; only the follower's: "
                          f"{sorted(h.hex() for h in blocks - server_blocks)[:5]}, only the "
                          f"server's: {sorted(h.hex() for h in server_blocks - blocks)[:5]}")
            time.sleep(0.05)

    def test_follower_rebuilds_the_cached_block_set(self):
        self.server.start()
        self.assertLess(self.server.num_blocks, 80, "the KV cache must be small enough to evict")
        # A subscriber learns of a publisher from its first message: the ones
        # sent before the subscription reached loomd are lost (ZeroMQ's slow
        # joiner), so every check follows a request, and replay fills the rest.
        sizes = []
        for wave in range(6):
            if wave == 3:
                with self.follower.lock:
                    self.follower.drop_next = 3  # lost on the wire: replay must fill them
            self.wave(12)
            sizes.append(self.assert_follower_matches_server(f"after wave {wave}"))

        self.assertEqual(self.server.stop(), 0)
        self.server.start()
        self.wave(1)
        sizes.append(self.assert_follower_matches_server("after the restart"))
        for wave in range(3):
            self.wave(12)
            sizes.append(self.assert_follower_matches_server(f"after restart wave {wave}"))

        counts = dict(self.follower.counts)
        counts["quiet_point_sizes"] = sizes
        print("kv events:", json.dumps(counts), flush=True)
        # Batch 0 of both processes is a lone AllBlocksCleared.
        self.assertEqual(self.follower.first_batches, [[["AllBlocksCleared"]]] * 2)
        self.assertEqual(self.follower.processes, 2)
        self.assertEqual(counts["restarts"], 1)
        self.assertEqual(counts["dropped_on_purpose"], 3)
        self.assertGreaterEqual(counts["replayed"], 3, "replay filled the dropped range")
        self.assertGreater(counts["removed_blocks"], 0, "the workload evicted blocks")
        self.assertGreater(counts["salted_events"], 0)
        metrics = urllib.request.urlopen(self.server.http + "/metrics", timeout=60).read().decode()
        self.assertRegex(metrics, r"(?m)^loom_kv_events_dropped_total 0$")


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("LOOM_TEST_SEED", "1")))
    ARGS, rest = parser.parse_known_args()
    print(f"seed {ARGS.seed} (LOOM_TEST_SEED)", flush=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
