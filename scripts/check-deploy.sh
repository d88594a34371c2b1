#!/usr/bin/env bash
# Checks deploy/ without a cluster or a Docker engine (ctest deploy.manifests_rules_dockerfile):
#   1. yamllint over deploy/ (repo-root .yamllint)
#   2. hadolint deploy/Dockerfile (deploy/.hadolint.yaml)
#   3. the Dockerfile's packages: build stage installs scripts/apt-packages.txt, runtime stage
#      provides every library `ldd` shows for the real binaries
#      (deploy/check_dockerfile_packages.py)
#   4. kustomize build of both overlays, each validated with kubernetes-validate --strict
#      against the oldest and newest Kubernetes versions we target, then checked against the
#      real gateway binary (deploy/check_manifests.py: config accepted, ports, probes,
#      shutdown budget, secrets, event log); no Secret with values outside the sandbox overlay
#   5. promtool check rules + promtool test rules, and every alert has a firing and a
#      not-firing unit test
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
for overlay in sandbox production; do
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
step "promtool check rules / test rules; every alert has a firing and a quiet test"
promtool check rules deploy/prometheus/rules.yaml >/dev/null
promtool test rules deploy/prometheus/rules_test.yaml
"$python" - deploy/prometheus/rules.yaml deploy/prometheus/rules_test.yaml <<'PY'
import sys
import yaml

rules = yaml.safe_load(open(sys.argv[1]))
tests = yaml.safe_load(open(sys.argv[2]))
alerts = {}
for group in rules["groups"]:
    for rule in group["rules"]:
        if "alert" in rule:
            problems = []
            if not rule.get("for"):
                problems.append("no `for:`")
            if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                problems.append("no severity label (critical|warning|info)")
            for key in ("summary", "description", "runbook"):
                if not rule.get("annotations", {}).get(key):
                    problems.append(f"no {key} annotation")
            if problems:
                sys.exit(f"alert {rule['alert']}: " + ", ".join(problems))
            alerts[rule["alert"]] = {"firing": 0, "quiet": 0}
for test in tests["tests"]:
    for case in test.get("alert_rule_test", []):
        name = case["alertname"]
        if name not in alerts:
            sys.exit(f"rules_test.yaml tests unknown alert {name}")
        alerts[name]["firing" if case.get("exp_alerts") else "quiet"] += 1
missing = [f"{name} (firing: {c['firing']}, not firing: {c['quiet']})"
           for name, c in alerts.items() if not c["firing"] or not c["quiet"]]
if missing:
    sys.exit("alerts without both a firing and a not-firing test: " + "; ".join(missing))
print(f"check-deploy:   {len(alerts)} alerts, each tested firing and not firing")
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
