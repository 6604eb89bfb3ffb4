#!/usr/bin/env python3
"""Runs tests/sdk/test_*.py (the official openai SDK and a LangChain agent as clients) against
`dsinfer serve` on the bundled model, as ctest's `sdk_test` does.

    python3 tests/sdk/run_sdk_tests.py --dsinfer build/dsinfer [--log FILE] [-k PATTERN]

Standard library only: it runs under any python3, and the tests under .deps/venv's python (made by
`make deps` from tools/requirements-sdk.txt). Without that venv, or with one made from another
requirements file, it fails saying to run `make deps`: a missing client must never pass as a skip.

The server gets a free port (--port 0; the port is read from the line it prints when ready), the
tools chat template with the deepseek_v3 tool-call parser, and an API key (the tests check the 401).
It is stopped with SIGTERM whatever happens, and must then exit 0. If this process is killed outright
(ctest's timeout), the kernel ends the server too (PR_SET_PDEATHSIG).
"""

import argparse
import ctypes
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS_DIR = os.path.join(ROOT, "tests", "sdk")
VENV = os.path.join(ROOT, ".deps", "venv")
REQUIREMENTS = os.path.join(ROOT, "tools", "requirements-sdk.txt")
MODEL_NAME = "dsv3-tiny"
API_KEY = "sk-dsinfer-sdk-test"
START_TIMEOUT_S = 90   # loading takes ~1 s; the rest is slack for a 2-core machine under a parallel ctest
TESTS_TIMEOUT_S = 240  # the tests take ~30-60 s on 2 cores
STOP_TIMEOUT_S = 20    # no request is running by then: SIGTERM ends the server at once
PR_SET_PDEATHSIG = 1


def fail(message):
    print(f"sdk_test: FAIL: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def venv_python():
    """The venv's python, or a failure naming `make deps`."""
    python = os.path.join(VENV, "bin", "python")
    stamp = os.path.join(VENV, ".dsinfer-stamp")
    if not (os.path.exists(python) and os.path.exists(stamp)):
        fail(f"the Python test clients are not installed ({os.path.relpath(VENV, ROOT)} is missing or "
             "incomplete): run `make deps` (tools/setup.sh) and look at what it reports")
    with open(REQUIREMENTS, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    with open(stamp) as f:
        have = f.read().split()[0]
    if have != want:
        fail(f"{os.path.relpath(VENV, ROOT)} was made from another tools/requirements-sdk.txt: run `make deps`")
    return python


def die_with_parent():
    """In the server's process before exec: the kernel sends it SIGTERM when this wrapper dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class Server:
    """`dsinfer serve` on a free port, its output in a log file."""

    def __init__(self, dsinfer, model, log_path):
        command = [dsinfer, "serve", model, "--served-model-name", MODEL_NAME, "--port", "0",
                   "--api-key", API_KEY, "--num-kv-pages", "256",
                   "--chat-template", os.path.join(ROOT, "templates", "deepseek_v3_tools.jinja"),
                   "--enable-auto-tool-choice", "--tool-call-parser", "deepseek_v3"]
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.log.write("$ " + " ".join(command) + "\n")
        self.log.flush()
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                        preexec_fn=die_with_parent)
        self.base_url = None
        self.ready = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self):
        for line in self.process.stdout:
            self.log.write(line)
            self.log.flush()
            match = re.search(r"serving .* at (http://[^\s]+)", line)
            if match and self.base_url is None:
                self.base_url = match.group(1)
                self.ready.set()
        self.ready.set()  # stdout closed: the server ended

    def wait_healthy(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        if not self.ready.wait(START_TIMEOUT_S) or self.base_url is None:
            fail(f"dsinfer serve did not print its address within {START_TIMEOUT_S} s "
                 f"(exit status {self.process.poll()}); log: {self.log_path}\n{self.log_tail()}")
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                fail(f"dsinfer serve exited with {self.process.returncode} before /health answered; "
                     f"log: {self.log_path}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # 503 while loading, or not yet listening
            time.sleep(0.1)
        fail(f"/health did not answer 200 within {START_TIMEOUT_S} s; log: {self.log_path}\n{self.log_tail()}")

    def stop(self):
        """SIGTERM; the exit status, or None when it had to be killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def log_tail(self, lines=40):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsinfer", required=True, help="the dsinfer binary")
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "dsv3-tiny"))
    parser.add_argument("--log", default=None, help="the server's log (default: a file beside --dsinfer)")
    parser.add_argument("-k", dest="pattern", action="append", default=[],
                        help="only tests whose name contains this (unittest's -k; repeatable)")
    args = parser.parse_args()

    python = venv_python()
    if not os.access(args.dsinfer, os.X_OK):
        fail(f"{args.dsinfer} is not an executable: build the dsinfer target first")
    log_path = args.log or os.path.join(os.path.dirname(os.path.abspath(args.dsinfer)), "sdk_test_server.log")

    # ctest and Ctrl-C end this wrapper through the finally below, so the server is always stopped.
    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)

    start = time.monotonic()
    server = Server(args.dsinfer, args.model, log_path)
    status = 1
    try:
        server.wait_healthy()
        print(f"sdk_test: dsinfer serve ready at {server.base_url} after {time.monotonic() - start:.1f} s",
              flush=True)
        env = dict(os.environ, DSINFER_SDK_BASE_URL=server.base_url, DSINFER_SDK_API_KEY=API_KEY,
                   DSINFER_SDK_MODEL=MODEL_NAME, PYTHONDONTWRITEBYTECODE="1",
                   # LangChain must not try to reach its tracing service from a test.
                   LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false")
        command = [python, "-m", "unittest", "discover", "-s", TESTS_DIR, "-p", "test_*.py", "-v"]
        for pattern in args.pattern:
            command += ["-k", pattern]
        try:
            status = subprocess.run(command, env=env, cwd=TESTS_DIR, timeout=TESTS_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            print(f"sdk_test: FAIL: the tests did not finish within {TESTS_TIMEOUT_S} s", file=sys.stderr)
            status = 1
    finally:
        exit_status = server.stop()
    if exit_status != 0:
        print(f"sdk_test: FAIL: dsinfer serve exited with {exit_status} after SIGTERM (None: killed after "
              f"{STOP_TIMEOUT_S} s); log: {log_path}\n{server.log_tail()}", file=sys.stderr)
        status = 1
    elif status != 0:
        print(f"sdk_test: server log: {log_path}", file=sys.stderr)
    print(f"sdk_test: {'passed' if status == 0 else 'FAILED'} in {time.monotonic() - start:.1f} s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
