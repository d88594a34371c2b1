#!/usr/bin/env bash
# Runs ctest in a sanitizer build folder (`make test-sanitize`, `make test-tsan`; BUILD.md,
# "Sanitizers") and fails on any sanitizer report, from a test binary or from a process a test
# started (the gateway, the sandbox), whatever that test made of the process's exit code.
#   scripts/run-sanitized-tests.sh BUILD_DIR address|thread [ctest arguments...]
#                                  [--then ctest arguments...]...
# (each --then starts another ctest run over the same build, e.g. a -L selection and a -R one)
# Every report goes to BUILD_DIR/sanitizer-reports/<sanitizer>.<pid> (log_path) instead of
# stderr; the folder must be empty at the end. The options are the sanitizers' own:
#   ASan: halt on the first error (its default), LeakSanitizer on (its default on Linux);
#         suppressions in tests/sanitizers/lsan.supp.
#   UBSan: built with -fno-sanitize-recover=undefined, so the first report ends the process;
#          a stack trace with it.
#   TSan: every report of a run (not only the first), exit code 66 when there was one;
#         suppressions in tests/sanitizers/tsan.supp.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="$(cd "$1" && pwd)"
sanitizer="$2"
shift 2
supp="$root/tests/sanitizers"
reports="$build_dir/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"

case "$sanitizer" in
  address)
    export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:halt_on_error=1:check_initialization_order=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="log_path=$reports/ubsan:halt_on_error=1:print_stacktrace=1"
    ;;
  thread)
    # ignore_noninstrumented_modules: the interceptors (malloc, free, memcpy...) called from
    # Debian's uninstrumented libraries (gRPC, protobuf, Abseil, curl) are not checked: their
    # own synchronization is invisible to TSan, so what they free or copy on their threads
    # would be reported as races. Our code's accesses are all checked.
    export TSAN_OPTIONS="log_path=$reports/tsan:suppressions=$supp/tsan.supp:print_suppressions=0:halt_on_error=0:second_deadlock_stack=1:history_size=4:ignore_noninstrumented_modules=1"
    ;;
  *)
    echo "run-sanitized-tests: address or thread, not '$sanitizer'" >&2
    exit 2
    ;;
esac

status=0
run=()
for arg in "$@" --then; do
  if [ "$arg" = --then ]; then
    ctest --test-dir "$build_dir" --output-on-failure "${run[@]}" || status=$?
    run=()
  else
    run+=("$arg")
  fi
done

mapfile -t found < <(find "$reports" -type f | sort)
if [ "${#found[@]}" -gt 0 ]; then
  for f in "${found[@]}"; do
    echo "===== $f"
    cat "$f"
  done
  echo "run-sanitized-tests: ${#found[@]} sanitizer report file(s) in $reports (above)" >&2
  exit 1
fi
[ "$status" -eq 0 ] && echo "run-sanitized-tests: $sanitizer: no report"
exit "$status"
