#!/usr/bin/env bash
# Checks deploy/ without a cluster or a Docker engine (ctest deploy.manifests_rules_dockerfile):
#   1. yamllint over deploy/ (repo-root .yamllint)
#   2. hadolint deploy/Dockerfile (deploy/.hadolint.yaml)
#   3. the Dockerfile's packages: build stage installs scripts/apt-packages.txt, runtime stage
#      provides every library `ldd` shows for the real binaries
#      (deploy/check_dockerfile_packages.py)
#   4. kustomize build of each overlay (sandbox, production, redis-sentinel), each validated
#      with kubernetes-validate --strict against the oldest and newest Kubernetes versions we
#      target, then checked against the real gateway binary (deploy/check_manifests.py:
#      config accepted, ports, probes, shutdown budget, secrets, env order, event log); no
#      Secret with values outside the sandbox overlay
#   5. the rules (deploy/prometheus/prometheusrule.yaml, one source for kustomize and the
#      chart): its SLO block is what scripts/slo-rules.py generates from
#      deploy/prometheus/slos.yaml; `kustomize build deploy/prometheus`, the plain rule file
#      extracted with scripts/prometheus-rules.py (also with --selector) through promtool
#      check rules and promtool test rules (every deploy/prometheus/*_test.yaml); every alert
#      has a firing and a not-firing unit test (an SLO alert a firing one per severity, page
#      and ticket), a runbook_url to its deploy/README.md section and no hard-coded job
#   6. the Grafana dashboards parse, use the datasource variable, have unique panel ids
#
# Tools: .tools/bin (scripts/install-deploy-tools.sh: kustomize, kubernetes-validate,
# yamllint, hadolint), .tools/venv/bin/python (PyYAML via yamllint), promtool (apt
# `prometheus`). Binaries: GATEWAY_BINARY and SANDBOX_BINARY, default build/inspection-*.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
tools="$root/.tools"
export PATH="$tools/bin:$PATH"
python="$tools/venv/bin/python"
gateway="${GATEWAY_BINARY:-$root/build/inspection-gateway}"
sandbox="${SANDBOX_BINARY:-$root/build/inspection-sandbox}"
# Oldest and newest Kubernetes minor versions the manifests must validate against.
k8s_versions=(1.30.0 1.34.0)

cd "$root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "check-deploy: FAIL: $*" >&2
  exit 1
}
step_start=0
step() {
  step_start=$(date +%s%N)
  echo "check-deploy: $*"
}
done_step() {
  local ms=$((($(date +%s%N) - step_start) / 1000000))
  echo "check-deploy:   ok (${ms} ms)"
}

for tool in kustomize kubernetes-validate yamllint hadolint promtool; do
  command -v "$tool" >/dev/null || fail "$tool not found (run scripts/install-deploy-tools.sh; promtool: apt package prometheus)"
done
[ -x "$python" ] || fail "$python not found (run scripts/install-deps.sh)"
"$python" -c 'import yaml' 2>/dev/null || fail "PyYAML missing from $python (run scripts/install-deploy-tools.sh)"
for binary in "$gateway" "$sandbox"; do
  [ -x "$binary" ] || fail "$binary not found: build first, or set GATEWAY_BINARY/SANDBOX_BINARY"
done
[ -f .yamllint ] || fail ".yamllint missing at the repository root"

# 1 ---------------------------------------------------------------------------------------------
step "yamllint deploy/"
yamllint --strict deploy/
done_step

# 2 ---------------------------------------------------------------------------------------------
step "hadolint deploy/Dockerfile"
hadolint --config deploy/.hadolint.yaml deploy/Dockerfile
done_step

# 3 ---------------------------------------------------------------------------------------------
step "Dockerfile packages vs scripts/apt-packages.txt, BUILD.md and ldd of the binaries"
"$python" deploy/check_dockerfile_packages.py --dockerfile deploy/Dockerfile \
  --apt-packages scripts/apt-packages.txt --build-md BUILD.md "$gateway" "$sandbox"
done_step

# 4 ---------------------------------------------------------------------------------------------
for overlay in sandbox production redis-sentinel; do
  step "kustomize build overlays/$overlay | kubernetes-validate --strict (${k8s_versions[*]}) | check_manifests"
  rendered="$work/$overlay.yaml"
  kustomize build "deploy/kustomize/overlays/$overlay" >"$rendered"
  for version in "${k8s_versions[@]}"; do
    kubernetes-validate --strict --quiet --kubernetes-version "$version" "$rendered" ||
      fail "overlays/$overlay does not validate against Kubernetes $version"
  done
  "$python" deploy/check_manifests.py --gateway "$gateway" --overlay "$overlay" "$rendered"
  if [ "$overlay" != sandbox ] && grep -q '^kind: Secret$' "$rendered"; then
    fail "overlays/$overlay renders a Secret: production secrets are created out of band"
  fi
  done_step
done

# 5 ---------------------------------------------------------------------------------------------
step "prometheusrule.yaml: SLO rules as generated from slos.yaml, kustomize build, promtool check/test on the extracted rules; every alert tested, with a runbook_url to deploy/README.md"
"$python" scripts/slo-rules.py --check
kustomize build deploy/prometheus >"$work/prometheusrule.rendered.yaml"
"$python" - deploy/prometheus/prometheusrule.yaml "$work/prometheusrule.rendered.yaml" <<'PY'
import sys
import yaml

source = yaml.safe_load(open(sys.argv[1]))
rendered = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
if len(rendered) != 1 or rendered[0].get("kind") != "PrometheusRule":
    sys.exit("kustomize build deploy/prometheus: expected one PrometheusRule")
def squeeze(value):
    """kustomize re-folds block scalars (it may add blank lines to folded PromQL): compare
    strings with their whitespace runs squeezed, which PromQL and the annotations ignore."""
    if isinstance(value, dict):
        return {k: squeeze(v) for k, v in value.items()}
    if isinstance(value, list):
        return [squeeze(v) for v in value]
    return " ".join(value.split()) if isinstance(value, str) else value
if squeeze(rendered[0]["spec"]) != squeeze(source["spec"]):
    sys.exit("kustomize build deploy/prometheus: the rules differ from prometheusrule.yaml")
for key in ("apiVersion", "kind", "metadata", "spec"):
    if key not in rendered[0]:
        sys.exit(f"kustomize build deploy/prometheus: PrometheusRule without {key}")
PY
rules_dir="$work/rules"
mkdir -p "$rules_dir"
"$python" scripts/prometheus-rules.py deploy/prometheus/prometheusrule.yaml >"$rules_dir/rules.yaml"
cp deploy/prometheus/*_test.yaml "$rules_dir/"
promtool check rules "$rules_dir/rules.yaml" >/dev/null
promtool test rules "$rules_dir"/*_test.yaml
# The selector parameter gives valid rules too.
"$python" scripts/prometheus-rules.py --selector 'job="gw", namespace="inspections"' \
  deploy/prometheus/prometheusrule.yaml >"$rules_dir/selected.yaml"
promtool check rules "$rules_dir/selected.yaml" >/dev/null
grep -q 'job="gw", namespace="inspections"' "$rules_dir/selected.yaml" || fail "--selector was not applied"
"$python" - "$rules_dir/rules.yaml" deploy/README.md deploy/prometheus/*_test.yaml <<'PY'
import re
import sys
import yaml

rules = yaml.safe_load(open(sys.argv[1]))
readme = open(sys.argv[2]).read()
tests = [(path.rsplit("/", 1)[-1], yaml.safe_load(open(path))) for path in sys.argv[3:]]
# GitHub heading anchors: lower case, punctuation dropped, spaces as '-'.
anchors = {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#+ (.+)$", readme, re.M)}
base = "https://github.com/inspection-gateway/inspection-gateway/blob/main/deploy/README.md#"
alerts = {}
for group in rules["groups"]:
    for rule in group["rules"]:
        if "alert" in rule:
            problems = []
            if not rule.get("for"):
                problems.append("no `for:`")
            # SLO alerts (scripts/slo-rules.py) page or open a ticket; the others are
            # critical, warning or info.
            severities = ("page", "ticket") if "slo" in rule.get("labels", {}) else (
                "critical", "warning", "info")
            severity = rule.get("labels", {}).get("severity")
            if severity not in severities:
                problems.append(f"severity {severity!r} is not one of {'|'.join(severities)}")
            for key in ("summary", "description", "runbook_url"):
                if not rule.get("annotations", {}).get(key):
                    problems.append(f"no {key} annotation")
            url = rule.get("annotations", {}).get("runbook_url", "")
            if not url.startswith(base) or url[len(base):] not in anchors:
                problems.append(f"runbook_url {url} is not a section of deploy/README.md")
            if url[len(base):] != rule["alert"].lower():
                problems.append(f"runbook_url {url} is not the alert's own section")
            if "job=\"" in rule["expr"]:
                problems.append("a hard-coded job selector (use the job!=\"\" parameter)")
            if problems:
                sys.exit(f"alert {rule['alert']}: " + ", ".join(problems))
            # An SLO alert is two rules of one name, told apart by severity: each must fire.
            counts = alerts.setdefault(rule["alert"], {"firing": set(), "quiet": 0, "rules": set()})
            counts["rules"].add(severity)
for file, test_file in tests:
    for test in test_file["tests"]:
        for case in test.get("alert_rule_test", []):
            name = case["alertname"]
            if name not in alerts:
                sys.exit(f"{file} tests unknown alert {name}")
            if case.get("exp_alerts"):
                alerts[name]["firing"].update(a.get("exp_labels", {}).get("severity")
                                              for a in case["exp_alerts"])
            else:
                alerts[name]["quiet"] += 1
missing = [f"{name} (firing as: {', '.join(sorted(filter(None, c['firing']))) or 'none'}; "
           f"rules: {', '.join(sorted(c['rules']))}; not firing: {c['quiet']})"
           for name, c in alerts.items() if not c["rules"] <= c["firing"] or not c["quiet"]]
if missing:
    sys.exit("alerts without a firing test (for each severity) and a not-firing test: " +
             "; ".join(missing))
rules_count = sum(len(c["rules"]) for c in alerts.values())
print(f"check-deploy:   {len(alerts)} alerts ({rules_count} rules), each tested firing (each "
      f"severity) and not firing, each with its runbook section")
PY
done_step

# 6 ---------------------------------------------------------------------------------------------
step "Grafana dashboards parse"
"$python" - deploy/grafana/*.json <<'PY'
import json
import sys

for path in sys.argv[1:]:
    with open(path) as f:
        dashboard = json.load(f)
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        sys.exit(f"{path}: no `datasource` variable of type datasource (prometheus)")
    ids, exprs = set(), 0

    def walk(panels):
        global exprs
        for panel in panels:
            if panel["id"] in ids:
                sys.exit(f"{path}: duplicate panel id {panel['id']}")
            ids.add(panel["id"])
            if panel.get("type") == "row":
                walk(panel.get("panels", []))
                continue
            if panel.get("datasource", {}).get("uid") != "${datasource}":
                sys.exit(f"{path}: panel {panel['title']!r} does not use ${{datasource}}")
            targets = panel.get("targets", [])
            if not targets or not all(t.get("expr") for t in targets):
                sys.exit(f"{path}: panel {panel['title']!r} has a target without expr")
            exprs += len(targets)
    walk(dashboard.get("panels", []))
    print(f"check-deploy:   {path}: {len(ids)} panels, {exprs} queries")
PY
done_step

echo "check-deploy: ok"
