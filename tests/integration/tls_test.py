#!/usr/bin/env python3
"""TLS on both of loomd's ports, with certificates made by openssl at test
time: a grpcio client and the openai SDK trusting a custom CA; plaintext
clients refused; gRPC health on the plaintext --health_port for kubelet
probes; a rotated certificate picked up by new handshakes on both ports; and
mTLS refusing a client without a certificate."""
import argparse
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import openai
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_proc import LoomdProcess  # noqa: E402
from python_client_test import generate_stubs  # noqa: E402

ARGS = None
TIMEOUT = 120
FLAGS = ["--threads=1", "--max_model_len=256", "--kv_cache_bytes=16777216"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


class Pki:
    """A CA and the certificates it signs, in a folder."""

    def __init__(self, folder):
        self.folder = folder
        self.ca = self.path("ca.pem")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                "/CN=loom-test-ca", "-keyout", self.path("ca.key"), "-out", self.ca)

    def path(self, name):
        return os.path.join(self.folder, name)

    def issue(self, name, cn, server=True):
        """name.pem and name.key, signed by the CA."""
        key, csr, cert, ext = (self.path(f"{name}.{x}") for x in ("key", "csr", "pem", "ext"))
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", key,
                "-out", csr)
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server
                    else "extendedKeyUsage=clientAuth\n")
        openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.path("ca.key"),
                "-CAcreateserial", "-days", "1", "-extfile", ext, "-out", cert)
        return cert, key


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def served_certificate(port, ca, alpn):
    """The DER certificate a new TLS handshake on port gets."""
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols([alpn])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.getpeercert(binary_form=True)


def der(pem_path):
    return ssl.PEM_cert_to_DER_cert(read(pem_path, "r"))


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb2, cls.pb2_grpc = generate_stubs(ARGS.proto_dir, cls.tmp.name)
        cls.pki = Pki(cls.tmp.name)
        cls.cert, cls.key = cls.pki.path("server.pem"), cls.pki.path("server.key")
        issued = cls.pki.issue("first", "localhost")
        os.rename(issued[0], cls.cert)
        os.rename(issued[1], cls.key)
        cls.health_port = free_port()
        cls.loomd = LoomdProcess(ARGS.loomd, FLAGS + [
            f"--tls_cert_file={cls.cert}", f"--tls_key_file={cls.key}",
            f"--health_port={cls.health_port}"], cls.tmp.name)
        cls.loomd.start()

    @classmethod
    def tearDownClass(cls):
        code = cls.loomd.stop()
        cls.tmp.cleanup()
        if code != 0:
            raise AssertionError(f"loomd exited with {code} after SIGTERM")

    def secure_stub(self):
        credentials = grpc.ssl_channel_credentials(root_certificates=read(self.pki.ca))
        channel = grpc.secure_channel(self.loomd.grpc_target, credentials,
                                      options=[("grpc.ssl_target_name_override", "localhost")])
        self.addCleanup(channel.close)
        return self.pb2_grpc.GenerationServiceStub(channel)

    def test_grpc_over_tls_with_the_custom_ca(self):
        stub = self.secure_stub()
        info = stub.GetModelInfo(self.pb2.GetModelInfoRequest(), timeout=TIMEOUT)
        self.assertGreater(info.vocab_size, 0)
        reply = stub.Generate(self.pb2.GenerateRequest(
            prompt="Hello", sampling=self.pb2.SamplingParams(temperature=0),
            stopping=self.pb2.StoppingCriteria(max_tokens=2, ignore_eos=True)), timeout=TIMEOUT)
        self.assertEqual(reply.usage.completion_tokens, 2)

    def test_plaintext_grpc_is_refused(self):
        with grpc.insecure_channel(self.loomd.grpc_target) as channel:
            stub = self.pb2_grpc.GenerationServiceStub(channel)
            with self.assertRaises(grpc.RpcError) as raised:
                stub.GetModelInfo(self.pb2.GetModelInfoRequest(), timeout=10)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_health_alone_on_the_plaintext_health_port(self):
        with grpc.insecure_channel(f"127.0.0.1:{self.health_port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", "loom.v1.GenerationService"):
                reply = health.Check(health_pb2.HealthCheckRequest(service=service),
                                     timeout=TIMEOUT)
                self.assertEqual(reply.status, health_pb2.HealthCheckResponse.SERVING)
            stub = self.pb2_grpc.GenerationServiceStub(channel)
            with self.assertRaises(grpc.RpcError) as raised:
                stub.GetModelInfo(self.pb2.GetModelInfoRequest(), timeout=TIMEOUT)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_openai_sdk_over_https_with_the_custom_ca(self):
        client = openai.OpenAI(base_url=f"https://localhost:{self.loomd.http_port}/v1",
                               api_key="unused",
                               http_client=openai.DefaultHttpxClient(
                                   verify=ssl.create_default_context(cafile=self.pki.ca)))
        model = client.models.list().data[0].id
        reply = client.completions.create(model=model, prompt="Hello", max_tokens=2,
                                          temperature=0)
        self.assertEqual(reply.usage.completion_tokens, 2)
        plain = openai.OpenAI(base_url=f"http://127.0.0.1:{self.loomd.http_port}/v1",
                              api_key="unused", max_retries=0)
        with self.assertRaises(openai.APIConnectionError):
            plain.models.list()

    def test_tls12_on_the_http_port_is_ecdhe_with_aead_only(self):
        """TLS 1.2 handshakes on the HTTP port get forward-secret AEAD suites
        only, as on the gRPC port: CBC-SHA suites and static-RSA key exchange
        (no forward secrecy) are refused."""
        def handshake(cipher):
            context = ssl.create_default_context(cafile=self.pki.ca)
            context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_2
            context.set_ciphers(cipher + ":@SECLEVEL=0")
            with socket.create_connection(("127.0.0.1", self.loomd.http_port), timeout=30) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    return tls.cipher()[0]
        self.assertEqual(handshake("ECDHE-RSA-AES128-GCM-SHA256"), "ECDHE-RSA-AES128-GCM-SHA256")
        for cipher in ("ECDHE-RSA-AES128-SHA", "AES128-SHA", "AES256-GCM-SHA384"):
            with self.subTest(cipher=cipher), self.assertRaises(ssl.SSLError):
                handshake(cipher)

    def test_z_rotated_certificate_serves_new_handshakes(self):
        # Last (z): the other tests use the first certificate.
        self.assertEqual(served_certificate(self.loomd.http_port, self.pki.ca, "http/1.1"),
                         der(self.cert))
        new_cert, new_key = self.pki.issue("second", "localhost")
        # As cert-manager does: the new files replace the old ones.
        os.rename(new_key, self.key)
        os.rename(new_cert, self.cert)
        want = der(self.cert)
        for port, alpn in ((self.loomd.http_port, "http/1.1"), (self.loomd.grpc_port, "h2")):
            deadline = time.monotonic() + 60
            while served_certificate(port, self.pki.ca, alpn) != want:
                self.assertLess(time.monotonic(), deadline, f"port {port} kept the old certificate")
                time.sleep(0.1)
        self.test_grpc_over_tls_with_the_custom_ca()


class MutualTlsTest(unittest.TestCase):
    def test_a_client_without_a_certificate_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = generate_stubs(ARGS.proto_dir, tmp)
            pki = Pki(tmp)
            cert, key = pki.issue("server", "localhost")
            client_cert, client_key = pki.issue("client", "loom-client", server=False)
            loomd = LoomdProcess(ARGS.loomd, FLAGS + [
                f"--tls_cert_file={cert}", f"--tls_key_file={key}",
                f"--tls_client_ca_file={pki.ca}"], tmp)
            loomd.start()
            try:
                options = [("grpc.ssl_target_name_override", "localhost")]
                anonymous = grpc.ssl_channel_credentials(root_certificates=read(pki.ca))
                with grpc.secure_channel(loomd.grpc_target, anonymous, options) as channel:
                    with self.assertRaises(grpc.RpcError) as raised:
                        pb2_grpc.GenerationServiceStub(channel).GetModelInfo(
                            pb2.GetModelInfoRequest(), timeout=10)
                    self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAVAILABLE)
                mutual = grpc.ssl_channel_credentials(root_certificates=read(pki.ca),
                                                      private_key=read(client_key),
                                                      certificate_chain=read(client_cert))
                with grpc.secure_channel(loomd.grpc_target, mutual, options) as channel:
                    info = pb2_grpc.GenerationServiceStub(channel).GetModelInfo(
                        pb2.GetModelInfoRequest(), timeout=TIMEOUT)
                    self.assertGreater(info.vocab_size, 0)

                url = f"https://localhost:{loomd.http_port}/v1"
                no_cert = openai.OpenAI(base_url=url, api_key="unused", max_retries=0,
                                        http_client=openai.DefaultHttpxClient(
                                            verify=ssl.create_default_context(cafile=pki.ca)))
                with self.assertRaises(openai.APIConnectionError):
                    no_cert.models.list()
                context = ssl.create_default_context(cafile=pki.ca)
                context.load_cert_chain(client_cert, client_key)
                with_cert = openai.OpenAI(base_url=url, api_key="unused",
                                          http_client=openai.DefaultHttpxClient(verify=context))
                self.assertEqual(len(with_cert.models.list().data), 1)
            finally:
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
