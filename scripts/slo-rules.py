#!/usr/bin/env python3
"""Generates the SLO recording rules and multi-window, multi-burn-rate alerts of
deploy/prometheus/slos.yaml into deploy/prometheus/prometheusrule.yaml.

  python3 scripts/slo-rules.py           # rewrite the generated block of prometheusrule.yaml
  python3 scripts/slo-rules.py --check   # fail (with a diff) if it is not what this writes
  python3 scripts/slo-rules.py --print   # print the block, change nothing

slos.yaml is in Sloth's prometheus/v1 spec format (https://sloth.dev/specs/prometheus/v1/);
this script reads the subset it needs and refuses every other key, so nothing in the spec
is silently ignored. The rules land at the end of prometheusrule.yaml, from the line
"# BEGIN slo-rules.py" on; that file is the one source kustomize, the Helm chart
(files/prometheusrule.yaml links to it) and scripts/prometheus-rules.py read, so they are
scoped (the job!="" selector) and extracted like every hand-written rule.

For each SLO, one rule group inspection-gateway.slo.<name>, every series labelled
slo="<name>" and aggregated as the queries aggregate (by job):
  inspection:slo_errors:rate5m, inspection:slo_requests:rate5m   the SLI's events, 5m rates
  inspection:slo_error_ratio:rate<W>     bad / all events over W = 5m, 30m, 1h, 2h, 6h, 1d,
                                         3d (from the counters), 30d (the 5m rates summed
                                         over 30 days: reading 30 days of raw counters on
                                         every evaluation would be too costly)
  inspection:slo_burn_rate:rate<W>       error ratio / error budget (1 - objective): 1 spends
                                         the budget in exactly 30 days
  inspection:slo_error_budget_remaining:rate30d   1 - burn rate over 30 days (below 0: spent)
  the alert (alerting.name), twice: page_alert's labels (severity: page) when the burn rate
  is over 14.4 on 1h and 5m, or 6 on 6h and 30m; ticket_alert's (severity: ticket) when it
  is over 3 on 1d and 2h, or 1 on 3d and 6h. The short window makes an alert stop soon
  after the burn does. {{ $value }} in the annotations is the long window's burn rate.

Needs PyYAML (.tools/venv/bin/python has it)."""

import argparse
import difflib
import pathlib
import re
import sys
import textwrap

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC = ROOT / "deploy/prometheus/slos.yaml"
TARGET = ROOT / "deploy/prometheus/prometheusrule.yaml"
# The generated block runs from this line to the end of prometheusrule.yaml.
BEGIN = "    # BEGIN slo-rules.py"

PERIOD = "30d"
PERIOD_HOURS = 30 * 24
# Windows computed from the counters; the period's ratio comes from the 5m rates.
WINDOWS = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"]
# (burn rate, long window, short window), and `for:`: the SRE workbook's multi-window,
# multi-burn-rate alerts for a 30-day period.
POLICY = {
    "page": {"conditions": [(14.4, "1h", "5m"), (6, "6h", "30m")], "for": "2m"},
    "ticket": {"conditions": [(3, "1d", "2h"), (1, "3d", "6h")], "for": "15m"},
}
HOURS = {"5m": 5 / 60, "30m": 0.5, "1h": 1, "2h": 2, "6h": 6, "1d": 24, "3d": 72}
WINDOW_WORDS = {"5m": "5 min", "30m": "30 min", "1h": "1 h", "2h": "2 h", "6h": "6 h",
                "1d": "1 d", "3d": "3 d"}

# The keys of Sloth's prometheus/v1 spec this script understands.
SPEC_KEYS = {"version", "service", "labels", "slos"}
SLO_KEYS = {"name", "objective", "description", "labels", "sli", "alerting"}
ALERTING_KEYS = {"name", "labels", "annotations", "page_alert", "ticket_alert"}
ALERT_KEYS = {"labels", "annotations"}
WINDOW_VAR = re.compile(r"\{\{\s*\.window\s*\}\}")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
ALERT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")

WIDTH = 100  # annotation prose is wrapped to this (yamllint allows 120)


def die(message):
    sys.exit(f"slo-rules: {message}")


def only(mapping, allowed, where):
    if not isinstance(mapping, dict):
        die(f"{where}: expected a mapping")
    unknown = set(mapping) - allowed
    if unknown:
        die(f"{where}: unsupported key(s) {', '.join(sorted(unknown))} (this script reads "
            f"{', '.join(sorted(allowed))})")


def load_spec(path):
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    only(spec, SPEC_KEYS, str(path))
    if spec.get("version") != "prometheus/v1":
        die(f"{path}: version must be prometheus/v1 (Sloth's spec format)")
    if not spec.get("service"):
        die(f"{path}: no service")
    slos = spec.get("slos") or die(f"{path}: no slos")
    names = set()
    for slo in slos:
        where = f"{path}: slo {slo.get('name')!r}"
        only(slo, SLO_KEYS, where)
        if not NAME.match(str(slo.get("name", ""))) or slo["name"] in names:
            die(f"{where}: name must be unique, lower case, digits and '-'")
        names.add(slo["name"])
        objective = slo.get("objective")
        if not isinstance(objective, (int, float)) or not 0 < objective < 100:
            die(f"{where}: objective must be a percentage between 0 and 100")
        only(slo.get("sli"), {"events"}, f"{where} sli (only events SLIs)")
        events = slo["sli"]["events"]
        only(events, {"error_query", "total_query"}, f"{where} sli.events")
        for key in ("error_query", "total_query"):
            query = events.get(key) or die(f"{where}: no sli.events.{key}")
            if not WINDOW_VAR.search(query):
                die(f"{where}: sli.events.{key} has no {{{{.window}}}}")
            if 'job!=""' not in query:
                die(f'{where}: sli.events.{key} has no job!="" selector to scope it by')
        alerting = slo.get("alerting") or die(f"{where}: no alerting")
        only(alerting, ALERTING_KEYS, f"{where} alerting")
        if not ALERT_NAME.match(str(alerting.get("name", ""))):
            die(f"{where}: alerting.name must be an alert name (letters and digits)")
        for key in ("summary", "description", "runbook_url"):
            if not (alerting.get("annotations") or {}).get(key):
                die(f"{where}: alerting.annotations.{key} is required")
        for kind in POLICY:
            alert = alerting.get(f"{kind}_alert") or die(f"{where}: no alerting.{kind}_alert")
            only(alert, ALERT_KEYS, f"{where} alerting.{kind}_alert")
    return spec


# --- PromQL and YAML text ------------------------------------------------------------------

def number(value):
    """0.0010000000000000009 -> 0.001."""
    text = f"{value:.10f}".rstrip("0").rstrip(".")
    return text or "0"


def query(text, window):
    return WINDOW_VAR.sub(window, text.strip())


def indent(text, spaces):
    return "\n".join(" " * spaces + line if line else line for line in text.split("\n"))


def ratio(errors, total):
    return f"(\n{indent(errors, 2)}\n)\n/\n(\n{indent(total, 2)}\n)"


PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/#-]*$")


def scalar(value):
    """A YAML scalar on one line: plain when that is safe, else double-quoted."""
    value = str(value)
    if PLAIN.match(value) and value not in ("true", "false", "null", "yes", "no", "on", "off"):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def folded(key, text, spaces, wrap=False):
    """key: >- and the text below it. Prose is wrapped (folding joins the lines with a
    space); PromQL keeps its lines (the newlines are whitespace to PromQL)."""
    if wrap:
        # Never break inside a template action ({{ $value | humanize }}).
        text = re.sub(r"\{\{.*?\}\}", lambda m: m.group(0).replace(" ", "\0"),
                      " ".join(text.split()))
        lines = [line.replace("\0", " ") for line in textwrap.wrap(text, WIDTH - spaces - 2)]
    else:
        lines = text.split("\n")
    body = "\n".join(" " * (spaces + 2) + line.rstrip() for line in lines)
    return f"{' ' * spaces}{key}: >-\n{body}"


def mapping(key, values, spaces):
    lines = [f"{' ' * spaces}{key}:"]
    lines += [f"{' ' * (spaces + 2)}{k}: {scalar(v)}" for k, v in values.items()]
    return "\n".join(lines)


def record(name, expr, labels):
    return "\n".join([f"        - record: {name}",
                      mapping("labels", labels, 10),
                      folded("expr", expr, 10)])


# --- the rules -----------------------------------------------------------------------------

def rules_of(spec, slo):
    name = slo["name"]
    budget = number(1 - slo["objective"] / 100)
    events = slo["sli"]["events"]
    sel = f'{{slo="{name}"}}'
    labels = {**(spec.get("labels") or {}), **(slo.get("labels") or {}), "slo": name}
    out = [f"    - name: inspection-gateway.slo.{name}", "      rules:"]

    def add(name_, expr):
        out.append(record(name_, expr, labels))

    comment = (f"{' '.join(slo['description'].split())} Error budget: {budget} of the events "
               f"in {PERIOD.replace('d', ' days')}.")
    out += ["        # " + line for line in textwrap.wrap(comment, WIDTH - 10)]
    add("inspection:slo_errors:rate5m", query(events["error_query"], "5m"))
    add("inspection:slo_requests:rate5m", query(events["total_query"], "5m"))
    add("inspection:slo_error_ratio:rate5m",
        f"inspection:slo_errors:rate5m{sel}\n/\ninspection:slo_requests:rate5m{sel}")
    for window in WINDOWS[1:]:
        add(f"inspection:slo_error_ratio:rate{window}",
            ratio(query(events["error_query"], window), query(events["total_query"], window)))
    add(f"inspection:slo_error_ratio:rate{PERIOD}",
        f"sum_over_time(inspection:slo_errors:rate5m{sel}[{PERIOD}])\n/\n"
        f"sum_over_time(inspection:slo_requests:rate5m{sel}[{PERIOD}])")
    for window in WINDOWS + [PERIOD]:
        add(f"inspection:slo_burn_rate:rate{window}",
            f"inspection:slo_error_ratio:rate{window}{sel} / {budget}")
    add(f"inspection:slo_error_budget_remaining:rate{PERIOD}",
        f"1 - inspection:slo_burn_rate:rate{PERIOD}{sel}")

    alerting = slo["alerting"]
    for kind, policy in POLICY.items():
        alert = alerting[f"{kind}_alert"]
        pairs = [f"(\n  inspection:slo_burn_rate:rate{long}{sel} > {number(factor)}\n"
                 f"  and inspection:slo_burn_rate:rate{short}{sel} > {number(factor)}\n)"
                 for factor, long, short in policy["conditions"]]
        alert_labels = {**labels, **(alerting.get("labels") or {}), **(alert.get("labels") or {})}
        annotations = {**(alerting.get("annotations") or {}), **(alert.get("annotations") or {})}
        when = " or ".join(
            f"{number(factor)}x over {WINDOW_WORDS[long]} and {WINDOW_WORDS[short]} "
            f"({number(round(factor * HOURS[long] / PERIOD_HOURS * 100, 1))}% of the budget spent)"
            for factor, long, short in policy["conditions"])
        fastest = policy["conditions"][0][0]
        annotations["description"] = (
            f"{annotations['description']} {kind.capitalize()}: fires at {when}; at "
            f"{number(fastest)}x the {PERIOD.replace('d', '-day')} budget is gone in "
            f"{number(round(PERIOD_HOURS / fastest / 24, 1))} days.")
        block = [f"        - alert: {alerting['name']}",
                 folded("expr", "\nor\n".join(pairs), 10),
                 f"          for: {policy['for']}",
                 mapping("labels", alert_labels, 10),
                 "          annotations:"]
        for key, value in annotations.items():
            if key == "runbook_url" or len(str(value)) < 60:
                block.append(f"            {key}: {scalar(value)}")
            else:
                block.append(folded(key, value, 12, wrap=True))
        out.append("\n".join(block))
    return out


def generate(spec_path=SPEC):
    spec = load_spec(spec_path)
    lines = [BEGIN + ": from here to the end, generated from slos.yaml (Sloth's",
             "    # prometheus/v1 format) by scripts/slo-rules.py. Edit slos.yaml and run the",
             "    # script; scripts/check-deploy.sh fails when this is not the script's output."]
    for slo in spec["slos"]:
        lines += rules_of(spec, slo)
    block = "\n".join(lines) + "\n"
    check_block(block, spec)
    return block


def check_block(block, spec):
    """The text parses back as YAML: one group per SLO, every rule with an expr whose
    {{.window}} was filled in (promtool checks the PromQL)."""
    groups = yaml.safe_load("groups:\n" + block)["groups"]
    if [g["name"] for g in groups] != [f"inspection-gateway.slo.{s['name']}" for s in spec["slos"]]:
        die("internal: the generated groups do not parse back")
    for group in groups:
        for rule in group["rules"]:
            if not isinstance(rule.get("expr"), str) or "{{" in rule["expr"]:
                die(f"internal: bad expr in {rule}")


# --- the target file -----------------------------------------------------------------------

def splice(text, block):
    start = text.find("\n" + BEGIN)
    if start < 0:
        die(f"{TARGET}: no '{BEGIN.strip()}' line (after the last hand-written group)")
    return text[:start + 1] + block


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="fail if prometheusrule.yaml's block is not what the spec generates")
    mode.add_argument("--print", action="store_true", help="print the generated block only")
    args = parser.parse_args()
    block = generate()
    if args.print:
        sys.stdout.write(block)
        return
    current = TARGET.read_text(encoding="utf-8")
    wanted = splice(current, block)
    if args.check:
        if current != wanted:
            diff = difflib.unified_diff(current.splitlines(True), wanted.splitlines(True),
                                        str(TARGET.relative_to(ROOT)), "generated from slos.yaml")
            sys.stderr.write("".join(diff))
            die(f"{TARGET.relative_to(ROOT)} is not what {SPEC.relative_to(ROOT)} generates: "
                "run scripts/slo-rules.py and commit the result")
        print(f"slo-rules: {TARGET.relative_to(ROOT)} matches {SPEC.relative_to(ROOT)} "
              f"({len(load_spec(SPEC)['slos'])} SLOs)")
        return
    if current != wanted:
        TARGET.write_text(wanted, encoding="utf-8")
        print(f"slo-rules: wrote {TARGET.relative_to(ROOT)}")
    else:
        print(f"slo-rules: {TARGET.relative_to(ROOT)} already up to date")


if __name__ == "__main__":
    main()
