#!/usr/bin/env bash
# Runs every cmocka test program in BUILD/tests (or only the named ones, in that order),
# shows its output, and ends with one line "tests: N passed, N failed, N skipped" over all
# of them. Exits non-zero when a test failed or a program crashed or timed out.
#   scripts/run-tests.sh [BUILD [TEST ...]]     e.g. run-tests.sh build test_core_gpu test_fusion
# Environment: TEST_TIMEOUT (seconds per program, default 600; 0: no limit), TEST_JOBS
# (test programs run at once, default 1; with more, each program's output is printed whole
# when it ends, in the order they end), TESTS_SKIP
# (names not to run, e.g. those another pass ran), TESTS_STATUS (a file for the caller:
# lines "failing NAME", "stopped NAME", "not_reached NAME", apart from the tests' own
# output, which may hold such words).
# Each program runs under its own timeout(1), in a process group of its own; a SIGTERM,
# SIGINT or SIGHUP to this script (the GPU check's deadline) or to make's whole process
# group (timeout 40 make test, scancel, Ctrl-C: that signal does not reach the tests' own
# groups) goes on to the groups of the running tests, so they stop with it instead of
# running on beside what comes next. It then ends with the tally so far and "tests not
# reached: ...", and exits 128 + the signal.
set -uo pipefail
build=${1:-build}
(($#)) && shift
per_program_timeout=${TEST_TIMEOUT:-600}
if [[ ! $per_program_timeout =~ ^[0-9]+$ ]]; then # 0: no limit, as for timeout(1)
  echo "run-tests: TEST_TIMEOUT='$per_program_timeout' is not a whole number of seconds" >&2
  exit 1
fi
jobs=${TEST_JOBS:-1}
if [[ ! $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "run-tests: TEST_JOBS='$jobs' is not a positive whole number (test programs at once)" >&2
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
# to files in a folder of the test program's own, so one from a forked loader worker or from
# a program a test runs (train, datasets, bench_*) fails that test program even if an exit
# status hides it. Why each option and suppression: tests/sanitizer/README.md.
work=$(mktemp -d) # per test program: its output and its reports (see start_test)
trap 'rm -rf "$work"' EXIT
san_supp=$SUITE_ROOT/tests/sanitizer
user_asan=${ASAN_OPTIONS:-} user_lsan=${LSAN_OPTIONS:-} user_ubsan=${UBSAN_OPTIONS:-}
# Exports the sanitizer options that send reports to folder $1 (report_hook.c writes there).
sanitizer_env() {
  export SUITE_SANITIZER_REPORTS=$1
  local common="log_path=$1/report:exitcode=86:print_summary=1:print_suppressions=0"
  export ASAN_OPTIONS="$common:detect_leaks=1:allocator_may_return_null=1:protect_shadow_gap=0:check_initialization_order=1:strict_init_order=1${user_asan:+:$user_asan}"
  export LSAN_OPTIONS="$common:suppressions=$san_supp/lsan.supp${user_lsan:+:$user_lsan}"
  export UBSAN_OPTIONS="$common:halt_on_error=1:print_stacktrace=1:suppressions=$san_supp/ubsan.supp${user_ubsan:+:$user_ubsan}"
}

passed=0 failed=0 skipped=0 broken=()
status_file=${TESTS_STATUS:-/dev/null}
: >"$status_file"

# The running tests, by the pid of their timeout(1): it leads the test's process group (it
# makes one unless --foreground), so the group is -pid.
declare -A running_name=() running_start=() running_files=()
index=0 # programs started
stop() {
  local sig=$1 code=$2 pid
  # Ignored, not reset: timeout(1) sends its signal to us and then to our whole process group,
  # so a second one may come while we stop the tests; by default it would end us unprinted.
  trap '' TERM INT HUP
  # every background job: also one started just before the signal and not yet recorded
  for pid in "${!running_name[@]}" $(jobs -p); do kill -s "$sig" -- "-$pid" "$pid" 2>/dev/null; done
  for pid in "${!running_name[@]}"; do
    local waited=0 # 3 s to stop cleanly (the GPU check kills us 5 s after), then the group goes
    while kill -0 "$pid" 2>/dev/null && ((waited < 30)); do sleep 0.1; waited=$((waited + 1)); done
    kill -s KILL -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    cat "${running_files[$pid]}.log"
  done
  for pid in $(jobs -p); do kill -s KILL -- "-$pid" "$pid" 2>/dev/null; done
  echo
  if ((${#broken[@]})); then printf 'failing: %s\n' "${broken[@]}"; fi
  # not a failure of the test: the caller's deadline came first
  for pid in "${!running_name[@]}"; do
    echo "tests stopped: ${running_name[$pid]} (SIG$sig: run-tests was stopped)"
    echo "stopped ${running_name[$pid]}" >>"$status_file"
  done
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

# Starts test program $1 in the background, its output to $work/N.log and its sanitizer
# reports to $work/N.reports/ (N: the how-manieth program started).
start_test() {
  local prog=$1 name files
  name=$(basename "$prog")
  index=$((index + 1))
  files=$work/$index
  ((jobs == 1)) && echo "=== $name" # with several at once, each one's output comes whole at its end
  mkdir -p "$files.reports"
  (
    sanitizer_env "$files.reports"
    exec timeout --signal=TERM --kill-after=10 "$per_program_timeout" "$prog" >"$files.log" 2>&1 </dev/null
  ) &
  running_name[$!]=$name running_start[$!]=$SECONDS running_files[$!]=$files
}

# Prints the output of the test whose timeout(1) was `pid`, which ended with status `rc`,
# and counts its results.
finish_test() {
  local pid=$1 rc=$2 name=${running_name[$1]} start=${running_start[$1]} files=${running_files[$1]}
  local log=$files.log p f s reports
  unset "running_name[$pid]" "running_start[$pid]" "running_files[$pid]"
  ((jobs == 1)) || echo "=== $name"
  cat "$log"
  reports=("$files.reports"/*)
  if ((${#reports[@]})); then cat "${reports[@]}"; fi
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
  rm -rf "$log" "$files.reports"
}

# Up to `jobs` at once; `wait -n` in the background and a trapped signal interrupts it at
# once (it would wait for a foreground program to end first).
while ((index < ${#programs[@]} || ${#running_name[@]})); do
  while ((index < ${#programs[@]} && ${#running_name[@]} < jobs)); do start_test "${programs[index]}"; done
  done_pid=""
  wait -n -p done_pid "${!running_name[@]}"
  rc=$?
  [[ -n $done_pid ]] && finish_test "$done_pid" "$rc"
done

echo
if ((${#broken[@]})); then printf 'failing: %s\n' "${broken[@]}"; fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
