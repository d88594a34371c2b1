#!/usr/bin/env bash
# make clients: client code for every caller language, from proto/, into clients/:
#   clients/go/          Go module (committed; buf.gen.go.yaml)
#   clients/python/      Python package inspection.v1 with .pyi stubs, and its wheel in
#                        clients/python/dist/
#   clients/java/        Java sources (messages + gRPC stubs; buf.gen.yaml)
#   clients/ts/          TypeScript (protoc-gen-es; buf.gen.yaml)
#   clients/descriptor/  inspection-v1.binpb: a FileDescriptorSet with imports and source
#                        info (grpcurl -protoset, Envoy, gRPC UIs)
#   docs/api.md          the API reference from the proto comments (committed)
# and clients/service_config.json (committed) beside them.
# CLIENTS_BASE=DIR writes DIR/clients/... instead (the ctest clients.every_language_generates
# does, so that it never rewrites the committed Go module).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
base="${CLIENTS_BASE:-$root}"
bash scripts/install-client-tools.sh
export PATH="$root/.tools/bin:$PATH"
buf="$root/.tools/bin/buf"
mkdir -p "$base/clients/go" "$base/clients/python"
if [ "$base" != "$root" ]; then
  cp clients/go/go.mod clients/go/go.sum "$base/clients/go/"
  cp clients/python/pyproject.toml "$base/clients/python/"
fi

echo "make-clients: Go"
rm -rf "$base/clients/go/inspection"
"$buf" generate --template buf.gen.go.yaml -o "$base"
(cd "$base/clients/go" && go build ./...)

echo "make-clients: Java, TypeScript"
rm -rf "$base/clients/java/src" "$base/clients/ts/src"
"$buf" generate --template buf.gen.yaml -o "$base"
# The protoc version the Java messages were generated with (their runtime must match).
protoc --version >"$base/clients/java/PROTOC_VERSION"

echo "make-clients: Python"
py="$base/clients/python"
rm -rf "$py/inspection" "$py/dist" "$py/build" "$py"/*.egg-info
.tools/venv/bin/python -m grpc_tools.protoc -I proto \
  --python_out="$py" --pyi_out="$py" --grpc_python_out="$py" \
  proto/inspection/v1/*.proto
for dir in "$py/inspection" "$py/inspection/v1"; do
  : >"$dir/__init__.py"
done
: >"$py/inspection/py.typed"
.tools/venv/bin/pip wheel --quiet --disable-pip-version-check --no-deps -w "$py/dist" "$py" >/dev/null
rm -rf "$py/build" "$py"/*.egg-info

echo "make-clients: API reference (docs/api.md)"
"$buf" generate --template buf.gen.docs.yaml -o "$base"

echo "make-clients: descriptor set"
mkdir -p "$base/clients/descriptor"
"$buf" build --as-file-descriptor-set -o "$base/clients/descriptor/inspection-v1.binpb"

echo "make-clients: ok ($(ls "$py"/dist/*.whl))"
