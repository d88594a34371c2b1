#!/usr/bin/env bash
# ctest examples.go_and_python_against_the_sandbox: builds examples/go (against the
# committed Go module) and generates the Python stubs, starts `inspection-gateway --sandbox`
# on loopback ports the OS picks, runs both examples against it, and stops it by its pid.
# Usage: scripts/run-examples.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="$(cd "${1:?usage: run-examples.sh BUILD_DIR}" && pwd)"
scratch="$(mktemp -d)"
gateway_pid=""
cleanup() {
  if [ -n "$gateway_pid" ]; then kill "$gateway_pid" 2>/dev/null || true; wait "$gateway_pid" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "run-examples: FAIL: $*" >&2; [ -f "$scratch/gateway.log" ] && tail -20 "$scratch/gateway.log" >&2; exit 1; }

(cd examples/go && go build -o "$scratch/go-example" .)
mkdir -p "$scratch/python"
.tools/venv/bin/python -m grpc_tools.protoc -I proto --python_out="$scratch/python" \
  --pyi_out="$scratch/python" --grpc_python_out="$scratch/python" proto/inspection/v1/*.proto
touch "$scratch/python/inspection/__init__.py" "$scratch/python/inspection/v1/__init__.py"

"$build/inspection-gateway" --sandbox --grpc-addr=127.0.0.1:0 --webhook-addr=127.0.0.1:0 \
  --admin-addr=127.0.0.1:0 --event-log="sqlite:$scratch/events.db" \
  >"$scratch/stdout.log" 2>"$scratch/gateway.log" &
gateway_pid=$!
port=""
for _ in $(seq 1 600); do
  port="$(grep -o '"grpc_port":[0-9]*' "$scratch/gateway.log" | head -1 | cut -d: -f2 || true)"
  [ -n "$port" ] && break
  kill -0 "$gateway_pid" 2>/dev/null || fail "the gateway exited"
  sleep 0.05
done
[ -n "$port" ] || fail "the gateway did not announce its port"
echo "run-examples: gateway --sandbox on 127.0.0.1:$port (pid $gateway_pid)"

"$scratch/go-example" -addr "127.0.0.1:$port" -service-config clients/service_config.json ||
  fail "the Go example"
PYTHONPATH="$scratch/python" .tools/venv/bin/python examples/python/example.py \
  --addr "127.0.0.1:$port" --service-config clients/service_config.json ||
  fail "the Python example"
echo "run-examples: ok"
