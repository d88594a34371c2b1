#!/usr/bin/env python3
"""Benchmarks of DESIGN.md §9 with public load generators (h2load, wrk, grpc.aio), against
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


def tool(name):
    for candidate in (ROOT / ".tools" / "bin" / name, shutil.which(name)):
        if candidate and os.access(str(candidate), os.X_OK):
            return str(candidate)
    raise SystemExit(f"bench: {name} not found (run scripts/install-bench-tools.sh)")


def record(scenario, figure, value, unit, target, ok):
    RESULTS.append({"scenario": scenario, "figure": figure, "value": value, "unit": unit,
                    "target": target, "ok": ok})
    verdict = "ok  " if ok else "MISS"
    print(f"  [{verdict}] {figure}: {value:.3f} {unit}   (target {target})", flush=True)


def proc_status(pid, field):
    """A field of /proc/PID/status as an integer (VmRSS in KiB, Threads)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class Stack:
    """inspection-sandbox + inspection-gateway as processes, on free ports."""

    def __init__(self, build, workdir, gateway_flags=(), sandbox_flags=(), faults=None):
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
        ready = self.sandbox.wait_json_line("inspection-sandbox serving")
        self.sandbox_url = ready["base_url"]
        key_file = self.workdir / "api-key"
        key_file.write_text(API_KEY + "\n")
        webhook_file = self.workdir / "webhook-key"
        webhook_file.write_text(WEBHOOK_KEY + "\n")
        # log.level=warn: one log line per RPC would cost the gateway (and this script)
        # more than the work measured. The ready line is info, so the ports are chosen
        # here and readiness is /readyz.
        ports = [free_loopback_port() for _ in range(3)]
        self.grpc = f"127.0.0.1:{ports[0]}"
        self.webhook_port, self.admin_port = ports[1], ports[2]
        self.gateway = Process([
            str(build / "inspection-gateway"), f"--upstream-url={self.sandbox_url}",
            f"--webapp-url={self.sandbox_url}/webapp", f"--api-key-file={key_file}",
            f"--webhook-key-file={webhook_file}", f"--grpc-addr={self.grpc}",
            f"--webhook-addr=127.0.0.1:{self.webhook_port}",
            f"--admin-addr=127.0.0.1:{self.admin_port}", "--log-level=warn",
            f"--event-log=sqlite:{self.workdir / 'events.db'}", *gateway_flags])
        self.pid = self.gateway.proc.pid

        def ready():
            if self.gateway.proc.poll() is not None:
                raise RuntimeError("the gateway exited:\n" + "\n".join(self.gateway.lines[-20:]))
            try:
                return http_get(f"http://127.0.0.1:{self.admin_port}/readyz", timeout=1)[0] == 200
            except OSError:
                return False
        wait_for(ready, 30, "the gateway's /readyz")

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
        self.gateway.stop()
        self.sandbox.stop()


GRPC_EMPTY_FRAME = b"\x00\x00\x00\x00\x00"  # uncompressed, 0-byte message: an empty request


def h2load(url, tmp, *, clients, streams, requests=None, duration=None, grpc=True,
           headers=()):
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
    else:
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
            "rps": rps, "statuses": statuses, "text": out.stdout}


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


# --- scenarios --------------------------------------------------------------------------

def hop_latency(build, tmp, args):
    """One connection, one call at a time: gateway -> sandbox vs REST straight to the
    sandbox, both driven by h2load. The cache is off so every call reaches the sandbox."""
    stack = Stack(build, tmp, gateway_flags=["--cache-enabled=false"])
    n = args.seconds * 1000
    try:
        direct = h2load(f"{stack.sandbox_url}/apiV1/eventmanager/configwebhook", tmp, clients=1,
                        streams=1, requests=n, grpc=False, headers=[f"x-api-key: {API_KEY}"])
        ok_before = stack.grpc_ok("GetWebhookConfig")
        via = h2load(f"http://{stack.grpc}/inspection.v1.EventConfigService/GetWebhookConfig",
                     tmp, clients=1, streams=1, requests=n)
        ok = stack.grpc_ok("GetWebhookConfig") - ok_before
        # The gateway's own view: handling time minus the vendor attempt, per call.
        handling = stack.metric("grpc_server_handling_seconds_sum",
                                'grpc_method="GetWebhookConfig"')
        upstream = stack.metric("inspection_upstream_request_duration_seconds_sum",
                                'route="get_webhook_config"')
        inside_us = (handling - upstream) / max(ok, 1) * 1e6
        attempt_us = upstream / max(ok, 1) * 1e6
        # For reading the figure: the bare gRPC round trip of the same server.
        bare = h2load(f"http://{stack.grpc}/grpc.health.v1.Health/Check", tmp, clients=1,
                      streams=1, requests=n)
    finally:
        stack.stop()
    print(f"  direct REST: p50 {direct['p'][50]} us, p99 {direct['p'][99]} us; through the "
          f"gateway: p50 {via['p'][50]} us, p99 {via['p'][99]} us; {ok:.0f}/{n} gRPC OK; "
          f"bare gRPC health check: p50 {bare['p'][50]} us, p99 {bare['p'][99]} us; "
          f"per call (means, the gateway's metrics): vendor attempt {attempt_us:.0f} us "
          f"(libcurl, sandbox included), the rest of the gateway {inside_us:.0f} us")
    added50 = via["p"][50] - direct["p"][50]
    added99 = via["p"][99] - direct["p"][99]
    record("hop_latency", "added latency p50", added50, "us", "<= 100 us",
           added50 <= 100 and ok == n)
    record("hop_latency", "added latency p99", added99, "us", "<= 300 us", added99 <= 300)


def cached_throughput(build, tmp, args):
    """Cached unary calls vs the same server's gRPC health check (the bare gRPC cost),
    same h2load load: 4 connections x 16 streams."""
    stack = Stack(build, tmp)
    try:
        common = dict(clients=4, streams=16, duration=args.seconds)
        bare = h2load(f"http://{stack.grpc}/grpc.health.v1.Health/Check", tmp, **common)
        ok_before = stack.grpc_ok("GetWebhookConfig")
        cached = h2load(f"http://{stack.grpc}/inspection.v1.EventConfigService/GetWebhookConfig",
                        tmp, **common)
        ok = stack.grpc_ok("GetWebhookConfig") - ok_before
        vendor_calls = stack.metric("inspection_upstream_requests_total")
    finally:
        stack.stop()
    print(f"  health check {bare['rps']:.0f}/s, cached GetWebhookConfig {cached['rps']:.0f}/s "
          f"({vendor_calls:.0f} vendor call(s), {ok:.0f} gRPC OK of {cached['count']})")
    ratio = cached["rps"] / bare["rps"]
    good = ratio >= 0.75 and ok >= cached["count"] and vendor_calls <= 2
    record("cached_throughput", "cached rps / bare gRPC rps", ratio, "", ">= 0.75", good)


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


def streams(build, tmp, args):
    """10,000 open Subscribe streams (RSS), then one webhook fanned out to 1,000
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

    try:
        rss_before = proc_status(stack.pid, "VmRSS")
        client = open_streams(args.streams)
        rss_after = proc_status(stack.pid, "VmRSS")
        client.communicate("quit\n", timeout=60)
        extra_mib = (rss_after - rss_before) / 1024
        print(f"  {args.streams} streams open: gateway RSS {rss_before / 1024:.0f} -> "
              f"{rss_after / 1024:.0f} MiB")
        record("streams", f"extra RSS for {args.streams} Subscribe streams", extra_mib, "MiB",
               "<= 200 MiB", extra_mib <= 200)
        wait_for(lambda: stack.metric("inspection_stream_subscribers", 'rpc="Subscribe"') == 0,
                 60, "the streams to close")

        client = open_streams(1000)
        out, _ = client.communicate("post\n", timeout=120)
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        stack.stop()
    print(f"  fan-out to {result['received']} subscribers: p50 {result['p50_us'] / 1e3:.1f} ms, "
          f"p99 {result['p99_us'] / 1e3:.1f} ms, min {result['min_us'] / 1e3:.1f} ms, "
          f"max {result['max_us'] / 1e3:.1f} ms (from the POST to each stream's receipt; the "
          f"POST itself, i.e. the durable append, took {result['post_us'] / 1e3:.1f} ms)")
    p99_ms = result["p99_us"] / 1e3
    record("streams", "fan-out p99 to 1,000 subscribers", p99_ms, "ms", "<= 20 ms",
           p99_ms <= 20 and result["received"] == 1000)


def catchup_isolation(build, tmp, args):
    """One webhook fanned out to 1,000 live subscribers, before and while ten
    Subscribe{from_start, inspection_id: "nope"} streams scan a 100,000-event log."""
    client_binary, stack, webhook, key_file = fanout_stack(build, tmp)
    clients = []

    def post(client):
        client.stdin.write("post\n")
        client.stdin.flush()
        return json.loads(client.stdout.readline())

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
    def p99(results):  # the median of the posts' p99s
        return sorted(r["p99_us"] for r in results)[len(results) // 2] / 1e3
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


SCENARIOS = {"hop_latency": hop_latency, "cached_throughput": cached_throughput,
             "inflight_2000": inflight_2000, "webhook_throughput": webhook_throughput,
             "webhook_slowloris": webhook_slowloris, "streams": streams,
             "catchup_isolation": catchup_isolation}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    parser.add_argument("--seconds", type=int, default=10, help="length of timed runs")
    parser.add_argument("--streams", type=int, default=10000)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    build = pathlib.Path(args.build_dir).resolve()
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
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(RESULTS, indent=2) + "\n")
    missed = [r for r in RESULTS if not r["ok"]]
    print(f"bench: {len(RESULTS) - len(missed)} of {len(RESULTS)} targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
