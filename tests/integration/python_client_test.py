#!/usr/bin/env python3
"""Drives the real loomd with a Python grpcio client: health, reflection,
model info, tokenize, validation errors, streaming, and the SIGTERM exit.

Stubs are generated from proto/ at test time (grpc_tools.protoc) into a
temporary directory, so the test always speaks the checked-in API.
"""
import argparse
import importlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase)
from grpc_tools import protoc

TIMEOUT = 60  # seconds per call
ARGS = None


def generate_stubs(proto_dir, out_dir):
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main([
        "protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}", os.path.join(proto_dir, "loom/v1/generation.proto")
    ])
    if rc != 0:
        raise RuntimeError(f"grpc_tools.protoc failed with {rc}")
    sys.path.insert(0, out_dir)
    return (importlib.import_module("loom.v1.generation_pb2"),
            importlib.import_module("loom.v1.generation_pb2_grpc"))


class Loomd:
    """loomd on loopback with a port it picks itself, read back from its log."""

    def __init__(self, binary):
        self.proc = subprocess.Popen(
            [binary, "--host=127.0.0.1", "--port=0", "--http_port=0", "--threads=2",
             "--max_model_len=512", "--kv_cache_bytes=67108864"],
            stderr=subprocess.PIPE, text=True)
        self.log = []
        self.ready = threading.Event()
        self.port = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.ready.wait(180) or self.port is None:
            self.proc.kill()
            raise RuntimeError("loomd did not start:\n" + "".join(self.log))

    def _read(self):
        for line in self.proc.stderr:
            sys.stderr.write(line)
            self.log.append(line)
            match = re.search(r":(\d+) \(gRPC\)", line)
            if match:
                self.port = int(match.group(1))
                self.ready.set()
        self.ready.set()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(TIMEOUT)


class LoomdPythonClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb2, cls.pb2_grpc = generate_stubs(ARGS.proto_dir, cls.tmp.name)
        cls.loomd = Loomd(ARGS.loomd)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.loomd.port}")
        cls.stub = cls.pb2_grpc.GenerationServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        code = cls.loomd.stop()
        cls.tmp.cleanup()
        if code != 0:
            raise AssertionError(f"loomd exited with {code} after SIGTERM")

    def greedy(self, prompt, max_tokens):
        pb2 = self.pb2
        return pb2.GenerateRequest(
            prompt=prompt,
            sampling=pb2.SamplingParams(temperature=0),
            stopping=pb2.StoppingCriteria(max_tokens=max_tokens, ignore_eos=True))

    def test_health_is_serving(self):
        health = health_pb2_grpc.HealthStub(self.channel)
        for service in ("", "loom.v1.GenerationService"):
            response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
            self.assertEqual(response.status, health_pb2.HealthCheckResponse.SERVING, service)

    def test_reflection_lists_the_services(self):
        stub = reflection_pb2_grpc.ServerReflectionStub(self.channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        responses = list(stub.ServerReflectionInfo(iter([request]), timeout=TIMEOUT))
        names = {s.name for s in responses[0].list_services_response.service}
        self.assertIn("loom.v1.GenerationService", names)
        self.assertIn("grpc.health.v1.Health", names)
        self.assertIn("grpc.reflection.v1alpha.ServerReflection", names)
        self.assertIn("grpc.reflection.v1.ServerReflection", names)

    def test_reflection_describes_the_api(self):
        # As grpcurl's `describe` does: the pool fetches files by symbol.
        pool = descriptor_pool.DescriptorPool(
            ProtoReflectionDescriptorDatabase(self.channel))
        generate = pool.FindMethodByName("loom.v1.GenerationService.Generate")
        self.assertEqual(generate.input_type.full_name, "loom.v1.GenerateRequest")
        self.assertIn("prompt", generate.input_type.fields_by_name)
        self.assertEqual(pool.FindServiceByName("grpc.health.v1.Health").methods_by_name[
            "Check"].output_type.full_name, "grpc.health.v1.HealthCheckResponse")
        with self.assertRaises(KeyError):
            pool.FindMessageTypeByName("loom.v1.NoSuchMessage")

    def test_reflection_v1_answers_as_v1alpha_does(self):
        # grpc.reflection.v1 has v1alpha's messages under another package,
        # so v1alpha's classes encode and decode it.
        call = self.channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        requests = [reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="loom.v1.GenerateRequest"),
                    reflection_pb2.ServerReflectionRequest(file_by_filename="no/such.proto")]
        replies = list(call(iter(requests), timeout=TIMEOUT))
        self.assertEqual(len(replies), 2)
        files = [descriptor_pb2.FileDescriptorProto.FromString(blob)
                 for blob in replies[0].file_descriptor_response.file_descriptor_proto]
        self.assertEqual(files[0].name, "loom/v1/generation.proto")
        self.assertEqual(replies[1].error_response.error_code, grpc.StatusCode.NOT_FOUND.value[0])
        self.assertIn("no/such.proto", replies[1].error_response.error_message)

    def test_model_info_and_tokenize(self):
        info = self.stub.GetModelInfo(self.pb2.GetModelInfoRequest(), timeout=TIMEOUT)
        self.assertEqual(info.max_model_len, 512)
        self.assertEqual(info.vocab_size, 49152)
        tokens = self.stub.Tokenize(self.pb2.TokenizeRequest(text="Hello world"), timeout=TIMEOUT)
        self.assertGreater(len(tokens.token_ids), 0)
        self.assertEqual(len(tokens.token_ids), len(tokens.tokens))

    def test_invalid_argument_names_the_field(self):
        request = self.greedy("hi", 4)
        request.sampling.temperature = 250
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Generate(request, timeout=TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sampling.temperature must be in [0, 100]; got 250",
                      caught.exception.details())
        request = self.greedy("hi", 4)
        request.stopping.stop.extend(["x"] * 17)
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Generate(request, timeout=TIMEOUT)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("stopping.stop", caught.exception.details())
        # Still serving.
        response = self.stub.Generate(self.greedy("hi", 2), timeout=TIMEOUT)
        self.assertEqual(len(response.completions[0].token_ids), 2)

    def test_streaming(self):
        messages = list(self.stub.GenerateStream(self.greedy("Once upon a time", 6),
                                                 timeout=TIMEOUT))
        self.assertGreaterEqual(len(messages), 1)
        tokens = [t for m in messages for t in m.token_ids]
        self.assertEqual(len(tokens), 6)
        last = messages[-1]
        self.assertEqual(last.finish_reason, self.pb2.FINISH_REASON_LENGTH)
        self.assertEqual(last.usage.completion_tokens, 6)
        self.assertTrue(all(m.request_id == messages[0].request_id for m in messages))
        self.assertNotEqual(messages[0].request_id, "")

    def test_chat_messages(self):
        pb2 = self.pb2
        request = pb2.GenerateRequest(
            messages=pb2.ChatMessages(messages=[pb2.ChatMessage(role="user", content="Hi!")]),
            sampling=pb2.SamplingParams(temperature=0),
            stopping=pb2.StoppingCriteria(max_tokens=4))
        response = self.stub.Generate(request, timeout=TIMEOUT)
        self.assertGreater(len(response.completions[0].token_ids), 0)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--proto_dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
