#!/usr/bin/env bash
# The GPU check, run on the GPU machine in the repository root after
# scripts/device-stage.sh here:
#   bash scripts/device-check.sh [BUDGET_SECONDS]        (default 480)
# Within one deadline (start + budget) for everything, it logs the CUDA libraries it
# finds and loads, FIRST compares the core with its PyTorch twin (scripts/twin_compare.py:
# resnet18 at batch 128 and 256, fp16 and fp32, NCHW and NHWC, core against eager, and
# torch.compile while time is left; twin/twin.csv and twin/twin.md in the results folder) within
# its own share of the budget (it never fails the check: without torch it says so), then
# runs every test (GPU tests included) and then a quick pass of every practice (`make
# bench` with a short minimum time), and packs the log and the results
# folder into $OUT/device-check.tar.gz after the tests and again after each practice
# program, so that a kill at the tool's limit still brings back what finished. It ends
# with a summary of tests passed/failed/skipped and benchmarks ok/skipped/failed. Draw the
# charts back home with `make charts RESULTS=results/<folder>`.
# Environment: BUILD (default device-stage/build), OUT (default /tmp/device-out),
# RESULTS_ROOT (where the results folder goes, default results),
# BENCH_ARGS (default --benchmark_min_time=0.05), BENCH_REPETITIONS (default 3),
# DEVICE_CHECK_TEST_SHARE (percent of the budget the tests may use, default 45, counted
# from the end of the twin comparison), DEVICE_CHECK_TWIN_SHARE (percent for the twin
# comparison, default 30: 144 s of 480; 0 skips it), TWIN_CONFIGS (its configs,
# PRESET:BATCH:PRECISION:LAYOUT ...), TWIN_PRACTICES (e.g. zero_grad,readback,amp: the
# same toggles timed on both sides; default none), PYTHON (a Python with torch).
set -uo pipefail
cd "$(dirname "$0")/.."
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

budget=${1:-480}
if [[ ! $budget =~ ^[0-9]+$ ]] || ((budget < 10)); then
  echo "device-check: BUDGET_SECONDS='$budget' must be a whole number of seconds >= 10" >&2
  exit 2
fi
test_share=${DEVICE_CHECK_TEST_SHARE:-45}
if [[ ! $test_share =~ ^[0-9]+$ ]] || ((test_share < 1 || test_share > 95)); then
  echo "device-check: DEVICE_CHECK_TEST_SHARE='$test_share' must be a percentage in 1..95" >&2
  exit 2
fi
twin_share=${DEVICE_CHECK_TWIN_SHARE:-30}
if [[ ! $twin_share =~ ^[0-9]+$ ]] || ((twin_share > 50)); then
  echo "device-check: DEVICE_CHECK_TWIN_SHARE='$twin_share' must be a percentage in 0..50" >&2
  exit 2
fi
out=${OUT:-/tmp/device-out}
build=${BUILD:-device-stage/build}
mkdir -p "$out" || exit 2
log="$out/device-check.log"
: >"$log"
now() { date +%s; }
start=$(now)
deadline=$((start + budget))
pack_reserve=$((budget / 10 < 2 ? 2 : budget / 10 > 10 ? 10 : budget / 10)) # last archive, summary
wrap=("$root/scripts/with-gpu-libs.sh")

# Everything below goes to the terminal and to the log; the log is archived with it.
main() {
  echo "device-check: budget ${budget}s, deadline $(date -u -d "@$deadline" +%H:%M:%SZ), build $build"
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
  "${wrap[@]}" --print
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm \
    --format=csv 2>&1 || echo "device-check: nvidia-smi failed"
  "${wrap[@]}" "$build/context" || echo "device-check: $build/context failed (libraries? see below)"
  "${wrap[@]}" ldd "$build/context" | grep -E 'not found|cud|nccl|cublas' || true
  slug=$("${wrap[@]}" "$build/context" --slug) || slug=unknown
  results="${RESULTS_ROOT:-results}/${slug}_$(date -u +%Y%m%d-%H%M)"
  printf -v archive_cmd '%q ' bash "$root/scripts/device-check.sh" --archive "$out" "$results" "$log"
  echo "$results" >"$out/.results-dir"

  # The suite's credibility figure first: the core against PyTorch on this GPU.
  local twin_start twin_line="twin: not run"
  twin_start=$(now)
  local twin_budget=$((budget * twin_share / 100))
  if ((twin_share == 0)); then
    twin_line="twin: skipped (DEVICE_CHECK_TWIN_SHARE=0)"
  elif [[ ! -x $build/steptime ]]; then
    twin_line="twin: skipped (no $build/steptime)"
  elif ! "${PYTHON:-python3}" -c 'import torch' >/dev/null 2>&1; then
    twin_line="twin: skipped (${PYTHON:-python3} cannot import torch on this machine)"
  else
    echo "== twin comparison (at most ${twin_budget}s)"
    # shellcheck disable=SC2086
    timeout --signal=TERM --kill-after=5 $((twin_budget + 10)) \
      "${PYTHON:-python3}" scripts/twin_compare.py --device cuda --build "$build" --out "$results/twin" \
      --rounds 2 --compile --budget "$twin_budget" --core-prefix "bash $root/scripts/with-gpu-libs.sh" \
      ${TWIN_PRACTICES:+--practices "$TWIN_PRACTICES"} ${TWIN_CONFIGS:-} && twin_line="twin: $results/twin/twin.md" ||
      twin_line="twin: twin_compare.py failed (exit $?; see the log above)"
    eval "$archive_cmd"
  fi
  echo "$twin_line"
  local twin_used=$(($(now) - twin_start))

  local test_limit=$((budget * test_share / 100 - ($(now) - start - twin_used)))
  local tests_rc=0 test_line="tests: not run"
  if ((test_limit < 3)); then
    echo "device-check: no time left for the tests"
    tests_rc=1
  else
    echo "== tests (at most ${test_limit}s; $((deadline - $(now)))s left in all)"
    local test_out="$out/.tests.out"
    # each program gets a little less than the share, so a hung one is named as such
    TEST_TIMEOUT=$((test_limit > 6 ? test_limit - 2 : test_limit * 2 / 3)) \
      timeout --signal=TERM --kill-after=5 "$test_limit" \
      "${wrap[@]}" bash scripts/run-tests.sh "$build" 2>&1 | tee "$test_out"
    tests_rc=${PIPESTATUS[0]}
    test_line=$(grep -E '^tests: [0-9]+ passed' "$test_out" | tail -n 1)
    [[ -n $test_line ]] || test_line="tests: stopped after ${test_limit}s before the end (exit $tests_rc)"
    ((tests_rc == 124 || tests_rc == 137)) && test_line="$test_line (stopped at the tests' ${test_limit}s share)"
  fi
  eval "$archive_cmd"

  local bench_rc=0
  echo "== quick bench ($((deadline - $(now)))s left)"
  # The quick pass of the GPU practices whose full sweeps take minutes: a small, a middle
  # and the largest preset (the caller's own BENCH_ARGS_<name> win).
  export BENCH_ARGS_batch_size=${BENCH_ARGS_batch_size-"--benchmark_filter=preset:tiny/|^batch_size/sweep/preset:resnet18/batch:(8|64|512)/"}
  export BENCH_ARGS_zero_grad=${BENCH_ARGS_zero_grad-"--benchmark_filter=preset:(tiny|small|resnet18)/"}
  export BENCH_ARGS_amp=${BENCH_ARGS_amp-"--benchmark_filter=^amp_gemm/.*/size:(1024|4096|16384)/|^amp_gemm_linear/|^amp_conv(_tf32)?/.*/shape:(c64h56k64r3s1|c256h14k256r3s1)/|^amp(_nhwc|_tf32)?/.*/preset:(tiny|resnet18)/|^amp_parity/|^amp_scaler"}
  export BENCH_ARGS_layout=${BENCH_ARGS_layout-"--benchmark_filter=preset:(tiny|resnet18)/"}
  export BENCH_ARGS_cudnn_benchmark=${BENCH_ARGS_cudnn_benchmark-"--benchmark_filter=preset:(tiny|resnet18)/ --dynamic_steps=16 --harness_axis=conv=0,5,10"}
  export BENCH_ARGS_sync=${BENCH_ARGS_sync-"--harness_axis=batch=8,64"}
  export BENCH_ARGS_on_device=${BENCH_ARGS_on_device-"--harness_axis=bytes=4096:67108864:*16"}
  export BENCH_ARGS_fusion=${BENCH_ARGS_fusion-"--benchmark_filter=preset:(tiny|resnet18)/"}
  export BENCH_ARGS_cuda_graphs=${BENCH_ARGS_cuda_graphs-"--benchmark_filter=^cuda_graphs(_capture)?/.*preset:(tiny|small|resnet18)/|^cuda_graphs_dynamic/.*preset:tiny/.*every:(1|16)/"}
  # Three repetitions (not make bench's five): enough for an interval, not for the U test.
  export BENCH_REPETITIONS=${BENCH_REPETITIONS:-3}
  BENCH_DEADLINE=$((deadline - pack_reserve)) BENCH_NO_CHARTS=1 RESULTS_DIR="$results" \
    BENCH_ARGS="${BENCH_ARGS:---benchmark_min_time=0.05}" BENCH_AFTER_PROGRAM="$archive_cmd" \
    BENCH_COMMAND="bash scripts/device-check.sh $budget (quick pass: BENCH_ARGS=${BENCH_ARGS:---benchmark_min_time=0.05})" \
    "${wrap[@]}" bash scripts/run-suite.sh "$build"
  bench_rc=$?

  echo
  echo "== device-check summary ($(($(now) - start))s of ${budget}s)"
  echo "$twin_line"
  echo "$test_line"
  if [[ -f $results/suite-status.tsv ]]; then
    awk -F'\t' 'NR > 1 { n++; prog[$2]++; ok += $3; sk += $4; er += $5 }
      END { printf "benchmarks: %d ok, %d skipped, %d failed in %d programs:", ok, sk, er, n
            sep = " "; for (s in prog) { printf "%s%d %s", sep, prog[s], s; sep = ", " }
            print "" }' "$results/suite-status.tsv"
  else
    echo "benchmarks: no results (run-suite exit $bench_rc)"
  fi
  echo "results: $results (archived in $out/device-check.tar.gz)"
  ((tests_rc == 0 && bench_rc == 0))
}

main 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
results=$(cat "$out/.results-dir" 2>/dev/null || echo "")
rm -f "$out/.results-dir" "$out/.tests.out"
bash "$root/scripts/device-check.sh" --archive "$out" "${results:-/nonexistent}" "$log"
exit "$rc"
