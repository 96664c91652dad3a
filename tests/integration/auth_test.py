#!/usr/bin/env python3
"""API keys and tenants against the real loomd (--api_keys_file):
  - every generation RPC (grpcio) and every OpenAI route (urllib and the
    official openai SDK) with no key, a wrong key and a right one: the status
    or HTTP code, and no engine work for the rejected ones (the request and
    token counters do not move);
  - health, /healthz, /readyz, /metrics and reflection stay open, unless
    --metrics_require_auth and --reflection=auth put the last two behind a key;
  - keys never reach the log;
  - the file reloads when it changes, and on SIGHUP when it looks unchanged;
  - tenants: the same prompt from tenant B finds none of tenant A's cached
    blocks, also when B writes A's cache_salt, while A's repeat hits; the
    KV events a router follows carry the tenant-derived salts;
  - --tenant_max_concurrent_requests: a tenant with its cap of streams open
    gets RESOURCE_EXHAUSTED (gRPC) and 429 (HTTP), counted as rejected,
    while another tenant's requests complete; a finished stream frees a slot.
"""
import argparse
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import grpc
import msgpack
import openai
import zmq
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_proc import LoomdProcess  # noqa: E402
from python_client_test import generate_stubs  # noqa: E402

ARGS = None
TIMEOUT = 120
KEYS = "# test keys\nsk-alpha-0123 alpha\nsk-beta-4567 beta\nsk-ops-89ab\n"
WRONG = "sk-wrong-cdef"
# 80 token ids: five full blocks of 16, so a repeat finds four of them cached.
PROMPT = [1000 + 7 * i for i in range(80)]


def bearer(key):
    return [("authorization", f"Bearer {key}")] if key else []


class SaltFollower(threading.Thread):
    """Follows KV events as a router's indexer does (it binds, loomd
    connects) and keeps the cache salts of the stored blocks. It reads all
    the time, as a real consumer does: a ZeroMQ SUB sends its subscription
    only once its own thread has taken the new connection in."""

    def __init__(self):
        super().__init__(daemon=True)
        self.context = zmq.Context()
        self.sub = self.context.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt_string(zmq.SUBSCRIBE, "")
        self.port = self.sub.bind_to_random_port("tcp://127.0.0.1")
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.seen = set()

    def run(self):
        while not self.stopping.is_set():
            if not self.sub.poll(50):
                continue
            _, _, payload = self.sub.recv_multipart()
            for event in msgpack.unpackb(payload, raw=False)[1]:
                if event[0] == "BlockStored" and len(event) == 9:
                    with self.lock:
                        self.seen.update(keys[0] for keys in event[8])

    def salts(self):
        with self.lock:
            return set(self.seen)

    def stop(self):
        self.stopping.set()
        self.join()
        self.sub.close()
        self.context.term()


class AuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.keys_path = os.path.join(cls.tmp.name, "keys")
        with open(cls.keys_path, "w") as f:
            f.write(KEYS)
        cls.pb2, cls.pb2_grpc = generate_stubs(ARGS.proto_dir, cls.tmp.name)
        cls.events = SaltFollower()
        events_port = cls.events.port
        cls.loomd = LoomdProcess(ARGS.loomd, [
            "--threads=1", "--max_model_len=512", "--kv_cache_bytes=67108864",
            f"--api_keys_file={cls.keys_path}",
            f"--kv_events_endpoint=tcp://127.0.0.1:{events_port}"], cls.tmp.name)
        cls.loomd.start()
        cls.events.start()
        cls.channel = grpc.insecure_channel(cls.loomd.grpc_target)
        cls.stub = cls.pb2_grpc.GenerationServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.events.stop()
        cls.channel.close()
        code = cls.loomd.stop()
        cls.tmp.cleanup()
        if code != 0:
            raise AssertionError(f"loomd exited with {code} after SIGTERM")

    # --- helpers -----------------------------------------------------------
    def http(self, method, path, body=None, key=None):
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.loomd.http + path, data=data, headers=headers,
                                     method=method)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metric_sum(self, name, text=None):
        text = text if text is not None else self.http("GET", "/metrics")[1]
        # name: a metric name (every series of it) or a regex of one series.
        pattern = name if "{" in name else rf"{name}(?:{{[^}}]*}})?"
        return sum(float(v) for v in re.findall(rf"(?m)^{pattern} (\S+)$", text))

    # Generation requests this test class has completed so far: the engine
    # counts a request when it finishes, which can be just after its reply.
    completed = 0

    def engine_counters(self):
        """(requests, prompt tokens) once every completed request is counted."""
        deadline = time.monotonic() + 60
        while True:
            text = self.http("GET", "/metrics")[1]
            requests = self.metric_sum("loom_requests_total", text)
            if requests >= AuthTest.completed or time.monotonic() > deadline:
                return requests, self.metric_sum("loom_prompt_tokens_total", text)
            time.sleep(0.01)

    def greedy(self, max_tokens=2):
        pb2 = self.pb2
        return pb2.GenerateRequest(prompt="Hello", sampling=pb2.SamplingParams(temperature=0),
                                   stopping=pb2.StoppingCriteria(max_tokens=max_tokens))

    def rpcs(self):
        pb2 = self.pb2
        return {
            "Generate": lambda md: self.stub.Generate(self.greedy(), metadata=md, timeout=TIMEOUT),
            "GenerateStream": lambda md: list(
                self.stub.GenerateStream(self.greedy(), metadata=md, timeout=TIMEOUT)),
            "Tokenize": lambda md: self.stub.Tokenize(pb2.TokenizeRequest(text="Hello"),
                                                      metadata=md, timeout=TIMEOUT),
            "GetModelInfo": lambda md: self.stub.GetModelInfo(pb2.GetModelInfoRequest(),
                                                              metadata=md, timeout=TIMEOUT),
        }

    def routes(self):
        return [
            ("GET", "/v1/models", None),
            ("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0}),
            ("POST", "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}),
            ("POST", "/tokenize", {"prompt": "Hello"}),
            ("POST", "/detokenize", {"tokens": [1, 2]}),
            ("GET", "/version", None),
        ]

    def cached_tokens(self, key, salt=None):
        body = {"prompt": PROMPT, "max_tokens": 1, "temperature": 0}
        if salt is not None:
            body["cache_salt"] = salt
        status, text = self.http("POST", "/v1/completions", body, key)
        self.assertEqual(status, 200, text)
        return json.loads(text)["usage"]["prompt_tokens_details"]["cached_tokens"]

    def stored_salts(self, wanted):
        """The extra_keys salts of the BlockStored events so far, once every
        salt of `wanted` has come (or a minute has passed)."""
        deadline = time.monotonic() + 60
        while not wanted <= self.events.salts() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.events.salts()

    def wait_until_accepted(self, key):
        deadline = time.monotonic() + 60
        while self.http("GET", "/v1/models", key=key)[0] != 200:
            self.assertLess(time.monotonic(), deadline, f"key {key!r} never took effect")
            time.sleep(0.05)

    # --- tests -------------------------------------------------------------
    def test_1_rpcs_need_a_key_and_rejected_ones_do_no_engine_work(self):
        for name, call in self.rpcs().items():
            before = self.engine_counters()
            series = rf'loom_grpc_requests_total{{(?=[^}}]*method="{name}")(?=[^}}]*code="UNAUTHENTICATED")[^}}]*}}'
            unauthenticated = self.metric_sum(series)
            for metadata in (bearer(None), bearer(WRONG), [("authorization", "sk-alpha-0123")]):
                with self.assertRaises(grpc.RpcError) as raised:
                    call(metadata)
                self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAUTHENTICATED, name)
            self.assertEqual(self.engine_counters(), before, f"{name}: rejected calls did work")
            self.assertEqual(self.metric_sum(series), unauthenticated + 3, name)
            call(bearer("sk-alpha-0123"))
            call(bearer("sk-ops-89ab"))
            if name.startswith("Generate"):
                AuthTest.completed += 2

    def test_2_routes_need_a_key_with_openai_error_bodies(self):
        for method, path, body in self.routes():
            before = self.engine_counters()
            for key in (None, WRONG):
                status, text = self.http(method, path, body, key)
                self.assertEqual(status, 401, f"{method} {path} with {key!r}: {text}")
                error = json.loads(text)["error"]
                self.assertEqual(error["code"], "invalid_api_key")
                self.assertEqual(error["type"], "invalid_request_error")
                self.assertNotIn(WRONG, text)
            self.assertEqual(self.engine_counters(), before, f"{path}: rejected requests did work")
            status, text = self.http(method, path, body, "sk-beta-4567")
            self.assertEqual(status, 200, f"{method} {path}: {text}")
            if "completions" in path:
                AuthTest.completed += 1

    def test_3_the_openai_sdk_with_wrong_and_right_keys(self):
        wrong = openai.OpenAI(base_url=self.loomd.http + "/v1", api_key=WRONG, max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            wrong.models.list()
        right = openai.OpenAI(base_url=self.loomd.http + "/v1", api_key="sk-alpha-0123")
        model = right.models.list().data[0].id
        reply = right.completions.create(model=model, prompt="Hello", max_tokens=2, temperature=0)
        self.assertEqual(reply.usage.completion_tokens, 2)

    def test_4_probes_metrics_health_and_reflection_stay_open(self):
        for path in ("/healthz", "/health", "/readyz", "/metrics"):
            self.assertEqual(self.http("GET", path)[0], 200, path)
        health = health_pb2_grpc.HealthStub(self.channel)
        for service in ("", "loom.v1.GenerationService"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
            self.assertEqual(reply.status, health_pb2.HealthCheckResponse.SERVING)
        reflection = reflection_pb2_grpc.ServerReflectionStub(self.channel)
        replies = list(reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=TIMEOUT))
        names = {s.name for s in replies[0].list_services_response.service}
        self.assertIn("loom.v1.GenerationService", names)

    def test_5_tenants_never_share_cached_blocks(self):
        self.assertEqual(self.cached_tokens("sk-alpha-0123"), 0)
        self.assertEqual(self.cached_tokens("sk-alpha-0123"), 64, "tenant alpha's repeat hits")
        self.assertEqual(self.cached_tokens("sk-beta-4567"), 0, "beta sees none of alpha's")
        self.assertEqual(self.cached_tokens("sk-ops-89ab"), 0, "nor does a key without a tenant")
        # beta writing the salt alpha uses still hashes apart.
        self.assertEqual(self.cached_tokens("sk-alpha-0123", salt="shared"), 0)
        self.assertEqual(self.cached_tokens("sk-alpha-0123", salt="shared"), 64)
        self.assertEqual(self.cached_tokens("sk-beta-4567", salt="shared"), 0)
        # Routers see the tenant-derived salts, never a bare request salt.
        wanted = {"tenant:5:alpha:", "tenant:4:beta:", "tenant:0::", "tenant:5:alpha:shared",
                  "tenant:4:beta:shared"}
        salts = self.stored_salts(wanted)
        self.assertEqual(salts, wanted)
        self.assertEqual(self.cached_tokens("sk-beta-4567"), 64, "beta's own repeat hits")

    def test_6_keys_reload_on_change_and_on_sighup(self):
        # A changed file (a new inode, as a Secret update makes) is picked up.
        replaced = self.keys_path + ".new"
        with open(replaced, "w") as f:
            f.write("sk-gamma-1111 gamma\n")
        os.rename(replaced, self.keys_path)
        self.wait_until_accepted("sk-gamma-1111")
        self.assertEqual(self.http("GET", "/v1/models", key="sk-alpha-0123")[0], 401)

        # Rewritten in place with the same size and modification time, the
        # file looks unchanged: SIGHUP makes loomd read it.
        stat = os.stat(self.keys_path)
        with open(self.keys_path, "r+") as f:
            f.write("sk-delta-2222 delta\n")
        os.utime(self.keys_path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        self.assertEqual(os.stat(self.keys_path).st_size, stat.st_size)
        self.loomd.signal(signal.SIGHUP)
        self.wait_until_accepted("sk-delta-2222")
        self.assertEqual(self.http("GET", "/v1/models", key="sk-gamma-1111")[0], 401)

        # A bad file keeps the keys in force.
        with open(replaced, "w") as f:
            f.write("sk-epsilon a b c\n")
        os.rename(replaced, self.keys_path)
        deadline = time.monotonic() + 60
        while "keeping the previous ones" not in self.loomd.log():
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        self.assertEqual(self.http("GET", "/v1/models", key="sk-delta-2222")[0], 200)
        with open(replaced, "w") as f:
            f.write(KEYS)
        os.rename(replaced, self.keys_path)
        self.wait_until_accepted("sk-alpha-0123")

    def test_7_keys_never_reach_the_log(self):
        self.http("GET", "/v1/models", key=WRONG)
        log = self.loomd.log()
        for secret in ("sk-alpha-0123", "sk-beta-4567", "sk-ops-89ab", WRONG, "sk-gamma", "sk-delta"):
            self.assertNotIn(secret, log)
        self.assertIn("API keys from", log)


class MetricsAuthTest(unittest.TestCase):
    """--metrics_require_auth puts /metrics behind a key; the debug listing
    always is with keys on; the probes never are. --metrics_port serves
    /metrics alone. --reflection=auth puts reflection behind a key."""

    def test_metrics_debug_listing_and_reflection_need_a_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            keys = os.path.join(tmp, "keys")
            with open(keys, "w") as f:
                f.write("sk-metrics-3333\n")
            with socket.socket() as probe:  # a free port for --metrics_port
                probe.bind(("127.0.0.1", 0))
                metrics_port = probe.getsockname()[1]
            loomd = LoomdProcess(ARGS.loomd, [
                "--threads=1", "--max_model_len=256", "--kv_cache_bytes=16777216",
                f"--api_keys_file={keys}", "--metrics_require_auth", "--debug_kv_blocks",
                f"--metrics_port={metrics_port}", "--reflection=auth"], tmp)
            loomd.start()
            channel = grpc.insecure_channel(loomd.grpc_target)
            try:
                reflection = reflection_pb2_grpc.ServerReflectionStub(channel)

                def list_services(key):
                    return list(reflection.ServerReflectionInfo(
                        iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                        metadata=bearer(key), timeout=TIMEOUT))
                for key in (None, WRONG):
                    with self.assertRaises(grpc.RpcError) as refused:
                        list_services(key)
                    self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
                names = {s.name for s in list_services("sk-metrics-3333")[0]
                         .list_services_response.service}
                self.assertIn("loom.v1.GenerationService", names)
                health = health_pb2_grpc.HealthStub(channel)
                self.assertEqual(health.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT)
                                 .status, health_pb2.HealthCheckResponse.SERVING)

                def get(path, key=None, base=None):
                    req = urllib.request.Request((base or loomd.http) + path, headers=(
                        {"Authorization": f"Bearer {key}"} if key else {}))
                    try:
                        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                            return r.status
                    except urllib.error.HTTPError as e:
                        return e.code
                for path in ("/metrics", "/debug/kv_blocks"):
                    self.assertEqual(get(path), 401, path)
                    self.assertEqual(get(path, WRONG), 401, path)
                    self.assertEqual(get(path, "sk-metrics-3333"), 200, path)
                for path in ("/healthz", "/readyz"):
                    self.assertEqual(get(path), 200, path)
                # --metrics_port serves /metrics, under the same key rule, and
                # nothing else: no API, no probes, no debug listing.
                metrics_only = f"http://127.0.0.1:{metrics_port}"
                self.assertEqual(get("/metrics", base=metrics_only), 401)
                self.assertEqual(get("/metrics", "sk-metrics-3333", base=metrics_only), 200)
                for path in ("/v1/models", "/healthz", "/debug/kv_blocks"):
                    self.assertEqual(get(path, "sk-metrics-3333", base=metrics_only), 404, path)
            finally:
                channel.close()
                self.assertEqual(loomd.stop(), 0)


class TenantLimitTest(unittest.TestCase):
    """A tenant at its concurrency cap is refused; the other keeps going."""

    def test_a_tenant_over_its_cap_is_refused_while_another_completes(self):
        with tempfile.TemporaryDirectory() as tmp:
            keys = os.path.join(tmp, "keys")
            with open(keys, "w") as f:
                f.write(KEYS)
            pb2, pb2_grpc = generate_stubs(ARGS.proto_dir, tmp)
            loomd = LoomdProcess(ARGS.loomd, [
                "--threads=1", "--max_model_len=1024", "--kv_cache_bytes=134217728",
                f"--api_keys_file={keys}", "--tenant_max_concurrent_requests=2"], tmp)
            loomd.start()
            channel = grpc.insecure_channel(loomd.grpc_target)
            try:
                stub = pb2_grpc.GenerationServiceStub(channel)

                def request(max_tokens):
                    return pb2.GenerateRequest(
                        prompt="Once upon a time", sampling=pb2.SamplingParams(temperature=0),
                        stopping=pb2.StoppingCriteria(max_tokens=max_tokens, ignore_eos=True))

                # alpha opens its two allowed streams and reads a first chunk of
                # each, so both are in flight for the rest of the test.
                streams = [stub.GenerateStream(request(900), metadata=bearer("sk-alpha-0123"),
                                               timeout=TIMEOUT) for _ in range(2)]
                for stream in streams:
                    next(stream)
                with self.assertRaises(grpc.RpcError) as refused:
                    stub.Generate(request(2), metadata=bearer("sk-alpha-0123"), timeout=TIMEOUT)
                self.assertEqual(refused.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertIn("tenant alpha has 2 requests in flight",
                              refused.exception.details())
                body = json.dumps({"prompt": "Hi", "max_tokens": 2}).encode()
                req = urllib.request.Request(loomd.http + "/v1/completions", data=body, headers={
                    "Authorization": "Bearer sk-alpha-0123", "Content-Type": "application/json"})
                with self.assertRaises(urllib.error.HTTPError) as http_refused:
                    urllib.request.urlopen(req, timeout=TIMEOUT)
                self.assertEqual(http_refused.exception.code, 429)
                error = json.loads(http_refused.exception.read())["error"]
                self.assertEqual(error["type"], "rate_limit_error")

                # beta is not held back while alpha's streams still run.
                for _ in range(3):
                    reply = stub.Generate(request(4), metadata=bearer("sk-beta-4567"),
                                          timeout=TIMEOUT)
                    self.assertEqual(len(reply.completions[0].token_ids), 4)
                self.assertIsNone(streams[0].code() if streams[0].done() else None)
                with urllib.request.urlopen(loomd.http + "/metrics", timeout=TIMEOUT) as r:
                    metrics = r.read().decode()
                # Counted per tenant, under the tenant's name and never the key.
                rejected = re.search(
                    r'^loom_requests_total\{finish_reason="rejected",tenant="alpha"\} (\S+)',
                    metrics, re.M)
                self.assertIsNotNone(rejected, "no rejected series for tenant alpha")
                self.assertEqual(float(rejected.group(1)), 2)
                self.assertRegex(metrics, r'(?m)^loom_generation_tokens_total\{tenant="beta"\} 12')
                self.assertNotIn("sk-", metrics)

                # A cancelled stream gives its slot back.
                streams[0].cancel()
                deadline = time.monotonic() + 60
                while True:
                    try:
                        stub.Generate(request(2), metadata=bearer("sk-alpha-0123"),
                                      timeout=TIMEOUT)
                        break
                    except grpc.RpcError as error:
                        self.assertEqual(error.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                        self.assertLess(time.monotonic(), deadline, "the slot never came back")
                        time.sleep(0.05)
                streams[1].cancel()
            finally:
                channel.close()
                self.assertEqual(loomd.stop(), 0)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--proto_dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
