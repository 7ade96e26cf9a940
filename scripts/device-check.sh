#!/usr/bin/env bash
# The GPU check, run on the GPU machine in the repository root after
# scripts/device-stage.sh here:
#   bash scripts/device-check.sh [BUDGET_SECONDS] [--only NAME,NAME...]     (default 420)
# One deadline, start + budget, for everything, in the order a first run must answer:
#   1. the GPU tests (does each GPU path work at all: kernels against the CPU reference,
#      graph replay, cuDNN selection, NCCL), up to DEVICE_CHECK_TEST_SHARE % of the budget;
#   2. the twin's credibility rows (scripts/twin_compare.py: the core against PyTorch
#      eager on the same GPU), up to DEVICE_CHECK_TWIN_SHARE %;
#   3. a quick pass of every practice program (scripts/quick-pass.txt: each program's
#      share and filter, 4 repetitions), until DEVICE_CHECK_CPU_TEST_SHARE % before the end;
#   4. the other tests (they ran on the build machine already), with what is left.
# A phase that ends early leaves its time to the next. It archives the log and the results
# folder into $OUT/device-check.tar.gz after each phase and each practice program (a kill
# at the tool's limit still brings back what finished), checks that no process of the
# suite is left, and ends with a summary and the --only line that reruns what failed.
#   --only NAMES   a rerun: just these tests (test_*), twin configs (twin, or
#                  PRESET:BATCH:PRECISION:LAYOUT) and practice programs (amp, zero_grad),
#                  with the same archive; e.g. --only test_core_graph,resnet18:128:fp16:nhwc,amp
# Without a GPU (here) it is a dry run: the context says why there is no GPU, so
# SUITE_EXPECT_GPU stays unset (every GPU test and benchmark skips instead of failing);
# SUITE_GPU_CHECK=1 is set in both cases (a missing tool such as mpirun is a visible skip).
# Environment: BUILD (default device-stage/build), OUT (default /tmp/device-out),
# RESULTS_ROOT (default results), DEVICE_CHECK_TEST_SHARE (default 25),
# DEVICE_CHECK_TWIN_SHARE (default 20; 0 skips the twin), DEVICE_CHECK_CPU_TEST_SHARE
# (default 10), TWIN_CONFIGS, TWIN_PRACTICES, PYTHON (a Python with torch), and
# run-suite.sh's BENCH_* variables (they win over the plan).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD

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

usage() { echo "usage: scripts/device-check.sh [BUDGET_SECONDS] [--only NAME,NAME...]" >&2; exit 2; }
budget=420 budget_set="" only="" args=("$@")
while (($#)); do
  case $1 in
    --only) (($# >= 2)) || usage; only=$2; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
test_share=${DEVICE_CHECK_TEST_SHARE:-25}; percent DEVICE_CHECK_TEST_SHARE "$test_share" 1 80
twin_share=${DEVICE_CHECK_TWIN_SHARE:-20}; percent DEVICE_CHECK_TWIN_SHARE "$twin_share" 0 50
cpu_share=${DEVICE_CHECK_CPU_TEST_SHARE:-10}; percent DEVICE_CHECK_CPU_TEST_SHARE "$cpu_share" 0 50
if ((test_share + twin_share + cpu_share > 90)); then
  echo "device-check: the shares of the tests, the twin and the other tests add up to over 90%" >&2
  exit 2
fi
plan=scripts/quick-pass.txt

# The tests that exercise a GPU path, most telling first (where to look when one fails:
# README, "The GPU check").
# test_practice last: most of its time is CPU work (25 s and more on a 2-core VM).
gpu_tests=(test_core_gpu test_layers_gpu test_bench_kernels test_core_graph test_fusion test_core_dynamic
           test_dist_gpu test_conv_select test_pin_thread test_bench_amp test_bench_layout
           test_bench_cudnn_benchmark test_bench_cuda_graphs test_bench_sync test_bench_on_device
           test_bench_pin_memory test_bench_fusion test_core_infer test_bench_inference
           test_core_checkpoint test_bench_checkpoint test_model_options test_core_fold
           test_bench_conv_bias test_bench_bn_fold test_bench_grad_accum test_practice)

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
mkdir -p "$out" || exit 2
log="$out/device-check.log"
: >"$log"
now() { date +%s; }
start=$(now)
deadline=$((start + budget))
pack_reserve=$((budget / 20 < 8 ? 8 : budget / 20 > 15 ? 15 : budget / 20)) # leftovers (<= 5 s), summary, archive
wrap=("$root/scripts/with-gpu-libs.sh")

# The phases' ends (seconds since the epoch); a phase that is not run leaves its time on.
end_gpu_tests=$((start + budget * test_share / 100))
end_twin=$((end_gpu_tests + budget * twin_share / 100))
end_all=$((deadline - pack_reserve))
run_gpu_tests=1 run_twin=1 run_bench=1 run_other_tests=1
if [[ -n $only ]]; then
  ((${#only_tests[@]})) || run_gpu_tests=0
  ((${#only_twin[@]})) || run_twin=0
  ((${#only_programs[@]})) || run_bench=0
  run_other_tests=0 # named tests all run first
fi
((twin_share > 0)) || run_twin=0
end_bench=$((run_other_tests ? end_all - budget * cpu_share / 100 : end_all))
# a rerun's phases that are the last to run may use all that is left
((run_bench)) || end_twin=$end_bench
((run_bench || run_twin)) || end_gpu_tests=$end_bench

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

# Runs one test phase: LABEL LIMIT SKIP [TEST...] (no names: every test but those in SKIP).
# Adds its line to tests_lines, its failures to tests_failed, and what to rerun to rerun.
tests_failed=0 rerun=() tests_lines=()
run_tests_phase() {
  local label=$1 limit=$2 skip=$3; shift 3
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
  TEST_JOBS=1 TEST_TIMEOUT=$per TESTS_SKIP=$skip TESTS_STATUS=$test_status timeout --signal=TERM --kill-after=5 "$limit" \
    "${wrap[@]}" bash scripts/run-tests.sh "$build" "$@" 2>&1 | tee "$test_out"
  rc=${PIPESTATUS[0]}
  local line failed
  line=$(grep -E '^tests: [0-9]+ passed' "$test_out" | tail -n 1)
  [[ -n $line ]] || line="tests: no tally (exit $rc)"
  failed=$(sed -n 's/^tests: [0-9]* passed, \([0-9]*\) failed.*/\1/p' <<<"$line")
  tests_failed=$((tests_failed + ${failed:-1}))
  ((rc != 0 && ${failed:-1} == 0 && rc != 124 && rc != 137 && rc != 143)) && tests_failed=$((tests_failed + 1))
  # run-tests.sh's own account (the tests' output may hold the same words)
  local stopped reached
  stopped=$(awk '$1 == "stopped" { print $2 }' "$test_status" 2>/dev/null)
  reached=$(awk '$1 == "not_reached" { printf "%s ", $2 }' "$test_status" 2>/dev/null)
  if [[ -n $stopped || -n $reached ]]; then
    line="$line; cut at the phase's ${limit}s: stopped ${stopped:-none}, not reached: ${reached:-none}"
    rerun+=($stopped $reached)
  fi
  rerun+=($(awk '$1 == "failing" { print $2 }' "$test_status" 2>/dev/null))
  tests_lines+=("$label: ${line#tests: }")
  rm -f "$test_out" "$test_status"
}

# Everything below goes to the terminal and to the log; the log is archived with it.
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
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm \
      --format=csv 2>&1 || echo "device-check: nvidia-smi failed"
  else
    echo "device-check: no nvidia-smi on this machine"
  fi
  local context
  context=$("${wrap[@]}" "$build/context" 2>&1) || echo "device-check: $build/context failed (libraries? see below)"
  echo "$context"
  "${wrap[@]}" ldd "$build/context" | grep -E 'not found|cud|nccl|cublas' || true
  slug=$("${wrap[@]}" "$build/context" --slug) || slug=unknown
  results="${RESULTS_ROOT:-results}/${slug}_$(date -u +%Y%m%d-%H%M)"
  [[ -e $results ]] && results="${results}_$(date -u +%S)" # a rerun within the minute
  mkdir -p "$results"
  printf -v archive_cmd '%q ' bash "$root/scripts/device-check.sh" --archive "$out" "$results" "$log"
  echo "$results" >"$out/.results-dir"

  # A dry run: the context names why there is no GPU. Only a real run expects one.
  local dry_reason
  dry_reason=$(sed -n 's/^no_gpu_reason=//p' <<<"$context")
  export SUITE_GPU_CHECK=1
  if [[ -n $dry_reason ]]; then
    echo "device-check: DRY RUN ($dry_reason): GPU tests and GPU benchmarks skip; SUITE_EXPECT_GPU unset"
    unset SUITE_EXPECT_GPU
  else
    export SUITE_EXPECT_GPU=1
    echo "device-check: GPU run: SUITE_EXPECT_GPU=1 (no CUDA device fails every test and benchmark)"
  fi
  echo "device-check: the plan (seconds from the start): GPU tests until $((end_gpu_tests - start))," \
       "the twin until $((end_twin - start)), the quick pass until $((end_bench - start))," \
       "the other tests until $((end_all - start)), the leftover check, summary and archive in the last ${pack_reserve}"

  # 1. Does each GPU path work?
  local t0=$(now) gpu_secs=0
  if ((run_gpu_tests)); then
    local names=()
    if [[ -n $only ]]; then names=("${only_tests[@]}")
    else for t in "${gpu_tests[@]}"; do [[ -x $build/tests/$t ]] && names+=("$t"); done; fi
    if ((${#names[@]})); then
      local label="tests on the GPU"
      [[ -n $only ]] && label="named tests"
      run_tests_phase "$label" $((end_gpu_tests - $(now))) "" "${names[@]}"
    fi
    eval "$archive_cmd"
  fi
  gpu_secs=$(($(now) - t0))

  # 2. The suite's credibility figure: the core against PyTorch on this GPU.
  local twin_line="twin: not run" twin_secs=0
  [[ -n $only && run_twin -eq 0 ]] && twin_line="twin: not named in --only"
  t0=$(now)
  if ((run_twin)); then
    local twin_budget=$((end_twin - $(now))) compile=() configs=()
    if [[ -n $only && ${only_twin[*]} != *all* ]]; then configs=("${only_twin[@]}")
    else read -r -a configs <<<"${TWIN_CONFIGS:-}"; fi
    # torch.compile needs a C compiler at run time (Triton builds its launchers)
    if command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; then compile=(--compile)
    else echo "twin: torch.compile skipped: no C compiler on this machine (Triton needs one at run time)"; fi
    if ((twin_budget < 10)); then
      twin_line="twin: not run (no time left)"
    elif [[ ! -x $build/steptime ]]; then
      twin_line="twin: skipped (no $build/steptime)"
    elif ! "${PYTHON:-python3}" -c 'import torch' >/dev/null 2>&1; then
      twin_line="twin: skipped (${PYTHON:-python3} cannot import torch on this machine)"
    else
      echo "== twin comparison (at most ${twin_budget}s)"
      timeout --signal=TERM --kill-after=5 $((twin_budget + 5)) \
        "${PYTHON:-python3}" scripts/twin_compare.py --device cuda --build "$build" --out "$results/twin" \
        --rounds 2 "${compile[@]}" --budget "$twin_budget" --core-prefix "bash $root/scripts/with-gpu-libs.sh" \
        ${TWIN_PRACTICES:+--practices "$TWIN_PRACTICES"} "${configs[@]}" && twin_line="twin: $results/twin/twin.md" ||
        twin_line="twin: twin_compare.py failed (exit $?; see the log above)"
    fi
    eval "$archive_cmd"
    echo "$twin_line"
  fi
  twin_secs=$(($(now) - t0))

  # 3. The practices' quick pass.
  local bench_rc=0 bench_secs=0
  t0=$(now)
  if ((run_bench)); then
    echo "== quick pass ($((end_bench - $(now)))s of $((deadline - $(now)))s left; plan $plan)"
    local filter=""
    ((${#only_programs[@]})) && filter="^bench_($(IFS='|'; echo "${only_programs[*]}"))\$"
    printf -v command_line '%q ' bash scripts/device-check.sh "${args[@]}"
    BENCH_PLAN=$plan BENCH_DEADLINE=$end_bench BENCH_NO_CHARTS=1 RESULTS_DIR="$results" \
      BENCH_FILTER="$filter" BENCH_AFTER_PROGRAM="$archive_cmd" \
      BENCH_COMMAND="${command_line}(the quick pass: BENCH_PLAN=$plan)" \
      "${wrap[@]}" bash scripts/run-suite.sh "$build"
    bench_rc=$?
  fi
  bench_secs=$(($(now) - t0))

  # 4. The other tests, with what is left: they ran on the build machine already.
  local other_secs=0
  t0=$(now)
  if ((run_other_tests)); then
    run_tests_phase "other tests" $((end_all - $(now))) "${gpu_tests[*]}"
    eval "$archive_cmd"
  fi
  other_secs=$(($(now) - t0))

  # Nothing of the suite may outlive the check (a rank, mpirun, a test's child).
  local left leftover_line="leftover processes: none" tries=0
  left=$(suite_processes)
  while [[ -n $left ]] && ((tries < 6)); do # ranks on their way out get 3 s
    sleep 0.5
    tries=$((tries + 1))
    left=$(suite_processes)
  done
  if [[ -n $left ]]; then
    echo "device-check: processes of the suite still running after the check:"
    echo "$left"
    kill -TERM $(cut -d' ' -f1 <<<"$left") 2>/dev/null
    sleep 1
    local still
    still=$(suite_processes | cut -d' ' -f1)
    [[ -z $still ]] || kill -KILL $still 2>/dev/null
    leftover_line="leftover processes: $(wc -l <<<"$left") found and killed: $(cut -c1-60 <<<"$left" | tr '\n' ';')"
  fi

  echo
  echo "== device-check summary ($(($(now) - start))s of ${budget}s${dry_reason:+; DRY RUN: $dry_reason})"
  local l
  for l in "${tests_lines[@]}"; do echo "$l"; done
  ((run_gpu_tests)) && echo "  tests phase: ${gpu_secs}s (planned until $((end_gpu_tests - start))s from the start)"
  if ((run_twin)); then echo "$twin_line (${twin_secs}s)"; else echo "$twin_line"; fi
  local bench_failed=0
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
    rerun+=($(awk -F'\t' 'NR > 1 && $2 != "ran" && $2 != "skipped" { print $1 }' "$results/suite-status.tsv"))
    if ((bench_rc != 0 && bench_failed == 0)); then
      echo "results pipeline: run-suite exit $bench_rc with no program failed (summary or report: see the log)"
    fi
  elif ((run_bench)); then
    echo "benchmarks: no results (run-suite exit $bench_rc)"
    bench_failed=1
  fi
  ((run_other_tests)) && echo "  other tests: ${other_secs}s"
  echo "$leftover_line"
  if ((${#rerun[@]})); then
    echo "rerun what failed or did not finish: bash scripts/device-check.sh 180 --only $(printf '%s\n' "${rerun[@]}" | awk '!seen[$0]++' | paste -sd, -)"
  fi
  echo "results: $results (archived in $out/device-check.tar.gz)"
  # A cut (a phase or a program stopped at its share) is not a failure: it depends on the
  # host's speed. A test or a benchmark that failed, or a process left behind, is.
  ((tests_failed == 0 && bench_failed == 0 && bench_rc == 0)) && [[ -z $left ]]
}

main 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
results=$(cat "$out/.results-dir" 2>/dev/null || echo "")
rm -f "$out/.results-dir" "$out/.tests.out" "$out/.tests.status"
bash "$root/scripts/device-check.sh" --archive "$out" "${results:-/nonexistent}" "$log"
exit "$rc"
