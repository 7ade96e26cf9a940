#!/usr/bin/env bash
# Runs every cmocka test program in BUILD/tests, shows its output, and ends with one
# line "tests: N passed, N failed, N skipped" over all of them. Exits non-zero when a
# test failed or a program crashed or timed out.
set -uo pipefail
build=${1:-build}
per_program_timeout=${TEST_TIMEOUT:-600}
if [[ ! $per_program_timeout =~ ^[0-9]+$ ]]; then # 0: no limit, as for timeout(1)
  echo "run-tests: TEST_TIMEOUT='$per_program_timeout' is not a whole number of seconds" >&2
  exit 1
fi
shopt -s nullglob
programs=("$build"/tests/test_*)
programs=($(printf '%s\n' "${programs[@]}" | grep -v '\.[od]$'))
if ((${#programs[@]} == 0)); then
  echo "run-tests: no test programs in $build/tests" >&2
  exit 1
fi

# the tests find the source tree and the programs through these
export SUITE_ROOT=$(cd "$(dirname "$0")/.." && pwd)
export SUITE_BUILD=$(cd "$build" && pwd)

# Sanitized builds (make test-sanitize; ignored by other builds): ASan/LSan/UBSan reports go
# to files in one folder, so one from a forked loader worker or from a program a test runs
# (train, datasets, bench_*) fails the test program even if an exit status hides it.
# Why each option and suppression: tests/sanitizer/README.md.
export SUITE_SANITIZER_REPORTS=$(mktemp -d) # tests/sanitizer/report_hook.c writes here
san_supp=$SUITE_ROOT/tests/sanitizer
san_common="log_path=$SUITE_SANITIZER_REPORTS/report:exitcode=86:print_summary=1:print_suppressions=0"
export ASAN_OPTIONS="$san_common:detect_leaks=1:allocator_may_return_null=1:protect_shadow_gap=0:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="$san_common:suppressions=$san_supp/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="$san_common:halt_on_error=1:print_stacktrace=1:suppressions=$san_supp/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

passed=0 failed=0 skipped=0 broken=()
log=$(mktemp)
trap 'rm -rf "$log" "$SUITE_SANITIZER_REPORTS"' EXIT
for prog in "${programs[@]}"; do
  name=$(basename "$prog")
  echo "=== $name"
  start=$SECONDS
  timeout --signal=TERM --kill-after=10 "$per_program_timeout" "$prog" >"$log" 2>&1
  rc=$?
  cat "$log"
  reports=("$SUITE_SANITIZER_REPORTS"/*)
  if ((${#reports[@]})); then
    cat "${reports[@]}"
    rm -f "${reports[@]}"
  fi
  p=$(awk '/^\[  PASSED  \] [0-9]+ test/ {s += $4} END {print s+0}' "$log")
  f=$(awk '/^\[  FAILED  \] [0-9]+ test\(s\), listed below/ {s += $4} END {print s+0}' "$log")
  s=$(awk '/^\[  SKIPPED \] [0-9]+ test\(s\), listed below/ {s += $4} END {print s+0}' "$log")
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  if ((${#reports[@]})); then
    failed=$((failed + 1))
    broken+=("$name (sanitizer reports above)")
  elif ((rc != 0 && f == 0)); then
    failed=$((failed + 1))
    if ((rc == 124 || rc == 137)); then broken+=("$name (timed out after ${per_program_timeout}s)")
    else broken+=("$name (exit status $rc)"); fi
  elif ((f > 0)); then
    broken+=("$name ($f failed)")
  fi
  echo "=== $name: exit $rc, $((SECONDS - start))s"
done

echo
if ((${#broken[@]})); then printf 'failing: %s\n' "${broken[@]}"; fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
