#!/usr/bin/env bash
# Installs the load generators of `make bench` (bench/run.py) on Debian bookworm:
# h2load (nghttp2-client), wrk, HAProxy with openssl (the TLS terminator in front of the
# sandbox in the tls_hop scenario) and redis-server (the shared event log, its replica and
# sentinels of the scaleout_* scenarios; redis-cli comes with it). Idempotent. Not needed by
# `make test`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/apt-install.sh
. "$here/apt-install.sh"
apt_install_missing install-bench-tools nghttp2-client wrk haproxy openssl redis-server
echo "install-bench-tools: ok (h2load $(h2load --version 2>/dev/null | head -1 | awk '{print $NF}'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), $(/usr/sbin/haproxy -v 2>/dev/null | head -1 | awk '{print $1, $3}'), $(redis-server --version | awk '{print $1, $3}'))"
