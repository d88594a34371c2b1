"""Helpers shared by the end-to-end tests: child processes stopped by pid, an HTTP
webhook receiver, generated gRPC stubs."""

import http.server
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def field(message, name):
    """A field of grpcurl's JSON output by its proto name; grpcurl prints proto names,
    other tools lowerCamel, so both spellings are accepted."""
    camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
    return message[name] if name in message else message[camel]


def wait_for(predicate, timeout, what):
    """Waits for predicate() with a deadline: short, growing pauses between checks (the
    conditions live in other processes, so there is nothing to block on)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Process:
    """A child process whose output is read on a thread; stopped by its pid."""

    def __init__(self, argv, env=None):
        self.lines = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})), text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_json_line(self, needle, timeout=30):
        """The first JSON line whose text contains `needle`, parsed."""
        def find():
            for line in self.lines:
                if needle in line:
                    try:
                        return json.loads(line)
                    except ValueError:
                        continue
            return None
        with self.cond:
            found = self.cond.wait_for(lambda: find() or self.proc.poll() is not None, timeout)
            result = find()
        if not result:
            raise AssertionError(f"no '{needle}' line (exit {self.proc.poll()}):\n" +
                                 "\n".join(self.lines[-30:]))
        return result

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self.reader.join(timeout=5)
        self.proc.stdout.close()
        return self.proc.returncode


class Receiver:
    """An HTTP server on a free loopback port that records every POST (webhook deliveries,
    OTLP exports): its path, headers of interest, raw and parsed JSON body. `path` is the
    path of `url`."""

    def __init__(self, path="/webhooks/v2"):
        self.deliveries = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.deliveries.append({
                        "path": self.path,
                        "x-api-key": self.headers.get("x-api-key"),
                        "content-type": self.headers.get("Content-Type"),
                        "raw": body,
                        "body": json.loads(body or b"null"),
                    })
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}{path}"

    def events(self):
        with self.lock:
            return [d["body"].get("event") for d in self.deliveries if isinstance(d["body"], dict)]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def load_stubs(proto_dir, out_dir):
    """Generates the Python modules of our protos with grpc_tools and imports them."""
    from grpc_tools import protoc
    import grpc_tools
    include = str(pathlib.Path(grpc_tools.__file__).parent / "_proto")
    protos = sorted(str(p.relative_to(proto_dir))
                    for p in pathlib.Path(proto_dir).rglob("*.proto"))
    code = protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}",
                        f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", *protos])
    if code != 0:
        raise RuntimeError("grpc_tools.protoc failed")
    sys.path.insert(0, out_dir)
    import importlib
    mods = {}
    for name in ["common", "token", "image", "damage", "inspection", "event_config", "event"]:
        mods[name] = importlib.import_module(f"inspection.v1.{name}_pb2")
        mods[name + "_grpc"] = importlib.import_module(f"inspection.v1.{name}_pb2_grpc")
    return mods


def free_loopback_port():
    """A TCP port on 127.0.0.1 that was free a moment ago: bound to port 0, then closed.
    For servers that cannot listen on port 0 and report the port they got. Racy: another
    process may take the port between the close and the server's bind, so the caller
    retries the start when the server fails with "address already in use"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    """GET `url`: (status, body text); an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def http_get_json(url, timeout=10):
    """GET `url`, expecting 200 and a JSON body, parsed."""
    status, body = http_get(url, timeout)
    if status != 200:
        raise AssertionError(f"GET {url}: HTTP {status}: {body[:500]}")
    return json.loads(body)
