#!/usr/bin/env python3
"""End-to-end: every metric the Grafana dashboard and the Prometheus rules query exists.

Starts the real gateway (`--sandbox`, every port 0, event log in a temp dir), makes a few
RPCs (gRPC health, AssessQuality against the embedded sandbox, an invalid GetTokenStatus),
posts one webhook with a wrong key, reads /metrics from the admin port, and checks that:
- every metric name in deploy/grafana/*.json and deploy/prometheus/prometheusrule.yaml (PromQL
  expressions and label_values() queries) is a family of the exposition (# TYPE lines;
  histogram _bucket/_sum/_count and counter _total spellings handled). Recording-rule names
  are excluded, and must be defined in prometheusrule.yaml when the dashboard uses them; `up` is
  Prometheus' own;
- every label a selector matches on exists on that family, and every literal label value
  (=, !=, and =~/!~ alternations of plain words) is one the gateway exposes: a typo there
  matches nothing and the alert never fires;
- the RPCs made are counted (grpc_server_handled_total).

Run by ctest as e2e.dashboard_and_alerts_use_real_metrics:
  deploy_metrics_test.py --gateway BIN --deploy-dir DIR
"""

import argparse
import json
import os
import pathlib
import re
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import Process, wait_for  # noqa: E402

ARGS = None

# Series Prometheus makes itself for every target: not the gateway's to expose.
PROMETHEUS_SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                        "scrape_samples_post_metric_relabeling", "scrape_series_added"}
# Target labels Prometheus adds at scrape time.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "service", "endpoint"}

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                   "unless", "bool", "offset", "inf", "nan", "atan2", "start", "end"}


# ---------------------------------------------------------------------------------------------
# PromQL: the metric names and label matchers of an expression (enough of the grammar for
# names and selectors; functions and aggregations are recognised by the '(' after them).
# ---------------------------------------------------------------------------------------------

IDENT = r"[A-Za-z_:][A-Za-z0-9_:]*"


# A dashboard variable as a label matcher's value ({account=~"$account"}): any value the
# user picks; the label itself must still exist.
GRAFANA_VARIABLE = "__grafana_variable__"


def strip_grafana(expr):
    """Grafana's $__rate_interval, ${var}, $var become a literal so the rest parses; a
    variable that is a whole matcher value becomes GRAFANA_VARIABLE."""
    expr = re.sub(r'"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)"', f'"{GRAFANA_VARIABLE}"', expr)
    expr = re.sub(r"\$\{[^}]*\}", "5m", expr)
    return re.sub(r"\$[A-Za-z_][A-Za-z0-9_]*", "5m", expr)


def selectors(expr):
    """[(metric name, [(label, op, value), ...])] of every vector selector in `expr`."""
    expr = strip_grafana(expr)
    found = []
    # Remove grouping clauses first: their label lists are not metric names.
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    i = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            end = expr.index(c, i + 1)
            while expr[end - 1] == "\\":
                end = expr.index(c, end + 1)
            i = end + 1
            continue
        if c == "[":
            i = expr.index("]", i) + 1
            continue
        if c == "{":  # a selector with no name: {__name__="..."} is not used here
            end = expr.index("}", i)
            found.append((None, matchers(expr[i + 1:end])))
            i = end + 1
            continue
        match = re.match(IDENT, expr[i:])
        if match and (i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] in "_.")):
            name = match.group(0)
            j = i + len(name)
            rest = expr[j:].lstrip()
            if rest.startswith("("):  # a function or an aggregation
                i = j
                continue
            if name.lower() in PROMQL_KEYWORDS or re.fullmatch(r"\d+[smhdwy]", name):
                i = j
                continue
            labels = []
            if rest.startswith("{"):
                start = expr.index("{", j)
                end = expr.index("}", start)
                labels = matchers(expr[start + 1:end])
                j = end + 1
            found.append((name, labels))
            i = j
            continue
        if c.isdigit():  # numbers and durations
            number = re.match(r"[0-9.eE+-]+[smhdwy]?", expr[i:])
            i += len(number.group(0)) if number else 1
            continue
        i += 1
    return found


def matchers(text):
    return [(m.group(1), m.group(2), m.group(3))
            for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*\"((?:[^\"\\]|\\.)*)\"",
                                 text)]


def label_values_metric(query):
    """label_values(metric{...}, label) -> the selector part; label_values(label) -> None."""
    match = re.match(r"\s*label_values\s*\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$", query)
    return match.group(1) if match else None


def dashboard_expressions(path):
    """Every PromQL expression of a dashboard: panel targets (nested rows too) and query
    variables."""
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                exprs.append(node["expr"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        metric = label_values_metric(query or "")
        if metric:
            exprs.append(metric)
        elif query and not query.strip().startswith(("label_names", "metrics(")):
            exprs.append(query.replace("query_result(", "(", 1))
    return exprs


def rule_expressions(path):
    with open(path, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    exprs, records, alerts = [], set(), []
    for group in rules["spec"]["groups"]:
        for rule in group["rules"]:
            exprs.append(rule["expr"])
            if "record" in rule:
                records.add(rule["record"])
            else:
                alerts.append(rule["alert"])
    return exprs, records, alerts


# ---------------------------------------------------------------------------------------------
# The exposition.
# ---------------------------------------------------------------------------------------------

def parse_exposition(text):
    """({family: type}, {sample name: {label: set(values)}})."""
    families = {}
    samples = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            families[name] = kind.strip()
        elif line and not line.startswith("#"):
            match = re.match(r"(" + IDENT + r")(\{(.*)\})?\s", line)
            if not match:
                continue
            labels = samples.setdefault(match.group(1), {})
            for label, _, value in matchers(match.group(3) or ""):
                labels.setdefault(label, set()).add(value)
    return families, samples


def family_of(name, families):
    """The family exposing sample name `name`, or None."""
    if name in families:
        return name
    for suffix, kinds in (("_bucket", {"histogram"}), ("_sum", {"histogram", "summary"}),
                          ("_count", {"histogram", "summary"}), ("_total", {"counter"})):
        if name.endswith(suffix) and families.get(name[: -len(suffix)]) in kinds:
            return name[: -len(suffix)]
    if families.get(name + "_total") == "counter":  # OpenMetrics-style family name
        return name + "_total"
    return None


def plain_alternatives(value):
    """The words of `a|b|c` when the regex is nothing but literal words, else None."""
    if re.fullmatch(r"[A-Za-z0-9_.+]+(\|[A-Za-z0-9_.+]+)*", value):
        return [v.replace("\\", "") for v in value.split("|")]
    return None


class DeployMetrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.gateway = Process([ARGS.gateway, "--sandbox", "--grpc-addr=127.0.0.1:0",
                               "--webhook-addr=127.0.0.1:0", "--admin-addr=127.0.0.1:0",
                               f"--event-log=sqlite:{cls.tmp.name}/events.db"])
        ready = cls.gateway.wait_json_line("inspection-gateway serving")
        cls.grpc_target = "127.0.0.1:%d" % ready["grpc_port"]
        cls.admin = "http://127.0.0.1:%d" % ready["admin_port"]
        cls.webhook = "http://127.0.0.1:%d/webhooks/v2" % ready["webhook_port"]
        cls.make_traffic()
        cls.families, cls.samples = parse_exposition(cls.fetch_metrics())

        deploy = pathlib.Path(ARGS.deploy_dir)
        cls.rule_exprs, cls.records, cls.alerts = rule_expressions(
            deploy / "prometheus" / "prometheusrule.yaml")
        cls.dashboards = sorted((deploy / "grafana").glob("*.json"))
        cls.dashboard_exprs = {p.name: dashboard_expressions(p) for p in cls.dashboards}

    @classmethod
    def tearDownClass(cls):
        code = cls.gateway.stop()
        cls.tmp.cleanup()
        assert code == 0, f"gateway exited {code}"

    @classmethod
    def make_traffic(cls):
        import grpc
        with grpc.insecure_channel(cls.grpc_target) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            # Raw bytes: no generated stubs needed. An empty HealthCheckRequest is b"".
            health = channel.unary_unary("/grpc.health.v1.Health/Check")
            health(b"", timeout=10)
            # AssessQualityRequest{url = 1}: a real call to the embedded sandbox.
            url = b"https://images.example.com/deploy-metrics/front.jpg"
            assess = channel.unary_unary("/inspection.v1.ImageService/AssessQuality")
            assess(b"\x0a" + bytes([len(url)]) + url, timeout=30)
            # GetTokenStatusRequest without uid: INVALID_ARGUMENT before any vendor call.
            status = channel.unary_unary("/inspection.v1.TokenService/GetTokenStatus")
            with cls.assert_raises_rpc(grpc.StatusCode.INVALID_ARGUMENT):
                status(b"", timeout=10)
        # One webhook with a wrong key (the receiver answers 401).
        request = urllib.request.Request(cls.webhook, data=b'{"event":"newInspection"}',
                                         method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "x-api-key": "not-the-key"})
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except urllib.error.HTTPError as error:
            assert error.code == 401, f"webhook with a wrong key answered {error.code}"

    class assert_raises_rpc:  # noqa: N801 - used as a context manager
        def __init__(self, code):
            self.code = code

        def __enter__(self):
            return self

        def __exit__(self, kind, error, tb):
            import grpc
            assert kind is not None, f"expected {self.code}, the call succeeded"
            assert issubclass(kind, grpc.RpcError) and error.code() == self.code, \
                f"expected {self.code}, got {error!r}"
            return True

    @classmethod
    def fetch_metrics(cls):
        def get():
            try:
                with urllib.request.urlopen(cls.admin + "/metrics", timeout=10) as response:
                    return response.read().decode()
            except OSError:
                return None
        return wait_for(get, 30, "/metrics on the admin port")

    # ---- helpers ----

    def check_expressions(self, source, exprs, records):
        missing, bad_labels, unknown_records = [], [], []
        for expr in exprs:
            for name, labels in selectors(expr):
                if name is None:
                    continue
                if name in records or ":" in name:
                    if name not in records:
                        unknown_records.append(name)
                    continue
                if name in PROMETHEUS_SYNTHETIC:
                    continue
                family = family_of(name, self.families)
                if family is None:
                    missing.append(name)
                    continue
                exposed = self.samples.get(name, {})
                for label, op, value in labels:
                    if label in TARGET_LABELS or label == "__name__":
                        continue
                    if label not in exposed:
                        bad_labels.append(f"{name}{{{label}}}: no such label (has: "
                                          f"{', '.join(sorted(exposed)) or 'none'})")
                        continue
                    if value == GRAFANA_VARIABLE:
                        continue
                    words = [value] if op in ("=", "!=") else plain_alternatives(value)
                    for word in words or []:
                        if word not in exposed[label]:
                            bad_labels.append(f"{name}{{{label}{op}\"{value}\"}}: value "
                                              f"\"{word}\" is never exposed (values: "
                                              f"{', '.join(sorted(exposed[label]))})")
        report = []
        if missing:
            report.append(f"{source}: metric families missing from /metrics:\n  " +
                          "\n  ".join(sorted(set(missing))))
        if bad_labels:
            report.append(f"{source}: label matchers that match nothing:\n  " +
                          "\n  ".join(sorted(set(bad_labels))))
        if unknown_records:
            report.append(f"{source}: recording rules not defined in prometheusrule.yaml:\n  " +
                          "\n  ".join(sorted(set(unknown_records))))
        return report

    # ---- tests ----

    def test_rpcs_are_counted(self):
        handled = self.samples.get("grpc_server_handled_total", {})
        self.assertIn("AssessQuality", handled.get("grpc_method", set()))
        text = self.fetch_metrics()
        self.assertRegex(text, r'grpc_server_handled_total\{[^}]*grpc_code="InvalidArgument"'
                               r'[^}]*grpc_method="GetTokenStatus"[^}]*\} [1-9]')

    def test_rules_use_real_metrics(self):
        self.assertTrue(self.alerts, "prometheusrule.yaml has no alert")
        report = self.check_expressions("deploy/prometheus/prometheusrule.yaml", self.rule_exprs,
                                        self.records)
        if report:
            self.fail("\n" + "\n".join(report))

    def test_dashboards_use_real_metrics(self):
        self.assertTrue(self.dashboards, "no dashboard in deploy/grafana")
        report = []
        for name, exprs in self.dashboard_exprs.items():
            self.assertTrue(exprs, f"{name}: no PromQL expression found")
            report += self.check_expressions(f"deploy/grafana/{name}", exprs, self.records)
        if report:
            self.fail("\n" + "\n".join(report))

    def test_parser_sees_names_and_matchers(self):
        # Guards the extraction itself: a parser that found nothing would pass everything.
        found = selectors('sum by (route, le) (rate(x_bucket{route=~"a|b", le!="1"}[$__rate_interval]))'
                          ' / on (route) group_left y_total offset 5m and z > bool 1')
        self.assertEqual([n for n, _ in found], ["x_bucket", "y_total", "z"])
        self.assertEqual(found[0][1], [("route", "=~", "a|b"), ("le", "!=", "1")])
        names = {n for e in self.rule_exprs for n, _ in selectors(e)}
        self.assertIn("inspection_upstream_circuit_state", names)
        self.assertIn("grpc_server_handled_total", names)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--deploy-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
