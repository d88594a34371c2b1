#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (BUILD.md, "Fuzzing"), built in BUILD_DIR.
#   scripts/run-fuzzers.sh BUILD_DIR [SECONDS] [TARGET...]
#       each target (all of fuzz/targets.txt by default) for SECONDS (default 60), one after
#       the other, from a fresh copy of its committed corpus (fuzz/corpus/<name>, crash-*
#       left out: those still crash and wait for their fix), with its flags from
#       fuzz/targets.txt. New inputs go to BUILD_DIR/fuzz-work/<name>/corpus, crashes to
#       BUILD_DIR/fuzz-work/<name>/ (crash-*, leak-*, timeout-*, oom-*), the log to
#       BUILD_DIR/fuzz-work/<name>/log. Exit 1 when any target found anything.
#   scripts/run-fuzzers.sh --replay BUILD_DIR
#       every committed corpus input (crash-* left out) through its target once: no fuzzing,
#       a few seconds (the CTest test fuzz.corpora_replay).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"

replay=0
if [ "${1:-}" = --replay ]; then
  replay=1
  shift
fi
build="${1:?usage: run-fuzzers.sh [--replay] BUILD_DIR [SECONDS] [TARGET...]}"
build="$(cd "$build" && pwd)"
seconds="${2:-60}"
shift $(( $# < 2 ? $# : 2 ))
only=("$@")

passed=0
failed=0
failures=()
summary=()
while read -r name max_len rss timeout dict; do
  case "$name" in '' | '#'*) continue ;; esac
  if [ "${#only[@]}" -gt 0 ] && [[ ! " ${only[*]} " =~ " $name " ]]; then continue; fi
  bin="$build/fuzz/${name}_fuzzer"
  seeds="$root/fuzz/corpus/$name"
  if [ ! -x "$bin" ]; then
    echo "run-fuzzers: $bin is missing (cmake --build $build --target fuzzers)" >&2
    failed=$((failed + 1)); failures+=("$name (not built)")
    continue
  fi
  flags=(-max_len="$max_len" -rss_limit_mb="$rss" -timeout="$timeout")
  [ "$dict" != - ] && flags+=(-dict="$root/fuzz/dict/$dict.dict")

  if [ "$replay" = 1 ]; then
    mapfile -t inputs < <(find "$seeds" -maxdepth 1 -type f ! -name 'crash-*' | sort)
    if "$bin" "${flags[@]}" "${inputs[@]}" >"$build/fuzz-replay-$name.log" 2>&1; then
      echo "replay $name: ${#inputs[@]} inputs ok"
      passed=$((passed + 1))
    else
      echo "replay $name: FAILED (log: $build/fuzz-replay-$name.log)"
      tail -30 "$build/fuzz-replay-$name.log"
      failed=$((failed + 1)); failures+=("$name")
    fi
    continue
  fi

  work="$build/fuzz-work/$name"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  find "$seeds" -maxdepth 1 -type f ! -name 'crash-*' -exec cp {} "$work/corpus/" \;
  echo "=== $name: ${seconds}s, $(ls "$work/corpus" | wc -l) seeds, ${flags[*]}"
  "$bin" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus" >"$work/log" 2>&1
  status=$?
  last="$(grep -E '^#[0-9]+' "$work/log" | tail -1)"
  execs="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
  corp="$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")"
  line="$(printf '%-16s exec/s %-6s cov %-6s ft %-6s corpus %s' "$name" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")"
  if [ "$status" = 0 ]; then
    passed=$((passed + 1))
    summary+=("$line  ok")
  else
    failed=$((failed + 1))
    failures+=("$name")
    summary+=("$line  FAILED (exit $status): $(ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | tr '\n' ' ')")
    grep -E 'ERROR: |SUMMARY: |_fuzzer: ' "$work/log" | head -5
  fi
  echo "${summary[-1]}"
done <"$root/fuzz/targets.txt"

if [ "$replay" = 0 ] && [ "${#summary[@]}" -gt 0 ]; then
  echo
  printf '%s\n' "${summary[@]}"
fi
[ "$failed" -gt 0 ] && echo "failed: ${failures[*]} (inputs and logs under $build/fuzz-work/)"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
