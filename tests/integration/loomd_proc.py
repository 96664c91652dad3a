"""loomd as the Python integration tests run it: its log in a file, its ports
(picked by loomd itself with --port=0 --http_port=0) read back from the log's
serving line, once per start, so that a restart reads the new ones."""
import os
import re
import signal
import subprocess
import time

SERVING = re.compile(r"serving .* on [^ ]+:(\d+) \(gRPC\) and [^ ]+:(\d+) \(HTTP\).*?(\d+) KV blocks of")


class LoomdProcess:
    def __init__(self, binary, args, log_dir, name="loomd"):
        self.args = [binary, "--host=127.0.0.1", "--port=0", "--http_port=0"] + list(args)
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.proc = None
        self.starts = 0
        self.grpc_port = self.http_port = self.num_blocks = None

    @property
    def http(self):
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_target(self):
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout=180):
        self.starts += 1
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log()
            serving = SERVING.findall(text)
            if len(serving) >= self.starts:
                self.grpc_port, self.http_port, self.num_blocks = map(int, serving[-1])
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"loomd exited with {self.proc.returncode} at start:\n{text}")
            time.sleep(0.05)
        raise RuntimeError(f"loomd did not start:\n{self.log()}")

    def signal(self, signum):
        self.proc.send_signal(signum)

    def stop(self, timeout=120):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self):
        with open(self.log_path) as f:
            return f.read()
