#!/usr/bin/env bash
# Runs every cmocka test program in BUILD/tests (or only the named ones, in that order),
# shows its output, and ends with one line "tests: N passed, N failed, N skipped" over all
# of them. Exits non-zero when a test failed or a program crashed or timed out.
#   scripts/run-tests.sh [BUILD [TEST ...]]     e.g. run-tests.sh build test_core_gpu test_fusion
# Environment: TEST_TIMEOUT (seconds per program, default 600; 0: no limit), TESTS_SKIP
# (names not to run, e.g. those another pass ran), TESTS_STATUS (a file for the caller:
# lines "failing NAME", "stopped NAME", "not_reached NAME", apart from the tests' own
# output, which may hold such words).
# Each program runs under its own timeout(1), in a process group of its own; a SIGTERM,
# SIGINT or SIGHUP to this script (the GPU check's deadline) goes on to that group, so the
# running test stops with it instead of running on beside what comes next. It then ends
# with the tally so far and "tests not reached: ...", and exits 128 + the signal.
set -uo pipefail
build=${1:-build}
(($#)) && shift
per_program_timeout=${TEST_TIMEOUT:-600}
if [[ ! $per_program_timeout =~ ^[0-9]+$ ]]; then # 0: no limit, as for timeout(1)
  echo "run-tests: TEST_TIMEOUT='$per_program_timeout' is not a whole number of seconds" >&2
  exit 1
fi
shopt -s nullglob
programs=("$build"/tests/test_*)
programs=($(printf '%s\n' "${programs[@]}" | grep -v '\.[od]$'))
if (($#)); then # the named ones, in the order given
  named=()
  for name in "$@"; do
    if [[ -x $build/tests/$name && ! -d $build/tests/$name ]]; then named+=("$build/tests/$name")
    else echo "run-tests: no test program $build/tests/$name" >&2; exit 1; fi
  done
  programs=("${named[@]}")
fi
if [[ -n ${TESTS_SKIP:-} ]]; then
  kept=()
  for prog in "${programs[@]}"; do
    [[ " $TESTS_SKIP " == *" $(basename "$prog") "* ]] || kept+=("$prog")
  done
  programs=(${kept[@]+"${kept[@]}"})
fi
if ((${#programs[@]} == 0)); then
  echo "run-tests: no test programs in $build/tests${TESTS_SKIP:+ outside TESTS_SKIP}" >&2
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
status_file=${TESTS_STATUS:-/dev/null}
: >"$status_file"
log=$(mktemp)
trap 'rm -rf "$log" "$SUITE_SANITIZER_REPORTS"' EXIT

# The running test's timeout(1): it leads the test's process group (it makes one unless
# --foreground), so the group is -$current.
current="" current_name="" index=0
stop() {
  local sig=$1 code=$2
  trap - TERM INT HUP
  if [[ -n $current ]]; then
    kill -s "$sig" -- "-$current" "$current" 2>/dev/null
    local waited=0 # 3 s to stop cleanly (the GPU check kills us 5 s after), then the group goes
    while kill -0 "$current" 2>/dev/null && ((waited < 30)); do sleep 0.1; waited=$((waited + 1)); done
    kill -s KILL -- "-$current" 2>/dev/null
    wait "$current" 2>/dev/null
    cat "$log"
  fi
  echo
  if ((${#broken[@]})); then printf 'failing: %s\n' "${broken[@]}"; fi
  # not a failure of the test: the caller's deadline came first
  if [[ -n $current ]]; then
    echo "tests stopped: $current_name (SIG$sig, the caller's deadline)"
    echo "stopped $current_name" >>"$status_file"
  fi
  local rest=("${programs[@]:index}") p
  if ((${#rest[@]})); then
    echo "tests not reached: $(printf '%s\n' "${rest[@]}" | xargs -n1 basename | tr '\n' ' ')"
    for p in "${rest[@]}"; do echo "not_reached $(basename "$p")" >>"$status_file"; done
  fi
  echo "tests: $passed passed, $failed failed, $skipped skipped (stopped by SIG$sig)"
  exit "$code"
}
trap 'stop TERM 143' TERM
trap 'stop INT 130' INT
trap 'stop HUP 129' HUP

for prog in "${programs[@]}"; do
  name=$(basename "$prog")
  index=$((index + 1))
  echo "=== $name"
  start=$SECONDS
  # In the background and waited for: a trapped signal interrupts `wait` at once (it
  # would wait for a foreground program to end first).
  timeout --signal=TERM --kill-after=10 "$per_program_timeout" "$prog" >"$log" 2>&1 </dev/null &
  current=$! current_name=$name
  wait "$current"
  rc=$?
  current=""
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
    echo "failing $name" >>"$status_file"
  elif ((rc != 0 && f == 0)); then
    failed=$((failed + 1))
    if ((rc == 124 || rc == 137)); then broken+=("$name (timed out after ${per_program_timeout}s)")
    else broken+=("$name (exit status $rc)"); fi
    echo "failing $name" >>"$status_file"
  elif ((f > 0)); then
    broken+=("$name ($f failed)")
    echo "failing $name" >>"$status_file"
  fi
  echo "=== $name: exit $rc, $((SECONDS - start))s"
done

echo
if ((${#broken[@]})); then printf 'failing: %s\n' "${broken[@]}"; fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
