#!/usr/bin/env python3
"""The server's soak: `dsinfer serve` on a model under mixed, partly hostile load for a long time.

Starts `dsinfer serve` (CPU), runs client threads until the duration is over, each repeating one
kind of exchange at a time, drawn at random:
  complete      a whole answer (completions or chat), on the thread's keep-alive connection
  stream        a streamed answer on the same connection, read to data: [DONE]
  slow_reader   a streamed answer read a byte now and then through a small receive buffer for a
                while (shorter than the server's send timeout), then read to the end
  disconnect    a client that goes away: mid-stream (with a FIN or a reset), right after sending
                its request, or half-way through its body
  bad_request   a malformed or refused request (bad JSON, no key, unknown model, forbidden
                framing, no Host, too large, too long a prompt, ...): it must get its 4xx (400,
                401, 404 or 413), and the framing errors must also close the connection
Greedy answers must be the same every time a prompt is asked again (the CPU engine computes each
sequence alike whatever else runs in its step), so a mix-up of pages under load shows as an error.

The server's RSS (/proc/PID/status VmRSS) is sampled at the start, every --sample-every seconds
and at the end. After the load stops, the KV pages in use (from /metrics) must return to 0, the
server must hold no TCP connection (its sockets in /proc/PID/fd against /proc/net/tcp*), and
/health must answer 200. Writes the result JSON (bench/results/soak_cpu.json by default) and exits
1 on a leaked page, a stuck connection, an error, a failed /health or a server that died.

Usage (from the repository root): python3 bench/soak.py --dsinfer build/dsinfer [--duration 600]
Only the Python standard library is needed.
"""

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timezone

API_KEY = "soak-key"
MODEL_NAME = "soak-model"
IO_TIMEOUT_S = 120  # any single socket operation; a server that stalls longer is an error
SETTLE_TIMEOUT_S = 30  # after the load: time for the engine to end what it runs and free its pages
# After the load every client has closed its sockets, so the server must close its ends at once:
# well below its 60 s timeouts, so that no timeout closes what the server should have noticed.
CONNECTION_SETTLE_S = 10
KINDS = ("complete", "stream", "slow_reader", "disconnect", "bad_request")


# ----------------------------------------------------------------------------- the server process

class Server:
    """`dsinfer serve` on a free port; its stdout is read for the address it prints."""

    def __init__(self, args, log_path):
        command = [args.dsinfer, "serve", "--model", args.model, "--served-model-name", MODEL_NAME,
                   "--port", "0", "--api-key", API_KEY, "--disable-log-requests",
                   "--num-kv-pages", str(args.num_kv_pages), "--max-body-mb", str(args.max_body_mb)]
        if args.threads:
            command += ["--threads", str(args.threads)]
        self.command = command
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.pid = self.process.pid
        self.port = None
        self.total_pages = None
        ready = threading.Event()
        threading.Thread(target=self._read_stdout, args=(ready,), daemon=True).start()
        if not ready.wait(args.start_timeout) or self.port is None:
            self.process.kill()
            raise SystemExit(f"dsinfer serve did not start within {args.start_timeout} s (log: {log_path})")

    def _read_stdout(self, ready):
        for line in self.process.stdout:
            self.log.write(line)
            self.log.flush()
            match = re.search(r"serving .* at http://[^:]+:(\d+) .*KV cache (\d+) pages", line)
            if match and self.port is None:
                self.port, self.total_pages = int(match.group(1)), int(match.group(2))
                ready.set()
        ready.set()  # stdout closed: the server ended

    def alive(self):
        return self.process.poll() is None

    def rss_kib(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc/PID/status")

    def tcp_sockets(self):
        """The server's TCP sockets that are not listening, counted by state name."""
        inodes = set()
        fd_dir = f"/proc/{self.pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue  # closed meanwhile
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
        states = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
                  "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN",
                  "0B": "CLOSING"}
        counts = Counter()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    rows = f.readlines()[1:]
            except OSError:
                continue
            for row in rows:
                fields = row.split()
                if fields[9] in inodes and fields[3] != "0A":
                    counts[states.get(fields[3], fields[3])] += 1
        return counts

    def stop(self, timeout_s=60):
        """SIGTERM, then the exit status (None if it had to be killed)."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None


# ----------------------------------------------------------------------------- raw HTTP

def connect(port, receive_buffer=None):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:  # before connect, so that the window the server sees is small from the start
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(IO_TIMEOUT_S)
    sock.connect(("127.0.0.1", port))
    return sock


def request_bytes(method, path, body=b"", headers=None, key=API_KEY, version="HTTP/1.1", host=True):
    lines = [f"{method} {path} {version}"]
    if host:
        lines.append("Host: 127.0.0.1")
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    if body:
        lines.append("Content-Type: application/json")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body and not any(name.lower() in ("content-length", "transfer-encoding") for name in (headers or {})):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class RawResponse:
    """Reads one response from a socket: the head, then the body by its framing."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self._receive()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def _receive(self, size=65536):
        piece = self.sock.recv(size)
        if not piece:
            raise ConnectionError("the server closed the connection")
        self.buffer += piece

    def body(self):
        """The whole body: Content-Length, chunked (decoded) or up to the close."""
        if "content-length" in self.headers:
            length = int(self.headers["content-length"])
            while len(self.buffer) < length:
                self._receive()
            return self.buffer[:length]
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            out = b""
            while True:
                while b"\r\n" not in self.buffer:
                    self._receive()
                size_line, self.buffer = self.buffer.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(self.buffer) < size + 2:
                    self._receive()
                out += self.buffer[:size]
                self.buffer = self.buffer[size + 2:]
                if size == 0:
                    return out
        while True:
            piece = self.sock.recv(65536)
            if not piece:
                return self.buffer
            self.buffer += piece


def closes_soon(sock, within_s=5.0):
    """Whether the server closes the connection (after its answer) within `within_s`."""
    sock.settimeout(within_s)
    try:
        while True:
            piece = sock.recv(65536)
            if not piece:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    finally:
        sock.settimeout(IO_TIMEOUT_S)


def sse_events(text):
    """The data fields of an SSE body."""
    return [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]


# ----------------------------------------------------------------------------- the workload

def load_prompts(model_dir, count, seed):
    """`count` user turns from the model's evaluation sets (its skills), so that answers are real
    ones; few enough that greedy requests repeat and their answers can be compared."""
    prompts = []
    eval_dir = os.path.join(model_dir, "eval")
    for name in sorted(os.listdir(eval_dir)) if os.path.isdir(eval_dir) else []:
        if not name.endswith(".jsonl") or name.startswith("mtp"):
            continue
        with open(os.path.join(eval_dir, name)) as f:
            for line in f:
                row = json.loads(line)
                prompts.append(row["messages"][0]["content"])
    if not prompts:
        return ["What is 123+456?", "sort 5 3 9 1", "reverse abcdef", "copy hello"]
    return random.Random(seed).sample(prompts, min(count, len(prompts)))


class Tally:
    """What the clients did: exchanges by kind, errors by kind and cause, and the greedy answers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.done = Counter()
        self.errors = Counter()
        self.examples = {}  # error key -> its first message
        self.greedy = {}    # (endpoint, prompt, max_tokens, ignore_eos) -> text
        self.greedy_checks = 0  # greedy answers compared with an earlier one

    def record(self, kind, error=None, detail=""):
        with self.lock:
            self.done[kind] += 1
            if error:
                key = f"{kind}:{error}"
                self.errors[key] += 1
                self.examples.setdefault(key, detail[:300])

    def same_greedy(self, key, text):
        """False when an earlier greedy answer to the same request differs."""
        with self.lock:
            if key in self.greedy:
                self.greedy_checks += 1
            return self.greedy.setdefault(key, text) == text


class Client(threading.Thread):
    def __init__(self, index, port, prompts, tally, stop, args):
        super().__init__(daemon=True, name=f"soak-client-{index}")
        self.rng = random.Random(args.seed * 1000 + index)
        self.port, self.prompts, self.tally, self.stop_event, self.args = port, prompts, tally, stop, args
        self.connection = None  # keep-alive, for complete and stream
        self.weights = [args.weight_complete, args.weight_stream, args.weight_slow_reader, args.weight_disconnect,
                        args.weight_bad_request]

    def run(self):
        while not self.stop_event.is_set():
            kind = self.rng.choices(KINDS, self.weights)[0]
            try:
                error, detail = getattr(self, kind)()
            except socket.timeout as exc:
                error, detail = "timeout", repr(exc)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                error, detail = type(exc).__name__, repr(exc)
            except (KeyError, IndexError, TypeError) as exc:  # an answer without the fields OpenAI's has
                error, detail = "malformed_answer", repr(exc)
            if error and self.connection is not None and kind in ("complete", "stream"):
                self.connection.close()
                self.connection = None
            self.tally.record(kind, error, detail)
        if self.connection is not None:
            self.connection.close()

    # A request body for the model: chat or completions, greedy or sampled.
    def body(self, stream, max_tokens, ignore_eos=False, greedy=None):
        prompt = self.rng.choice(self.prompts)
        chat = self.rng.random() < 0.5
        body = {"model": MODEL_NAME, "max_tokens": max_tokens}
        if chat:
            endpoint = "/v1/chat/completions"
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            endpoint = "/v1/completions"
            body["prompt"] = prompt
        if greedy is None:
            greedy = self.rng.random() < 0.5
        body["temperature"] = 0 if greedy else 0.8
        if ignore_eos:
            body["ignore_eos"] = True
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        key = (endpoint, prompt, max_tokens, ignore_eos) if greedy else None
        return endpoint, body, key

    def kept_connection(self):
        if self.connection is None:
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=IO_TIMEOUT_S)
        return self.connection

    def post(self, endpoint, body):
        connection = self.kept_connection()
        connection.request("POST", endpoint, json.dumps(body),
                           {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
        return connection.getresponse()

    def complete(self):
        endpoint, body, key = self.body(False, self.rng.choice((8, 32, 96)), ignore_eos=self.rng.random() < 0.3)
        response = self.post(endpoint, body)
        data = response.read()
        if response.status != 200:
            return f"http_{response.status}", data.decode(errors="replace")
        answer = json.loads(data)
        choice = answer["choices"][0]
        text = choice["text"] if "text" in choice else (choice["message"].get("content") or "")
        if choice.get("finish_reason") not in ("stop", "length"):
            return "finish_reason", json.dumps(choice)
        if answer["usage"]["completion_tokens"] > body["max_tokens"]:
            return "too_many_tokens", json.dumps(answer["usage"])
        if key is not None and not self.tally.same_greedy(key, text):
            return "greedy_answer_changed", f"{key}: {text!r}"
        return None, ""

    def stream(self):
        endpoint, body, key = self.body(True, self.rng.choice((8, 64, 160)), ignore_eos=self.rng.random() < 0.3)
        response = self.post(endpoint, body)
        if response.status != 200:
            return f"http_{response.status}", response.read().decode(errors="replace")
        text, done, usage = "", False, None
        while True:
            line = response.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                done = True
                continue
            event = json.loads(data)
            if "error" in event:
                return "error_event", data
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices", []):
                text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
        if not done:
            return "no_done", text[-200:]
        if usage is None or usage["completion_tokens"] > body["max_tokens"]:
            return "usage", json.dumps(usage)
        if key is not None and not self.tally.same_greedy(key, text):
            return "greedy_answer_changed", f"{key}: {text!r}"
        return None, ""

    def slow_reader(self):
        # ~200 bytes of SSE per token: a few hundred tokens overflow the small buffers, so the
        # server has to queue the rest for this client while it serves the others.
        endpoint, body, _ = self.body(True, self.rng.randint(100, 400), ignore_eos=True, greedy=False)
        sock = connect(self.port, receive_buffer=2048)
        try:
            sock.sendall(request_bytes("POST", endpoint, json.dumps(body).encode(), {"Connection": "close"}))
            slow_until = time.monotonic() + self.rng.uniform(2, self.args.slow_read_s)
            received = b""
            while time.monotonic() < slow_until:
                piece = sock.recv(1)
                if not piece:
                    break
                received += piece
                time.sleep(self.rng.uniform(0.01, 0.3))
            while True:
                piece = sock.recv(65536)
                if not piece:
                    break
                received += piece
        finally:
            sock.close()
        head, _, rest = received.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            return "status", head[:200].decode(errors="replace")
        text = rest.decode(errors="replace")
        if "data: [DONE]" not in text:
            return "no_done", text[-200:]
        if '"error"' in text:
            return "error_event", text[-300:]
        return None, ""

    def disconnect(self):
        endpoint, body, _ = self.body(True, self.rng.randint(64, 600), ignore_eos=True, greedy=False)
        payload = json.dumps(body).encode()
        way = self.rng.choice(("mid_stream", "mid_stream_reset", "after_request", "mid_body"))
        sock = connect(self.port)
        try:
            if way == "mid_body":
                whole = request_bytes("POST", endpoint, payload)
                sock.sendall(whole[:len(whole) - self.rng.randint(1, len(payload))])
                return None, ""
            sock.sendall(request_bytes("POST", endpoint, payload))
            if way == "after_request":
                return None, ""
            response = RawResponse(sock)
            if response.status != 200:
                return f"http_{response.status}", response.buffer[:200].decode(errors="replace")
            wanted = self.rng.randint(1, 12)
            while response.buffer.count(b"data: ") < wanted:
                response._receive()
            if way == "mid_stream_reset":  # a reset instead of a FIN: SO_LINGER on, zero seconds
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return None, ""
        finally:
            sock.close()

    def bad_request(self):
        name, raw, expected_status, must_close = self.rng.choice(bad_requests(self.rng))
        sock = connect(self.port)
        try:
            try:
                sock.sendall(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer and close before taking all of it; its answer is still there
            response = RawResponse(sock)
            if "content-length" in response.headers or "transfer-encoding" in response.headers:
                response.body()
            if response.status != expected_status:
                return f"{name}:http_{response.status}", response.buffer[:200].decode(errors="replace")
            if must_close and not closes_soon(sock):
                return f"{name}:left_open", f"HTTP {response.status}"
            return None, ""
        finally:
            sock.close()


def bad_requests(rng):
    """(name, bytes to send, the status the server must answer, whether it must close the connection)."""
    completion = {"model": MODEL_NAME, "prompt": "1+1", "max_tokens": 4}

    def post(body, **kwargs):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return request_bytes("POST", "/v1/completions", data, **kwargs)

    too_long = dict(completion, prompt=[rng.randrange(2, 6000) for _ in range(1100)])  # context: 1024
    chat = json.dumps({"model": MODEL_NAME, "messages": "hi"}).encode()
    return [
        ("bad_json", post(b'{"model": "' + MODEL_NAME.encode() + b'", "prompt": '), 400, False),
        ("not_an_object", post(b"[1, 2, 3]"), 400, False),
        ("no_key", post(completion, key=None), 401, False),
        ("wrong_key", post(completion, key="not-the-key"), 401, False),
        ("unknown_model", post(dict(completion, model="no-such-model")), 404, False),
        ("max_tokens_text", post(dict(completion, max_tokens="ten")), 400, False),
        ("max_tokens_negative", post(dict(completion, max_tokens=-5)), 400, False),
        ("temperature_negative", post(dict(completion, temperature=-1)), 400, False),
        ("prompt_too_long", post(too_long), 400, False),
        ("messages_not_a_list", request_bytes("POST", "/v1/chat/completions", chat), 400, False),
        ("unknown_v1_path", request_bytes("GET", "/v1/no-such-route"), 404, False),
        ("unknown_v1_path_no_key", request_bytes("GET", "/v1/no-such-route", key=None), 401, False),
        # RFC 9112: a body whose length is unknown, no Host on 1.1, a broken request line, and a
        # body refused unread all end the connection.
        ("transfer_encoding_gzip", post(completion, headers={"Transfer-Encoding": "gzip"}), 400, True),
        ("no_host", post(completion, host=False), 400, True),
        ("garbage_request_line", b"HELLO THERE\r\n\r\n", 400, True),
        ("body_too_large", request_bytes("POST", "/v1/completions", b"",
                                         {"Content-Type": "application/json",
                                          "Content-Length": str(64 << 20)}), 413, True),
    ]


# ----------------------------------------------------------------------------- server state

def get(port, path, key=None):
    """(status, body text) of one GET on its own connection, closed afterwards."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Connection": "close"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def metric(text, name):
    match = re.search(r"^" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", text, re.MULTILINE)
    return float(match.group(2)) if match else None


def engine_state(port, total_pages):
    status, text = get(port, "/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    usage = metric(text, "vllm:kv_cache_usage_perc")
    return {"pages_in_use": round(usage * total_pages),
            "running": int(metric(text, "vllm:num_requests_running")),
            "waiting": int(metric(text, "vllm:num_requests_waiting")),
            # this /metrics request's own connection is one of them
            "open_connections_gauge": int(metric(text, "dsinfer:open_connections")) - 1,
            "preemptions": int(metric(text, "vllm:num_preemptions_total") or 0)}


def git_commit():
    if os.environ.get("DSINFER_COMMIT"):
        return os.environ["DSINFER_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_device():
    name = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"cpu: {name} ({os.cpu_count()} threads)"


# ----------------------------------------------------------------------------- the run

def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsinfer", default="build/dsinfer", help="the dsinfer binary")
    parser.add_argument("--model", default="models/dsv3-tiny")
    parser.add_argument("--duration", type=float, default=600, help="seconds of load")
    parser.add_argument("--clients", type=int, default=24, help="client threads, one exchange at a time each")
    parser.add_argument("--sample-every", type=float, default=30, help="seconds between RSS samples")
    parser.add_argument("--num-kv-pages", type=int, default=64,
                        help="a small pool (64 pages of 64 tokens), so that the load preempts")
    parser.add_argument("--max-body-mb", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="the server's model threads (0: all cores)")
    parser.add_argument("--slow-read-s", type=float, default=20,
                        help="longest slow-reading phase (below the server's 60 s send timeout)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=48, help="distinct prompts drawn from the model's eval sets")
    parser.add_argument("--start-timeout", type=float, default=120)
    for kind, weight in zip(KINDS, (25, 25, 10, 20, 20)):
        parser.add_argument(f"--weight-{kind.replace('_', '-')}", type=float, default=weight)
    parser.add_argument("--max-rss-growth-mib", type=float, default=32,
                        help="the most RSS may grow from the first sample under load to the end")
    parser.add_argument("--hold-open", type=int, default=0,
                        help="idle connections held to the end, which must make the run fail (checks the checker)")
    parser.add_argument("--out", default=None, help="the result JSON (default: bench/results/soak_cpu.json)")
    parser.add_argument("--log", default=None, help="the server's output (default: in a new folder under /tmp)")
    parser.add_argument("--smoke", action="store_true",
                        help="a few seconds with every kind of client (ctest's soak_smoke); writes under /tmp")
    if parser.parse_known_args()[0].smoke:  # the smoke's settings, unless a flag says otherwise
        parser.set_defaults(duration=3, clients=8, sample_every=1.5, slow_read_s=2)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="dsinfer-soak-") if args.log is None or (args.smoke and args.out is None) else None
    if args.out is None:
        args.out = os.path.join(scratch, "soak_smoke.json") if args.smoke else "bench/results/soak_cpu.json"
    if args.log is None:
        args.log = os.path.join(scratch, "serve.log")
    return args


def main():
    args = parse_args()
    log_path = args.log
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    started = time.monotonic()
    server = Server(args, log_path)
    deadline = time.monotonic() + args.start_timeout
    while get(server.port, "/health")[0] != 200:  # 503 until the model is attached
        if time.monotonic() > deadline or not server.alive():
            server.stop()
            raise SystemExit(f"/health never answered 200 (log: {log_path})")
        time.sleep(0.1)
    print(f"soak: dsinfer serve pid {server.pid} on port {server.port}, {server.total_pages} KV pages; "
          f"{args.clients} clients for {args.duration:.0f} s", flush=True)

    samples = [{"t_s": 0.0, "rss_kib": server.rss_kib(), **engine_state(server.port, server.total_pages)}]
    # To check the checker: connections that never send a byte, kept past the end, must fail the run.
    held_open = [connect(server.port) for _ in range(args.hold_open)]
    tally, stop = Tally(), threading.Event()
    prompts = load_prompts(args.model, args.prompts, args.seed)
    clients = [Client(i, server.port, prompts, tally, stop, args) for i in range(args.clients)]
    load_start = time.monotonic()
    for client in clients:
        client.start()
    next_sample = load_start + args.sample_every
    end = load_start + args.duration
    while time.monotonic() < end and server.alive():
        time.sleep(max(0.0, min(next_sample, end) - time.monotonic()))
        if time.monotonic() >= next_sample and server.alive():
            sample = {"t_s": round(time.monotonic() - load_start, 1), "rss_kib": server.rss_kib(),
                      **engine_state(server.port, server.total_pages)}
            samples.append(sample)
            next_sample += args.sample_every
            print(f"soak: {sample['t_s']:6.0f} s  rss {sample['rss_kib'] / 1024:7.1f} MiB  pages {sample['pages_in_use']:3d}"
                  f"  running {sample['running']:3d}  exchanges {sum(tally.done.values())}"
                  f"  errors {sum(tally.errors.values())}", flush=True)
    stop.set()
    for client in clients:  # each finishes its exchange in progress (bounded by IO_TIMEOUT_S)
        client.join()
    load_s = time.monotonic() - load_start

    # After the load: everything must come back.
    failures = []
    final = {}
    if not server.alive():
        failures.append(f"the server died (exit status {server.process.returncode})")
    else:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            final = engine_state(server.port, server.total_pages)
            idle = final["pages_in_use"] == 0 and final["running"] == 0 and final["waiting"] == 0
            if idle or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        deadline = time.monotonic() + CONNECTION_SETTLE_S
        while True:  # the server closes each client's socket once it sees the close
            sockets = server.tcp_sockets()
            if not sockets or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        final["tcp_sockets"] = dict(sockets)
        final["health_status"] = get(server.port, "/health")[0]
        final["rss_kib"] = server.rss_kib()
        final["t_s"] = round(time.monotonic() - load_start, 1)
        samples.append(final)
        if final["pages_in_use"] != 0:
            failures.append(f"{final['pages_in_use']} KV pages still in use")
        if sum(sockets.values()) != 0:
            failures.append(f"{sum(sockets.values())} TCP connections still open: {dict(sockets)}")
        if final["running"] or final["waiting"]:
            failures.append(f"requests still in the engine: {final['running']} running, {final['waiting']} waiting")
        if final["health_status"] != 200:
            failures.append(f"/health answered {final['health_status']}")
    for sock in held_open:
        sock.close()
    exit_status = server.stop()
    if exit_status != 0:
        failures.append(f"SIGTERM: dsinfer serve exited with {exit_status}")
    error_count = sum(tally.errors.values())
    if error_count:
        failures.append(f"{error_count} exchanges went wrong: {dict(tally.errors)}")

    rss = [s["rss_kib"] for s in samples]
    # Growth after the first sample under load: the allocator's arenas and the caches warm up first.
    rss_growth_mib = (rss[-1] - rss[1]) / 1024 if len(rss) > 2 else 0.0
    if rss_growth_mib > args.max_rss_growth_mib:
        failures.append(f"RSS grew by {rss_growth_mib:.1f} MiB after the first sample under load "
                        f"(limit {args.max_rss_growth_mib} MiB)")
    result = {
        "benchmark": "soak",
        "config": {"model": args.model, "duration_s": args.duration, "clients": args.clients,
                   "num_kv_pages": server.total_pages, "max_body_mb": args.max_body_mb,
                   "threads": args.threads, "sample_every_s": args.sample_every, "slow_read_s": args.slow_read_s,
                   "seed": args.seed, "prompts": len(prompts), "max_rss_growth_mib": args.max_rss_growth_mib,
                   "weights": dict(zip(KINDS, clients[0].weights)),
                   "command": " ".join(server.command)},
        "figures": {
            "requests_done": sum(tally.done.values()),
            "errors": error_count,
            "rss_start_mib": round(rss[0] / 1024, 1),
            "rss_end_mib": round(rss[-1] / 1024, 1),
            "rss_max_mib": round(max(rss) / 1024, 1),
            "rss_growth_after_warmup_mib": round(rss_growth_mib, 1),
            "leaked_pages": final.get("pages_in_use"),
            "open_connections_end": sum(final.get("tcp_sockets", {}).values()) if final else None,
            "requests_by_kind": dict(tally.done),
            "errors_by_kind": dict(tally.errors),
            "greedy_answers_compared": tally.greedy_checks,
            "preemptions": final.get("preemptions"),
            "load_s": round(load_s, 1),
        },
        "error_examples": tally.examples,
        "samples": samples,
        "health_end": final.get("health_status"),
        "server_exit_status": exit_status,
        "passed": not failures,
        "failures": failures,
        "device": cpu_device(),
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    figures = result["figures"]
    print(f"soak: {figures['requests_done']} exchanges in {load_s:.0f} s {dict(tally.done)}; errors {error_count}; "
          f"RSS start {figures['rss_start_mib']} MiB, end {figures['rss_end_mib']} MiB, max {figures['rss_max_mib']} MiB; "
          f"leaked pages {figures['leaked_pages']}; open connections {figures['open_connections_end']}; "
          f"{time.monotonic() - started:.0f} s in all; wrote {args.out} (server log: {log_path})")
    for failure in failures:
        print(f"soak: FAILED: {failure}", file=sys.stderr)
    for key, example in tally.examples.items():
        print(f"soak: {key}: {example}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
