#!/usr/bin/env bash
# Checks helm/inspection-gateway without a cluster (ctest deploy.helm_chart):
#   - yamllint over the chart's values, Chart.yaml and ci/ files (.yamllint at the repo root);
#   - helm lint and helm lint --strict, with the default values and each ci/*.yaml;
#   - helm template with the default values and each ci/*.yaml, every rendered manifest
#     validated by kubernetes-validate --strict (offline schemas) for the oldest and newest
#     Kubernetes version the chart targets; the CRD kinds (ServiceMonitor, PrometheusRule,
#     cert-manager's Certificate), which have no schema there, get their required fields
#     checked here; the PrometheusRule renders every rule of its source (the SLO rules
#     generated into it included);
#     plus chart invariants (config file is JSON, non-root, read-only root fs, grace period);
#   - the rendered config files accepted by the real gateway (--print-config), when a built
#     binary is found (INSPECTION_GATEWAY_BIN or build/inspection-gateway);
#     with the gateway container's INSPECTION_* env (the event_log URL composed from a Secret,
#     stand-ins for Secrets you manage), and Redis Sentinel and its password as the values ask;
#   - negative checks that must fail: several replicas on SQLite, unknown values keys,
#     chart-managed config keys, a missing API key, a too short grace period, vendor
#     accounts that are misnamed, without a Secret or with webhooks but no default key,
#     Redis Sentinel on SQLite, without sentinels or primary name, beside a redis:// host,
#     with a bad address, or a sentinel password given twice or without sentinels;
#   - no secret value (the Redis and the sentinels' passwords included) in any rendered
#     manifest except base64 in a Secret.
# Tools: helm, kubernetes-validate, yamllint from scripts/install-deploy-tools.sh (.tools/bin);
# promtool (apt `prometheus`) for the rendered PrometheusRule.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
chart="$root/helm/inspection-gateway"
export PATH="$root/.tools/bin:$PATH"

# Oldest supported (README) and newest Kubernetes versions validated against.
KUBE_MIN=1.30.0
KUBE_MAX=1.37.0

fail() {
  echo "check-helm: FAIL: $*" >&2
  exit 1
}
ok() { echo "check-helm: ok: $*"; }

for tool in helm kubernetes-validate yamllint promtool; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found (run scripts/install-deploy-tools.sh; it installs into .tools/bin)"
done
# kubernetes-validate's own venv has PyYAML: use its python for the checks below.
python="$(dirname "$(readlink -f "$(command -v kubernetes-validate)")")/python"
[ -x "$python" ] || python=python3
"$python" -c 'import yaml' 2>/dev/null || fail "$python cannot import yaml"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
started=$SECONDS

# --- yamllint ----------------------------------------------------------------------------
yamllint -c "$root/.yamllint" --strict "$chart/Chart.yaml" "$chart/values.yaml" \
  "$chart/values-sandbox.yaml" "$chart"/ci/*.yaml ||
  fail "yamllint"
ok "yamllint (Chart.yaml, values.yaml, values-sandbox.yaml, ci/*.yaml; templates are checked by rendering)"

# --- helm lint ---------------------------------------------------------------------------
# helm lint renders leniently (a template's `fail` is not an error there): the defaults,
# which name no upstream, pass lint and fail `helm template` (the negative checks below).
helm lint "$chart" >"$tmp/lint.log" 2>&1 || {
  cat "$tmp/lint.log"
  fail "helm lint"
}
ok "helm lint (default values)"
for values in "$chart/values-sandbox.yaml" "$chart"/ci/*.yaml; do
  name="$(basename "$values")"
  helm lint --strict "$chart" -f "$values" >"$tmp/lint.log" 2>&1 || {
    cat "$tmp/lint.log"
    fail "helm lint --strict $name"
  }
  ok "helm lint --strict $name"
done

# --- helm template + schema validation ---------------------------------------------------
# check_render FILE VALUES: CRDs checked here, every other document written to FILE.k8s for
# kubernetes-validate; chart invariants; secrets from VALUES never in plain text.
cat >"$tmp/check_render.py" <<'PY'
import base64, json, math, sys, urllib.parse
import yaml

rendered, values_file, out = sys.argv[1], sys.argv[2], sys.argv[3]
rule_source = sys.argv[4]  # the chart's files/prometheusrule.yaml
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
values = yaml.safe_load(open(values_file)) if values_file != "-" else {}
values = values or {}
errors = []

# CRDs: no offline schema; check the fields the Prometheus Operator requires.
def need(doc, path):
    node = doc
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            errors.append(f"{doc['kind']}/{doc['metadata']['name']}: missing {path}")
            return None
        node = node[part]
    return node

crd_kinds = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "Certificate"}
prometheus_rules = []
rest = []
for doc in docs:
    for field in ("apiVersion", "kind", "metadata"):
        if field not in doc:
            errors.append(f"a document has no {field}: {str(doc)[:80]}")
    if doc.get("kind") == "ServiceMonitor":
        if doc["apiVersion"] != "monitoring.coreos.com/v1":
            errors.append("ServiceMonitor apiVersion must be monitoring.coreos.com/v1")
        need(doc, "spec.selector.matchLabels")
        for ep in need(doc, "spec.endpoints") or []:
            if "port" not in ep:
                errors.append("ServiceMonitor endpoint without port")
    elif doc.get("kind") == "PodMonitor":
        if doc["apiVersion"] != "monitoring.coreos.com/v1":
            errors.append("PodMonitor apiVersion must be monitoring.coreos.com/v1")
        need(doc, "spec.selector.matchLabels")
        for ep in need(doc, "spec.podMetricsEndpoints") or []:
            if "port" not in ep:
                errors.append("PodMonitor endpoint without port")
    elif doc.get("kind") == "PrometheusRule":
        if doc["apiVersion"] != "monitoring.coreos.com/v1":
            errors.append("PrometheusRule apiVersion must be monitoring.coreos.com/v1")
        prometheus_rules.extend(doc.get("spec", {}).get("groups", []))
        if 'job!=""' in yaml.safe_dump(doc):
            errors.append("PrometheusRule still has the source's job!=\"\" selector (not scoped to the release)")
        for group in doc.get("spec", {}).get("groups", []):
            if group.get("name", "").endswith(".additional"):
                continue  # prometheusRule.additionalRules: the user's own
            for rule in group.get("rules", []):
                if "alert" in rule and not rule.get("annotations", {}).get("runbook_url", "").startswith("http"):
                    errors.append(f"alert {rule['alert']} without a runbook_url")
        # Every rule of the source (the SLO rules generated into it by scripts/slo-rules.py
        # too) is rendered, each alert with its severity.
        source = yaml.safe_load(open(rule_source))
        def rule_keys(groups):
            return sorted((r.get("record") or r.get("alert"), (r.get("labels") or {}).get("slo", ""),
                           (r.get("labels") or {}).get("severity", ""))
                          for g in groups if not g.get("name", "").endswith(".additional")
                          for r in g.get("rules", []))
        want = rule_keys(source["spec"]["groups"])
        got = rule_keys(doc.get("spec", {}).get("groups", []))
        if "severity" not in ((values.get("prometheusRule") or {}).get("alertLabels") or {}) and got != want:
            errors.append(f"the PrometheusRule's rules are not the source's: missing "
                          f"{sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}")
        for group in need(doc, "spec.groups") or []:
            if not group.get("name"):
                errors.append("PrometheusRule group without name")
            for rule in group.get("rules", []):
                if not isinstance(rule.get("expr"), str) or not rule["expr"].strip():
                    errors.append(f"rule without expr: {rule}")
                if ("alert" in rule) == ("record" in rule):
                    errors.append(f"rule must have exactly one of alert/record: {rule}")
    elif doc.get("kind") == "Certificate":
        if doc["apiVersion"] != "cert-manager.io/v1":
            errors.append("Certificate apiVersion must be cert-manager.io/v1")
        need(doc, "spec.secretName")
        need(doc, "spec.issuerRef.name")
        if not need(doc, "spec.dnsNames"):
            errors.append("Certificate without dnsNames")
    else:
        rest.append(doc)
crds = sorted({d["kind"] for d in docs if d.get("kind") in crd_kinds})

# Invariants of the gateway Deployment and its config file.
config = None
for doc in docs:
    if doc.get("kind") == "ConfigMap" and "config.json" in doc.get("data", {}):
        try:
            config = json.loads(doc["data"]["config.json"])
        except ValueError as e:
            errors.append(f"config.json is not JSON: {e}")
for doc in docs:
    if doc.get("kind") != "Deployment":
        continue
    spec = doc["spec"]["template"]["spec"]
    pod_sc = spec.get("securityContext", {})
    for c in spec["containers"]:
        sc = c.get("securityContext", {})
        where = f"{doc['metadata']['name']}/{c['name']}"
        if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
            errors.append(f"{where}: not runAsNonRoot")
        if sc.get("readOnlyRootFilesystem") is not True:
            errors.append(f"{where}: root file system not read-only")
        if sc.get("allowPrivilegeEscalation") is not False:
            errors.append(f"{where}: allowPrivilegeEscalation not false")
        if "ALL" not in sc.get("capabilities", {}).get("drop", []):
            errors.append(f"{where}: capabilities not dropped")
        if "resources" not in c:
            errors.append(f"{where}: no resources")
        if c["name"] == "gateway":
            grace_ms = (config or {}).get("shutdown", {}).get("grace_ms", 10000)
            pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
            period = spec.get("terminationGracePeriodSeconds", 30)
            if period <= math.ceil(grace_ms / 1000) + pre_stop:
                errors.append(f"{where}: terminationGracePeriodSeconds {period} <= drain "
                              f"{math.ceil(grace_ms / 1000)} + preStop {pre_stop}")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if probe not in c:
                    errors.append(f"{where}: no {probe}")
if config is None:
    errors.append("no ConfigMap with config.json")
else:
    for key in ("api_key", "webhook_key", "webhook_previous_key"):
        if key in config:
            errors.append(f"config.json holds the secret {key}")
    if "@" in str(config.get("event_log", "")):
        errors.append("config.json event_log carries credentials")

# Secrets from the values file: never in plain text; base64 only inside a Secret.
secrets = []
s = values.get("secrets", {}) or {}
for key in ("apiKey", "webhookKey", "webhookPreviousKey"):
    if s.get(key):
        secrets.append((f"secrets.{key}", s[key]))
event_log_values = values.get("eventLog") or {}
redis_values = event_log_values.get("redis") or {}
sentinel_values = redis_values.get("sentinel") or {}
redis_password = redis_values.get("password")
if redis_password:
    secrets.append(("eventLog.redis.password", redis_password))
    urls = [base64.b64decode(d["data"]["url"]).decode() for d in docs
            if d.get("kind") == "Secret" and "url" in d.get("data", {})]
    if not urls:
        errors.append("no event-log Secret with the Redis URL")
    for url in urls:
        credentials = url.split("://", 1)[1].rsplit("@", 1)[0]
        if urllib.parse.unquote(credentials.split(":", 1)[1]) != redis_password:
            errors.append("the event-log Secret's URL does not decode to the Redis password")
sentinel_password = sentinel_values.get("password")
if sentinel_password:
    secrets.append(("eventLog.redis.sentinel.password", sentinel_password))
    stored = [base64.b64decode(d["data"]["sentinel-password"]).decode() for d in docs
              if d.get("kind") == "Secret" and "sentinel-password" in d.get("data", {})]
    if stored != [sentinel_password]:
        errors.append("no (single) Secret whose sentinel-password is eventLog.redis.sentinel.password")
text = open(rendered).read()
for name, secret in secrets:
    if secret in text:
        errors.append(f"{name} appears in plain text in the rendered manifests")
    encoded = base64.b64encode(secret.encode()).decode()
    for doc in docs:
        if doc.get("kind") != "Secret" and encoded in yaml.safe_dump(doc):
            errors.append(f"{name} appears base64-encoded in {doc['kind']}/{doc['metadata']['name']}")

# The gateway container's INSPECTION_* env as the kubelet sets it: the chart's own Secrets
# decoded, a URL-safe stand-in for a Secret you manage, $(VAR) expanded. A variable taken
# whole from a Secret you manage (eventLog.redis.existingSecret.urlKey) is left out.
gateway_env = {}
env_unknown = []
secret_data = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d.get("kind") == "Secret"}
for doc in docs:
    if doc.get("kind") != "Deployment":
        continue
    for c in doc["spec"]["template"]["spec"]["containers"]:
        if c["name"] != "gateway":
            continue
        for item in c.get("env", []) or []:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if "value" in item:
                value = str(item["value"])
                for name, known in gateway_env.items():
                    value = value.replace(f"$({name})", known)
            elif ref and ref["name"] in secret_data:
                value = base64.b64decode(secret_data[ref["name"]][ref["key"]]).decode()
            elif ref and not item["name"].startswith("INSPECTION_"):
                value = "stand-in-secret-value"
            else:
                env_unknown.append(item["name"])
                continue
            gateway_env[item["name"]] = value

# Redis Sentinel: the URL names the sentinels and the primary, and the sentinels' password
# is a file of a mounted Secret, named by redis.sentinel_password_file.
if sentinel_values.get("enabled") and not (redis_values.get("existingSecret") or {}).get("urlKey"):
    url = gateway_env.get("INSPECTION_EVENT_LOG", (config or {}).get("event_log", ""))
    if not url.startswith("redis+sentinel://"):
        errors.append(f"eventLog.redis.sentinel.enabled but the event log is not redis+sentinel:// ({url.split('@')[-1][:80]})")
    location = url.split("://", 1)[-1].rsplit("@", 1)[-1]
    hosts = [h if h.rsplit(":", 1)[-1].isdigit() and not h.endswith("]") else h + ":26379"
             for h in sentinel_values.get("hosts") or []]
    expected = ",".join(hosts) + "/" + sentinel_values.get("masterName", "mymaster") + "/"
    if not location.startswith(expected):
        errors.append(f"the event log URL does not start with the sentinels and primary {expected}: {location[:120]}")
# Several replicas on Redis share their idempotency keys there, unless config says otherwise.
if event_log_values.get("backend") == "redis" and "idempotency_store" not in (values.get("config") or {}):
    if (config or {}).get("idempotency_store") != "event_log":
        errors.append("eventLog.backend=redis but config idempotency_store is not event_log: "
                      "replicas would each keep their own idempotency keys")
sentinel_secret = None
existing = sentinel_values.get("existingSecret") or {}
if sentinel_values.get("enabled") and existing.get("name"):
    sentinel_secret = (existing["name"], existing.get("passwordKey"))
elif sentinel_values.get("enabled") and sentinel_password:
    sentinel_secret = (next((name for name, data in secret_data.items() if "sentinel-password" in data),
                            "(none)"), "sentinel-password")
password_file = ((config or {}).get("redis") or {}).get("sentinel_password_file")
gateway_deployment = next((d for d in docs if d.get("kind") == "Deployment" and any(
    c["name"] == "gateway" for c in d["spec"]["template"]["spec"]["containers"])), None)
if sentinel_secret and gateway_deployment is not None:
    pod = gateway_deployment["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "gateway")
    mounted = {}
    for m in container.get("volumeMounts", []):
        volume = next((v for v in pod.get("volumes", []) if v["name"] == m["name"]), {})
        if "secret" in volume:
            for i in volume["secret"].get("items", []):
                mounted[f"{m['mountPath']}/{i['path']}"] = (volume["secret"]["secretName"], i["key"])
    if not password_file:
        errors.append("a sentinel password is configured but config redis.sentinel_password_file is not set")
    elif mounted.get(password_file) != sentinel_secret:
        errors.append(f"redis.sentinel_password_file {password_file} is not key {sentinel_secret[1]} "
                      f"of Secret {sentinel_secret[0]} mounted in the gateway container")
elif password_file:
    errors.append("redis.sentinel_password_file is set without a sentinel password in the values")

with open(out, "w") as f:
    yaml.safe_dump_all(rest, f)
with open(out + ".env", "w") as f:
    for name, value in gateway_env.items():
        if name.startswith("INSPECTION_"):
            f.write(f"{name}={value}\n")
with open(out + ".expect.json", "w") as f:
    json.dump({"sentinel": bool(sentinel_values.get("enabled")) and
                           not (redis_values.get("existingSecret") or {}).get("urlKey"),
               "sentinel_password": sentinel_secret is not None,
               "url_from_env": "INSPECTION_EVENT_LOG" in gateway_env}, f)
with open(out + ".crds", "w") as f:
    f.write(" ".join(crds))
with open(out + ".config.json", "w") as f:
    json.dump(config or {}, f)
with open(out + ".secrets", "w") as f:
    f.write(str(len(secrets)))
# What the values ask for is in the manifests.
gateway = next((d for d in docs if d.get("kind") == "Deployment"
                and any(c["name"] == "gateway" for c in d["spec"]["template"]["spec"]["containers"])), None)
if gateway is not None:
    pod = gateway["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "gateway")
    image = values.get("image") or {}
    if image.get("digest") and container["image"] != f"{image['repository']}@{image['digest']}":
        errors.append(f"image.digest set but the gateway image is {container['image']}")
    expect = {"extraVolumes": [v["name"] for v in pod.get("volumes", [])],
              "extraVolumeMounts": [m["name"] for m in container.get("volumeMounts", [])],
              "initContainers": [c["name"] for c in pod.get("initContainers", [])],
              "extraContainers": [c["name"] for c in pod["containers"]]}
    for key, present in expect.items():
        for item in values.get(key) or []:
            if item["name"] not in present:
                errors.append(f"{key} {item['name']} is not in the gateway pod")
    if values.get("extraEnvFrom") and container.get("envFrom") != values["extraEnvFrom"]:
        errors.append("extraEnvFrom is not the gateway container's envFrom")
    if values.get("priorityClassName") and pod.get("priorityClassName") != values["priorityClassName"]:
        errors.append("priorityClassName is not on the gateway pod")
    for key, value in (values.get("podLabels") or {}).items():
        if gateway["spec"]["template"]["metadata"]["labels"].get(key) != value:
            errors.append(f"podLabels.{key} is not on the gateway pod")
rule_values = values.get("prometheusRule") or {}
for doc in docs:
    if doc.get("kind") == "PrometheusRule" and rule_values.get("selector"):
        if rule_values["selector"] not in yaml.safe_dump(doc, width=10000):
            errors.append("prometheusRule.selector is not in the PrometheusRule")
    if doc.get("kind") == "PrometheusRule" and rule_values.get("runbookBaseUrl"):
        if rule_values["runbookBaseUrl"] + "#" not in yaml.safe_dump(doc, width=10000):
            errors.append("prometheusRule.runbookBaseUrl is not in the runbook URLs")
if (values.get("grafanaDashboard") or {}).get("enabled") and not any(
        d.get("kind") == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard") for d in docs):
    errors.append("grafanaDashboard.enabled but no dashboard ConfigMap")
if (values.get("podMonitor") or {}).get("enabled") and not any(d.get("kind") == "PodMonitor" for d in docs):
    errors.append("podMonitor.enabled but no PodMonitor")

# The chart's PrometheusRule as a plain rule file, for promtool check rules.
if prometheus_rules:
    with open(out + ".rules.yaml", "w") as f:
        yaml.safe_dump({"groups": prometheus_rules}, f, sort_keys=False, width=1000)
# The Grafana dashboard ConfigMap: valid JSON, the sidecar's label.
for doc in docs:
    if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"].endswith("-dashboard"):
        for key, text in doc["data"].items():
            try:
                dashboard = json.loads(text)
            except ValueError as e:
                errors.append(f"ConfigMap {doc['metadata']['name']} {key}: not JSON: {e}")
                continue
            if not dashboard.get("panels"):
                errors.append(f"ConfigMap {doc['metadata']['name']} {key}: a dashboard without panels")
        if not doc["metadata"].get("labels", {}).get("grafana_dashboard"):
            errors.append(f"ConfigMap {doc['metadata']['name']}: no grafana_dashboard label for the sidecar")
if errors:
    print("\n".join(errors))
    sys.exit(1)
PY

gateway_bin="${INSPECTION_GATEWAY_BIN:-$root/build/inspection-gateway}"
if [ ! -x "$gateway_bin" ]; then
  echo "check-helm: skip: rendered config files are not run through the gateway (no binary at $gateway_bin; set INSPECTION_GATEWAY_BIN)"
  gateway_bin=""
fi

# render NAME VALUES_FILE|- [helm args...]: template, validate, check.
render() {
  local name="$1" values="$2"
  shift 2
  local out="$tmp/$name.yaml"
  local args=()
  [ "$values" = - ] || args=(-f "$values")
  helm template ig "$chart" --namespace inspections \
    "${args[@]}" "$@" >"$out" 2>"$tmp/err" || {
    cat "$tmp/err"
    fail "helm template $name"
  }
  "$python" "$tmp/check_render.py" "$out" "$values" "$out.k8s" "$chart/files/prometheusrule.yaml" ||
    fail "$name: chart checks (above)"
  local count
  count="$(grep -c '^kind:' "$out.k8s" || true)"
  kubernetes-validate --strict --quiet -k "$KUBE_MIN" -k "$KUBE_MAX" "$out.k8s" >"$tmp/kv.log" 2>&1 || {
    cat "$tmp/kv.log"
    fail "$name: kubernetes-validate --strict"
  }
  # kubernetes-validate only warns about a kind it has no schema for: none may be left.
  if [ -s "$tmp/kv.log" ]; then
    cat "$tmp/kv.log"
    fail "$name: kubernetes-validate printed warnings (unknown kind or apiVersion?)"
  fi
  if [ -f "$out.k8s.rules.yaml" ]; then
    promtool check rules "$out.k8s.rules.yaml" >"$tmp/promtool.log" 2>&1 || {
      cat "$tmp/promtool.log"
      fail "$name: the chart's PrometheusRule does not pass promtool check rules"
    }
    ok "$name: the chart's PrometheusRule passes promtool check rules"
  fi
  local crds
  crds="$(cat "$out.k8s.crds")"
  ok "helm template $name: $count manifests valid for Kubernetes $KUBE_MIN and $KUBE_MAX (--strict)${crds:+; $crds: no offline schema, required fields checked}; invariants hold; $(cat "$out.k8s.secrets") secret value(s) only base64 in Secrets"
  if [ -n "$gateway_bin" ]; then
    # The gateway reads secrets from the mounted files: point them at stand-ins.
    mkdir -p "$tmp/secrets" "$tmp/redis-sentinel"
    for f in api-key webhook-key webhook-previous-key; do echo "stand-in-$f-value" >"$tmp/secrets/$f"; done
    echo "stand-in-sentinel-password" >"$tmp/redis-sentinel/sentinel-password"
    sed -e "s#/etc/inspection-gateway/secrets#$tmp/secrets#g" \
      -e "s#/etc/inspection-gateway/redis-sentinel#$tmp/redis-sentinel#g" \
      -e "s#/etc/inspection-gateway/accounts#$tmp/accounts#g" "$out.k8s.config.json" >"$tmp/config.json"
    # Vendor accounts' key files: a distinct stand-in each (the gateway refuses shared keys).
    "$python" - "$tmp/config.json" <<'PY'
import json, os, sys
for name, account in json.load(open(sys.argv[1])).get("accounts", {}).items():
    for key, path in account.items():
        if key.endswith("_file"):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(f"stand-in-{name}-{key}\n")
PY
    # With the container's INSPECTION_* env (the event_log URL the chart composes from a
    # Secret; stand-ins for the Secrets you manage).
    local env_args=()
    while IFS= read -r line; do env_args+=("$line"); done <"$out.k8s.env"
    env "${env_args[@]}" "$gateway_bin" --config="$tmp/config.json" --print-config \
      >"$tmp/printed.json" 2>"$tmp/gw.err" || {
      cat "$tmp/gw.err"
      fail "$name: the gateway rejects the rendered config file"
    }
    # What the gateway made of it: Redis Sentinel and its password as the values ask.
    "$python" - "$tmp/printed.json" "$out.k8s.expect.json" <<'PY' || fail "$name: the gateway's effective config (above)"
import json, sys
printed, expect = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
errors = []
if expect["sentinel"] and not printed["event_log"].startswith("redis+sentinel://"):
    errors.append(f"event_log is {printed['event_log']}, not redis+sentinel://")
if expect["url_from_env"] and not printed["event_log"].startswith("redis"):
    errors.append(f"INSPECTION_EVENT_LOG did not reach the gateway: event_log {printed['event_log']}")
shown = printed.get("redis", {}).get("sentinel_password")
if shown != ("[redacted]" if expect["sentinel_password"] else "[unset]"):
    errors.append(f"redis.sentinel_password is {shown} (a sentinel password configured: {expect['sentinel_password']})")
if errors:
    print("\n".join(errors))
    sys.exit(1)
PY
    ok "$name: the gateway accepts the rendered config file and env (--print-config; event_log $(
      "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["event_log"].split(":")[0])' "$tmp/printed.json"))"
  fi
}

render sandbox "$chart/values-sandbox.yaml"
# Sandbox mode without a webhook receiver: the chart must not register one (the gateway
# refuses register_webhook with webhook.mode poll; it crash-looped).
render sandbox-poll "$chart/values-sandbox.yaml" --set config.webhook.mode=poll
if grep -q '"register_webhook"' "$tmp/sandbox-poll.yaml.k8s.config.json"; then
  fail "sandbox-poll: the chart sets register_webhook with webhook.mode poll"
fi
ok "sandbox-poll: no register_webhook with webhook.mode poll"
for values in "$chart"/ci/*.yaml; do
  render "$(basename "$values" .yaml)" "$values"
done

# Secrets with characters that need URL encoding, sandbox off, every secret kind.
cat >"$tmp/secret-values.yaml" <<'EOF'
config:
  upstream_url: https://vendor.example.com
  webapp_url: https://webapp.example.com
secrets:
  apiKey: "leak-test-API-KEY-7f3a9c"
  webhookKey: "leak-test-WEBHOOK-KEY-51be0d"
  webhookPreviousKey: "leak-test-PREVIOUS-KEY-c4e871"
eventLog:
  backend: redis
  redis:
    host: redis.example.internal
    username: gateway
    password: "leak-test-p@ss/w%rd:9e2?#"
replicaCount: 2
sandbox:
  enabled: false
EOF
render secret-leak "$tmp/secret-values.yaml"

# The same through Redis Sentinel, the sentinels with a password of their own (the chart's
# Secret holds both: the URL, and the sentinels' password mounted as a file).
cat >"$tmp/secret-sentinel-values.yaml" <<'EOF'
config:
  upstream_url: https://vendor.example.com
  webapp_url: https://webapp.example.com
secrets:
  apiKey: "leak-test-API-KEY-sentinel-0c1d"
eventLog:
  backend: redis
  redis:
    username: gateway
    password: "leak-test-data-p@ss/w%rd:77a?#"
    sentinel:
      enabled: true
      hosts: ["10.0.0.7", "[fd00::7]:26380", "sentinel-2.example.internal:26379"]
      masterName: ig.primary_1
      password: "leak-test-SENTINEL-p@ss w%rd-4e1f"
replicaCount: 2
sandbox:
  enabled: false
EOF
render secret-leak-sentinel "$tmp/secret-sentinel-values.yaml"

# A config key the chart does not know (the gateway's newer keys) is passed through.
helm template ig "$chart" -f "$chart/values-sandbox.yaml" --set config.some_future_section.knob=7 \
  >"$tmp/future.yaml" || fail "a config key unknown to the chart is refused"
grep -q '"some_future_section"' "$tmp/future.yaml" || fail "config.some_future_section not in the ConfigMap"
ok "config accepts keys the chart does not know (passed to the config file)"

# --- negative checks: each must fail with the expected message ---------------------------
# must_fail DESCRIPTION EXPECTED_TEXT helm-template-args...: on top of values-sandbox.yaml
# (a chart that renders), so that each case fails for its own reason; --set
# sandbox.enabled=false turns the sandbox off again.
must_fail() {
  local what="$1" expected="$2"
  shift 2
  must_fail_on_defaults "$what" "$expected" -f "$chart/values-sandbox.yaml" "$@"
}
# The same on the chart's own defaults.
must_fail_on_defaults() {
  local what="$1" expected="$2"
  shift 2
  if helm template ig "$chart" "$@" >"$tmp/neg.out" 2>"$tmp/neg.err"; then
    fail "$what: helm template succeeded, it must fail"
  fi
  grep -qF -- "$expected" "$tmp/neg.err" || {
    cat "$tmp/neg.err"
    fail "$what: failed without the expected message '$expected'"
  }
  # (helm notes the chart's links to deploy/ on stderr: not the message)
  ok "fails as it must: $what ($(grep -v 'found symbolic link' "$tmp/neg.err" | head -c 160 | tr '\n' ' ')...)"
}
must_fail "replicaCount=2 with the SQLite event log" "needs a shared event log" \
  --set replicaCount=2
must_fail "autoscaling.maxReplicas=4 with the SQLite event log" "needs a shared event log" \
  --set autoscaling.enabled=true --set autoscaling.maxReplicas=4
must_fail "an unknown top-level values key" "additional properties 'replicas' not allowed" \
  --set replicas=2
must_fail "an unknown nested values key" "additional properties 'hostt' not allowed" \
  --set eventLog.redis.hostt=redis
must_fail "a wrongly typed value" "replicaCount" \
  --set-string replicaCount=two
must_fail "a config key of the wrong value (config.log.level=verbose)" "/config/log/level" \
  --set config.log.level=verbose
must_fail "a chart-managed config key (config.grpc_addr)" "config.grpc_addr is set by the chart" \
  --set config.grpc_addr=0.0.0.0:1
must_fail "an Ingress without TLS" "ingress.enabled without ingress.tls.enabled" \
  --set ingress.enabled=true --set ingress.host=h.example.com --set secrets.webhookKey=k
must_fail "grpcTls without a Secret or cert-manager" "grpcTls.enabled needs" \
  --set grpcTls.enabled=true
must_fail "native gRPC probes on a TLS listener" "probes.type=grpc cannot probe a TLS listener" \
  --set grpcTls.enabled=true --set grpcTls.existingSecret=tls --set probes.type=grpc
must_fail "the TLS files set in config instead of grpcTls" "config.grpc.tls is set by the chart" \
  --set config.grpc.tls.cert_file=/x
must_fail "a secret in the config file (config.api_key)" "secrets never go in the config file" \
  --set config.api_key=oops
must_fail "accounts in config instead of vendorAccounts" "config.accounts is set by the chart" \
  --set config.accounts.preprod.upstream_url=https://p.example.com
must_fail "a vendor account named default" "invalid propertyName 'default'" \
  --set vendorAccounts.default.upstreamUrl=https://p.example.com \
  --set vendorAccounts.default.existingSecret=s
must_fail "a vendor account without its Secret" "existingSecret" \
  --set vendorAccounts.preprod.upstreamUrl=https://p.example.com
must_fail "an account webhook key without the default one" "needs the default account's webhook key" \
  --set sandbox.enabled=false --set secrets.apiKey=k --set config.upstream_url=https://v.example.com \
  --set config.webapp_url=https://w.example.com --set vendorAccounts.preprod.upstreamUrl=https://p.example.com \
  --set vendorAccounts.preprod.existingSecret=s --set vendorAccounts.preprod.webhookKeyKey=hook
must_fail "no vendor API key without the sandbox" "the vendor API key is required" \
  --set sandbox.enabled=false --set config.upstream_url=https://v.example.com \
  --set config.webapp_url=https://w.example.com
must_fail_on_defaults "the default values (no upstream, no sandbox)" "no upstream: set config.upstream_url"
must_fail_on_defaults "an API key but no upstream_url" "no upstream: set config.upstream_url" \
  --set secrets.apiKey=k
must_fail "no upstream_url without the sandbox" "no upstream: set config.upstream_url" \
  --set sandbox.enabled=false --set secrets.apiKey=k
must_fail "podMonitor and serviceMonitor together" "enable one" \
  --set podMonitor.enabled=true --set serviceMonitor.enabled=true
must_fail "an image digest that is not sha256" "/image/digest" \
  --set image.digest=latest
must_fail "an extraVolumeMount without mountPath" "mountPath" \
  --set 'extraVolumeMounts[0].name=ca'
must_fail "an unknown podMonitor key" "additional properties 'intervall' not allowed" \
  --set podMonitor.intervall=10s
must_fail "terminationGracePeriodSeconds shorter than the drain" "must be larger than" \
  --set terminationGracePeriodSeconds=12 --set config.shutdown.grace_ms=10000
# Redis Sentinel.
sentinel=(--set eventLog.backend=redis --set eventLog.redis.sentinel.enabled=true
  --set 'eventLog.redis.sentinel.hosts={redis-node-0.redis-headless.redis.svc.cluster.local}')
must_fail "Redis Sentinel on the SQLite event log" "eventLog.redis.sentinel.enabled needs eventLog.backend=redis" \
  --set eventLog.redis.sentinel.enabled=true --set 'eventLog.redis.sentinel.hosts={s-0.example.internal}'
must_fail "Redis Sentinel without sentinels" "needs eventLog.redis.sentinel.hosts" \
  --set eventLog.backend=redis --set eventLog.redis.sentinel.enabled=true
must_fail "Redis Sentinel without the primary's name" "needs eventLog.redis.sentinel.masterName" \
  "${sentinel[@]}" --set eventLog.redis.sentinel.masterName=
must_fail "Redis Sentinel and a redis:// host" "leave host empty" \
  "${sentinel[@]}" --set eventLog.redis.host=redis-master.redis.svc.cluster.local
must_fail "a sentinel port out of range" "the port must be 1..65535" \
  "${sentinel[@]}" --set 'eventLog.redis.sentinel.hosts={s-0.example.internal:70000}'
must_fail "a sentinel address that is not host[:port]" "/eventLog/redis/sentinel/hosts/0" \
  "${sentinel[@]}" --set 'eventLog.redis.sentinel.hosts={redis://s-0:26379}'
must_fail "more than 16 sentinels" "/eventLog/redis/sentinel/hosts" \
  "${sentinel[@]}" --set 'eventLog.redis.sentinel.hosts={s0,s1,s2,s3,s4,s5,s6,s7,s8,s9,s10,s11,s12,s13,s14,s15,s16}'
must_fail "a primary's name Sentinel would not take" "/eventLog/redis/sentinel/masterName" \
  "${sentinel[@]}" --set 'eventLog.redis.sentinel.masterName=my master'
must_fail "a sentinel password without sentinels" "they need eventLog.redis.sentinel.enabled" \
  --set eventLog.backend=redis --set eventLog.redis.host=redis --set eventLog.redis.sentinel.password=p
must_fail "a sentinel password twice" "set password or existingSecret, not both" \
  "${sentinel[@]}" --set eventLog.redis.sentinel.password=p \
  --set eventLog.redis.sentinel.existingSecret.name=redis --set eventLog.redis.sentinel.existingSecret.passwordKey=redis-password
must_fail "a sentinel Secret without its key" "existingSecret.name needs passwordKey" \
  "${sentinel[@]}" --set eventLog.redis.sentinel.existingSecret.name=redis
must_fail "a sentinel Secret key without the Secret" "passwordKey needs eventLog.redis.sentinel.existingSecret.name" \
  "${sentinel[@]}" --set eventLog.redis.sentinel.existingSecret.passwordKey=redis-password
must_fail "an unknown sentinel key" "additional properties 'masterSet' not allowed" \
  "${sentinel[@]}" --set eventLog.redis.sentinel.masterSet=mymaster
must_fail "the sentinel password file set in config" "config.redis.sentinel_password_file is set by the chart" \
  "${sentinel[@]}" --set config.redis.sentinel_password_file=/x
must_fail "the sentinel password in config" "secrets never go in the config file" \
  "${sentinel[@]}" --set config.redis.sentinel_password=p
must_fail "config.redis.min_replicas_acked above 16" "/config/redis/min_replicas_acked" \
  "${sentinel[@]}" --set config.redis.min_replicas_acked=17
must_fail "config.redis.replica_ack_timeout_ms of 0" "/config/redis/replica_ack_timeout_ms" \
  "${sentinel[@]}" --set config.redis.replica_ack_timeout_ms=0
must_fail "an Ingress without a webhook key" "needs a webhook key" \
  --set sandbox.enabled=false --set secrets.apiKey=k --set config.upstream_url=https://v.example.com \
  --set config.webapp_url=https://w.example.com --set ingress.enabled=true --set ingress.host=h.example.com --set ingress.tls.enabled=true

ok "all checks passed in $((SECONDS - started)) s"
