#!/usr/bin/env bash
# The code generators `make clients` runs, at pinned versions, into .tools/ (idempotent):
#   Go:         protoc-gen-go, protoc-gen-go-grpc (Go module proxy)
#   API docs:   protoc-gen-doc (Go module proxy): docs/api.md
#   Python:     grpcio-tools (PyPI; in .tools/venv, installed by install-deps.sh)
#   TypeScript: @bufbuild/protoc-gen-es (npm)
#   Java:       protoc-gen-grpc-java (Maven Central); protoc's built-in java generator
# Usage: scripts/install-client-tools.sh [go]   ("go": the Go generators only, for make test)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tools="$(dirname "$here")/.tools"
mkdir -p "$tools/bin"

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
PROTOC_GEN_ES_VERSION=2.17.0
PROTOC_GEN_DOC_VERSION=v1.5.1
# The newest whose linux-x86_64 binary Maven Central served here (1.84.2 and 1.85.0 were not).
GRPC_JAVA_VERSION=1.82.0

if ! "$tools/bin/protoc-gen-go" --version 2>/dev/null | grep -q "$PROTOC_GEN_GO_VERSION"; then
  echo "install-client-tools: go install protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  GOBIN="$tools/bin" GOFLAGS=-mod=mod go install \
    "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if ! "$tools/bin/protoc-gen-go-grpc" --version 2>/dev/null | grep -q "${PROTOC_GEN_GO_GRPC_VERSION#v}"; then
  echo "install-client-tools: go install protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
  GOBIN="$tools/bin" GOFLAGS=-mod=mod go install \
    "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi
if [ "$(cat "$tools/protoc-gen-doc.version" 2>/dev/null)" != "$PROTOC_GEN_DOC_VERSION" ] || [ ! -x "$tools/bin/protoc-gen-doc" ]; then
  echo "install-client-tools: go install protoc-gen-doc@$PROTOC_GEN_DOC_VERSION"
  GOBIN="$tools/bin" GOFLAGS=-mod=mod go install \
    "github.com/pseudomuto/protoc-gen-doc/cmd/protoc-gen-doc@$PROTOC_GEN_DOC_VERSION"
  echo "$PROTOC_GEN_DOC_VERSION" >"$tools/protoc-gen-doc.version"
fi
[ "${1:-}" = go ] && exit 0

if [ "$("$tools/node_modules/.bin/protoc-gen-es" --version 2>/dev/null)" != "protoc-gen-es v$PROTOC_GEN_ES_VERSION" ]; then
  echo "install-client-tools: npm install @bufbuild/protoc-gen-es@$PROTOC_GEN_ES_VERSION"
  npm install --silent --no-audit --no-fund --prefix "$tools" \
    "@bufbuild/protoc-gen-es@$PROTOC_GEN_ES_VERSION" >/dev/null
fi
java_plugin="$tools/bin/protoc-gen-grpc-java"
if [ ! -x "$java_plugin" ] || [ "$(cat "$tools/protoc-gen-grpc-java.version" 2>/dev/null)" != "$GRPC_JAVA_VERSION" ]; then
  echo "install-client-tools: protoc-gen-grpc-java $GRPC_JAVA_VERSION (Maven Central)"
  scratch="$(mktemp -d)"
  mvn -q -B dependency:copy \
    -Dartifact="io.grpc:protoc-gen-grpc-java:$GRPC_JAVA_VERSION:exe:linux-x86_64" \
    -DoutputDirectory="$scratch" >/dev/null
  install -m 0755 "$scratch"/protoc-gen-grpc-java-*.exe "$java_plugin"
  rm -rf "$scratch"
  echo "$GRPC_JAVA_VERSION" >"$tools/protoc-gen-grpc-java.version"
fi
echo "install-client-tools: ok"
