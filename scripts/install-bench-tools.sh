#!/usr/bin/env bash
# Installs the load generators of `make bench` (bench/run.py) on Debian bookworm:
# h2load (nghttp2-client) and wrk. Idempotent. Not needed by `make test`.
set -euo pipefail
missing=()
for p in nghttp2-client wrk; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-bench-tools: apt-get install ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "install-bench-tools: ok (h2load $(h2load --version 2>/dev/null | head -1 | awk '{print $NF}'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'))"
