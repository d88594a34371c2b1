#!/usr/bin/env python3
"""End-to-end: a real Prometheus server scrapes a real inspection-gateway.

`inspection-gateway --sandbox` runs with every port chosen by the OS; a Prometheus
(the Debian package's /usr/bin/prometheus) scrapes its admin endpoint every second. The
test waits for the target to be up, checks that grpc_server_handled_total for one method
is 0, makes N GetWebhookConfig calls with a Python grpcio client, then queries Prometheus'
HTTP API until the series reads exactly N; `up` is 1 and the gateway's upstream series
(inspection_upstream_requests_total for the route the calls took) is above 0.

Run by ctest (see CMakeLists.txt) with the venv from scripts/install-deps.sh:
  prometheus_e2e_test.py --gateway BIN --proto-dir DIR [--prometheus BIN]
"""

import argparse
import os
import shutil
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import (Process, free_loopback_port, http_get, http_get_json,  # noqa: E402
                         load_stubs, wait_for)

ARGS = None
JOB = "inspection-gateway"
SERVICE = "inspection.v1.EventConfigService"
METHOD = "GetWebhookConfig"
ROUTE = "get_webhook_config"  # the route table's metric label for GetWebhookConfig
CALLS = 3

PROMETHEUS_YML = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: {job}
    metrics_path: /metrics
    static_configs:
      - targets: ["{target}"]
"""


def tail(process, lines=40):
    return "\n".join(process.lines[-lines:])


def start_prometheus(binary, workdir, admin_target, attempts=5):
    """Starts Prometheus scraping `admin_target`; returns (Process, base URL).

    Prometheus cannot listen on port 0 and tell us the port, so the port comes from
    free_loopback_port(): another process may take it between that check and
    Prometheus' bind. Prometheus then exits at once ("Unable to start web listener ...
    address already in use") and the start is retried on a new port."""
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write(PROMETHEUS_YML.format(job=JOB, target=admin_target))
    for attempt in range(attempts):
        port = free_loopback_port()
        # A fresh data directory per attempt: nothing left behind by a failed start.
        data = os.path.join(workdir, f"data-{attempt}")
        process = Process([binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
                           f"--web.listen-address=127.0.0.1:{port}",
                           "--storage.tsdb.retention.time=1h", "--query.max-concurrency=2",
                           "--log.format=json", "--log.level=info"],
                          env={"GOMAXPROCS": "1"})  # two cores shared with the build
        try:
            process.wait_json_line("Server is ready to receive web requests", timeout=60)
            return process, f"http://127.0.0.1:{port}"
        except AssertionError:
            code = process.stop()
            bind_failure = any("address already in use" in line for line in process.lines)
            if bind_failure and attempt + 1 < attempts:
                print(f"prometheus: port {port} taken before it could bind, retrying",
                      file=sys.stderr)
                continue
            raise AssertionError(f"prometheus did not start (exit {code}):\n{tail(process)}")
    raise AssertionError("unreachable")


class PrometheusScrapesTheGateway(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        # Class cleanups run even when setUpClass fails half-way, last registered first.
        cls.tmp = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.tmp.cleanup)
        cls.pb = load_stubs(ARGS.proto_dir, cls.tmp.name)
        # INSPECTION_API_KEY empty: --sandbox uses the sandbox's own dev key, never one
        # from the environment.
        cls.gateway = Process([ARGS.gateway, "--sandbox", "--grpc-addr=127.0.0.1:0",
                               "--webhook-addr=127.0.0.1:0", "--admin-addr=127.0.0.1:0",
                               f"--event-log=sqlite:{cls.tmp.name}/events.db"],
                              env={"INSPECTION_API_KEY": ""})
        cls.addClassCleanup(cls.stop_gateway)
        ready = cls.gateway.wait_json_line("inspection-gateway serving", timeout=60)
        cls.admin_target = "127.0.0.1:%d" % ready["admin_port"]
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % ready["grpc_port"])
        cls.addClassCleanup(cls.channel.close)
        grpc.channel_ready_future(cls.channel).result(timeout=30)
        cls.events = cls.pb["event_config_grpc"].EventConfigServiceStub(cls.channel)

        cls.prometheus, cls.prometheus_url = start_prometheus(ARGS.prometheus, cls.tmp.name,
                                                              cls.admin_target)
        cls.addClassCleanup(cls.prometheus.stop)

    @classmethod
    def stop_gateway(cls):
        code = cls.gateway.stop()
        assert code == 0, f"gateway exited {code}:\n{tail(cls.gateway)}"

    def run(self, result=None):
        # Prometheus' log tail with any failure of a test: the usual cause is in there.
        failures = len(result.failures) + len(result.errors) if result else 0
        outcome = super().run(result)
        if result and len(result.failures) + len(result.errors) > failures:
            print(f"\n--- prometheus log (last lines) ---\n{tail(self.prometheus)}\n"
                  f"--- gateway log (last lines) ---\n{tail(self.gateway)}", file=sys.stderr)
        return outcome

    # ---- helpers ----

    def query(self, promql):
        """An instant query: {frozenset(labels.items()): float value}."""
        answer = http_get_json(f"{self.prometheus_url}/api/v1/query?" +
                               urllib.parse.urlencode({"query": promql}))
        self.assertEqual(answer["status"], "success", answer)
        self.assertEqual(answer["data"]["resultType"], "vector", answer)
        return {frozenset(sample["metric"].items()): float(sample["value"][1])
                for sample in answer["data"]["result"]}

    def single_value(self, promql):
        """The value of the query's only series, or None while it has none."""
        values = self.query(promql)
        self.assertLessEqual(len(values), 1, f"{promql}: {values}")
        return next(iter(values.values()), None)

    def gateway_target(self):
        """The gateway's scrape target, or None until service discovery has produced it
        (Prometheus hands discovered targets to the scrape manager every 5 s)."""
        targets = http_get_json(f"{self.prometheus_url}/api/v1/targets?state=active")
        mine = [t for t in targets["data"]["activeTargets"] if t["labels"].get("job") == JOB]
        self.assertLessEqual(len(mine), 1, targets)
        return mine[0] if mine else None

    # ---- the test ----

    def test_prometheus_scrapes_and_queries_the_gateway(self):
        # The admin endpoint itself, as Prometheus and a kubelet see it.
        self.assertEqual(http_get(f"http://{self.admin_target}/healthz")[0], 200)
        self.assertEqual(http_get(f"http://{self.admin_target}/readyz")[0], 200)

        def target_up():
            target = self.gateway_target()
            return target if target and target["health"] == "up" else None
        target = wait_for(target_up, 60, "the gateway target to be up")
        self.assertEqual(target["scrapeUrl"], f"http://{self.admin_target}/metrics")
        self.assertEqual(target["lastError"], "")
        self.assertEqual(self.single_value(f'up{{job="{JOB}"}}'), 1.0)

        handled = (f'grpc_server_handled_total{{job="{JOB}",grpc_service="{SERVICE}",'
                   f'grpc_method="{METHOD}",grpc_code="OK"}}')
        # Every (method, code) series exists from the start, at 0 (nothing called it yet).
        self.assertEqual(self.single_value(handled), 0.0)

        request = self.pb["event_config"].GetWebhookConfigRequest()
        for _ in range(CALLS):
            config = self.events.GetWebhookConfig(request, timeout=10)
            # --sandbox points the sandbox's webhooks at the gateway's receiver.
            self.assertTrue(config.config.webhook_url_v2.startswith("http://127.0.0.1:"),
                            config.config.webhook_url_v2)

        def handled_is_n():
            value = self.single_value(handled)
            if value is not None and value > CALLS:
                raise AssertionError(f"{handled} = {value}, more than the {CALLS} calls made")
            return value == CALLS
        wait_for(handled_is_n, 60, f"{handled} == {CALLS} in Prometheus")
        self.assertEqual(self.single_value(handled), float(CALLS))
        # The series carries the gateway's labels plus the scrape's own.
        (labels,) = self.query(handled).keys()
        self.assertIn(("grpc_type", "unary"), labels)
        self.assertIn(("instance", self.admin_target), labels)

        # The upstream call behind it, by route and status class, scraped in the same pass
        # or an earlier one (a response cache may answer some calls: at least one went out).
        upstream = (f'inspection_upstream_requests_total{{job="{JOB}",account="default",'
                    f'route="{ROUTE}",status_class="2xx"}}')
        value = self.single_value(upstream)
        self.assertIsNotNone(value, upstream)
        self.assertGreater(value, 0, upstream)
        self.assertEqual(self.single_value(f'up{{job="{JOB}"}}'), 1.0)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--prometheus", default=shutil.which("prometheus"),
                        help="the Prometheus server binary (default: from PATH)")
    ARGS, rest = parser.parse_known_args()
    if not ARGS.prometheus:
        parser.error("no prometheus on PATH (apt package `prometheus`); pass --prometheus")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
