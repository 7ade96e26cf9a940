#!/usr/bin/env bash
# The GPU check, run on the GPU machine in the repository root after
# scripts/device-stage.sh here:
#   bash scripts/device-check.sh [BUDGET_SECONDS] [--only NAME,NAME...]     (default 490)
#   bash scripts/device-check.sh --plan [BUDGET_SECONDS]   the plan on an H200, and whether it fits
# One deadline, start + budget, for everything, in the order a first run must answer:
#   1. the GPU tests (does each GPU path work at all: the core's kernels against the CPU
#      reference, graph replay, the new inference, checkpointing, model-option and folding
#      paths, cuDNN selection, NCCL, then the practice programs' tests, the heavy ones
#      last), up to DEVICE_CHECK_TEST_SHARE % of the budget;
#   2. the twin's credibility rows (scripts/twin_compare.py: the core against PyTorch
#      eager on the same GPU), up to DEVICE_CHECK_TWIN_SHARE %;
#   3. a quick pass of every practice program (scripts/quick-pass.txt: each program's
#      estimate, which is its share, and filter, 4 repetitions), until
#      DEVICE_CHECK_CPU_TEST_SHARE % before the end;
#   4. the other tests (they ran on the build machine already), with what is left.
# A phase that ends early leaves its time to the next; scripts/device-plan.sh holds the
# estimates, and --plan prints each phase and programme with its estimate and window and
# exits 1 when the plan does not fit the budget. The check archives the log and the results
# folder into $OUT/device-check.tar.gz after each phase and each practice program (a kill
# at the tool's limit still brings back what finished), checks that no process of the
# suite is left, and ends with a summary and the --only line that reruns what failed,
# its budget sized for a fresh machine (issue it at once: the machine goes cold 30 s after
# a call, and a fresh start takes ~120 s of the session's 900).
#   --only NAMES   a rerun: just these tests (test_*), twin configs (twin, or
#                  PRESET:BATCH:PRECISION:LAYOUT) and practice programs (amp, zero_grad),
#                  with the same archive; e.g. --only test_core_graph,resnet18:128:fp16:nhwc,amp
# SIGTERM, SIGINT or SIGHUP (timeout(1), a scheduler, Ctrl-C) go on to what runs (the
# tests' runner, the twin, run-suite, each in a session of its own); what finished is
# summarized and archived within a few seconds, nothing of the suite is left running, and
# the check exits 128 + the signal's number.
# Whether a GPU is expected does not rest on the CUDA probe alone (build/context's
# no_gpu_reason: the very call a broken or too old driver fails): `nvidia-smi -L` listing a
# GPU, the device file /dev/nvidia0 (DEVICE_CHECK_NVIDIA_DEVICE) or SUITE_EXPECT_GPU=1 from
# the caller say that there is one. Where they do and the probe finds none, the check
# fails at once, naming both. With no such evidence and no GPU it is a dry run:
# SUITE_EXPECT_GPU stays unset (every GPU test and benchmark skips instead of failing);
# on a GPU it exports SUITE_EXPECT_GPU=1. SUITE_GPU_CHECK=1 is set in both cases (a
# missing tool such as mpirun is a visible skip).
# Environment: BUILD (default device-stage/build), OUT (default /tmp/device-out),
# RESULTS_ROOT (default results), DEVICE_CHECK_TEST_SHARE (default 49),
# DEVICE_CHECK_TWIN_SHARE (default 11; 0 skips the twin), DEVICE_CHECK_CPU_TEST_SHARE
# (default 0: the other tests get what the phases before leave), DEVICE_CHECK_NVIDIA_DEVICE,
# TWIN_CONFIGS (default resnet18:128:fp32:nchw resnet18:128:fp16:nhwc), TWIN_PRACTICES,
# PYTHON (a Python with torch), and run-suite.sh's BENCH_* variables (they win over the plan).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD
source scripts/device-plan.sh || exit 2

# --archive OUT RESULTS LOG: (re)writes OUT/device-check.tar.gz atomically.
if [[ ${1:-} == --archive ]]; then
  out=$2 results=$3 log=$4
  items=()
  [[ -d $results ]] && items+=("$results")
  [[ -f $log ]] && items+=(-C "$(dirname "$log")" "$(basename "$log")")
  ((${#items[@]})) || exit 0
  tar -czf "$out/.device-check.tar.gz.tmp" "${items[@]}" 2>/dev/null &&
    mv -f "$out/.device-check.tar.gz.tmp" "$out/device-check.tar.gz"
  exit $?
fi

usage() { echo "usage: scripts/device-check.sh [--plan] [BUDGET_SECONDS] [--only NAME,NAME...]" >&2; exit 2; }
budget=490 budget_set="" only="" plan_only=0 args=("$@")
while (($#)); do
  case $1 in
    --only) (($# >= 2)) || usage; only=$2; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    --plan) plan_only=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) [[ -z $budget_set ]] || usage; budget=$1 budget_set=1; shift ;;
  esac
done
if [[ ! $budget =~ ^[0-9]+$ ]] || ((budget < 10)); then
  echo "device-check: BUDGET_SECONDS='$budget' must be a whole number of seconds >= 10" >&2
  exit 2
fi
percent() { # NAME VALUE MIN MAX
  if [[ ! $2 =~ ^[0-9]+$ ]] || (($2 < $3 || $2 > $4)); then
    echo "device-check: $1='$2' must be a percentage in $3..$4" >&2
    exit 2
  fi
}
test_share=${DEVICE_CHECK_TEST_SHARE:-49}; percent DEVICE_CHECK_TEST_SHARE "$test_share" 1 80
twin_share=${DEVICE_CHECK_TWIN_SHARE:-11}; percent DEVICE_CHECK_TWIN_SHARE "$twin_share" 0 50
cpu_share=${DEVICE_CHECK_CPU_TEST_SHARE:-0}; percent DEVICE_CHECK_CPU_TEST_SHARE "$cpu_share" 0 50
if ((test_share + twin_share + cpu_share > 90)); then
  echo "device-check: the shares of the tests, the twin and the other tests add up to over 90%" >&2
  exit 2
fi
if ((plan_only)); then
  [[ -z $only ]] || usage
  plan_print "$budget" "$test_share" "$twin_share" "$cpu_share"
  exit $?
fi
plan=$plan_quick_pass
gpu_tests=("${plan_gpu_tests[@]}")

# --only: split the names by kind.
only_tests=() only_twin=() only_programs=()
if [[ -n $only ]]; then
  IFS=, read -r -a names <<<"$only"
  for n in "${names[@]}"; do
    case $n in
      "") ;;
      test_*) only_tests+=("$n") ;;
      twin) only_twin+=(all) ;;
      *:*:*:*) only_twin+=("$n") ;;
      *[!a-z0-9_]*) echo "device-check: --only: '$n' is no test, twin config or program name" >&2; exit 2 ;;
      *) only_programs+=("$n") ;;
    esac
  done
  if ((${#only_tests[@]} + ${#only_twin[@]} + ${#only_programs[@]} == 0)); then
    echo "device-check: --only '$only' names nothing to run" >&2
    exit 2
  fi
fi

out=${OUT:-/tmp/device-out}
build=${BUILD:-device-stage/build}
nvidia_device=${DEVICE_CHECK_NVIDIA_DEVICE:-/dev/nvidia0}
mkdir -p "$out" || exit 2
log="$out/device-check.log"
: >"$log"
now() { date +%s; }
start=$(now)
deadline=$((start + budget))
wrap=("$root/scripts/with-gpu-libs.sh")

# The phases' ends (seconds since the epoch); a phase that is not run leaves its time on.
plan_phases "$budget" "$test_share" "$twin_share" "$cpu_share"
pack_reserve=$plan_pack_reserve # leftovers (<= 5 s), summary, archive
end_gpu_tests=$((start + plan_end_tests))
end_twin=$((start + plan_end_twin))
end_all=$((start + plan_end_all))
run_gpu_tests=1 run_twin=1 run_bench=1 run_other_tests=1
if [[ -n $only ]]; then
  ((${#only_tests[@]})) || run_gpu_tests=0
  ((${#only_twin[@]})) || run_twin=0
  ((${#only_programs[@]})) || run_bench=0
  run_other_tests=0 # named tests all run first
fi
((twin_share > 0)) || run_twin=0
end_bench=$((run_other_tests ? start + plan_end_bench : end_all))
# a rerun's phases that are the last to run may use all that is left
((run_bench)) || end_twin=$end_bench
((run_bench || run_twin)) || end_gpu_tests=$end_bench

# Everything from here goes to the terminal and to the log (the log is archived with the
# results); the tee ignores the signals that stop the check, so that the summary still
# reaches both.
exec 3>&1 4>&2
exec > >(trap '' TERM INT HUP; exec tee -a "$log") 2>&1
tee_pid=$!

# A signal stops the check: it goes on to the phase that runs (a session of its own, so the
# signal reaches it once, from here), the phases after it are not run, and the check
# summarizes and archives what finished and exits 128 + the signal's number. A second
# signal while it stops (timeout(1) signals the check, then its whole group) is ignored.
stop_signal="" stop_status=0 phase_pid="" stop_grace=9 # run-suite: 5 s for its program, then its summary
on_signal() { # NAME NUMBER
  [[ -z $stop_signal ]] || return 0
  stop_signal=$1 stop_status=$((128 + $2))
  echo "device-check: SIG$1: stopping what runs; the summary and the archive of what finished follow"
  [[ -z $phase_pid ]] || kill -s "$1" -- "-$phase_pid" 2>/dev/null
}
trap 'on_signal TERM 15' TERM
trap 'on_signal INT 2' INT
trap 'on_signal HUP 1' HUP

# Runs a phase's command in a session of its own, its output to the log and, unless FILE is
# -, also to FILE, and waits for it; sets phase_rc. Stopped by a signal, the phase gets
# stop_grace seconds to end (run-tests.sh and run-suite.sh stop what they run and report),
# then its whole group is killed.
run_phase() { # FILE|- COMMAND...
  local file=$1 follower="" waited; shift
  if [[ $file == - ]]; then
    setsid "$@" </dev/null &
    phase_pid=$!
  else
    : >"$file" # before the follower opens it
    setsid "$@" </dev/null >>"$file" 2>&1 &
    phase_pid=$!
    (trap '' TERM INT HUP; exec tail -n +1 -s 0.2 -f --pid="$phase_pid" "$file") &
    follower=$!
  fi
  while kill -0 "$phase_pid" 2>/dev/null; do
    if [[ -n $stop_signal ]]; then
      waited=0
      while kill -0 "$phase_pid" 2>/dev/null && ((waited < stop_grace * 10)); do
        sleep 0.1
        waited=$((waited + 1))
      done
      kill -s KILL -- "-$phase_pid" 2>/dev/null
    fi
    wait "$phase_pid" # a trapped signal ends the wait early: the loop waits again
  done
  wait "$phase_pid"
  phase_rc=$?
  phase_pid=""
  [[ -z $follower ]] || wait "$follower"
  return 0
}

# Processes of the suite still running: their program is in the build folder, or their
# command line names it (mpirun, a shell running a test), or they are the twin's Python.
# One ps and one find, not a few commands per process: this runs on a busy machine.
suite_processes() {
  local build_abs
  build_abs=$(cd "$build" 2>/dev/null && pwd -P) || return 0
  local by_exe
  by_exe=$(find /proc/[0-9]*/exe -maxdepth 0 -lname "$build_abs/*" 2>/dev/null | cut -d/ -f3 | tr '\n' ' ')
  # the patterns travel in the environment: on awk's command line they would match awk
  ps -eo pid=,stat=,args= 2>/dev/null | B="$build_abs/" EXE=" $by_exe" ME="$$" \
    TWIN="twin_compare.py --device cuda --build $build " awk '
    $1 == ENVIRON["ME"] || $2 ~ /^[ZX]/ { next }
    index(ENVIRON["EXE"], " " $1 " ") || index($0, ENVIRON["B"]) || index($0, ENVIRON["TWIN"]) {
      line = $1; for (i = 3; i <= NF; i++) line = line " " $i; print substr(line, 1, 160) }'
}

# The names of the rerun line: only tests and programs of this build (a status file may
# hold other words: a test that ran run-tests.sh itself once wrote "failing test_g" there).
rerun=()
rerun_add() { # NAME...
  local n
  for n; do
    if [[ $n == test_* && -x $build/tests/$n && ! -d $build/tests/$n ]] ||
       [[ $n != test_* && $n =~ ^[a-z0-9_]+$ && -x $build/bench_$n ]]; then
      rerun+=("$n")
    else
      echo "device-check: '$n' is no test or program of $build: not in the rerun line"
    fi
  done
}

# Runs one test phase: LABEL LIMIT SKIP RERUN_CUT [TEST...] (no names: every test but those
# in SKIP). Adds its line to tests_lines, its failures to tests_failed and to the rerun, and,
# when RERUN_CUT is 1, the tests it stopped or did not reach.
tests_failed=0 tests_lines=()
run_tests_phase() {
  local label=$1 limit=$2 skip=$3 rerun_cut=$4; shift 4
  if ((limit < 5)); then
    tests_lines+=("$label: not run (no time left)")
    return
  fi
  echo "== $label (at most ${limit}s; $((deadline - $(now)))s left in all)"
  local test_out="$out/.tests.out" test_status="$out/.tests.status" rc per=$((limit - 2))
  # each program a little less than the phase (a hung one is named as such), and at
  # most half of it beyond 60 s, so that one hung GPU test leaves the rest their time
  ((per > 60 && per > limit / 2)) && per=$((limit / 2 > 60 ? limit / 2 : 60))
  # one program at a time: the GPU tests share the device, and a deadline stops one
  run_phase "$test_out" env TEST_JOBS=1 TEST_TIMEOUT=$per TESTS_SKIP="$skip" TESTS_STATUS="$test_status" \
    timeout --signal=TERM --kill-after=5 "$limit" "${wrap[@]}" bash scripts/run-tests.sh "$build" "$@"
  rc=$phase_rc
  local line failed
  line=$(grep -E '^tests: [0-9]+ passed' "$test_out" | tail -n 1)
  [[ -n $line ]] || line="tests: no tally (exit $rc)"
  failed=$(sed -n 's/^tests: [0-9]* passed, \([0-9]*\) failed.*/\1/p' <<<"$line")
  tests_failed=$((tests_failed + ${failed:-1}))
  ((rc != 0 && ${failed:-1} == 0 && rc != 124 && rc != 137 && rc != 143 && rc != 130 && rc != 129)) &&
    tests_failed=$((tests_failed + 1))
  # run-tests.sh's own account (the tests' output may hold the same words)
  local stopped reached
  stopped=$(awk '$1 == "stopped" { print $2 }' "$test_status" 2>/dev/null)
  reached=$(awk '$1 == "not_reached" { printf "%s ", $2 }' "$test_status" 2>/dev/null)
  if [[ -n $stopped || -n $reached ]]; then
    if [[ -n $stop_signal ]]; then line="$line; stopped by SIG$stop_signal"; else line="$line; cut at the phase's ${limit}s"; fi
    line="$line: stopped ${stopped:-none}, not reached: ${reached:-none}"
    ((rerun_cut)) && rerun_add $stopped $reached
  fi
  rerun_add $(awk '$1 == "failing" { print $2 }' "$test_status" 2>/dev/null)
  tests_lines+=("$label: ${line#tests: }")
  rm -f "$test_out" "$test_status"
}

# The practice programs of the build that the quick pass runs (--only: the named ones).
quick_pass_programs() {
  local p
  if ((${#only_programs[@]})); then printf '%s\n' "${only_programs[@]}"; return; fi
  for p in "$build"/bench_*; do [[ -x $p && ! -d $p ]] && echo "${p##*/bench_}"; done
}

results=""
main() {
  echo "device-check: budget ${budget}s, deadline $(date -u -d "@$deadline" +%H:%M:%SZ), build $build${only:+, only $only}"
  # device-stage.sh packs the programs (device-stage/build.tar.xz): unpack them once, with
  # xz, or with Python's lzma where there is no xz.
  local packed=device-stage/build.tar.xz
  if [[ $build == device-stage/build && ! -x $build/context && -f $packed ]]; then
    echo "device-check: unpacking $packed"
    if command -v xz >/dev/null 2>&1; then
      xz -dc "$packed" | tar -xf - -C device-stage
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$packed" device-stage
    fi || echo "device-check: could not unpack $packed"
  fi
  if [[ ! -x $build/context ]]; then
    echo "device-check: no $build/context: run scripts/device-stage.sh on the build machine" \
         "and carry device-stage (or set BUILD)"
    return 2
  fi
  local n
  for n in "${only_programs[@]}"; do
    [[ -x $build/bench_$n ]] || { echo "device-check: --only: no practice program $build/bench_$n"; return 2; }
  done
  for n in "${only_tests[@]}"; do
    [[ -x $build/tests/$n ]] || { echo "device-check: --only: no test program $build/tests/$n"; return 2; }
  done
  "${wrap[@]}" --print
  local smi_list=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm \
      --format=csv 2>&1 || echo "device-check: nvidia-smi failed"
    smi_list=$(nvidia-smi -L 2>/dev/null | grep -m 1 '^GPU ')
  else
    echo "device-check: no nvidia-smi on this machine"
  fi
  local context
  context=$("${wrap[@]}" "$build/context" 2>&1) || echo "device-check: $build/context failed (libraries? see below)"
  echo "$context"
  "${wrap[@]}" ldd "$build/context" | grep -E 'not found|cud|nccl|cublas' || true
  slug=$("${wrap[@]}" "$build/context" --slug) || slug=unknown
  # a folder of its own, never shared with a rerun or another run (scripts/results-dir.sh)
  results=$(bash "$root/scripts/results-dir.sh" create "${RESULTS_ROOT:-results}" "$slug") || {
    echo "device-check: cannot create a results folder under ${RESULTS_ROOT:-results}"
    return 2
  }
  printf -v archive_cmd '%q ' bash "$root/scripts/device-check.sh" --archive "$out" "$results" "$log"

  # A GPU run or a dry run. The CUDA probe (the context's no_gpu_reason) is the very call a
  # broken or too old driver fails, so other evidence of an NVIDIA GPU is asked too; where
  # it and the probe disagree, nothing would mean anything: the check fails here.
  local dry_reason evidence=()
  dry_reason=$(sed -n 's/^no_gpu_reason=//p' <<<"$context")
  [[ -n $smi_list ]] && evidence+=("nvidia-smi -L lists '$smi_list'")
  [[ -e $nvidia_device ]] && evidence+=("$nvidia_device exists")
  [[ ${SUITE_EXPECT_GPU:-} == 1 ]] && evidence+=("the caller set SUITE_EXPECT_GPU=1")
  if [[ -n $dry_reason ]] && ((${#evidence[@]})); then
    local said
    said=$(printf '%s; ' "${evidence[@]}")
    echo
    echo "== device-check summary ($(($(now) - start))s of ${budget}s)"
    echo "device-check: FAILED: a GPU is expected (${said%; }), but the CUDA probe finds none" \
         "($dry_reason): a driver that is broken, older than the CUDA runtime, or not reachable" \
         "from here; nothing was run (nvidia-smi and the context above say more)"
    echo "results: $results (archived in $out/device-check.tar.gz)"
    return 1
  fi
  export SUITE_GPU_CHECK=1
  if [[ -n $dry_reason ]]; then
    echo "device-check: DRY RUN ($dry_reason; no nvidia-smi GPU, no $nvidia_device, no SUITE_EXPECT_GPU=1):" \
         "GPU tests and GPU benchmarks skip; SUITE_EXPECT_GPU unset"
    unset SUITE_EXPECT_GPU
  else
    export SUITE_EXPECT_GPU=1
    echo "device-check: GPU run: SUITE_EXPECT_GPU=1 (no CUDA device fails every test and benchmark)"
  fi
  echo "device-check: the plan (seconds from the start): GPU tests until $((end_gpu_tests - start))," \
       "the twin until $((end_twin - start)), the quick pass until $((end_bench - start))," \
       "the other tests until $((end_all - start)), the leftover check, summary and archive in the last ${pack_reserve}" \
       "(scripts/device-check.sh --plan $budget: each one's estimate)"

  # 1. Does each GPU path work?
  local t0=$(now) gpu_secs=0 names=()
  if ((run_gpu_tests)); then
    if [[ -n $only ]]; then names=("${only_tests[@]}")
    else for t in "${gpu_tests[@]}"; do [[ -x $build/tests/$t ]] && names+=("$t"); done; fi
    if ((${#names[@]})); then
      local label="tests on the GPU"
      [[ -n $only ]] && label="named tests"
      run_tests_phase "$label" $((end_gpu_tests - $(now))) "" 1 "${names[@]}"
    fi
    eval "$archive_cmd"
  fi
  gpu_secs=$(($(now) - t0))

  # 2. The suite's credibility figure: the core against PyTorch on this GPU.
  twin_line="twin: not run" twin_secs=0
  [[ -n $only && run_twin -eq 0 ]] && twin_line="twin: not named in --only"
  t0=$(now)
  if ((run_twin)) && [[ -n $stop_signal ]]; then
    run_twin=0 twin_line="twin: not run (stopped by SIG$stop_signal)"
    rerun+=(twin)
  elif ((run_twin)); then
    local twin_budget=$((end_twin - $(now))) compile=() configs=()
    if [[ -n $only && ${only_twin[*]} != *all* ]]; then configs=("${only_twin[@]}")
    else read -r -a configs <<<"${TWIN_CONFIGS:-$plan_twin_configs}"; fi
    # torch.compile needs a minute for resnet18 and a C compiler at run time (Triton builds
    # its launchers)
    if ((twin_budget < 90)); then
      echo "twin: torch.compile skipped: ${twin_budget}s are too few for its compilation (90 s or more)"
    elif command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; then compile=(--compile)
    else echo "twin: torch.compile skipped: no C compiler on this machine (Triton needs one at run time)"; fi
    if ((twin_budget < 10)); then
      twin_line="twin: not run (no time left)"
    elif [[ ! -x $build/steptime ]]; then
      twin_line="twin: skipped (no $build/steptime)"
    elif ! "${PYTHON:-python3}" -c 'import torch' >/dev/null 2>&1; then
      twin_line="twin: skipped (${PYTHON:-python3} cannot import torch on this machine)"
    else
      echo "== twin comparison (at most ${twin_budget}s)"
      run_phase - timeout --signal=TERM --kill-after=5 $((twin_budget + 5)) \
        "${PYTHON:-python3}" scripts/twin_compare.py --device cuda --build "$build" --out "$results/twin" \
        --rounds "$plan_twin_rounds" "${compile[@]}" --budget "$twin_budget" \
        --core-prefix "bash $root/scripts/with-gpu-libs.sh" \
        ${TWIN_PRACTICES:+--practices "$TWIN_PRACTICES"} "${configs[@]}"
      if ((phase_rc == 0)); then twin_line="twin: $results/twin/twin.md"
      else twin_line="twin: twin_compare.py failed (exit $phase_rc; see the log above)"; fi
    fi
    eval "$archive_cmd"
    echo "$twin_line"
  fi
  twin_secs=$(($(now) - t0))

  # 3. The practices' quick pass.
  bench_rc=0 bench_secs=0 bench_line=""
  t0=$(now)
  if ((run_bench)) && [[ -n $stop_signal ]]; then
    run_bench=0 bench_line="quick pass: not run (stopped by SIG$stop_signal)"
    rerun_add $(quick_pass_programs)
  elif ((run_bench)); then
    echo "== quick pass ($((end_bench - $(now)))s of $((deadline - $(now)))s left; plan $plan)"
    local filter=""
    ((${#only_programs[@]})) && filter="^bench_($(IFS='|'; echo "${only_programs[*]}"))\$"
    printf -v command_line '%q ' bash scripts/device-check.sh "${args[@]}"
    run_phase - env BENCH_PLAN="$plan" BENCH_DEADLINE="$end_bench" BENCH_NO_CHARTS=1 RESULTS_DIR="$results" \
      BENCH_FILTER="$filter" BENCH_AFTER_PROGRAM="$archive_cmd" \
      BENCH_COMMAND="${command_line}(the quick pass: BENCH_PLAN=$plan)" \
      "${wrap[@]}" bash scripts/run-suite.sh "$build"
    bench_rc=$phase_rc
  fi
  bench_secs=$(($(now) - t0))

  # 4. The other tests, with what is left: they ran on the build machine already (a cut
  # one is not rerun).
  other_secs=0
  t0=$(now)
  if ((run_other_tests)) && [[ -n $stop_signal ]]; then
    tests_lines+=("other tests: not run (stopped by SIG$stop_signal)")
  elif ((run_other_tests)); then
    run_tests_phase "other tests" $((end_all - $(now))) "${gpu_tests[*]}" 0
    eval "$archive_cmd"
  fi
  other_secs=$(($(now) - t0))

  # Nothing of the suite may outlive the check (a rank, mpirun, a test's child). Ranks on
  # their way out get 3 s, none after a signal.
  local left still tries=0
  leftover_line="leftover processes: none"
  left=$(suite_processes)
  while [[ -n $left && -z $stop_signal ]] && ((tries < 6)); do
    sleep 0.5
    tries=$((tries + 1))
    left=$(suite_processes)
  done
  if [[ -n $left ]]; then
    echo "device-check: processes of the suite still running after the check:"
    echo "$left"
    kill -TERM $(cut -d' ' -f1 <<<"$left") 2>/dev/null
    sleep 1
    still=$(suite_processes | cut -d' ' -f1)
    [[ -z $still ]] || kill -KILL $still 2>/dev/null
    leftover_line="leftover processes: $(wc -l <<<"$left") found and killed: $(cut -c1-60 <<<"$left" | tr '\n' ';')"
  fi
  summary "$dry_reason"
  # A cut (a phase or a program stopped at its share) is not a failure: it depends on the
  # host's speed. A test or a benchmark that failed, or a process left behind, is.
  ((tests_failed == 0 && bench_failed == 0 && bench_rc == 0)) && [[ -z $left ]]
}

# The summary: each phase's line, the quick pass per program, the leftover check, and the
# line that reruns what failed or did not finish, with a budget for a fresh machine.
summary() { # DRY_REASON
  local dry_reason=$1 l
  echo
  echo "== device-check summary ($(($(now) - start))s of ${budget}s${dry_reason:+; DRY RUN: $dry_reason}${stop_signal:+; stopped by SIG$stop_signal})"
  for l in "${tests_lines[@]}"; do echo "$l"; done
  ((run_gpu_tests)) && echo "  tests phase: ${gpu_secs}s (planned until $((end_gpu_tests - start))s from the start)"
  if ((run_twin)); then echo "$twin_line (${twin_secs}s)"; else echo "$twin_line"; fi
  bench_failed=0
  if ((run_bench)) && [[ -f $results/suite-status.tsv ]]; then
    awk -F'\t' 'NR > 1 { n++; st[$2]++; ok += $3; sk += $4; er += $5 }
      END { printf "benchmarks: %d ok, %d skipped, %d failed in %d programs:", ok, sk, er, n
            sep = " "; for (s in st) { printf "%s%d %s", sep, st[s], s; sep = ", " }
            print "" }' "$results/suite-status.tsv"
    echo "  quick pass: ${bench_secs}s; per program (share: planned seconds, limit: the most it could have had):"
    column -t -s $'\t' "$results/suite-plan.tsv" 2>/dev/null | sed 's/^/    /'
    awk -F'\t' 'NR > 1 && $2 != "ran" && $2 != "skipped" { printf "    %s: %s (%s)\n", $1, $2, $7 }' \
      "$results/suite-status.tsv"
    bench_failed=$(awk -F'\t' 'NR > 1 && $2 == "failed" { n++ } END { print n + 0 }' "$results/suite-status.tsv")
    rerun_add $(awk -F'\t' 'NR > 1 && $2 != "ran" && $2 != "skipped" { print $1 }' "$results/suite-status.tsv")
    # stopped by a signal: the programs it did not reach too
    [[ -z $stop_signal ]] || rerun_add $(quick_pass_programs | awk -F'\t' 'NR == FNR { if (FNR > 1) seen[$1] = 1; next }
      !($1 in seen)' "$results/suite-status.tsv" -)
    if ((bench_rc != 0 && bench_failed == 0)) && [[ -z $stop_signal ]]; then
      echo "results pipeline: run-suite exit $bench_rc with no program failed (summary or report: see the log)"
    fi
  elif ((run_bench)); then
    echo "benchmarks: no results (run-suite exit $bench_rc)"
    bench_failed=1
    [[ -z $stop_signal ]] || rerun_add $(quick_pass_programs)
  elif [[ -n $bench_line ]]; then
    echo "$bench_line"
  fi
  ((run_other_tests)) && echo "  other tests: ${other_secs}s"
  # How much room each check left (tolerance / largest observed difference): on a GPU, the
  # calibration of tolerances that were set from CPU rounding figures and reasoning.
  if ((run_bench)) && [[ -d $results ]]; then
    "${PYTHON:-python3}" "$root/scripts/check_margins.py" "$results" --out "$results/check-margins.tsv" 2>&1 ||
      echo "check margins: scripts/check_margins.py failed"
  fi
  echo "$leftover_line"
  if ((${#rerun[@]})); then
    local names rerun_budget
    names=$(printf '%s\n' "${rerun[@]}" | awk '!seen[$0]++' | paste -sd, -)
    rerun_budget=$(plan_rerun_budget "$budget" $(tr , ' ' <<<"$names"))
    echo "rerun what failed or did not finish, at once (the machine goes cold 30 s after this call;" \
         "a fresh one takes ~${plan_cold_start_s}s to start, so issue it while" \
         "$((plan_cold_start_s + plan_transfer_s + rerun_budget))s of device time are left):" \
         "bash scripts/device-check.sh $rerun_budget --only $names"
  fi
  echo "results: $results (archived in $out/device-check.tar.gz)"
}

main
rc=$?
((rc == 0 || rc == 2)) || rc=1
[[ -n $stop_signal ]] && rc=$stop_status
trap '' TERM INT HUP # the check is done: the archive is what is left to write
rm -f "$out/.tests.out" "$out/.tests.status"
exec >&3 2>&4 3>&- 4>&- # the tee sees the end of its input, writes the rest of the log
for ((i = 0; i < 50; i++)); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.1; done
bash "$root/scripts/device-check.sh" --archive "$out" "${results:-/nonexistent}" "$log"
exit "$rc"
