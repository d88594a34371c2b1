#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian bookworm machine.
# Idempotent: each step checks first and does nothing when its tool is already there.
#   scripts/install-deps.sh              build and test: scripts/apt-packages.txt,
#                                        scripts/apt-packages-test.txt, buf, grpcurl, the
#                                        Python test packages
#   scripts/install-deps.sh --build-only what building and running need (`make run`):
#                                        scripts/apt-packages.txt only
# The package lists are the one source of truth that BUILD.md and the Dockerfile refer to.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
tools="$root/.tools"
mkdir -p "$tools/bin"

# --- Debian packages ---
# shellcheck source=scripts/apt-install.sh
. "$here/apt-install.sh"
mapfile -t pkgs < <(grep -v '^\s*#' "$here/apt-packages.txt" | sed '/^\s*$/d')
apt_install_missing install-deps "${pkgs[@]}"
if [ "${1:-}" = --build-only ]; then
  echo "install-deps: ok (build only)"
  exit 0
fi
mapfile -t pkgs < <(grep -v '^\s*#' "$here/apt-packages-test.txt" | sed '/^\s*$/d')
apt_install_missing install-deps "${pkgs[@]}"

# --- buf (npm), pinned ---
BUF_VERSION=1.47.2
if [ ! -x "$tools/node_modules/.bin/buf" ] || [ "$("$tools/node_modules/.bin/buf" --version 2>/dev/null)" != "$BUF_VERSION" ]; then
  echo "install-deps: npm install @bufbuild/buf@$BUF_VERSION"
  npm install --silent --no-audit --no-fund --prefix "$tools" "@bufbuild/buf@$BUF_VERSION" >/dev/null
fi
ln -sf "$tools/node_modules/.bin/buf" "$tools/bin/buf"

# --- grpcurl (Go module proxy), pinned ---
GRPCURL_VERSION=v1.9.3
if [ ! -x "$tools/bin/grpcurl" ]; then
  echo "install-deps: go install grpcurl@$GRPCURL_VERSION"
  GOBIN="$tools/bin" GOFLAGS=-mod=mod go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
fi

# --- Python gRPC client for the end-to-end tests (PyPI), pinned, in a venv ---
GRPCIO_VERSION=1.66.2
if ! "$tools/venv/bin/python" -c "import grpc, grpc_tools; assert grpc.__version__ == '$GRPCIO_VERSION'" 2>/dev/null; then
  echo "install-deps: pip install grpcio grpcio-tools==$GRPCIO_VERSION (venv .tools/venv)"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check \
    "grpcio==$GRPCIO_VERSION" "grpcio-tools==$GRPCIO_VERSION"
fi

# --- opentelemetry-proto (PyPI), pinned: the official OTLP protos, whose parser checks the
# gateway's OTLP/JSON span export (tests/e2e/otlp_e2e_test.py) ---
OTEL_PROTO_VERSION=1.45.2
if ! "$tools/venv/bin/python" -c "from importlib.metadata import version; assert version('opentelemetry-proto') == '$OTEL_PROTO_VERSION'" 2>/dev/null; then
  echo "install-deps: pip install opentelemetry-proto==$OTEL_PROTO_VERSION (venv .tools/venv)"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check \
    "opentelemetry-proto==$OTEL_PROTO_VERSION"
fi

# --- lizard (PyPI), pinned: the function-length lint of `make test` (Makefile, lint-functions)
LIZARD_VERSION=1.24.3
if ! "$tools/venv/bin/python" -c "from importlib.metadata import version; assert version('lizard') == '$LIZARD_VERSION'" 2>/dev/null; then
  echo "install-deps: pip install lizard==$LIZARD_VERSION (venv .tools/venv)"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check "lizard==$LIZARD_VERSION"
fi

echo "install-deps: ok"
