#!/usr/bin/env python3
"""Drives the real loomd's OpenAI HTTP API with the official `openai` SDK:
greedy answers, streaming against non-streaming, usage, n, logprobs (sampled
and prompt), stop, seed, max_completion_tokens, the error statuses as the
SDK's exception classes, a disconnect that frees its KV blocks, plain
`curl -N` framing, idle connections beside /healthz, `loom bench`'s OpenAI
backends, and (with --heavy) 256 concurrent SSE streams batched together on a
flat thread count.
"""
import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

import jsonschema
import openai

ARGS = None
PROMPT = "The capital of France is"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Loomd:
    """loomd on loopback with ports it picks itself, read back from its log."""

    def __init__(self, binary, *flags, env=None):
        self.proc = subprocess.Popen(
            [binary, "--host=127.0.0.1", "--port=0", "--http_port=0", "--threads=2",
             "--max_model_len=512", "--kv_cache_bytes=67108864", *flags],
            stderr=subprocess.PIPE, text=True, env=env)
        self.log = []
        self.ready = threading.Event()
        self.http_port = None
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(180) or self.http_port is None:
            self.proc.kill()
            raise RuntimeError("loomd did not start:\n" + "".join(self.log))
        self.url = f"http://127.0.0.1:{self.http_port}"

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            match = re.search(r":(\d+) \(HTTP", line)
            if match:
                self.http_port = int(match.group(1))
                self.ready.set()
        self.ready.set()

    def client(self, **kwargs):
        return openai.OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0,
                             timeout=120, **kwargs)

    def metric(self, name, labels=""):
        """The value of one series in /metrics (labels: the exact label text)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            text = response.read().decode()
        pattern = re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)"
        match = re.search(r"^" + pattern + r"$", text, re.MULTILINE)
        return float(match.group(1)) if match else None

    def threads(self):
        with open(f"/proc/{self.proc.pid}/status") as status:
            return int(re.search(r"^Threads:\s+(\d+)", status.read(), re.MULTILINE).group(1))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def wait_for(predicate, timeout=60):
    """Polls predicate until it holds; fails after timeout (a hang, not timing)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


class OpenAiSdkTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.loomd = Loomd(ARGS.loomd)
        cls.client = cls.loomd.client()
        cls.model = cls.client.models.list().data[0].id

    def test_loom_bench_drives_both_openai_routes(self):
        """`loom bench --backend=openai|openai-chat`: every request streams to
        its exact length (ignore_eos) and the JSON names the backend."""
        for backend, route_input in (("openai", 4 * 16), ("openai-chat", None)):
            with self.subTest(backend=backend):
                out = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                   f"loom_bench_{backend}_{os.getpid()}.json")
                run = subprocess.run(
                    [ARGS.loom, "bench", f"--backend={backend}", f"--target={self.loomd.url}",
                     "--num_prompts=4", "--input_len=16", "--output_len=8", "--seed=3",
                     f"--json={out}"], capture_output=True, text=True, timeout=300)
                self.assertEqual(run.returncode, 0, run.stderr)
                with open(out) as f:
                    result = json.load(f)
                os.unlink(out)
                self.assertEqual(result["backend"], backend)
                self.assertEqual((result["completed"], result["failed"]), (4, 0))
                self.assertEqual(result["total_output_tokens"], 4 * 8)
                if route_input is not None:
                    self.assertEqual(result["total_input_tokens"], route_input)
                else:  # the chat template adds its tokens around each message
                    self.assertGreater(result["total_input_tokens"], 4 * 16)
                self.assertGreater(result["median_ttft_ms"], 0)
                self.assertGreater(result["median_itl_ms"], 0)

    def test_loom_bench_reports_a_failing_target(self):
        run = subprocess.run(
            [ARGS.loom, "bench", "--backend=openai", f"--target={self.loomd.url}/nowhere",
             "--num_prompts=1"], capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 1)
        self.assertIn("HTTP 404", run.stderr)

    @classmethod
    def tearDownClass(cls):
        if cls.loomd.stop() != 0:
            raise AssertionError("loomd exited non-zero:\n" + "".join(cls.loomd.log[-20:]))

    def complete(self, **kwargs):
        return self.client.completions.create(model=self.model, **kwargs)

    def chat(self, **kwargs):
        return self.client.chat.completions.create(model=self.model, **kwargs)

    def test_models(self):
        models = self.client.models.list().data
        self.assertEqual(len(models), 1)
        self.assertEqual(models[0].object, "model")
        self.assertTrue(models[0].id.startswith("SmolLM2-135M-Instruct"))

    def test_greedy_chat_answers_paris(self):
        first = self.chat(messages=QUESTION, temperature=0, max_tokens=24)
        self.assertEqual(first.object, "chat.completion")
        self.assertIn("Paris", first.choices[0].message.content)
        self.assertEqual(first.choices[0].message.role, "assistant")
        self.assertIn(first.choices[0].finish_reason, ("stop", "length"))
        second = self.chat(messages=QUESTION, temperature=0, max_tokens=24)
        self.assertEqual(second.choices[0].message.content, first.choices[0].message.content)

    def test_chat_takes_system_assistant_and_text_parts(self):
        messages = [{"role": "system", "content": "You answer in one word."},
                    {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]},
                    {"role": "assistant", "content": "Paris"},
                    {"role": "user", "content": "And of Italy?"}]
        response = self.chat(messages=messages, temperature=0, max_tokens=8)
        self.assertTrue(response.choices[0].message.content)
        self.assertGreater(response.usage.prompt_tokens, 20)

    def test_stream_equals_non_stream_completions(self):
        whole = self.complete(prompt=PROMPT, temperature=0, max_tokens=16)
        chunks = list(self.complete(prompt=PROMPT, temperature=0, max_tokens=16, stream=True,
                                    stream_options={"include_usage": True}))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        self.assertEqual(text, whole.choices[0].text)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        self.assertEqual(finishes[-1], whole.choices[0].finish_reason)
        self.assertTrue(all(f is None for f in finishes[:-1]))
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, whole.usage.completion_tokens)
        self.assertEqual(chunks[-1].usage.prompt_tokens, whole.usage.prompt_tokens)

    def test_stream_equals_non_stream_chat(self):
        whole = self.chat(messages=QUESTION, temperature=0, max_tokens=16)
        chunks = list(self.chat(messages=QUESTION, temperature=0, max_tokens=16, stream=True))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, whole.choices[0].message.content)
        self.assertEqual(chunks[-1].choices[0].finish_reason, whole.choices[0].finish_reason)
        self.assertTrue(all(c.object == "chat.completion.chunk" for c in chunks))

    def test_usage_counts_tokens(self):
        response = self.complete(prompt=PROMPT, temperature=0, max_tokens=5,
                                 extra_body={"ignore_eos": True})
        tokens = json.loads(post(self.loomd.url + "/tokenize", {"prompt": PROMPT}))["count"]
        self.assertEqual(response.usage.prompt_tokens, tokens)
        self.assertEqual(response.usage.completion_tokens, 5)
        self.assertEqual(response.usage.total_tokens, tokens + 5)
        self.assertEqual(response.choices[0].finish_reason, "length")

    def test_prompt_forms(self):
        ids = json.loads(post(self.loomd.url + "/tokenize", {"prompt": PROMPT}))["tokens"]
        by_text = self.complete(prompt=PROMPT, temperature=0, max_tokens=4)
        by_ids = self.complete(prompt=ids, temperature=0, max_tokens=4)
        self.assertEqual(by_ids.choices[0].text, by_text.choices[0].text)
        several = self.complete(prompt=[PROMPT, "One, two,"], temperature=0, max_tokens=4)
        self.assertEqual([c.index for c in several.choices], [0, 1])
        self.assertEqual(several.choices[0].text, by_text.choices[0].text)
        id_lists = self.complete(prompt=[ids, ids], temperature=0, max_tokens=4)
        self.assertEqual([c.text for c in id_lists.choices], [by_text.choices[0].text] * 2)

    def test_n_samples(self):
        response = self.complete(prompt=PROMPT, n=3, temperature=1.0, seed=7, max_tokens=6,
                                 extra_body={"ignore_eos": True})
        self.assertEqual(sorted(c.index for c in response.choices), [0, 1, 2])
        self.assertEqual(response.usage.completion_tokens, 18)
        chat = self.chat(messages=QUESTION, n=2, temperature=1.0, seed=7, max_tokens=6)
        self.assertEqual(sorted(c.index for c in chat.choices), [0, 1])

    def test_completion_logprobs(self):
        response = self.complete(prompt=PROMPT, temperature=0, max_tokens=4, logprobs=2)
        logprobs = response.choices[0].logprobs
        self.assertEqual(len(logprobs.tokens), response.usage.completion_tokens)
        self.assertEqual("".join(logprobs.tokens), response.choices[0].text)
        for token, logprob, top in zip(logprobs.tokens, logprobs.token_logprobs,
                                       logprobs.top_logprobs):
            self.assertLessEqual(logprob, 0.0)
            self.assertLessEqual(len(top), 2)
            # Greedy: the sampled token is the most likely one.
            self.assertAlmostEqual(max(top.values()), logprob, places=4)

    def test_chat_logprobs(self):
        response = self.chat(messages=QUESTION, temperature=0, max_tokens=4, logprobs=True,
                             top_logprobs=3)
        content = response.choices[0].logprobs.content
        self.assertEqual(len(content), response.usage.completion_tokens)
        for entry in content:
            self.assertEqual(len(entry.top_logprobs), 3)
            self.assertAlmostEqual(entry.top_logprobs[0].logprob, entry.logprob, places=4)

    def test_prompt_logprobs_for_scoring(self):
        # lm-eval's loglikelihood request: echo + logprobs + max_tokens 0.
        response = self.complete(prompt=PROMPT, echo=True, logprobs=1, max_tokens=0)
        choice = response.choices[0]
        self.assertEqual(choice.text, PROMPT)
        tokens = json.loads(post(self.loomd.url + "/tokenize", {"prompt": PROMPT}))["count"]
        self.assertEqual(len(choice.logprobs.token_logprobs), tokens)
        self.assertIsNone(choice.logprobs.token_logprobs[0])
        self.assertTrue(all(lp <= 0.0 for lp in choice.logprobs.token_logprobs[1:]))
        self.assertEqual("".join(choice.logprobs.tokens), PROMPT)
        self.assertEqual(response.usage.completion_tokens, 0)
        # A one-token prompt has no scores, but its token still leads the list.
        one = self.complete(prompt="a", echo=True, logprobs=1, max_tokens=2, temperature=0)
        logprobs = one.choices[0].logprobs
        self.assertEqual(logprobs.tokens[0], "a")
        self.assertIsNone(logprobs.token_logprobs[0])
        self.assertEqual("".join(logprobs.tokens), one.choices[0].text)
        self.assertEqual(logprobs.text_offset[1], 1)
        # vLLM's prompt_logprobs field gives the same numbers.
        body = json.loads(post(self.loomd.url + "/v1/completions",
                               {"prompt": PROMPT, "max_tokens": 1, "prompt_logprobs": 0}))
        vllm = body["choices"][0]["prompt_logprobs"]
        self.assertEqual(len(vllm), tokens)
        self.assertIsNone(vllm[0])
        for entry, expected in zip(vllm[1:], choice.logprobs.token_logprobs[1:]):
            (value,) = [v["logprob"] for v in entry.values()]
            self.assertAlmostEqual(value, expected, places=4)

    def test_stop_strings(self):
        whole = self.complete(prompt=PROMPT, temperature=0, max_tokens=16).choices[0].text
        word = whole.strip().split()[0].strip(".,")
        cut = whole.index(word) + len(word)
        stopped = self.complete(prompt=PROMPT, temperature=0, max_tokens=16, stop=[whole[cut:cut + 1]])
        self.assertEqual(stopped.choices[0].text, whole[:cut])
        self.assertEqual(stopped.choices[0].finish_reason, "stop")
        kept = self.complete(prompt=PROMPT, temperature=0, max_tokens=16, stop=[whole[cut:cut + 1]],
                             extra_body={"include_stop_str_in_output": True})
        self.assertEqual(kept.choices[0].text, whole[:cut + 1])

    def test_seed_repeats_a_sample(self):
        kwargs = dict(prompt="Once upon a time", temperature=1.0, max_tokens=12, seed=1234)
        first = self.complete(**kwargs).choices[0].text
        self.assertEqual(self.complete(**kwargs).choices[0].text, first)
        others = {self.complete(**{**kwargs, "seed": s}).choices[0].text for s in range(5)}
        self.assertGreater(len(others | {first}), 1)

    def test_max_completion_tokens(self):
        response = self.chat(messages=QUESTION, temperature=0, max_completion_tokens=3,
                             extra_body={"ignore_eos": True})
        self.assertEqual(response.usage.completion_tokens, 3)
        self.assertEqual(response.choices[0].finish_reason, "length")

    def test_vllm_extra_fields(self):
        response = self.complete(prompt=PROMPT, max_tokens=8, temperature=0.8, extra_body={
            "top_k": 5, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 4,
            "stop_token_ids": [2], "skip_special_tokens": True, "priority": 0,
            "cache_salt": "tenant-a", "truncate_prompt_tokens": 3}, presence_penalty=0.5,
            frequency_penalty=0.5, logit_bias={"28120": -100}, user="someone")
        self.assertGreaterEqual(response.usage.completion_tokens, 4)
        self.assertEqual(response.usage.prompt_tokens, 3)

    def test_bad_requests_are_400(self):
        cases = [dict(temperature=-1), dict(top_p=0), dict(n=0), dict(max_tokens=-1),
                 dict(logprobs=21), dict(extra_body={"top_k": -2}), dict(suffix="!"),
                 dict(best_of=3)]
        for case in cases:
            with self.subTest(case=case):
                with self.assertRaises(openai.BadRequestError) as raised:
                    self.complete(prompt=PROMPT, **case)
                error = raised.exception.body
                self.assertEqual(error["type"], "invalid_request_error")
                self.assertTrue(error["param"], error)
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(prompt="word " * 600, max_tokens=4)
        self.assertIn("512", raised.exception.body["message"])
        with self.assertRaises(openai.BadRequestError):
            self.chat(messages=[{"role": "wizard", "content": "hi"}])

    def test_continue_final_message(self):
        """vLLM's continue_final_message: the prompt ends inside the last
        (assistant) message, so the reply is the greedy continuation of exactly
        those tokens, as the completions route gives it; add_generation_prompt
        false alone leaves the assistant header out."""
        opened = QUESTION + [{"role": "assistant", "content": "The capital of France is"}]
        rendered = json.loads(post(self.loomd.url + "/tokenize", {
            "messages": opened, "continue_final_message": True}))["tokens"]
        text = json.loads(post(self.loomd.url + "/detokenize", {"tokens": rendered}))["prompt"]
        self.assertTrue(text.endswith("assistant\nThe capital of France is"), text)
        reply = self.chat(messages=opened, temperature=0, max_tokens=8, extra_body={
            "continue_final_message": True, "add_generation_prompt": False})
        completion = self.complete(prompt=rendered, temperature=0, max_tokens=8)
        self.assertEqual(reply.choices[0].message.content, completion.choices[0].text)
        self.assertEqual(reply.usage.prompt_tokens, len(rendered))

        closed = json.loads(post(self.loomd.url + "/tokenize", {
            "messages": QUESTION, "add_generation_prompt": False}))["tokens"]
        with_header = json.loads(post(self.loomd.url + "/tokenize", {"messages": QUESTION}))
        self.assertLess(len(closed), with_header["count"])
        self.assertEqual(with_header["tokens"][:len(closed)], closed)

        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(messages=opened, max_tokens=4, extra_body={
                "continue_final_message": True, "add_generation_prompt": True})
        self.assertEqual(raised.exception.body["param"], "continue_final_message")

    def test_forced_tool_calls_without_a_model_format(self):
        """The default model's template has no tool-call format: tool_choice
        "required" and a named function still give valid calls (written as
        llama3_json's plain JSON objects), whole and streamed; "auto", which
        would have to read the model's own format, is a 400 naming it."""
        tools = [{"type": "function", "function": {
            "name": "get_weather", "parameters": {
                "type": "object", "required": ["city", "unit"], "additionalProperties": False,
                "properties": {"city": {"type": "string", "maxLength": 24},
                               "unit": {"type": "string", "enum": ["c", "f"]}}}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {
                "type": "object", "required": ["tz"],
                "properties": {"tz": {"type": "string", "maxLength": 24}}}}}]
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        named = {"type": "function", "function": {"name": "get_time"}}
        for choice, names in (("required", {"get_weather", "get_time"}), (named, {"get_time"})):
            # Greedy, so that the calls end within max_tokens on every run (a
            # sampled one may spend its tokens on the whitespace JSON allows).
            whole = self.chat(messages=messages, tools=tools, tool_choice=choice, max_tokens=120,
                              temperature=0)
            with self.client.chat.completions.stream(model=self.model, messages=messages,
                                                     tools=tools, tool_choice=choice,
                                                     max_tokens=120, temperature=0) as stream:
                for _ in stream:
                    pass
                streamed = stream.get_final_completion()
            for response in (whole, streamed):
                with self.subTest(choice=choice, streamed=response is streamed):
                    result = response.choices[0]
                    self.assertEqual(result.finish_reason, "tool_calls")
                    self.assertFalse(result.message.content)
                    self.assertTrue(result.message.tool_calls)
                    for call in result.message.tool_calls:
                        self.assertIn(call.function.name, names)
                        self.assertRegex(call.id, r"^call_[A-Za-z0-9]{24}$")
                        jsonschema.validate(json.loads(call.function.arguments),
                                            schemas[call.function.name])
            if choice is named:
                self.assertEqual(len(whole.choices[0].message.tool_calls), 1)
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(messages=messages, tools=tools, tool_choice="auto", max_tokens=8)
        self.assertEqual(raised.exception.body["param"], "tool_choice")

    def test_forced_tool_call_cut_off_keeps_only_what_was_written(self):
        """A forced call that max_tokens cuts off ends with finish_reason
        "length" and the arguments the model wrote so far, as OpenAI's do:
        none before they start, never a made-up "{}" (city is required)."""
        tools = [{"type": "function", "function": {
            "name": "get_weather", "parameters": {
                "type": "object", "required": ["city"], "additionalProperties": False,
                "properties": {"city": {"type": "string", "maxLength": 24}}}}}]
        choice = {"type": "function", "function": {"name": "get_weather"}}
        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        named_cuts = 0
        for max_tokens in (16, 20, 24, 28):
            whole = self.chat(messages=messages, tools=tools, tool_choice=choice,
                              max_tokens=max_tokens, temperature=0)
            with self.subTest(max_tokens=max_tokens):
                result = whole.choices[0]
                self.assertEqual(result.finish_reason, "length")
                for call in result.message.tool_calls or []:
                    named_cuts += 1
                    self.assertEqual(call.function.name, "get_weather")
                    self.assertNotEqual(call.function.arguments, "{}")
                    if call.function.arguments:
                        self.assertTrue(call.function.arguments.startswith("{"))
                        with self.assertRaises(json.JSONDecodeError):
                            json.loads(call.function.arguments)
        self.assertGreater(named_cuts, 0)

    def test_unknown_model_is_404(self):
        with self.assertRaises(openai.NotFoundError) as raised:
            self.client.completions.create(model="no-such-model", prompt=PROMPT)
        self.assertIn("no-such-model", raised.exception.body["message"])

    def test_request_id_header(self):
        request = urllib.request.Request(
            self.loomd.url + "/v1/completions", method="POST",
            data=json.dumps({"prompt": PROMPT, "max_tokens": 2}).encode(),
            headers={"Content-Type": "application/json", "X-Request-Id": "trace-42"})
        with urllib.request.urlopen(request, timeout=60) as response:
            self.assertIn("trace-42", json.loads(response.read())["id"])

    def test_tokenize_detokenize_version(self):
        tokens = json.loads(post(self.loomd.url + "/tokenize", {"prompt": PROMPT}))
        self.assertEqual(tokens["count"], len(tokens["tokens"]))
        text = json.loads(post(self.loomd.url + "/detokenize", {"tokens": tokens["tokens"]}))
        self.assertEqual(text["prompt"], PROMPT)
        with urllib.request.urlopen(self.loomd.url + "/version", timeout=10) as response:
            self.assertIn("version", json.loads(response.read()))

    def test_curl_shows_sse_framing(self):
        if shutil.which("curl") is None:
            self.skipTest("curl is not installed")
        out = subprocess.run(
            ["curl", "-sN", self.loomd.url + "/v1/completions", "-H",
             "Content-Type: application/json", "-d",
             json.dumps({"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "stream": True})],
            capture_output=True, text=True, timeout=60, check=True).stdout
        events = out.split("\n\n")
        self.assertEqual(events[-1], "")
        self.assertEqual(events[-2], "data: [DONE]")
        for event in events[:-2]:
            self.assertTrue(event.startswith("data: {"), event)
            self.assertEqual(json.loads(event[6:])["object"], "text_completion")

    def test_disconnect_frees_blocks(self):
        # An earlier test's request may still be releasing its blocks after
        # its response ended: start from an idle engine.
        self.assertTrue(wait_for(lambda: self.loomd.metric("loom_requests_running") == 0))
        used_before = self.loomd.metric("loom_kv_cache_blocks", 'state="used"')
        aborted = self.loomd.metric("loom_requests_total", 'finish_reason="aborted"')
        sock = open_stream(self.loomd.http_port, {"prompt": PROMPT * 20, "max_tokens": 400,
                                                  "stream": True, "ignore_eos": True})
        received = b""
        while received.count(b"data: ") < 3:
            received += sock.recv(4096)
        self.assertTrue(wait_for(lambda: self.loomd.metric("loom_requests_running") >= 1))
        self.assertGreater(self.loomd.metric("loom_kv_cache_blocks", 'state="used"'), used_before)
        sock.close()
        # Aborted, not run to its 400 tokens.
        self.assertTrue(wait_for(lambda: self.loomd.metric("loom_requests_running") == 0))
        self.assertEqual(self.loomd.metric("loom_requests_total", 'finish_reason="aborted"'),
                         aborted + 1)
        self.assertEqual(self.loomd.metric("loom_kv_cache_blocks", 'state="used"'), used_before)

    def test_healthz_beside_idle_connections(self):
        idle = [socket.create_connection(("127.0.0.1", self.loomd.http_port)) for _ in range(64)]
        try:
            # The kubelet's default probe timeout is 1 s.
            with urllib.request.urlopen(self.loomd.url + "/healthz", timeout=1) as response:
                self.assertEqual(response.status, 200)
        finally:
            for sock in idle:
                sock.close()

    def test_metrics_count_http_requests(self):
        before = self.loomd.metric("loom_http_requests_total", 'code="404",route="/v1/completions"')
        with self.assertRaises(openai.NotFoundError):
            self.client.completions.create(model="other", prompt=PROMPT)
        after = self.loomd.metric("loom_http_requests_total", 'code="404",route="/v1/completions"')
        self.assertEqual(after, (before or 0) + 1)

class ConcurrentStreamsTest(unittest.TestCase):
    """Many SSE streams at once on a loomd of its own (release build only)."""

    @unittest.skipUnless(os.environ.get("LOOM_HEAVY_TESTS"), "heavy: set LOOM_HEAVY_TESTS=1")
    def test_256_concurrent_streams(self):
        # KV for all 256 at once (3 blocks each), so that they batch together.
        self.loomd = Loomd(ARGS.loomd, "--kv_cache_bytes=1073741824")
        self.model = self.loomd.client().models.list().data[0].id
        self.addCleanup(self.loomd.stop)
        threads_before = self.loomd.threads()
        peak = {"running": 0, "threads": threads_before}
        done = threading.Event()

        def watch():
            while not done.is_set():
                peak["running"] = max(peak["running"], self.loomd.metric("loom_requests_running"))
                peak["threads"] = max(peak["threads"], self.loomd.threads())
                time.sleep(0.1)

        async def one(client, i):
            text, usage = "", None
            stream = await client.completions.create(
                model=self.model, prompt=f"Story {i}:", max_tokens=32, stream=True,
                stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
            async for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].text
                if chunk.usage:
                    usage = chunk.usage
            return usage.completion_tokens

        async def run_all():
            client = openai.AsyncOpenAI(base_url=self.loomd.url + "/v1", api_key="unused",
                                        max_retries=0, timeout=600)
            return await asyncio.gather(*(one(client, i) for i in range(256)))

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            counts = asyncio.run(run_all())
        finally:
            done.set()
            watcher.join()
        self.assertEqual(counts, [32] * 256)
        # Batched together: far more than a handful ran in one step.
        self.assertGreaterEqual(peak["running"], 128)
        # No thread per stream.
        self.assertLessEqual(peak["threads"], threads_before + 2)



class GenerationConfigTest(unittest.TestCase):
    """--generation_config and --override_generation_config fill what a
    request leaves unset, and only that."""

    def ask(self, client, **fields):
        reply = client.chat.completions.create(model="", messages=QUESTION, **fields)
        return reply.choices[0].message.content, reply.usage.completion_tokens

    def test_override_fills_unset_fields_only(self):
        loomd = Loomd(ARGS.loomd, '--override_generation_config={"temperature": 0, "max_tokens": 5}')
        try:
            self.assertTrue(any("generation defaults: temperature=0 max_tokens=5" in line
                                for line in loomd.log))
            client = loomd.client()
            # Unset: greedy and 5 tokens, the same answer every time.
            first = self.ask(client)
            self.assertEqual(first[1], 5)
            self.assertEqual(self.ask(client), first)
            self.assertEqual(self.ask(client, seed=7), first)
            # Set by the request: its own values.
            self.assertEqual(self.ask(client, max_tokens=2)[1], 2)
            sampled = {self.ask(client, temperature=1.5, seed=s, max_tokens=5)[0] for s in range(6)}
            self.assertGreater(len(sampled), 1)
        finally:
            self.assertEqual(loomd.stop(), 0)

    def test_a_folder_generation_config(self):
        folder = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"loom_gencfg_{os.getpid()}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "generation_config.json"), "w") as f:
            json.dump({"max_new_tokens": 3, "do_sample": True, "eos_token_id": 2}, f)
        loomd = Loomd(ARGS.loomd, f"--generation_config={folder}")
        try:
            self.assertEqual(self.ask(loomd.client())[1], 3)
        finally:
            self.assertEqual(loomd.stop(), 0)
            shutil.rmtree(folder)

    def test_bad_override_fails_at_start_naming_the_field(self):
        for flag, message in (('{"temperature": 500}', "sampling.temperature must be in [0, 100]"),
                              ('{"temp": 1}', "unknown key temp")):
            run = subprocess.run([ARGS.loomd, f"--override_generation_config={flag}"],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn("--override_generation_config: " + message, run.stderr)


class OpenAiErrorStatusTest(unittest.TestCase):
    """429 and 503 need a loomd of their own: a one-slot queue, and a drain."""

    def test_queue_full_is_429_and_draining_is_503(self):
        loomd = Loomd(ARGS.loomd, "--max_num_seqs=1", "--max_queued_requests=1",
                      "--drain_timeout=60s")
        client = loomd.client()
        try:
            # One running (max_num_seqs 1) and one waiting fill the queue.
            long_body = {"prompt": PROMPT, "max_tokens": 480, "stream": True, "ignore_eos": True}
            streams = [open_stream(loomd.http_port, long_body)]
            self.assertTrue(wait_for(lambda: loomd.metric("loom_requests_running") == 1))
            streams.append(open_stream(loomd.http_port, long_body))
            self.assertTrue(wait_for(lambda: loomd.metric("loom_requests_waiting") == 1))
            with self.assertRaises(openai.RateLimitError) as raised:
                client.completions.create(model="", prompt=PROMPT, max_tokens=2)
            self.assertIn("max_queued_requests", raised.exception.body["message"])
            loomd.proc.send_signal(signal.SIGTERM)
            self.assertTrue(wait_for(lambda: any("draining" in line for line in loomd.log)))
            with self.assertRaises(openai.InternalServerError) as raised:
                client.completions.create(model="", prompt=PROMPT, max_tokens=2)
            self.assertEqual(raised.exception.status_code, 503)
            for sock in streams:
                sock.close()
            self.assertEqual(loomd.proc.wait(120), 0)
        finally:
            if loomd.proc.poll() is None:
                loomd.proc.kill()

    def test_engine_failure_is_500_and_ends_a_stream_with_an_error_event(self):
        env = dict(os.environ, LOOM_TEST_FAULT="fail_at:12")
        loomd = Loomd(ARGS.loomd, env=env)
        try:
            sock = open_stream(loomd.http_port, {"prompt": PROMPT, "max_tokens": 100,
                                                 "stream": True, "ignore_eos": True})
            received = b""
            while b"[DONE]" not in received:
                data = sock.recv(4096)
                if not data:
                    break
                received += data
            sock.close()
            events = [e for e in received.decode(errors="replace").split("\r\n") if "data: " in e]
            error_events = [e for e in events if '"error"' in e]
            self.assertTrue(error_events, received)
            self.assertIn("[DONE]", received.decode(errors="replace"))
            self.assertEqual(loomd.proc.wait(60), 2)
        finally:
            if loomd.proc.poll() is None:
                loomd.proc.kill()


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode()


def open_stream(port, body):
    """A raw streaming request whose response is left unread."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                 b"\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return sock


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--loom", required=True, help="the loom CLI, for `loom bench`")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
