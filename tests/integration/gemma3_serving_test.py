#!/usr/bin/env python3
"""loomd serves Gemma 3 270M Q4_K_M (the file scripts/setup fetches) with no
flag beyond --model: the model info, greedy continuations over gRPC equal to
transformers' (tests/fixtures/gemma3/golden.json, one prompt past the
512-token window of the sliding layers), the same text through the OpenAI
completions API, and chat in Gemma's turn format. Exits 77 (ctest: skipped) when the file is not in the cache.
"""
import argparse
import json
import os
import sys
import tempfile
import unittest
import urllib.request

import grpc
import openai

sys.path.insert(0, os.path.dirname(__file__))
from loomd_proc import LoomdProcess  # noqa: E402
from python_client_test import generate_stubs  # noqa: E402

SKIP = 77
TIMEOUT = 300  # seconds per call: the long prompt prefills on the CPU
GREEDY_TOKENS = 24
FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gemma3", "golden.json")
ARGS = None


def gemma_path():
    cache = os.environ.get("LOOM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "loom")
    return os.path.join(cache, "llm_gemma3", "gemma-3-270m-q4_k_m.gguf")


class Gemma3ServingTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb2, cls.pb2_grpc = generate_stubs(ARGS.proto_dir, cls.tmp.name)
        with open(FIXTURE) as f:
            cls.runs = json.load(f)["runs"]
        cls.loomd = LoomdProcess(ARGS.loomd, [f"--model={gemma_path()}"], cls.tmp.name)
        try:
            cls.loomd.start()
        except Exception:
            cls.loomd.kill()
            raise
        cls.channel = grpc.insecure_channel(cls.loomd.grpc_target)
        cls.stub = cls.pb2_grpc.GenerationServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        code = cls.loomd.stop()
        cls.tmp.cleanup()
        if code != 0:
            raise AssertionError(f"loomd exited with {code} after SIGTERM")

    def test_model_info(self):
        info = self.stub.GetModelInfo(self.pb2.GetModelInfoRequest(), timeout=TIMEOUT)
        self.assertEqual(info.vocab_size, 262144)
        self.assertEqual(info.name, "gemma-3-270m-q4_k_m")
        self.assertEqual(info.architecture, "Gemma3ForCausalLM")
        self.assertEqual(info.head_dim, 256)

    def test_grpc_greedy_matches_transformers(self):
        pb2 = self.pb2
        # Short prompts and one of 698 tokens, past the sliding window.
        runs = [r for r in self.runs if len(r["prompt_ids"]) < 16][:2]
        runs += [r for r in self.runs if 512 < len(r["prompt_ids"]) < 1024][:1]
        self.assertEqual(len(runs), 3)
        for run in runs:
            with self.subTest(prompt=run["text"][:40]):
                request = pb2.GenerateRequest(
                    prompt=run["text"], sampling=pb2.SamplingParams(temperature=0),
                    stopping=pb2.StoppingCriteria(max_tokens=GREEDY_TOKENS, ignore_eos=True))
                response = self.stub.Generate(request, timeout=TIMEOUT)
                self.assertEqual(response.usage.prompt_tokens, len(run["prompt_ids"]))
                self.assertEqual(list(response.completions[0].token_ids),
                                 run["greedy"][:GREEDY_TOKENS])

    def test_openai_completion_matches_transformers(self):
        run = self.runs[0]
        client = openai.OpenAI(base_url=self.loomd.http + "/v1", api_key="unused",
                               max_retries=0, timeout=TIMEOUT)
        reply = client.completions.create(model="gemma-3-270m-q4_k_m", prompt=run["text"],
                                          max_tokens=len(run["greedy"]), temperature=0)
        self.assertEqual(reply.choices[0].text, run["greedy_text"])

    def test_generated_newlines_reach_the_text(self):
        """Gemma's newline is a user-defined token (id 107): generated text,
        whole and streamed, keeps it, as the logprobs' tokens do."""
        client = openai.OpenAI(base_url=self.loomd.http + "/v1", api_key="unused",
                               max_retries=0, timeout=TIMEOUT)
        prompt = "1. apples\n2. pears\n3."
        whole = client.completions.create(model="gemma-3-270m-q4_k_m", prompt=prompt,
                                          max_tokens=12, temperature=0, logprobs=1)
        tokens = whole.choices[0].logprobs.tokens
        self.assertIn("\n", tokens)
        self.assertEqual(whole.choices[0].text, "".join(tokens))
        streamed = "".join(chunk.choices[0].text for chunk in client.completions.create(
            model="gemma-3-270m-q4_k_m", prompt=prompt, max_tokens=12, temperature=0,
            stream=True))
        self.assertEqual(streamed, whole.choices[0].text)

    def test_chat_uses_gemma_turns(self):
        """The GGUF has no chat template: loomd renders messages in Gemma's turn
        format (a system message opens the first user turn), token for token
        the prompt written out by hand, and refuses a tool turn, which the
        format has no place for, with a 400 naming messages."""
        messages = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "What is the capital of France?"}]
        chat = json.loads(post(self.loomd.http + "/tokenize", {"messages": messages}))
        written = ("<bos><start_of_turn>user\nBe brief.\n\nWhat is the capital of France?"
                   "<end_of_turn>\n<start_of_turn>model\n")
        by_hand = json.loads(post(self.loomd.http + "/tokenize",
                                  {"prompt": written, "add_special_tokens": False}))
        self.assertEqual(chat["tokens"], by_hand["tokens"])
        client = openai.OpenAI(base_url=self.loomd.http + "/v1", api_key="unused",
                               max_retries=0, timeout=TIMEOUT)
        reply = client.chat.completions.create(model="gemma-3-270m-q4_k_m", messages=messages,
                                               max_tokens=8, temperature=0)
        self.assertEqual(reply.usage.prompt_tokens, chat["count"])
        self.assertIn(reply.choices[0].finish_reason, ("stop", "length"))
        with self.assertRaises(openai.BadRequestError) as raised:
            client.chat.completions.create(
                model="gemma-3-270m-q4_k_m", max_tokens=4,
                messages=messages + [{"role": "tool", "content": "42", "tool_call_id": "c"}])
        self.assertEqual(raised.exception.body["param"], "messages")


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return response.read()


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--proto_dir", required=True)
    ARGS, rest = parser.parse_known_args()
    if not os.path.exists(gemma_path()):
        print(f"skipped: {gemma_path()} is missing (scripts/setup fetches Gemma 3 270M)")
        sys.exit(SKIP)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
