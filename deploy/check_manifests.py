#!/usr/bin/env python3
"""Checks the rendered kustomize output of an overlay against the real gateway binary.

For the gateway Deployment of `kustomize build <overlay>` (read from a file or stdin):
- the config.json of its ConfigMap, with the container's env applied (secretKeyRef values
  replaced by a placeholder, $(VAR) expanded as the kubelet does), is accepted by the real
  binary (`inspection-gateway --config=... --print-config`): no unknown key, valid values;
- the listen ports of the effective config match the container ports grpc/webhook/admin and
  the probes use the admin port;
- terminationGracePeriodSeconds outlasts preStop + shutdown.grace_ms;
- the secret files the config names (redis.sentinel_password_file included) live in a
  mounted Secret that has those keys;
- an env value refers ($(VAR)) only to variables defined before it (the kubelet leaves a
  later one unexpanded);
- a SQLite event log lives on a writable volume and has one replica (several replicas need
  Redis); a Redis URL (redis:// or redis+sentinel://) carries no inline password;
- every container runs non-root, read-only root filesystem, no privilege escalation, all
  capabilities dropped;
- upstream_url pointing into the cluster names a Service of the same output, on its port.

Usage: check_manifests.py --gateway BIN --overlay NAME RENDERED.yaml
Needs PyYAML (the .tools venv has it, through yamllint).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

import yaml

PLACEHOLDER = "placeholder-not-a-secret"


class Problems:
    def __init__(self, overlay):
        self.overlay = overlay
        self.items = []

    def add(self, message):
        self.items.append(message)

    def report(self):
        for item in self.items:
            print(f"check_manifests [{self.overlay}]: {item}", file=sys.stderr)
        return 1 if self.items else 0


def expand(value, env):
    """$(VAR) expansion as the kubelet does it ($$ escapes, unknown names stay)."""
    def replace(match):
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", replace, value)


def container_env(container, problems):
    env = {}
    items = container.get("env", []) or []
    for index, item in enumerate(items):
        name = item["name"]
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
            later = {i["name"] for i in items[index + 1:]} - set(env)
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", env[name]):
                if ref in later:
                    problems.add(f"env {name} refers to $({ref}), defined after it: the kubelet "
                                 "leaves it unexpanded")
        elif "valueFrom" in item:
            source = item["valueFrom"]
            if "secretKeyRef" in source:
                env[name] = PLACEHOLDER
            elif "configMapKeyRef" in source or "fieldRef" in source:
                env[name] = "placeholder"
            else:
                problems.add(f"env {name}: unsupported valueFrom {sorted(source)}")
    return env


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def check_security(kind, name, pod_spec, problems):
    pod_sc = pod_spec.get("securityContext", {}) or {}
    for container in pod_spec.get("containers", []):
        sc = container.get("securityContext", {}) or {}
        where = f"{kind} {name} container {container['name']}"
        if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
            problems.add(f"{where}: runAsNonRoot is not set")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.add(f"{where}: readOnlyRootFilesystem is not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.add(f"{where}: allowPrivilegeEscalation is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problems.add(f"{where}: capabilities do not drop ALL")
        uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
        if uid is not None and uid != 10001:
            problems.add(f"{where}: runAsUser {uid}, the image's user is 10001")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True, help="the inspection-gateway binary")
    parser.add_argument("--overlay", required=True, help="name used in messages")
    parser.add_argument("rendered", help="kustomize build output ('-' for stdin)")
    args = parser.parse_args()
    problems = Problems(args.overlay)

    text = sys.stdin.read() if args.rendered == "-" else open(args.rendered, encoding="utf-8").read()
    docs = [d for d in yaml.safe_load_all(text) if d]
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc

    for kind in ("Deployment", "StatefulSet", "DaemonSet"):
        for name, doc in by_kind.get(kind, {}).items():
            check_security(kind, name, doc["spec"]["template"]["spec"], problems)

    gateway = by_kind.get("Deployment", {}).get("inspection-gateway")
    if gateway is None:
        problems.add("no Deployment inspection-gateway in the output")
        return problems.report()
    pod = gateway["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    container = containers.get("gateway")
    if container is None:
        problems.add("Deployment inspection-gateway has no container `gateway`")
        return problems.report()
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"].rstrip("/"): m for m in container.get("volumeMounts", [])}

    # The config file: --config=PATH inside a ConfigMap mount.
    config_arg = [a for a in container.get("args", []) if a.startswith("--config=")]
    if len(config_arg) != 1:
        problems.add("the gateway container has no single --config=PATH argument")
        return problems.report()
    config_path = config_arg[0].split("=", 1)[1]
    mount = mounts.get(os.path.dirname(config_path))
    volume = volumes.get(mount["name"]) if mount else None
    if not volume or "configMap" not in volume:
        problems.add(f"{config_path} is not in a mounted ConfigMap")
        return problems.report()
    configmap = by_kind.get("ConfigMap", {}).get(volume["configMap"]["name"])
    key = os.path.basename(config_path)
    if configmap is None or key not in configmap.get("data", {}):
        problems.add(f"ConfigMap {volume['configMap']['name']} with key {key} is not in the output")
        return problems.report()
    config_text = configmap["data"][key]
    try:
        config_file = json.loads(config_text)
    except ValueError as error:
        problems.add(f"{key} is not JSON: {error}")
        return problems.report()

    # Secret files named by the config must be items of a mounted Secret.
    def file_key_value(key):
        node = config_file
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return node

    secret_file_keys = ("api_key_file", "webhook_key_file", "webhook_previous_key_file",
                        "redis.sentinel_password_file")
    for file_key in secret_file_keys:
        path = file_key_value(file_key)
        if not path:
            continue
        mount = mounts.get(os.path.dirname(path))
        volume = volumes.get(mount["name"]) if mount else None
        if not volume or "secret" not in volume:
            problems.add(f"{file_key} {path} is not in a mounted Secret")
            continue
        items = volume["secret"].get("items")
        if items is not None and os.path.basename(path) not in [i["path"] for i in items]:
            problems.add(f"{file_key} {path}: the Secret volume has no item with that path")
        secret = by_kind.get("Secret", {}).get(volume["secret"]["secretName"])
        if secret is not None:
            wanted = [i["key"] for i in items if i["path"] == os.path.basename(path)] if items \
                else [os.path.basename(path)]
            data = {**secret.get("data", {}), **secret.get("stringData", {})}
            for k in wanted:
                if k not in data:
                    problems.add(f"Secret {secret['metadata']['name']} has no key {k}")

    # The effective config, from the real binary. Secret files are replaced by a temporary
    # placeholder file through their env override (env beats the config file).
    env = container_env(container, problems)
    with tempfile.TemporaryDirectory() as tmp:
        config_copy = os.path.join(tmp, "config.json")
        with open(config_copy, "w", encoding="utf-8") as f:
            f.write(config_text)
        key_file = os.path.join(tmp, "key")
        with open(key_file, "w", encoding="utf-8") as f:
            f.write(PLACEHOLDER + "\n")
        run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        run_env.update({k: v for k, v in env.items() if k.startswith("INSPECTION_")})
        for file_key in secret_file_keys:
            if file_key_value(file_key):
                run_env["INSPECTION_" + file_key.upper().replace(".", "_")] = key_file
        result = subprocess.run([args.gateway, f"--config={config_copy}", "--print-config"],
                                capture_output=True, text=True, env=run_env, timeout=30,
                                check=False)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).replace(PLACEHOLDER, "<placeholder>")
        problems.add(f"the gateway rejects the config: {message.strip()[:500]}")
        return problems.report()
    effective = json.loads(result.stdout)

    # Ports and probes.
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    for name, key in (("grpc", "grpc_addr"), ("webhook", "webhook_addr"), ("admin", "admin_addr")):
        if ports.get(name) != port_of(effective[key]):
            problems.add(f"container port `{name}` is {ports.get(name)}, the gateway listens "
                         f"on {effective[key]} ({key})")
    for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = container.get(probe_name)
        if probe is None:
            if probe_name != "startupProbe":
                problems.add(f"the gateway container has no {probe_name}")
            continue
        if "httpGet" in probe:
            port = probe["httpGet"]["port"]
            if port not in ("admin", ports.get("admin")):
                problems.add(f"{probe_name} uses port {port}, not the admin port")
            if probe["httpGet"]["path"] not in ("/healthz", "/readyz"):
                problems.add(f"{probe_name} path {probe['httpGet']['path']} is not served")
        elif "grpc" in probe:
            if probe["grpc"]["port"] != port_of(effective["grpc_addr"]):
                problems.add(f"{probe_name} gRPC port is not grpc_addr's")
    readiness = container.get("readinessProbe", {}).get("httpGet", {})
    if readiness and readiness.get("path") != "/readyz":
        problems.add("readinessProbe should be /readyz")

    # Shutdown budget.
    grace_ms = effective["shutdown"]["grace_ms"]
    pre_stop_s = 0
    pre_stop = (container.get("lifecycle") or {}).get("preStop") or {}
    command = (pre_stop.get("exec") or {}).get("command") or []
    if command and os.path.basename(command[0]) == "sleep":
        pre_stop_s = float(command[1])
    elif "sleep" in pre_stop:
        pre_stop_s = float(pre_stop["sleep"]["seconds"])
    termination_s = pod.get("terminationGracePeriodSeconds", 30)
    if termination_s * 1000 <= pre_stop_s * 1000 + grace_ms:
        problems.add(f"terminationGracePeriodSeconds {termination_s} does not outlast preStop "
                     f"{pre_stop_s:g} s + shutdown.grace_ms {grace_ms}")

    # Event log: SQLite on a writable volume and one replica; or Redis.
    event_log = effective["event_log"]
    # The gateway prints a URL's password as "[redacted]": judge where the password comes
    # from on the value it was given (env beats the config file).
    given_event_log = env.get("INSPECTION_EVENT_LOG", config_file.get("event_log", event_log))
    replicas = gateway["spec"].get("replicas", 1)
    if event_log.startswith("sqlite:"):
        path = event_log[len("sqlite:"):]
        if not path.startswith("/"):
            path = "/var/lib/inspection-gateway/" + path  # the image's WORKDIR
        writable = [m for p, m in mounts.items()
                    if (path.startswith(p + "/")) and not m.get("readOnly")
                    and any(k in volumes.get(m["name"], {})
                            for k in ("emptyDir", "persistentVolumeClaim", "ephemeral"))]
        if not writable:
            problems.add(f"the SQLite event log {path} is not on a writable volume")
        if replicas != 1:
            problems.add(f"{replicas} replicas on a SQLite event log: each would keep its "
                         "own log; use redis://")
    elif event_log.startswith(("redis://", "redis+sentinel://")):
        if PLACEHOLDER not in given_event_log and "@" in given_event_log:
            problems.add("the Redis URL carries an inline password: take it from a Secret")
    # The sentinels' own password, when the config names its file, was read from it.
    if file_key_value("redis.sentinel_password_file"):
        if not event_log.startswith("redis+sentinel://"):
            problems.add("redis.sentinel_password_file is set but the event log is not "
                         "redis+sentinel://")
        if effective.get("redis", {}).get("sentinel_password") != "[redacted]":
            problems.add("redis.sentinel_password_file is set but the gateway read no password")

    # An in-cluster upstream must be a Service of this output.
    upstream = urllib.parse.urlsplit(effective.get("upstream_url", ""))
    host = upstream.hostname or ""
    if host and "." not in host and host != "localhost":
        service = by_kind.get("Service", {}).get(host)
        port = upstream.port or (443 if upstream.scheme == "https" else 80)
        if service is None:
            problems.add(f"upstream_url names {host}, which is not a Service of this output")
        elif port not in [p["port"] for p in service["spec"]["ports"]]:
            problems.add(f"upstream_url port {port} is not a port of Service {host}")

    if not problems.items:
        print(f"check_manifests [{args.overlay}]: ok ({len(docs)} objects; config accepted by "
              f"the gateway; event_log {event_log.split(':', 1)[0]}, {replicas} replica(s))")
    return problems.report()


if __name__ == "__main__":
    sys.exit(main())
