"""bench/gpu.sh on a pretend GPU machine: a fake nvidia-smi on PATH and a
bundle of small shell programs standing in for the GPU binaries. Checks that
the script cannot hide a failure: a failing, missing, silent or hung program
makes it exit non-zero and names the cause in summary.txt, --stages runs only
the stages named, and the four result files are always written."""
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_exe(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + textwrap.dedent(body))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class GpuShTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        bundle = os.path.join(self.root, ".bundle")
        self.bin = os.path.join(bundle, "bin")
        os.makedirs(self.bin)
        os.makedirs(os.path.join(bundle, "lib"))
        for name in ("gpu.sh", "gpu_summary.py"):
            shutil.copy(os.path.join(REPO, "bench", name), bundle)
        with open(os.path.join(bundle, "manifest.txt"), "w") as f:
            f.write("commit test\nbinaries gpu_ceilings\n")
        fake_path = os.path.join(self.root, "fakebin")
        os.makedirs(fake_path)
        write_exe(os.path.join(fake_path, "nvidia-smi"), 'echo "GPU 0: Pretend H200 (UUID: GPU-0)"\n')
        self.env = dict(os.environ, PATH=fake_path + os.pathsep + os.environ["PATH"])
        self.env.pop("LOOM_REQUIRE_GPU", None)
        self.out = os.path.join(self.root, "out")

    def ceilings(self, body):
        write_exe(os.path.join(self.bin, "gpu_ceilings"), body)

    def run_gpu_sh(self, *args, limit_s=None):
        env = dict(self.env)
        if limit_s is not None:
            env["LOOM_GPU_LIMIT_S"] = str(limit_s)
        proc = subprocess.run(
            ["bash", os.path.join(self.root, ".bundle", "gpu.sh"), self.out, *args],
            env=env, capture_output=True, text=True, timeout=120)
        for name in ("log.txt", "results.txt", "summary.txt", "gpu_results.tar.gz"):
            self.assertTrue(os.path.exists(os.path.join(self.out, name)), name)
        with open(os.path.join(self.out, "summary.txt")) as f:
            return proc.returncode, f.read()

    def test_a_stage_that_prints_its_rows_passes(self):
        self.ceilings("echo 'RESULT ceilings copy_gbps=4000 bf16_tflops=700'\n")
        rc, summary = self.run_gpu_sh("--stages", "ceilings")
        self.assertEqual(rc, 0, summary)
        self.assertRegex(summary, r"\| ceilings \| passed \|")

    def test_a_failing_program_fails_the_run(self):
        self.ceilings("echo 'RESULT ceilings copy_gbps=4000'; exit 3\n")
        rc, summary = self.run_gpu_sh("--stages", "ceilings")
        self.assertNotEqual(rc, 0)
        self.assertRegex(summary, r"\| ceilings \| failed \|")
        self.assertIn("gpu_ceilings exited 3", summary)

    def test_a_missing_row_fails_the_run(self):
        self.ceilings("echo 'nothing measured'\n")
        rc, summary = self.run_gpu_sh("--stages", "ceilings")
        self.assertNotEqual(rc, 0)
        self.assertIn("missing RESULT rows: ceilings", summary)

    def test_a_missing_binary_fails_the_run(self):
        rc, summary = self.run_gpu_sh("--stages", "ceilings")
        self.assertNotEqual(rc, 0)
        self.assertRegex(summary, r"\| ceilings \| missing \|")

    def test_a_hung_program_is_cut_off_within_the_overall_limit(self):
        self.ceilings("sleep 300\n")
        rc, summary = self.run_gpu_sh("--stages", "ceilings", limit_s=25)
        self.assertNotEqual(rc, 0)
        self.assertIn("gpu_ceilings timed out", summary)

    def test_only_the_stages_named_run(self):
        self.ceilings("echo 'RESULT ceilings copy_gbps=4000'\n")
        rc, summary = self.run_gpu_sh("--stages", "ceilings")
        self.assertEqual(rc, 0, summary)
        with open(os.path.join(self.out, "log.txt")) as f:
            log = f.read()
        self.assertIn("=== ceilings", log)
        self.assertNotIn("=== machine", log)
        self.assertNotIn("=== decode", log)

    def test_an_unknown_stage_is_a_usage_error(self):
        proc = subprocess.run(
            ["bash", os.path.join(self.root, ".bundle", "gpu.sh"), self.out, "--stages", "nope"],
            env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("unknown stage 'nope'", proc.stderr)


if __name__ == "__main__":
    unittest.main()
