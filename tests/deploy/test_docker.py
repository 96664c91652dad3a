"""The Dockerfiles install the package list the way scripts/setup does and
build a preset scripts/test builds; changing either side is noticed."""
import os
import unittest

import common
import check_docker


def read(path):
    return (common.REPO / path).read_text(encoding="utf-8")


class DockerTest(unittest.TestCase):
    def setUp(self):
        self.setup = read("scripts/setup")
        self.test = read("scripts/test")

    def check(self, name, text):
        return check_docker.check(name, text, self.setup, self.test)

    def test_shipped_dockerfiles_pass(self):
        for name in check_docker.DOCKERFILES:
            with self.subTest(dockerfile=name):
                self.assertEqual(self.check(name, read(name)), [])

    def test_the_list_is_what_setup_installs(self):
        listed = check_docker.packages(check_docker.setup_filter(self.setup),
                                       common.REPO / check_docker.PACKAGE_LIST)
        self.assertIn("prometheus-cpp-dev", listed)
        self.assertIn("libgrpc++-dev", listed)
        self.assertFalse(any(p.startswith("#") for p in listed))

    def test_a_different_filter_or_extra_package_is_noticed(self):
        text = read("deploy/docker/Dockerfile.cpu")
        changed = text.replace("-e '/^[[:space:]]*$/d' ", "")
        self.assertEqual(len(self.check("cpu", changed)), 1)
        extra = text.replace("rm -rf /var/lib/apt/lists/*",
                             "apt-get install -y curl && rm -rf /var/lib/apt/lists/*")
        self.assertEqual(len(self.check("cpu", extra)), 1)
        other_preset = text.replace("--preset release", "--preset fast")
        self.assertEqual(len(self.check("cpu", other_preset)), 1)

    def test_runtime_matches_builder_and_drops_root(self):
        text = read("deploy/docker/Dockerfile")
        self.assertEqual(len(self.check("cuda", text.replace("${DEBIAN}-slim", "${DEBIAN}"))), 1)
        self.assertEqual(len(self.check("cuda", text.replace("USER 10001:10001", "USER root"))),
                         1)
        self.assertEqual(len(self.check("cuda", text.replace('"loom", "health"', '"true"'))), 1)

    def test_cuda_packages_and_msgpack_headers(self):
        text = read("deploy/docker/Dockerfile")
        self.assertEqual(len(self.check("cuda", text.replace(
            " libcublas-${CUDA_PKG} ", " "))), 1)
        self.assertEqual(len(self.check("cuda", text.replace(
            "libcublas-dev-${CUDA_PKG}", "libcublas-dev-${CUDA_PKG} cuda-toolkit-${CUDA_PKG}"))), 1)
        cpu = read("deploy/docker/Dockerfile.cpu")
        self.assertEqual(len(self.check("cpu", cpu.replace(" && /tmp/install_msgpack_cxx /usr/local",
                                                           ""))), 1)
        moved = cpu.replace(" && /tmp/install_msgpack_cxx /usr/local \\\n", "").replace(
            "rm -rf /var/lib/apt/lists/*", "rm -rf /var/lib/apt/lists/* && /tmp/install_msgpack_cxx")
        self.assertEqual(len(self.check("cpu", moved)), 1)

    @unittest.skipUnless(os.environ.get("LOOMD"), "no built loomd ($LOOMD)")
    def test_runtime_libraries_include_zeromq_and_openssl(self):
        problems, copied = check_docker.check_libs(os.environ["LOOMD"])
        self.assertEqual(problems, [])
        self.assertTrue(any(name.startswith("libzmq.so") for name in copied), copied)
        self.assertFalse(any(name.startswith(("libc.so", "libcuda", "libcublas"))
                             for name in copied), copied)
        saved = check_docker.REQUIRED_LIBS
        check_docker.REQUIRED_LIBS = saved + ["libnot-linked.so"]
        try:
            self.assertEqual(len(check_docker.check_libs(os.environ["LOOMD"])[0]), 1)
        finally:
            check_docker.REQUIRED_LIBS = saved

if __name__ == "__main__":
    unittest.main()
