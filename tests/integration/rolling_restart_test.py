#!/usr/bin/env python3
"""A rolling restart under load behind a real proxy: three loomd replicas on
loopback behind nginx (grpc_pass, round robin), a steady gRPC load through
nginx, and each replica in turn SIGTERMed (it drains) and started again on its
port. Every request must complete, directly or after at most two client
retries on UNAVAILABLE or CANCELLED (with backoff), and exactly once: the
replicas' access logs hold one OK line per completed request, so no retried
call had run. CANCELLED is what a call gets when nginx opens it on a
replica whose listener is closing at the end of its drain (gRPC resets it
unstarted; docs/operations.md). The counts are printed for the record.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_client_test import generate_stubs  # noqa: E402

ARGS = None
CLIENTS = 6          # concurrent callers, each one request at a time
MAX_RETRIES = 2      # per request, on UNAVAILABLE or CANCELLED only
RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
# Backoff before retry 1 and 2, as a gRPC retry policy's (initial 0.25 s,
# multiplier 2): a draining replica answers UNAVAILABLE until its requests in
# flight end and it exits, and nginx's round robin may pick it again.
BACKOFF = (0.25, 0.5)
CALL_TIMEOUT = 60    # seconds


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """One loomd on a fixed gRPC port, so that its restart takes the same place
    in nginx's upstream."""

    def __init__(self, binary, port, log_dir, index):
        self.binary, self.port, self.index = binary, port, index
        self.log_path = os.path.join(log_dir, f"loomd-{index}.log")
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.binary, "--host=127.0.0.1", f"--port={self.port}", "--http_port=0",
             "--threads=1", "--max_model_len=512", "--kv_cache_bytes=33554432",
             "--drain_timeout=30s"],
            stderr=log, stdout=log)
        log.close()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica {self.index} exited at start:\n{self.tail()}")
            if self.tail().count(" (gRPC) and ") >= self.starts:
                return
            time.sleep(0.05)
        raise RuntimeError(f"replica {self.index} did not start:\n{self.tail()}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)

    def tail(self):
        with open(self.log_path) as f:
            return f.read()


NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  upstream loom {{
{servers}
  }}
  server {{
    listen 127.0.0.1:{port} http2;
    location / {{
      grpc_pass grpc://loom;
      grpc_read_timeout 120s;
      # A replica that is gone (connection refused) is skipped at once, and
      # never marked down (max_fails=0): it takes requests as soon as it is
      # back, instead of after nginx's fail_timeout, which could otherwise
      # leave no replica up while the next one restarts.
      grpc_next_upstream error timeout;
    }}
  }}
}}
"""


class RollingRestartTest(unittest.TestCase):

    def test_rolling_restart_loses_no_request(self):
        work = tempfile.mkdtemp(prefix="loom_rolling_")
        pb2, pb2_grpc = generate_stubs(ARGS.proto_dir, work)
        replicas = [Replica(ARGS.loomd, free_port(), work, i) for i in range(3)]
        nginx = None
        try:
            for r in replicas:
                r.start()
            proxy_port = free_port()
            conf = os.path.join(work, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(
                    dir=work, port=proxy_port,
                    servers="\n".join(f"    server 127.0.0.1:{r.port} max_fails=0;"
                                      for r in replicas)))
            nginx = subprocess.Popen([ARGS.nginx, "-c", conf, "-p", work, "-g", "daemon off;"],
                                     stderr=subprocess.PIPE, text=True)

            channel = grpc.insecure_channel(f"127.0.0.1:{proxy_port}")
            grpc.channel_ready_future(channel).result(timeout=30)
            stub = pb2_grpc.GenerationServiceStub(channel)
            request = pb2.GenerateRequest(
                prompt="The capital of France is",
                sampling=pb2.SamplingParams(temperature=0),
                stopping=pb2.StoppingCriteria(max_tokens=12, ignore_eos=True))

            lock = threading.Lock()
            counts = {"sent": 0, "completed": 0, "retried": 0, "retries": 0, "failed": 0}
            failures = []
            stop = threading.Event()

            def call():
                for attempt in range(MAX_RETRIES + 1):
                    try:
                        reply = stub.Generate(request, timeout=CALL_TIMEOUT)
                        if reply.usage.completion_tokens != 12:
                            return f"{reply.usage.completion_tokens} tokens, not 12"
                        return (None, attempt)
                    except grpc.RpcError as e:
                        if e.code() not in RETRIED or attempt == MAX_RETRIES:
                            return f"{e.code().name}: {e.details()} (attempt {attempt + 1})"
                        time.sleep(BACKOFF[attempt])
                return "unreachable"

            def client():
                while not stop.is_set():
                    with lock:
                        counts["sent"] += 1
                    outcome = call()
                    with lock:
                        if isinstance(outcome, tuple):
                            counts["completed"] += 1
                            counts["retries"] += outcome[1]
                            counts["retried"] += outcome[1] > 0
                        else:
                            counts["failed"] += 1
                            failures.append(outcome)

            threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
            for t in threads:
                t.start()

            def completed():
                with lock:
                    return counts["completed"]

            def run_until(more):
                target = completed() + more
                deadline = time.monotonic() + 120
                while completed() < target and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertGreaterEqual(completed(), target, "the load stalled")

            run_until(20)
            for r in replicas:
                self.assertEqual(r.stop(), 0, r.tail())
                self.assertIn("drained; exiting", r.tail())
                run_until(5)  # two replicas carry the load meanwhile
                r.start()
                run_until(10)
            stop.set()
            for t in threads:
                t.join(CALL_TIMEOUT * (MAX_RETRIES + 2))
            channel.close()

            print(f"\nrolling restart of 3 replicas behind nginx: {counts['sent']} sent, "
                  f"{counts['completed']} completed, {counts['retried']} retried "
                  f"({counts['retries']} retries), {counts['failed']} failed", flush=True)
            if failures:
                # What the proxy and the replicas saw, for the record.
                error_log = os.path.join(work, "nginx-error.log")
                if os.path.exists(error_log):
                    with open(error_log) as f:
                        print("nginx error log:\n" + f.read()[-4000:], flush=True)
                for r in replicas:
                    lines = [line for line in r.tail().splitlines()
                             if "status=" in line and "status=OK" not in line
                             or "drain" in line or "received" in line]
                    print(f"replica {r.index}:\n" + "\n".join(lines[-40:]), flush=True)
            self.assertEqual(failures[:5], [], f"{len(failures)} requests failed")
            self.assertEqual(counts["completed"], counts["sent"])
            # Exactly once: a call that was retried had not run anywhere.
            served = sum(r.tail().count("method=Generate status=OK") for r in replicas)
            self.assertEqual(served, counts["completed"])
            # The proxy really spread the load: every replica served requests
            # (its access log) before and after its restart.
            for r in replicas:
                runs = r.tail().split(" (gRPC) and ")[1:]
                self.assertEqual(len(runs), 2)
                for run in runs:
                    self.assertIn("method=Generate status=OK", run, f"replica {r.index}")
        finally:
            if nginx is not None:
                nginx.send_signal(signal.SIGQUIT)
                try:
                    nginx.wait(30)
                except subprocess.TimeoutExpired:
                    nginx.kill()
            for r in replicas:
                if r.proc is not None and r.proc.poll() is None:
                    r.proc.kill()
                    r.proc.wait()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--proto_dir", required=True)
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
