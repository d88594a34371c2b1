#!/usr/bin/env python3
"""Benchmarks of docs/design.md §9 with public load generators (h2load, wrk, grpc.aio), against
the real binaries: inspection-sandbox as the vendor, inspection-gateway in front of it.

Each scenario starts its own processes on OS-chosen ports, measures, stops them by pid,
and prints one result line per figure with the target next to it. The exit code is 1
when a target is missed (0 otherwise), so `make bench` can gate on it. Figures vary with
the machine and its load: run on an idle machine, and read the figures, not only the
verdict.

Usage: bench/run.py --build-dir build [--only NAME ...] [--json results.json]
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from e2e_support import Process, free_loopback_port, http_get, wait_for  # noqa: E402

API_KEY = "bench-api-key"
WEBHOOK_KEY = "bench-webhook-key"
RESULTS = []
# The previous run's figures, by (scenario, figure), from the results file (--json).
PREVIOUS = {}


def tool(name):
    # /usr/sbin: haproxy, which is not on a non-root user's PATH.
    for candidate in (ROOT / ".tools" / "bin" / name, shutil.which(name),
                      pathlib.Path("/usr/sbin") / name):
        if candidate and os.access(str(candidate), os.X_OK):
            return str(candidate)
    raise SystemExit(f"bench: {name} not found (run scripts/install-bench-tools.sh)")


def record(scenario, figure, value, unit, target, ok):
    RESULTS.append({"scenario": scenario, "figure": figure, "value": value, "unit": unit,
                    "target": target, "ok": ok})
    verdict = "ok  " if ok else "MISS"
    before = PREVIOUS.get((scenario, figure))
    was = "" if before is None else f"   previous run: {before['value']:.3f}" + (
        "" if before.get("ok", True) == ok else (" (met)" if before.get("ok") else " (missed)"))
    print(f"  [{verdict}] {figure}: {value:.3f} {unit}   (target {target}){was}", flush=True)


def cpu_seconds(pid):
    """User + system CPU time the process has used so far (/proc/PID/stat), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat(5) (utime, stime), counted from after the command name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status(pid, field):
    """A field of /proc/PID/status as an integer (VmRSS in KiB, Threads)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def machine_busy_seconds():
    """CPU time the whole machine has spent busy (every core, every process: /proc/stat's
    first line less idle and iowait), in seconds."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    """User + system CPU time of this script's children that have exited and been waited
    for (wrk, h2load, redis-cli), in seconds."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Gateway:
    """One inspection-gateway process in front of the vendor at `upstream_url`, with the
    bench's keys, on free ports, ready (/readyz) when constructed. `event_log` defaults to
    a SQLite file in `workdir`."""

    def __init__(self, build, workdir, upstream_url, webapp_url, flags=(), event_log=None):
        self.workdir = pathlib.Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        key_file = self.workdir / "api-key"
        key_file.write_text(API_KEY + "\n")
        webhook_file = self.workdir / "webhook-key"
        webhook_file.write_text(WEBHOOK_KEY + "\n")
        self.webhook_key_file = webhook_file
        # log.level=warn: one log line per RPC would cost the gateway (and this script)
        # more than the work measured. The ready line is info, so the ports are chosen
        # here and readiness is /readyz.
        ports = [free_loopback_port() for _ in range(3)]
        self.grpc = f"127.0.0.1:{ports[0]}"
        self.webhook_port, self.admin_port = ports[1], ports[2]
        self.webhook_url = f"http://127.0.0.1:{self.webhook_port}/webhooks/v2"
        self.process = Process([
            str(build / "inspection-gateway"), f"--upstream-url={upstream_url}",
            f"--webapp-url={webapp_url}", f"--api-key-file={key_file}",
            f"--webhook-key-file={webhook_file}", f"--grpc-addr={self.grpc}",
            f"--webhook-addr=127.0.0.1:{self.webhook_port}",
            f"--admin-addr=127.0.0.1:{self.admin_port}", "--log-level=warn",
            f"--event-log={event_log or 'sqlite:' + str(self.workdir / 'events.db')}",
            *flags])
        self.pid = self.process.proc.pid

        def ready():
            if self.process.proc.poll() is not None:
                raise RuntimeError("the gateway exited:\n" + "\n".join(self.process.lines[-20:]))
            try:
                return http_get(f"http://127.0.0.1:{self.admin_port}/readyz", timeout=1)[0] == 200
            except OSError:
                return False
        try:
            wait_for(ready, 30, "the gateway's /readyz")
        except BaseException:
            self.process.stop()
            raise

    def metric(self, name, labels="", exclude=None):
        """Sum of the series of `name` whose labels contain `labels` (and not `exclude`)."""
        _, text = http_get(f"http://127.0.0.1:{self.admin_port}/metrics")
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if labels in line and (exclude is None or exclude not in line):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def grpc_ok(self, method):
        """grpc_server_handled_total of `method` with code OK."""
        return self.metric("grpc_server_handled_total",
                           f'grpc_method="{method}"') - self.metric(
            "grpc_server_handled_total", f'grpc_method="{method}"', exclude='grpc_code="OK"')

    def stop(self):
        self.process.stop()


class Stack:
    """inspection-sandbox + inspection-gateway as processes, on free ports."""

    def __init__(self, build, workdir, gateway_flags=(), sandbox_flags=(), faults=None,
                 front=None):
        """`front(sandbox_url, workdir)`, when given, starts something between the gateway
        and the sandbox (the TLS terminator) and returns (its URL, extra gateway flags, an
        object with stop())."""
        self.workdir = pathlib.Path(workdir)
        keys = self.workdir / "api-keys"
        keys.write_text(API_KEY + "\n")
        argv = [str(build / "inspection-sandbox"), "--listen=127.0.0.1:0",
                f"--api-keys-file={keys}", "--webhook-delay-ms=0", *sandbox_flags]
        if faults is not None:
            path = self.workdir / "faults.json"
            path.write_text(json.dumps(faults))
            argv.append(f"--faults={path}")
        self.sandbox = Process(argv)
        self.front = None
        try:
            ready = self.sandbox.wait_json_line("inspection-sandbox serving")
            self.sandbox_url = ready["base_url"]
            self.upstream_url = self.sandbox_url
            if front is not None:
                self.upstream_url, front_flags, self.front = front(self.sandbox_url,
                                                                   self.workdir)
                gateway_flags = [*gateway_flags, *front_flags]
            self.server = Gateway(build, self.workdir, self.upstream_url,
                                  f"{self.sandbox_url}/webapp", gateway_flags)
        except BaseException:
            if self.front is not None:
                self.front.stop()
            self.sandbox.stop()
            raise
        self.gateway = self.server.process
        self.pid = self.server.pid
        self.grpc = self.server.grpc
        self.webhook_port, self.admin_port = self.server.webhook_port, self.server.admin_port

    def metric(self, name, labels="", exclude=None):
        """Sum of the series of `name` whose labels contain `labels` (and not `exclude`)."""
        return self.server.metric(name, labels, exclude)

    def grpc_ok(self, method):
        """grpc_server_handled_total of `method` with code OK."""
        return self.server.grpc_ok(method)

    def stop(self):
        self.server.stop()
        if self.front is not None:
            self.front.stop()
        self.sandbox.stop()


class TlsFront:
    """HAProxy (Debian's haproxy) terminating TLS in front of the sandbox, as the real
    vendor's HTTPS would be: a throwaway certificate (openssl CLI) for 127.0.0.1, ALPN h2 and
    http/1.1, and a stats socket that counts connections and TLS handshakes."""

    def __init__(self, sandbox_url, workdir):
        workdir = pathlib.Path(workdir)
        cert, key = workdir / "vendor.pem", workdir / "vendor.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
                        "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        bundle = workdir / "vendor-bundle.pem"
        bundle.write_text(cert.read_text() + key.read_text())
        self.ca_file = cert  # self-signed: the certificate is its own CA
        self.socket = workdir / "haproxy.sock"
        self.port = free_loopback_port()
        backend = sandbox_url.split("://", 1)[1].rstrip("/")
        config = workdir / "haproxy.cfg"
        config.write_text(f"""global
    maxconn 4096
    stats socket {self.socket} mode 600 level admin
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend vendor_tls
    bind 127.0.0.1:{self.port} ssl crt {bundle} alpn h2,http/1.1
    default_backend sandbox
backend sandbox
    http-reuse always
    server sandbox {backend}
""")
        self.process = Process([tool("haproxy"), "-f", str(config), "-db"])
        wait_for(lambda: self.socket.exists(), 10, "haproxy's stats socket")
        self.url = f"https://127.0.0.1:{self.port}"

    def stats(self):
        """The TLS frontend's counters: connections accepted (conn_tot) and TLS handshakes
        (CumSslConns of `show info`: every accepted TLS connection makes one)."""
        import socket

        def ask(command):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(self.socket))
                sock.sendall(command.encode() + b"\n")
                chunks = []
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
            return b"".join(chunks).decode()
        info = dict(line.split(": ", 1) for line in ask("show info").splitlines()
                    if ": " in line)
        stat = ask("show stat").splitlines()
        header = stat[0].lstrip("# ").split(",")
        frontend = next(dict(zip(header, row.split(","))) for row in stat[1:]
                        if row.startswith("vendor_tls,FRONTEND"))
        return {"connections": int(frontend["conn_tot"]),
                "handshakes": int(info["CumSslConns"])}

    def stop(self):
        self.process.stop()


def tls_front(sandbox_url, workdir):
    front = TlsFront(sandbox_url, workdir)
    return front.url, [f"--upstream-ca-file={front.ca_file}"], front


def wait_line(process, needles, timeout):
    """The first output line of `process` (an e2e_support.Process) that contains one of
    `needles`; raises with the process's last lines when none comes, or it exits first."""
    def find():
        return next((line for line in process.lines if any(n in line for n in needles)), None)
    with process.cond:
        process.cond.wait_for(lambda: find() or process.proc.poll() is not None, timeout)
        found = find()
    if found is None:
        raise RuntimeError(f"no line with {needles} from {process.proc.args[0]} (exit "
                           f"{process.proc.poll()}):\n" + "\n".join(process.lines[-20:]))
    return found


class RedisServer:
    """Debian's redis-server on a free loopback port, as tests/support/redis_server.cc
    starts it: no persistence, its files (a replica's sync copy, a sentinel's rewritten
    config) in `workdir`, ready when its ready line is printed. `replica_of` (a
    RedisServer) makes it a replica, ready once its first sync has finished; `sentinel_of`
    (a RedisServer, with `master_name`) makes it a sentinel monitoring that primary, ready
    at "+monitor master". The port is free when the OS hands it out, but another process
    may bind it first: a start that fails on "Address already in use" is retried once, on
    a new port."""

    def __init__(self, workdir, name, replica_of=None, sentinel_of=None, master_name="mymaster",
                 quorum=2):
        workdir = pathlib.Path(workdir) / name
        workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(2):
            self.port = free_loopback_port()
            common = ["--port", str(self.port), "--bind", "127.0.0.1", "--daemonize", "no",
                      "--dir", str(workdir), "--loglevel", "notice"]
            if sentinel_of is not None:
                config = workdir / "sentinel.conf"
                config.write_text(
                    f"sentinel monitor {master_name} 127.0.0.1 {sentinel_of.port} {quorum}\n"
                    f"sentinel down-after-milliseconds {master_name} 5000\n"
                    f"sentinel failover-timeout {master_name} 20000\n"
                    "sentinel resolve-hostnames no\n")
                argv = [tool("redis-server"), str(config), "--sentinel", *common]
                ready = ["+monitor master"]
            else:
                argv = [tool("redis-server"), *common, "--save", "", "--appendonly", "no"]
                ready = ["Ready to accept connections"]
                if replica_of is not None:
                    argv += ["--replicaof", "127.0.0.1", str(replica_of.port)]
                    # A full sync, or (a fresh diskless primary) a partial one.
                    ready = ["MASTER <-> REPLICA sync: Finished with success",
                             "MASTER <-> REPLICA sync: Master accepted a Partial "
                             "Resynchronization"]
            self.process = Process(argv)
            self.pid = self.process.proc.pid
            try:
                wait_line(self.process, ready, 20)
                return
            except BaseException:
                self.process.stop()
                if attempt == 0 and any("Address already in use" in line
                                        for line in self.process.lines):
                    continue
                raise

    def command(self, *words):
        """One command through redis-cli; its answer as text (--no-raw off: raw)."""
        out = subprocess.run([tool("redis-cli"), "-h", "127.0.0.1", "-p", str(self.port),
                              *words], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(words)}: {out.stdout}{out.stderr}")
        return out.stdout.strip()

    def info_stat(self, name):
        """A counter of INFO stats (total_connections_received, ...)."""
        return int(re.search(rf"^{name}:(\d+)", self.command("INFO", "stats"), re.M).group(1))

    def command_calls(self, command):
        """How many times the server has run `command` (INFO commandstats)."""
        found = re.search(rf"^cmdstat_{command.lower()}:calls=(\d+)",
                          self.command("INFO", "commandstats"), re.M)
        return int(found.group(1)) if found else 0

    def stop(self):
        self.process.stop()


class Processes:
    """What a scenario started (anything with stop()), stopped in the reverse order of
    start, each one even when another's stop fails."""

    def __init__(self):
        self.started = []

    def add(self, thing):
        self.started.append(thing)
        return thing

    def stop(self):
        errors = []
        while self.started:
            try:
                self.started.pop().stop()
            except Exception as error:  # noqa: BLE001 - stop the rest, then report
                errors.append(error)
        if errors:
            raise errors[0]


GRPC_EMPTY_FRAME = b"\x00\x00\x00\x00\x00"  # uncompressed, 0-byte message: an empty request


def h2load(url, tmp, *, clients, streams, requests=None, duration=None, grpc=True,
           headers=(), h2=False):
    """h2load against `url`: per-request latencies (its --log-file) -> percentiles in us.
    With grpc=True every request POSTs the empty gRPC frame. h2load sees HTTP statuses
    only (a gRPC error is a 200 with grpc-status in the trailers): callers check the
    gateway's own grpc_server_handled_total for the gRPC codes."""
    log = pathlib.Path(tmp) / f"h2load-{time.monotonic_ns()}.tsv"
    argv = [tool("h2load"), f"--clients={clients}", f"--max-concurrent-streams={streams}",
            f"--log-file={log}"]
    argv += [f"--requests={requests}"] if requests else [f"--duration={duration}",
                                                         "--warm-up-time=1"]
    if grpc:
        frame = pathlib.Path(tmp) / "empty.grpc"
        frame.write_bytes(GRPC_EMPTY_FRAME)
        argv += ["-H", "content-type: application/grpc", "-H", "te: trailers",
                 f"--data={frame}"]
    elif not h2:
        argv.append("--h1")
    for header in headers:
        argv += ["-H", header]
    out = subprocess.run(argv + [url], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"h2load failed: {out.stdout}{out.stderr}")
    latencies, statuses = [], {}
    for line in log.read_text().splitlines():
        _, status, micros = line.split("\t")[:3]
        latencies.append(int(micros))
        statuses[status] = statuses.get(status, 0) + 1
    latencies.sort()

    def pct(p):
        return latencies[min(len(latencies) - 1, int(len(latencies) * p / 100))]

    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out.stdout).group(1))
    return {"p": {p: pct(p) for p in (50, 90, 99)} if latencies else {}, "count": len(latencies),
            "rps": rps, "statuses": statuses, "text": out.stdout, "latencies": latencies}


def percentiles(latencies):
    """p50/p90/p99 (us) of the latencies of several h2load runs."""
    merged = sorted(latencies)
    return {p: merged[min(len(merged) - 1, int(len(merged) * p / 100))] for p in (50, 90, 99)}


def interleaved_hop(direct_url, via_url, bare_url, tmp, *, n, rounds, around_via=None,
                    relay_url=None, around_relay=None):
    """The three legs of the hop figures, one call at a time: REST straight to the vendor
    (`direct_url`, HTTP/1.1 with the API key), a gRPC call through the relay under test
    (`via_url`) and the bare gRPC health check of the same server (`bare_url`), `n` calls
    each, in `rounds` rounds of direct, via, bare. This machine drifts by tens of us within
    a minute (where the scheduler puts h2load, the sandbox and the server), so the legs of
    one figure are measured within a second of each other, and the overhead is the median of
    the rounds' via p50 - bare p50 - direct p50. `around_via(run)` wraps each via run (CPU
    accounting). With `relay_url` (bench_hop_floor serving the same call against the same
    vendor) each round also runs that relay, right after the via leg, and `over_relay50` is
    the median of the rounds' via p50 - relay p50: what the relay under test adds over a
    relay that does no work, with both legs' drift shared (`around_relay` wraps each relay
    run, as `around_via` does the via runs). Percentiles of each leg are over all its
    rounds."""
    per_round = max(1, n // rounds)
    legs = {"direct": [], "via": [], "bare": []}
    if relay_url:
        legs["relay"] = []
    overheads, over_relay = [], []

    def run_via():
        return h2load(via_url, tmp, clients=1, streams=1, requests=per_round)

    for _ in range(rounds):
        direct = h2load(direct_url, tmp, clients=1, streams=1, requests=per_round, grpc=False,
                        headers=[f"x-api-key: {API_KEY}"])
        via = around_via(run_via) if around_via else run_via()
        if relay_url:
            def run_relay():
                return h2load(relay_url, tmp, clients=1, streams=1, requests=per_round)
            relay = around_relay(run_relay) if around_relay else run_relay()
            legs["relay"] += relay["latencies"]
            over_relay.append(via["p"][50] - relay["p"][50])
        bare = h2load(bare_url, tmp, clients=1, streams=1, requests=per_round)
        for name, leg in (("direct", direct), ("via", via), ("bare", bare)):
            legs[name] += leg["latencies"]
        overheads.append(via["p"][50] - bare["p"][50] - direct["p"][50])
    result = {name: {"p": percentiles(values), "count": len(values)}
              for name, values in legs.items()}
    result["overheads"] = overheads
    result["overhead50"] = sorted(overheads)[len(overheads) // 2]
    if relay_url:
        result["over_relay"] = over_relay
        result["over_relay50"] = sorted(over_relay)[len(over_relay) // 2]
    result["n"] = per_round * rounds
    return result


def wrk(url, *, threads, connections, duration, headers=(), script=None, script_args=()):
    argv = [tool("wrk"), f"-t{threads}", f"-c{connections}", f"-d{duration}", "--latency"]
    for header in headers:
        argv += ["-H", header]
    if script:
        argv += ["-s", script]
    argv.append(url)
    if script_args:
        argv += ["--", *script_args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed: {out.stderr}")
    text = out.stdout

    def to_us(value, unit):
        return float(value) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]

    percentiles = {int(m.group(1)): to_us(m.group(2), m.group(3)) for m in
                   re.finditer(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)}
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = re.search(r"Socket errors: (.*)", text)
    return {"p": percentiles, "requests": requests, "rps": rps,
            "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errors.group(1) if errors else "", "text": text}


def floor_relay(build, sandbox_url, key_file, mode):
    """bench_hop_floor --mode=`mode` relaying to the sandbox at `sandbox_url`: (the process,
    the gRPC URL of its GetWebhookConfig, of its health check)."""
    binary = build / "bench_hop_floor"
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"{binary} missing: cmake --build {build} --target bench_hop_floor")
    vendor = sandbox_url.split("://", 1)[1].rstrip("/")
    relay = Process([str(binary), f"--vendor={vendor}", f"--api-key-file={key_file}",
                     f"--mode={mode}"])
    try:
        base = f"http://127.0.0.1:{relay.wait_json_line('bench_hop_floor')['port']}"
    except BaseException:
        relay.stop()
        raise
    return (relay, f"{base}/inspection.v1.EventConfigService/GetWebhookConfig",
            f"{base}/grpc.health.v1.Health/Check")


# --- scenarios --------------------------------------------------------------------------

def measure_hop(build, tmp, args, client, with_relay=False):
    """One gateway with upstream.http_client=`client`: direct REST, through the gateway and
    the bare gRPC health check, one call at a time, as h2load sees them (interleaved_hop),
    plus the gateway's own split of each call (its metrics) and its CPU per call. With
    `with_relay`, bench_hop_floor --mode=transport (the same Beast vendor client, no
    pipeline) relays to the same sandbox as a fourth leg of the same rounds, so the gateway's
    cost over a relay that does nothing is measured pairwise (`over_relay50`)."""
    tmp = pathlib.Path(tmp) / client  # each gateway (and TLS terminator) its own files
    tmp.mkdir(exist_ok=True)
    stack = Stack(build, tmp, gateway_flags=["--cache-enabled=false",
                                             f"--upstream-http-client={client}"])
    relay = relay_url = None
    if with_relay:
        try:
            relay, relay_url, _ = floor_relay(build, stack.sandbox_url, tmp / "api-key",
                                              "transport")
        except BaseException:
            stack.stop()
            raise
    cpu = {"gateway": 0.0, "relay": 0.0}

    def around_via(run):
        before = cpu_seconds(stack.pid)
        result = run()
        cpu["gateway"] += cpu_seconds(stack.pid) - before
        return result

    def around_relay(run):
        before = cpu_seconds(relay.proc.pid)
        result = run()
        cpu["relay"] += cpu_seconds(relay.proc.pid) - before
        return result

    try:
        ok_before = stack.grpc_ok("GetWebhookConfig")
        legs = interleaved_hop(
            f"{stack.sandbox_url}/apiV1/eventmanager/configwebhook",
            f"http://{stack.grpc}/inspection.v1.EventConfigService/GetWebhookConfig",
            f"http://{stack.grpc}/grpc.health.v1.Health/Check", tmp,
            n=args.seconds * 1000, rounds=args.hop_rounds, around_via=around_via,
            relay_url=relay_url, around_relay=around_relay if relay else None)
        ok = stack.grpc_ok("GetWebhookConfig") - ok_before
        # The gateway's own view: handling time minus the vendor attempt, per call.
        handling = stack.metric("grpc_server_handling_seconds_sum",
                                'grpc_method="GetWebhookConfig"')
        upstream = stack.metric("inspection_upstream_request_duration_seconds_sum",
                                'route="get_webhook_config"')
    finally:
        if relay:
            relay.stop()
        stack.stop()
    # The relay's closing line: {"bench_hop_floor":"stopped","ok":N,"failed":M}.
    relay_counts = relay.wait_json_line('"stopped"', timeout=5) if relay else None
    direct, via, bare = legs["direct"], legs["via"], legs["bare"]
    hop = {"n": legs["n"], "ok": ok, "direct": direct, "via": via, "bare": bare,
           "cpu_us": cpu["gateway"] * 1e6 / max(ok, 1), "attempt_us": upstream / max(ok, 1) * 1e6,
           "inside_us": (handling - upstream) / max(ok, 1) * 1e6,
           # What the gateway adds beyond the two legs it cannot avoid: a gRPC round trip
           # (the bare health check of the same server) and the vendor's REST round trip.
           "overhead50": legs["overhead50"], "overheads": legs["overheads"]}
    print(f"  upstream.http_client={client}: direct REST p50 {direct['p'][50]} us, p99 "
          f"{direct['p'][99]} us; through the gateway p50 {via['p'][50]} us, p99 "
          f"{via['p'][99]} us; {ok:.0f}/{hop['n']} gRPC OK; bare gRPC health check p50 "
          f"{bare['p'][50]} us, p99 {bare['p'][99]} us; overhead p50 per round "
          f"{sorted(legs['overheads'])} us; per call (means, the gateway's metrics): vendor "
          f"attempt {hop['attempt_us']:.0f} us (sandbox included), the rest of the gateway "
          f"{hop['inside_us']:.0f} us", flush=True)
    if relay_counts is not None:
        hop["over_relay50"] = legs["over_relay50"]
        hop["relay_complete"] = (relay_counts["ok"] == legs["n"]
                                 and relay_counts["failed"] == 0)
        hop["relay_cpu_us"] = cpu["relay"] * 1e6 / max(relay_counts["ok"], 1)
        print(f"  bench_hop_floor --mode=transport in the same rounds: p50 "
              f"{legs['relay']['p'][50]} us, p99 {legs['relay']['p'][99]} us; "
              f"{relay_counts['ok']}/{legs['n']} OK, CPU {hop['relay_cpu_us']:.0f} us per "
              f"call; the gateway over it, p50 per round {sorted(legs['over_relay'])} us",
              flush=True)
    return hop


def hop_latency(build, tmp, args):
    """One connection, one call at a time: gateway -> sandbox vs REST straight to the
    sandbox, both driven by h2load. The cache is off so every call reaches the sandbox. Run
    with the HTTP client auto picks for the sandbox (beast), then with curl for comparison."""
    hop = measure_hop(build, tmp, args, "beast", with_relay=True)
    curl = measure_hop(build, tmp, args, "curl")
    added50 = hop["via"]["p"][50] - hop["direct"]["p"][50]
    added99 = hop["via"]["p"][99] - hop["direct"]["p"][99]
    complete = hop["ok"] == hop["n"]
    # docs/design.md §9 dropped "added p50 <= 100 us": it sat below this machine's floor.
    record("hop_latency", "added latency p50", added50, "us", "reported", complete)
    record("hop_latency", "added latency p99", added99, "us", "<= 300 us",
           added99 <= 300 and complete)
    # Issue 33 withdrew "through - bare gRPC - direct REST <= 25 us": a relay with no features
    # measures 23-55 us by that formula here. It stays reported; the hop is judged against
    # the floor relay (bench_hop_floor --mode=transport: gRPC's callback API and the same Beast
    # vendor client, no pipeline) measured in the same rounds instead: the cost of the
    # gateway's own layers on this machine, in latency and in CPU.
    record("hop_latency", "gateway overhead p50 (through - bare gRPC - direct REST)",
           hop["overhead50"], "us", "reported", complete)
    relay_ok = complete and hop["relay_complete"]
    record("hop_latency", "gateway over a bare relay p50 (through - bench_hop_floor transport)",
           hop["over_relay50"], "us", "<= 40 us", hop["over_relay50"] <= 40 and relay_ok)
    record("hop_latency", "gateway CPU per uncached call", hop["cpu_us"], "us", "reported",
           complete)
    record("hop_latency", "bench_hop_floor transport CPU per call", hop["relay_cpu_us"], "us",
           "reported", relay_ok)
    cpu_ratio = hop["cpu_us"] / max(hop["relay_cpu_us"], 1e-9)
    record("hop_latency", "gateway CPU per uncached call / the relay's", cpu_ratio, "x",
           "<= 1.2 x", cpu_ratio <= 1.2 and relay_ok)
    record("hop_latency", "vendor attempt (mean)", hop["attempt_us"], "us", "reported", complete)
    complete_curl = curl["ok"] == curl["n"]
    record("hop_latency", "gateway overhead p50 with curl", curl["overhead50"], "us",
           "reported", complete_curl)
    record("hop_latency", "gateway CPU per uncached call with curl", curl["cpu_us"], "us",
           "reported", complete_curl)
    record("hop_latency", "vendor attempt (mean) with curl", curl["attempt_us"], "us",
           "reported", complete_curl)


def hop_floor(build, tmp, args):
    """The same three measurements as hop_latency against bench_hop_floor (bench/hop_floor.cc):
    the least a gRPC -> REST relay can do on this stack (gRPC's callback API, one kept-alive
    vendor connection, no pipeline). --mode=loop has the gateway's threading over a bare
    socket (the answer is read on one Asio loop thread, which finishes the call);
    --mode=transport is the same through the gateway's BeastTransport; --mode=inline reads
    the answer on the gRPC thread itself, no hand-off. Their overhead, by hop_latency's
    formula, is the floor that hop_latency's gateway overhead is to be read against."""
    tmp = pathlib.Path(tmp)
    keys = tmp / "floor-api-keys"
    keys.write_text(API_KEY + "\n")
    sandbox = Process([str(build / "inspection-sandbox"), "--listen=127.0.0.1:0",
                       f"--api-keys-file={keys}"])
    try:
        sandbox_url = sandbox.wait_json_line("inspection-sandbox serving")["base_url"]
        for mode in ("loop", "transport", "inline"):
            relay, via_url, bare_url = floor_relay(build, sandbox_url, keys, mode)
            try:
                legs = interleaved_hop(f"{sandbox_url}/apiV1/eventmanager/configwebhook",
                                       via_url, bare_url, tmp, n=args.seconds * 1000,
                                       rounds=args.hop_rounds)
            finally:
                relay.stop()
            stopped = relay.wait_json_line('"stopped"', timeout=5)
            print(f"  --mode={mode}: direct REST p50 {legs['direct']['p'][50]} us; through the "
                  f"relay p50 {legs['via']['p'][50]} us, p99 {legs['via']['p'][99]} us; bare "
                  f"gRPC health check p50 {legs['bare']['p'][50]} us; overhead p50 per round "
                  f"{sorted(legs['overheads'])} us", flush=True)
            complete = stopped["ok"] == legs["n"] and stopped["failed"] == 0
            record("hop_floor", f"relay overhead p50, {mode} (through - bare gRPC - direct REST)",
                   legs["overhead50"], "us", "reported", complete)
    finally:
        sandbox.stop()


def cached_throughput(build, tmp, args):
    """Cached unary calls vs the same server's gRPC health check (the bare gRPC cost),
    same h2load load: 4 connections x 16 streams."""
    # The two legs alternate in --ratio-rounds rounds (which one goes first alternates too)
    # and the figure is the median of the rounds' ratios: run one after the other, 10 s
    # each, the same build read anywhere from 0.55 to 0.89 on one afternoon, because the
    # machine's speed drifts between the legs.
    rounds = max(1, args.ratio_rounds)
    seconds = max(2, args.seconds // rounds)
    stack = Stack(build, tmp)
    ratios, cached_count, ok, cpu_us = [], 0, 0, 0.0
    try:
        common = dict(clients=4, streams=16, duration=seconds)
        for i in range(rounds):
            legs = {}
            for leg in (("bare", "cached") if i % 2 == 0 else ("cached", "bare")):
                if leg == "bare":
                    legs[leg] = h2load(f"http://{stack.grpc}/grpc.health.v1.Health/Check", tmp,
                                       **common)
                    continue
                ok_before = stack.grpc_ok("GetWebhookConfig")
                cpu_before = cpu_seconds(stack.pid)
                legs[leg] = h2load(
                    f"http://{stack.grpc}/inspection.v1.EventConfigService/GetWebhookConfig",
                    tmp, **common)
                cpu_us += (cpu_seconds(stack.pid) - cpu_before) * 1e6
                ok += stack.grpc_ok("GetWebhookConfig") - ok_before
                cached_count += legs[leg]["count"]
            ratios.append(legs["cached"]["rps"] / legs["bare"]["rps"])
            print(f"  round {i + 1}: health check {legs['bare']['rps']:.0f}/s, cached "
                  f"GetWebhookConfig {legs['cached']['rps']:.0f}/s ({ratios[-1]:.3f})",
                  flush=True)
        vendor_calls = stack.metric("inspection_upstream_requests_total")
    finally:
        stack.stop()
    ratio = sorted(ratios)[len(ratios) // 2]
    print(f"  {vendor_calls:.0f} vendor call(s), {ok:.0f} gRPC OK of {cached_count}; ratios "
          f"{min(ratios):.3f}..{max(ratios):.3f}")
    good = ratio >= 0.75 and ok >= cached_count and vendor_calls <= 2
    record("cached_throughput", "cached rps / bare gRPC rps", ratio, "", ">= 0.75", good)
    # h2load's warm-up second is served too: count every OK call of the cached legs.
    record("cached_throughput", "gateway CPU per cached call", cpu_us / max(ok, 1), "us",
           "reported", True)


def inflight_2000(build, tmp, args):
    """2,000 calls in flight at once, each held 1 s by the vendor."""
    faults = [{"route": "get_webhook_config", "kind": "latency", "latency_ms": 1000}]
    stack = Stack(build, tmp, faults=faults, sandbox_flags=["--threads=2200"],
                  gateway_flags=["--cache-enabled=false", "--upstream-max-connections=2100"])
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc_status(stack.pid, "Threads"))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        sampler.start()
        ok_before = stack.grpc_ok("GetWebhookConfig")
        # 20 connections x 100 streams: 2,000 calls in flight, twice over.
        result = h2load(f"http://{stack.grpc}/inspection.v1.EventConfigService/GetWebhookConfig",
                        tmp, clients=20, streams=100, requests=4000)
        ok = stack.grpc_ok("GetWebhookConfig") - ok_before
    finally:
        done.set()
        sampler.join()
        stack.stop()
    failed = result["count"] - ok
    print(f"  {result['count']} calls, {result['rps']:.0f}/s, p50 {result['p'][50] / 1e3:.0f} ms, "
          f"p99 {result['p'][99] / 1e3:.0f} ms, {ok:.0f} gRPC OK, HTTP {result['statuses']}")
    record("inflight_2000", "gateway threads (peak)", peak[0], "threads", "<= 64", peak[0] <= 64)
    record("inflight_2000", "failed calls", failed, "calls", "0", failed == 0)


def deliver_with_wrk(stack, seconds, connections=32):
    """wrk POSTs distinct, correctly keyed deliveries for `seconds`; returns wrk's result
    and the deliveries the gateway stored (its own counter)."""
    before = stack.metric("inspection_webhook_deliveries_total", 'outcome="accepted"')
    result = wrk(f"http://127.0.0.1:{stack.webhook_port}/webhooks/v2", threads=2,
                 connections=connections, duration=f"{seconds}s",
                 script=str(ROOT / "bench" / "webhook.lua"), script_args=[f"{time.time_ns()}"],
                 headers=[f"x-api-key: {WEBHOOK_KEY}", "Content-Type: application/json"])
    stored = stack.metric("inspection_webhook_deliveries_total", 'outcome="accepted"') - before
    return result, stored


def raise_open_file_limit(needed):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < needed:
        raise RuntimeError(f"this scenario needs {needed} open files, the hard limit is {hard}")


def webhook_throughput(build, tmp, args):
    """Durable webhook deliveries per second on the default (SQLite) event log, alone and
    while 10,000 idle connections are held open against the webhook port."""
    import socket
    raise_open_file_limit(11000)
    # Room for 10,000 idle connections (from 40 addresses, 250 each: under the 256 per
    # address) and a head timeout longer than the run, so that they stay open throughout.
    stack = Stack(build, tmp, gateway_flags=["--webhook-max-connections=12000",
                                             "--webhook-head-timeout-ms=600000"])
    idle = []
    try:
        alone, stored_alone = deliver_with_wrk(stack, args.seconds)
        for i in range(10000):
            sock = socket.socket()
            sock.bind((f"127.0.1.{1 + i // 250}", 0))
            sock.connect(("127.0.0.1", stack.webhook_port))
            idle.append(sock)
        wait_for(lambda: stack.metric("inspection_webhook_connections") >= 10000, 60,
                 "10,000 idle connections")
        threads = proc_status(stack.pid, "Threads")
        with_idle, stored_with_idle = deliver_with_wrk(stack, args.seconds)
        still_open = stack.metric("inspection_webhook_connections")
    finally:
        for sock in idle:
            sock.close()
        stack.stop()
    seconds = float(args.seconds)
    for label, result, stored in (("alone", alone, stored_alone),
                                  ("with 10,000 idle connections", with_idle, stored_with_idle)):
        print(f"  {label}: {result['requests']} deliveries, {result['non2xx']} not 2xx, "
              f"{stored:.0f} stored (metrics), p50 {result['p'][50] / 1e3:.2f} ms, "
              f"p99 {result['p'][99] / 1e3:.2f} ms")
    print(f"  gateway threads with 10,000 idle connections: {threads}; connections open at "
          f"the end: {still_open:.0f}")
    rate = stored_alone / seconds
    record("webhook_throughput", "durable deliveries/s", rate, "/s", ">= 3000",
           rate >= 3000 and alone["non2xx"] == 0)
    rate_idle = stored_with_idle / seconds
    record("webhook_throughput", "durable deliveries/s, 10,000 idle connections open",
           rate_idle, "/s", ">= 3000", rate_idle >= 3000 and with_idle["non2xx"] == 0)


def webhook_slowloris(build, tmp, args):
    """p99 of legitimate deliveries while 200 slowloris connections trickle their heads
    (one byte every 100 ms each, reconnecting as the gateway cuts them off)."""
    import socket
    stack = Stack(build, tmp, gateway_flags=["--webhook-head-timeout-ms=2000"])
    stop = threading.Event()
    cut = [0]

    def attack():
        head = b"POST /webhooks/v2 HTTP/1.1\r\nX-Slow: " + b"a" * 100000
        socks = {}
        while not stop.is_set():
            for i in range(200):
                if i not in socks:
                    sock = socket.socket()
                    sock.bind(("127.0.0.2", 0))
                    sock.connect(("127.0.0.1", stack.webhook_port))
                    sock.setblocking(False)
                    socks[i] = [sock, 0]
                sock, at = socks[i]
                try:
                    sock.send(head[at:at + 1])
                    socks[i][1] += 1
                except OSError:
                    sock.close()
                    del socks[i]
                    cut[0] += 1
            stop.wait(0.1)
        for sock, _ in socks.values():
            sock.close()

    attacker = threading.Thread(target=attack)
    try:
        quiet, _ = deliver_with_wrk(stack, args.seconds, connections=8)
        attacker.start()
        time.sleep(1)  # the attack's connections are open and trickling
        loud, stored = deliver_with_wrk(stack, args.seconds, connections=8)
        stop.set()
        attacker.join()
        timeouts = stack.metric("inspection_webhook_http_refusals_total",
                                'reason="head_timeout"')
    finally:
        stop.set()
        stack.stop()
    print(f"  without the attack: p50 {quiet['p'][50] / 1e3:.2f} ms, "
          f"p99 {quiet['p'][99] / 1e3:.2f} ms, {quiet['rps']:.0f}/s")
    print(f"  with 200 slowloris connections: p50 {loud['p'][50] / 1e3:.2f} ms, "
          f"p99 {loud['p'][99] / 1e3:.2f} ms, {loud['rps']:.0f}/s, {loud['non2xx']} not 2xx; "
          f"{timeouts:.0f} slow heads cut at the head timeout")
    p99_ms = loud["p"][99] / 1e3
    record("webhook_slowloris", "legitimate delivery p99 under slowloris", p99_ms, "ms",
           "<= 50 ms", p99_ms <= 50 and loud["non2xx"] == 0 and timeouts > 0)


def fanout_stack(build, tmp):
    """The stream scenarios' setup: the bench_fanout_client binary, a started stack, its
    webhook URL and the file holding the webhook key."""
    client_binary = build / "bench_fanout_client"
    if not os.access(client_binary, os.X_OK):
        raise RuntimeError(f"{client_binary} missing: cmake --build {build} "
                           "--target bench_fanout_client")
    stack = Stack(build, tmp)
    return (client_binary, stack, f"http://127.0.0.1:{stack.webhook_port}/webhooks/v2",
            stack.workdir / "webhook-key")


def post_fanout(client, posts):
    """Has `client` (bench_fanout_client) post `posts` webhooks, one after the other (each
    once every stream has the one before); returns each post's result line."""
    results = []
    for _ in range(posts):
        client.stdin.write("post\n")
        client.stdin.flush()
        line = client.stdout.readline()
        try:
            results.append(json.loads(line))
        except ValueError:
            raise RuntimeError(f"bench_fanout_client answered {line!r} (exit code "
                               f"{client.poll()}) to post {len(results) + 1}") from None
    return results


def median_p99_ms(results):
    """The median of the posts' p99s, in ms: one slow post (a GC pause of the client, a
    page fault) does not make the figure."""
    return sorted(r["p99_us"] for r in results)[len(results) // 2] / 1e3


def streams(build, tmp, args):
    """10,000 open Subscribe streams (RSS) and webhooks fanned out to them, then to 1,000
    subscribers (bench_fanout_client, a C++ gRPC client)."""
    client_binary, stack, webhook, key_file = fanout_stack(build, tmp)

    def open_streams(count):
        client = subprocess.Popen(
            [str(client_binary), f"--target={stack.grpc}", f"--streams={count}",
             f"--webhook={webhook}", f"--key-file={key_file}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        client.stdout.readline()  # "started N"
        wait_for(lambda: stack.metric("inspection_stream_subscribers",
                                      'rpc="Subscribe"') >= count,
                 120, f"{count} open Subscribe streams")
        return client

    posts = args.fanout_posts
    try:
        rss_before = proc_status(stack.pid, "VmRSS")
        client = open_streams(args.streams)
        rss_after = proc_status(stack.pid, "VmRSS")
        post_fanout(client, 1)  # warm-up: the first event on fresh streams is not a figure
        wide = post_fanout(client, max(posts // 4, 3))
        client.communicate("quit\n", timeout=60)
        extra_mib = (rss_after - rss_before) / 1024
        print(f"  {args.streams} streams open: gateway RSS {rss_before / 1024:.0f} -> "
              f"{rss_after / 1024:.0f} MiB")
        record("streams", f"extra RSS for {args.streams} Subscribe streams", extra_mib, "MiB",
               "<= 200 MiB", extra_mib <= 200)
        wait_for(lambda: stack.metric("inspection_stream_subscribers", 'rpc="Subscribe"') == 0,
                 60, "the streams to close")

        client = open_streams(1000)
        post_fanout(client, 1)  # warm-up
        results = post_fanout(client, posts)
        client.communicate("quit\n", timeout=60)
    finally:
        stack.stop()
    p99_ms = median_p99_ms(results)
    p50_ms = sorted(r["p50_us"] for r in results)[len(results) // 2] / 1e3
    worst = max(r["p99_us"] for r in results) / 1e3
    post_ms = sorted(r["post_us"] for r in results)[len(results) // 2] / 1e3
    print(f"  fan-out to 1,000 subscribers, {posts} posts: median p50 {p50_ms:.1f} ms, median "
          f"p99 {p99_ms:.1f} ms, worst p99 {worst:.1f} ms (from the POST to each stream's "
          f"receipt; the POST itself, i.e. the durable append, took {post_ms:.1f} ms)")
    wide_ms = median_p99_ms(wide)
    print(f"  fan-out to {args.streams} subscribers, {len(wide)} posts: median p99 "
          f"{wide_ms:.1f} ms, received {min(r['received'] for r in wide)} each")
    record("streams", "fan-out p99 to 1,000 subscribers (median of the posts)", p99_ms, "ms",
           "<= 20 ms", p99_ms <= 20 and all(r["received"] == 1000 for r in results))
    record("streams", f"fan-out p99 to {args.streams} subscribers (median of the posts)",
           wide_ms, "ms", "reported", all(r["received"] == args.streams for r in wide))


def catchup_isolation(build, tmp, args):
    """One webhook fanned out to 1,000 live subscribers, before and while ten
    Subscribe{from_start, inspection_id: "nope"} streams scan a 100,000-event log."""
    client_binary, stack, webhook, key_file = fanout_stack(build, tmp)
    clients = []

    def post(client):
        return post_fanout(client, 1)[0]

    try:
        stored = 0
        while stored < 100000:
            _, more = deliver_with_wrk(stack, 5)
            stored += more
        live = subprocess.Popen(
            [str(client_binary), f"--target={stack.grpc}", "--streams=1000",
             f"--webhook={webhook}", f"--key-file={key_file}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        clients.append(live)
        live.stdout.readline()  # "started N"
        wait_for(lambda: stack.metric("inspection_stream_subscribers",
                                      'rpc="Subscribe"') >= 1000,
                 120, "1,000 live Subscribe streams")
        post(live)  # warm-up: the first event on fresh streams is not a figure
        before = [post(live) for _ in range(5)]
        rss_before = proc_status(stack.pid, "VmRSS")
        peak = [rss_before]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], proc_status(stack.pid, "VmRSS"))
                stop.wait(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.monotonic()
        catchups = subprocess.Popen(
            [str(client_binary), f"--target={stack.grpc}", "--streams=10", "--from-start",
             "--inspection-id=nope"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        clients.append(catchups)
        catchups.stdout.readline()  # "started 10"
        wait_for(lambda: stack.metric("inspection_stream_catching_up_subscribers") >= 10,
                 60, "ten catching-up streams")
        during = [post(live) for _ in range(5)]
        posted_within = time.monotonic() - started
        # The posts overlapped the catch-ups only if these are still scanning now.
        still_catching_up = stack.metric("inspection_stream_catching_up_subscribers")
        stop.set()
        sampler.join()
    finally:
        for client in clients:
            try:
                client.communicate("quit\n", timeout=60)
            except Exception:  # noqa: BLE001 - a client that hangs is killed
                client.kill()
        stack.stop()
    p99 = median_p99_ms
    growth_mib = (peak[0] - rss_before) / 1024
    print(f"  {stored:.0f} events stored; 1,000 live subscribers; median p99 of five posts: "
          f"{p99(before):.1f} ms alone, {p99(during):.1f} ms during ten empty catch-ups "
          f"(posted within {posted_within:.1f} s of their start; {still_catching_up:.0f} still "
          f"catching up after the posts); gateway RSS "
          f"{rss_before / 1024:.0f} MiB, peak +{growth_mib:.1f} MiB")
    received = all(r["received"] == 1000 for r in before + during)
    record("catchup_isolation", "fan-out p99 to 1,000 subscribers during ten empty catch-ups "
           "over 100,000 events", p99(during), "ms", "<= 20 ms", p99(during) <= 20 and received)
    ratio = p99(during) / max(p99(before), 0.001)
    record("catchup_isolation", "that p99 over the same without the catch-ups", ratio, "x",
           "<= 1.5, catch-ups still running", ratio <= 1.5 and received and still_catching_up >= 10)
    record("catchup_isolation", "gateway RSS growth during the catch-ups", growth_mib, "MiB",
           "<= 64 MiB", growth_mib <= 64)


def measure_tls(build, tmp, args, client):
    """10,000 uncached calls to the HTTPS vendor (4 connections x 8 streams) with
    upstream.http_client=`client`, then one call at a time through the gateway vs HTTPS (h2)
    straight to the terminator."""
    tmp = pathlib.Path(tmp) / client  # each gateway (and TLS terminator) its own files
    tmp.mkdir(exist_ok=True)
    stack = Stack(build, tmp, gateway_flags=["--cache-enabled=false",
                                             f"--upstream-http-client={client}"],
                  front=tls_front)
    calls = 10000
    try:
        before = stack.front.stats()
        ok_before = stack.grpc_ok("GetWebhookConfig")
        load = h2load(f"http://{stack.grpc}/inspection.v1.EventConfigService/GetWebhookConfig",
                      tmp, clients=4, streams=8, requests=calls)
        ok = stack.grpc_ok("GetWebhookConfig") - ok_before
        after = stack.front.stats()
        n = args.seconds * 500
        direct = h2load(f"{stack.upstream_url}/apiV1/eventmanager/configwebhook", tmp,
                        clients=1, streams=1, requests=n, grpc=False,
                        headers=[f"x-api-key: {API_KEY}"], h2=True)
        via = h2load(f"http://{stack.grpc}/inspection.v1.EventConfigService/GetWebhookConfig",
                     tmp, clients=1, streams=1, requests=n)
        end = stack.front.stats()
    finally:
        stack.stop()
    connections = after["connections"] - before["connections"]
    handshakes = after["handshakes"] - before["handshakes"]
    print(f"  upstream.http_client={client}: {ok:.0f}/{calls} calls OK at {load['rps']:.0f}/s "
          f"over HTTPS: the gateway opened {connections} connection(s) to the vendor and made "
          f"{handshakes} TLS handshake(s); then one at a time, "
          f"{end['handshakes'] - after['handshakes']} more handshake(s) for {n} calls "
          f"(h2load's own direct connection included); direct HTTPS p50 {direct['p'][50]} us, "
          f"p99 {direct['p'][99]} us; through the gateway p50 {via['p'][50]} us, p99 "
          f"{via['p'][99]} us", flush=True)
    return {"ok": ok, "calls": calls, "connections": connections, "handshakes": handshakes,
            "per_10k": handshakes * 10000 / max(ok, 1),
            "added50": via["p"][50] - direct["p"][50], "added99": via["p"][99] - direct["p"][99]}


def tls_hop(build, tmp, args):
    """The vendor over HTTPS (HAProxy terminating TLS in front of the sandbox, ALPN h2 and
    http/1.1): with curl, the client auto picks for an https:// vendor (HTTP/2, one
    connection), and with beast (HTTP/1.1, a pool of connections)."""
    for client, suffix in (("curl", ""), ("beast", " (beast)")):
        tls = measure_tls(build, tmp, args, client)
        record("tls_hop", "TLS handshakes per 10,000 calls" + suffix, tls["per_10k"], "",
               "<= connections opened (<= 32)",
               tls["ok"] == tls["calls"] and tls["handshakes"] <= tls["connections"] and
               tls["connections"] <= 32)
        record("tls_hop", "added latency p50 with TLS" + suffix, tls["added50"], "us",
               "reported", True)
        record("tls_hop", "added latency p99 with TLS" + suffix, tls["added99"], "us",
               "reported", True)


# --- scale-out: several gateways on one Redis event log ------------------------------------

SCALEOUT_REPLICAS = 3


def start_sandbox(build, workdir, started):
    """inspection-sandbox (the vendor; a webhook delivery never calls it) on a free port,
    added to `started`: its base URL."""
    keys = pathlib.Path(workdir) / "api-keys"
    keys.write_text(API_KEY + "\n")
    sandbox = started.add(Process([str(build / "inspection-sandbox"), "--listen=127.0.0.1:0",
                                   f"--api-keys-file={keys}", "--webhook-delay-ms=0"]))
    return sandbox.wait_json_line("inspection-sandbox serving")["base_url"]


def start_gateways(build, workdir, sandbox_url, event_log, flags, started, count=SCALEOUT_REPLICAS):
    """`count` gateway replicas sharing `event_log`, each with its own ports and files,
    added to `started`."""
    return [started.add(Gateway(build, pathlib.Path(workdir) / f"gateway-{i}", sandbox_url,
                                f"{sandbox_url}/webapp", flags, event_log))
            for i in range(count)]


def deliveries(gateway):
    """The gateway's webhook deliveries by outcome: (answered 200, i.e. accepted or
    duplicate; duplicates; anything else)."""
    name = "inspection_webhook_deliveries_total"
    ok = gateway.metric(name, 'outcome="accepted"') + gateway.metric(name, 'outcome="duplicate"')
    return ok, gateway.metric(name, 'outcome="duplicate"'), gateway.metric(name) - ok


def deliver_to_all(gateways, seconds, connections):
    """One wrk per gateway at once (1 thread, `connections` connections each, unique bodies:
    bench/webhook.lua with a run name of its own): their results."""
    results, errors = [None] * len(gateways), []

    def run(i):
        try:
            results[i] = wrk(gateways[i].webhook_url, threads=1, connections=connections,
                             duration=f"{seconds}s", script=str(ROOT / "bench" / "webhook.lua"),
                             script_args=[f"{time.time_ns()}-{i}"],
                             headers=[f"x-api-key: {WEBHOOK_KEY}",
                                      "Content-Type: application/json"])
        except Exception as error:  # noqa: BLE001 - raised below, on the calling thread
            errors.append(error)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(gateways))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def measure_scaleout_deliveries(build, workdir, sandbox_url, primary, replica, event_log, stream,
                                flags, args):
    """Three gateways on `event_log` (the stream `stream` of `primary`), started for this
    measurement and stopped after it: wrk against the three webhook ports at once for
    --seconds, then XLEN of the stream against the 200 answers."""
    connections = 16
    started = Processes()
    try:
        gateways = start_gateways(build, workdir, sandbox_url, event_log, flags, started)
        before = [deliveries(g) for g in gateways]
        waits_before = primary.command_calls("WAIT")
        connections_before = primary.info_stat("total_connections_received")
        pids = {"primary": primary.pid, "replica": replica.pid,
                **{f"gateway-{i}": g.pid for i, g in enumerate(gateways)}}
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        busy_before = machine_busy_seconds()
        # wrk's CPU: it has exited (and been waited for) when deliver_to_all returns.
        wrk_before = children_cpu_seconds()
        results = deliver_to_all(gateways, args.seconds, connections)
        busy = (machine_busy_seconds() - busy_before) / args.seconds
        wrk_cpu = (children_cpu_seconds() - wrk_before) / args.seconds
        cpu = {name: (cpu_seconds(pids[name]) - used) / args.seconds
               for name, used in cpu_before.items()}

        def counts():
            now = [deliveries(g) for g in gateways]
            return [sum(n[k] - b[k] for n, b in zip(now, before)) for k in range(3)]

        # The deliveries wrk left in flight when it stopped are still being stored and
        # answered (to a closed connection): wait until the gateways' counts and the stream
        # agree, and report them as they are when they do not within 10 s.
        def settled():
            answered, _, other = counts()
            return int(primary.command("XLEN", stream)) == answered + other
        try:
            wait_for(settled, 10, "XLEN to equal the gateways' deliveries")
        except AssertionError:
            pass
        answered, duplicates, other = counts()
        xlen = int(primary.command("XLEN", stream))
        waits = primary.command_calls("WAIT") - waits_before
        # redis-cli's own connections (XLEN, INFO) included: a handful.
        opened = primary.info_stat("total_connections_received") - connections_before
    finally:
        started.stop()
    wrk_ok = sum(r["requests"] - r["non2xx"] for r in results)
    non2xx = sum(r["non2xx"] for r in results)
    in_flight = connections * len(results)
    p99 = max(r["p"].get(99, 0) for r in results) / 1e3
    acked = int(next(f for f in flags if f.startswith("--redis-min-replicas-acked=")).split("=")[1])
    return {"rate": answered / args.seconds, "answered": answered, "duplicates": duplicates,
            "other": other, "xlen": xlen, "wrk_ok": wrk_ok, "non2xx": non2xx,
            "in_flight": in_flight, "p99_ms": p99,
            "socket_errors": [r["socket_errors"] for r in results if r["socket_errors"]],
            "per_gateway": [r["requests"] for r in results],
            "waits": waits, "opened": opened, "busy": busy, "primary_cpu": cpu["primary"],
            "replica_cpu": cpu["replica"], "wrk_cpu": wrk_cpu,
            "gateways_cpu": sum(v for name, v in cpu.items() if name.startswith("gateway")),
            # Stored means answered: every 200 is in the stream and nothing else is (no
            # 503 not_replicated, whose event the stream holds without a 200); wrk saw all
            # of them but the ones in flight when it stopped.
            "durable": (xlen == answered and other == 0 and duplicates == 0 and non2xx == 0
                        and wrk_ok <= xlen <= wrk_ok + in_flight
                        # The setting took: each append (and each read that returned
                        # events) WAITs for the replica with 1, nothing WAITs with 0.
                        and (waits >= answered if acked > 0 else waits == 0))}


def report_scaleout_deliveries(label, m):
    errors = f", socket errors {m['socket_errors']}" if m["socket_errors"] else ""
    rest = m["busy"] - m["gateways_cpu"] - m["primary_cpu"] - m["replica_cpu"] - m["wrk_cpu"]
    print(f"  {label}: {m['answered']:.0f} deliveries answered 200 by the gateways "
          f"({m['rate']:.0f}/s; per wrk {m['per_gateway']}), {m['duplicates']:.0f} duplicates, "
          f"{m['other']:.0f} other outcomes; wrk: {m['wrk_ok']} 200s, {m['non2xx']} not 2xx, "
          f"slowest wrk p99 {m['p99_ms']:.2f} ms{errors}; XLEN {m['xlen']}; {m['waits']} "
          f"WAITs on the primary, {m['opened']} connections opened to it; CPU in cores: the "
          f"machine {m['busy']:.2f} of {os.cpu_count()} busy, the three gateways "
          f"{m['gateways_cpu']:.2f}, Redis primary {m['primary_cpu']:.2f}, replica "
          f"{m['replica_cpu']:.2f}, the three wrk {m['wrk_cpu']:.2f}; the rest, "
          f"{rest:.2f}, is this script and whatever else runs on the machine", flush=True)


def scaleout_deliveries(build, tmp, args):
    """Durable webhook deliveries/s through three gateway replicas sharing one Redis event
    log (a primary and one replica), redis.min_replicas_acked 0 and 1, then through three
    sentinels (redis+sentinel://, min_replicas_acked 1); XLEN of the stream against the 200
    answers."""
    tmp = pathlib.Path(tmp)
    started = Processes()
    measured = {}
    try:
        sandbox_url = start_sandbox(build, tmp, started)
        primary = started.add(RedisServer(tmp, "redis-primary"))
        replica = started.add(RedisServer(tmp, "redis-replica", replica_of=primary))
        for acked in (0, 1):
            stream = f"bench:scaleout:acked{acked}"
            measured[acked] = measure_scaleout_deliveries(
                build, tmp / f"acked{acked}", sandbox_url, primary, replica,
                f"redis://127.0.0.1:{primary.port}/0?stream={stream}", stream,
                [f"--redis-min-replicas-acked={acked}"], args)
            report_scaleout_deliveries(f"redis.min_replicas_acked={acked}", measured[acked])
        sentinels = [started.add(RedisServer(tmp, f"sentinel-{i}", sentinel_of=primary))
                     for i in range(3)]
        stream = "bench:scaleout:sentinel"
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in sentinels)
        measured["sentinel"] = measure_scaleout_deliveries(
            build, tmp / "sentinel", sandbox_url, primary, replica,
            f"redis+sentinel://{hosts}/mymaster?stream={stream}", stream,
            ["--redis-min-replicas-acked=1"], args)
        report_scaleout_deliveries("redis+sentinel://, redis.min_replicas_acked=1",
                                   measured["sentinel"])
    finally:
        started.stop()
    for key, suffix, target in ((0, "redis.min_replicas_acked=0", None),
                                (1, "redis.min_replicas_acked=1", 3000),
                                ("sentinel", "through Sentinel, redis.min_replicas_acked=1",
                                 None)):
        m = measured[key]
        record("scaleout_deliveries", f"durable deliveries/s, 3 replicas, {suffix}", m["rate"],
               "/s", ">= 3000" if target else "reported",
               m["durable"] and (target is None or m["rate"] >= target))
        record("scaleout_deliveries", f"events in the stream (XLEN), {suffix}", m["xlen"], "",
               "= the 200 answers", m["durable"])
        record("scaleout_deliveries", f"200 answers (the gateways' count), {suffix}",
               m["answered"], "", "= XLEN; wrk's 200s <= XLEN <= wrk's 200s + connections",
               m["durable"])


def fanout_from(client_binary, receiver, subscribed, per_client, posts):
    """Webhooks posted to the gateway `receiver`, each fanned out to `per_client` Subscribe
    streams on every gateway of `subscribed` (one bench_fanout_client each): the posts'
    result lines (post_fanout), each with "client", the index in `subscribed` of the client
    that posted it. bench_fanout_client times its own streams from its own POST, so the
    posts alternate between the clients: every post reaches all the streams, and is
    measured on the `per_client` streams of the client that posted it."""
    clients = []
    total = per_client * len(subscribed)
    distinct = list({id(g): g for g in subscribed}.values())

    def sent():
        return sum(g.metric("grpc_server_msg_sent_total", 'grpc_method="Subscribe"')
                   for g in distinct)

    def post(i):
        before = sent()
        result = post_fanout(clients[i % len(clients)], 1)[0]
        result["client"] = i % len(clients)
        # The other clients' streams got the event too, and their next post must not
        # count it: wait until every stream has been written the event, and a moment for
        # the clients to read it.
        wait_for(lambda: sent() - before >= total, 60, "every stream to get the event")
        time.sleep(0.05)
        return result

    try:
        for gateway in subscribed:
            clients.append(subprocess.Popen(
                [str(client_binary), f"--target={gateway.grpc}", f"--streams={per_client}",
                 f"--webhook={receiver.webhook_url}", f"--key-file={receiver.webhook_key_file}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            clients[-1].stdout.readline()  # "started N"
        for gateway in distinct:
            expected = per_client * sum(g is gateway for g in subscribed)
            wait_for(lambda g=gateway, n=expected: g.metric(
                "inspection_stream_subscribers", 'rpc="Subscribe"') >= n,
                120, f"{expected} open Subscribe streams on a replica")
        for i in range(len(clients)):
            post(i)  # warm-up: the first event on fresh streams is not a figure
        results = [post(i) for i in range(posts)]
        for client in clients:
            client.communicate("quit\n", timeout=60)
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
                client.wait(timeout=30)
    return results


def scaleout_fanout(build, tmp, args):
    """Webhooks posted to gateway replica A, fanned out to 1,000 Subscribe streams on
    replicas B and C (500 each) through the shared Redis event log (a primary and one
    replica, redis.min_replicas_acked 1): delay from the POST to each stream's receipt;
    then the same with the 1,000 streams on A itself."""
    tmp = pathlib.Path(tmp)
    client_binary = build / "bench_fanout_client"
    if not os.access(client_binary, os.X_OK):
        raise RuntimeError(f"{client_binary} missing: cmake --build {build} "
                           "--target bench_fanout_client")
    per_client = 500
    posts = max(2, args.fanout_posts)
    started = Processes()
    try:
        sandbox_url = start_sandbox(build, tmp, started)
        primary = started.add(RedisServer(tmp, "redis-primary"))
        started.add(RedisServer(tmp, "redis-replica", replica_of=primary))
        a, b, c = start_gateways(build, tmp, sandbox_url,
                                 f"redis://127.0.0.1:{primary.port}/0?stream=bench:fanout",
                                 ["--redis-min-replicas-acked=1"], started)
        across = fanout_from(client_binary, a, [b, c], per_client, posts)
        local = fanout_from(client_binary, a, [a, a], per_client, posts)
    finally:
        started.stop()

    def summary(results):
        return {"p50": sorted(r["p50_us"] for r in results)[len(results) // 2] / 1e3,
                "p99": median_p99_ms(results), "worst": max(r["p99_us"] for r in results) / 1e3,
                "post": sorted(r["post_us"] for r in results)[len(results) // 2] / 1e3,
                "received": all(r["received"] == per_client for r in results)}
    far, near = summary(across), summary(local)
    by_replica = [median_p99_ms([r for r in across if r["client"] == i]) for i in (0, 1)]
    print(f"  {posts} posts to replica A, each fanned out to {2 * per_client} streams on B and "
          f"C, measured on the posting client's {per_client}: median p50 {far['p50']:.1f} ms, "
          f"median p99 {far['p99']:.1f} ms (B {by_replica[0]:.1f}, C {by_replica[1]:.1f}), "
          f"worst p99 {far['worst']:.1f} ms (from the POST to each stream's receipt; the POST "
          f"itself, i.e. the durable append with WAIT 1, took {far['post']:.1f} ms)")
    print(f"  the same with the {2 * per_client} streams on A itself: median p50 "
          f"{near['p50']:.1f} ms, median p99 {near['p99']:.1f} ms, worst p99 "
          f"{near['worst']:.1f} ms (POST {near['post']:.1f} ms)", flush=True)
    record("scaleout_fanout", "fan-out p50 from a POST to replica A to 1,000 streams on B and C "
           "(median of the posts)", far["p50"], "ms", "reported", far["received"])
    record("scaleout_fanout", "fan-out p99 from a POST to replica A to 1,000 streams on B and C "
           "(median of the posts)", far["p99"], "ms", "<= 25 ms",
           far["p99"] <= 25 and far["received"])
    record("scaleout_fanout", "the same p99 with the 1,000 streams on A itself", near["p99"],
           "ms", "reported", near["received"])


SCENARIOS = {"hop_latency": hop_latency, "hop_floor": hop_floor,
             "cached_throughput": cached_throughput, "inflight_2000": inflight_2000,
             "webhook_throughput": webhook_throughput,
             "webhook_slowloris": webhook_slowloris, "streams": streams,
             "catchup_isolation": catchup_isolation, "tls_hop": tls_hop,
             "scaleout_deliveries": scaleout_deliveries, "scaleout_fanout": scaleout_fanout}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    parser.add_argument("--seconds", type=int, default=10, help="length of timed runs; the "
                        "one-call-at-a-time scenarios make 1,000 calls per second of it")
    parser.add_argument("--hop-rounds", type=int, default=10,
                        help="rounds the hop figures' three legs are interleaved in")
    parser.add_argument("--ratio-rounds", type=int, default=5,
                        help="rounds the cached and bare legs of cached_throughput alternate "
                        "in (--seconds is split among them, at least 2 s each)")
    parser.add_argument("--streams", type=int, default=10000)
    parser.add_argument("--fanout-posts", type=int, default=20,
                        help="webhooks fanned out per figure (the median of their p99s)")
    parser.add_argument("--json", help="where the results go, as JSON (default: "
                        "BUILD_DIR/bench-results.json); the figures already there are printed "
                        "next to the new ones, and kept as bench-results.previous.json")
    args = parser.parse_args()
    build = pathlib.Path(args.build_dir).resolve()
    results_file = pathlib.Path(args.json) if args.json else build / "bench-results.json"
    if results_file.exists():
        try:
            previous = json.loads(results_file.read_text())
            for r in previous.get("results", []):
                PREVIOUS[(r["scenario"], r["figure"])] = r
            print(f"bench: previous run {previous.get('date', '?')} at "
                  f"{previous.get('commit', '?')[:12]}", flush=True)
        except (ValueError, KeyError, AttributeError):
            print(f"bench: {results_file} is not a results file; not compared", flush=True)
    for binary in ("inspection-gateway", "inspection-sandbox"):
        if not os.access(build / binary, os.X_OK):
            raise SystemExit(f"bench: {build / binary} missing (make build)")
    print(f"bench: {os.cpu_count()} cores, build {build}", flush=True)
    for name in args.only or list(SCENARIOS):
        print(f"{name}: {SCENARIOS[name].__doc__.splitlines()[0]}", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
            try:
                SCENARIOS[name](build, tmp, args)
            except Exception as error:  # a scenario that cannot run is a miss, not a crash
                record(name, "scenario ran", 0, "", "runs", False)
                print(f"  error: {error}", flush=True)
    if results_file.exists():
        # A partial run (--only) keeps the figures it did not measure from the last run.
        results_file.replace(results_file.with_name(results_file.stem + ".previous.json"))
    # A scenario that ran replaces all of its old figures: a "scenario ran" miss from a run
    # that crashed must not outlive the run that measured it.
    ran = {r["scenario"] for r in RESULTS}
    kept = [r for (scenario, _), r in PREVIOUS.items() if scenario not in ran]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for r in RESULTS:
        r.update(date=now, commit=commit)
    results_file.write_text(json.dumps({
        "date": now, "commit": commit, "cores": os.cpu_count(), "build": str(build),
        "results": kept + RESULTS}, indent=2) + "\n")
    print(f"bench: results in {results_file}", flush=True)
    missed = [r for r in RESULTS if not r["ok"]]
    print(f"bench: {len(RESULTS) - len(missed)} of {len(RESULTS)} targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
