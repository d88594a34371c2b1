#!/usr/bin/env bash
# The compatibility policy of the gRPC API, checked (ctest api.breaking_changes_are_caught):
#   1. `buf breaking` (FILE rules) passes against the last release's image,
#      proto/releases/inspection-v1-<version>.binpb.gz: inspection.v1 only ever grows;
#   2. the check has teeth: in a scratch copy, a renumbered field and a removed RPC are each
#      reported as breaking.
# Usage: scripts/check-api-compat.sh [BUF]   (default: .tools/bin/buf, else buf on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
buf="${1:-}"
if [ -z "$buf" ]; then
  if [ -x .tools/bin/buf ]; then buf=.tools/bin/buf; else buf=buf; fi
fi
buf="$(cd "$(dirname "$(command -v "$buf")")" && pwd)/$(basename "$buf")"
release="$(ls proto/releases/inspection-v1-*.binpb.gz | sort -V | tail -1)"
against="$PWD/$release"
echo "check-api-compat: against $release"

"$buf" breaking --against "$against"
echo "check-api-compat: the API is compatible with $release"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
expect_breaking() {  # name, file, sed expression, text the report must contain
  local name="$1" file="$2" expr="$3" want="$4"
  rm -rf "$scratch/copy" && mkdir "$scratch/copy"
  cp -r proto buf.yaml "$scratch/copy/"
  sed -i "$expr" "$scratch/copy/$file"
  if cmp -s "proto/${file#proto/}" "$scratch/copy/$file"; then
    echo "check-api-compat: FAIL: '$expr' changed nothing in $file" >&2
    exit 1
  fi
  local report
  if report="$(cd "$scratch/copy" && "$buf" breaking --against "$against" 2>&1)"; then
    echo "check-api-compat: FAIL: $name was not reported as breaking" >&2
    exit 1
  fi
  if ! grep -qF "$want" <<<"$report"; then
    echo "check-api-compat: FAIL: $name: the report does not mention '$want':" >&2
    echo "$report" >&2
    exit 1
  fi
  echo "check-api-compat: $name is caught: $(head -1 <<<"$report")"
}
expect_breaking "a renumbered field" proto/inspection/v1/token.proto \
  '/^message GetTokenStatusRequest {/,/^}/ s/string uid = 1 /string uid = 9 /' \
  'with name "uid" on message "GetTokenStatusRequest"'
expect_breaking "a removed RPC" proto/inspection/v1/inspection.proto \
  '/rpc GetDamagesReport(/,/^  }/d' 'GetDamagesReport'
echo "check-api-compat: ok"
