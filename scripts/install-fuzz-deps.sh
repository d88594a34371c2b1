#!/usr/bin/env bash
# Installs what `make fuzz` needs on a fresh Debian bookworm machine: the build's packages
# (scripts/apt-packages.txt) and clang with libFuzzer (scripts/apt-packages-fuzz.txt).
# Idempotent: installs nothing when everything is there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/apt-install.sh
. "$here/apt-install.sh"
for list in apt-packages.txt apt-packages-fuzz.txt; do
  mapfile -t pkgs < <(grep -v '^\s*#' "$here/$list" | sed '/^\s*$/d')
  apt_install_missing install-fuzz-deps "${pkgs[@]}"
done
echo "install-fuzz-deps: ok"
