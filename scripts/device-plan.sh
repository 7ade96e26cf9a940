# device-plan.sh: the GPU check's time plan, sourced by scripts/device-check.sh: the device
# session the check must fit in, its phases' windows for a budget, the GPU tests in the
# order they run with their estimates on an H200, the twin's and the quick pass's
# estimates (scripts/quick-pass.txt), the plan that `device-check.sh --plan BUDGET` prints,
# and the budget of the rerun that the check's summary proposes.
#
# Estimates are seconds on the GPU machine (one H200, 16 cores), each process's start-up
# included: the CUDA context, cuBLAS and cuDNN handles and module loading take 1-2 s per
# process that uses the GPU (1.5 s here), a program that only lists its benchmarks (no
# context) 0.4 s. Nothing has run there yet: after the first run, suite-plan.tsv
# (estimate_s against seconds) and the log's "=== test: exit N, Ms" lines say where an
# estimate is wrong; correct it here or in quick-pass.txt.

# The device session (docs/gpu-check.md): 900 s of device time in all; each machine's cold
# start ~120 s (a machine goes cold 30 s after a call returns, so a rerun starts a fresh
# one); ~20 s of transfers per call (the tree and device-stage in, the archive out).
plan_session_s=900 plan_cold_start_s=120 plan_transfer_s=20

# The GPU tests, least verified first: the core's GPU paths and the graph test, the new
# core-level tests (inference, checkpointing, model options, BN folding) and the largest-batch
# probes' ballast, the rest of the
# core, the new practices' program tests, the older ones, test_practice (mostly CPU work),
# and the heavy program tests last (largest-batch probes, serving). Where to look when one
# fails: docs/gpu-check.md. Per test: its estimate and what it is made of.
plan_gpu_test_table='
test_core_gpu               15  17 GPU cases on tiny/mlp/small, some against the CPU reference over training curves
test_layers_gpu              5  8 kernels against the CPU reference
test_adamw                   3  AdamW on CUDA (fp32_strict; fp16 with a skipped step) against a float64 replay and the CPU reference
test_bench_kernels           9  2 listings, 2 runs of bench_kernels (~30 small validated rows), 2 refusals
test_core_graph              8  10 GPU cases, one each on resnet18 and medium (capture and replay)
test_core_infer              9  6 GPU cases (forward-only plans, autotune of the forward), 4 s of CPU work
test_core_checkpoint         9  2 GPU cases on resnet18 and medium, 7 s of CPU work here
test_model_options           3  2 GPU cases on tiny
test_core_fold               3  2 GPU cases on tiny
test_max_batch               3  the ballast of the largest-batch probes: all but the budget of the memory held, given back
test_fusion                  8  4 GPU cases up to resnet18 and medium, 5 s of CPU work here
test_core_dynamic            4  6 GPU cases on tiny/mlp
test_dist_gpu                6  4 NCCL communicators of one rank
test_conv_select             2  cuDNN candidate selection
test_pin_thread              3  pinned memory on a thread of its own
test_bench_conv_bias         7  3 runs of bench_conv_bias on tiny (rows, 2 self-tests)
test_bench_bn_fold           9  4 runs of bench_bn_fold on tiny (rows, 3 self-tests)
test_bench_grad_accum        5  5 runs of bench_grad_accum on the CPU backend
test_bench_amp              12  3 runs of bench_amp (GEMM, conv, training rows; parity on the GPU)
test_bench_layout            6  2 runs of bench_layout on tiny
test_bench_cudnn_benchmark   6  1 run with autotuning on tiny, 5 refusals
test_bench_cuda_graphs       5  1 run on tiny (capture, dynamic shapes), 3 refusals
test_bench_sync              7  1 run on tiny, 6 GPU cases
test_bench_on_device         6  1 run of 5 rows, 4 GPU cases
test_bench_pin_memory        8  2 runs, 6 refusals, 4 GPU cases
test_bench_fusion            5  2 runs on tiny
test_bench_fused_optimizer   5  per-tensor and multi-tensor SGD/AdamW on CUDA (multi_tensor_apply) bit for bit, a self-test
test_bench_debug_apis        6  the anomaly scan on the device, anomaly and profiler rows on tiny, self-tests
test_bench_prealloc          6  grow and preallocated on tiny (deterministic cuDNN, bit for bit), a self-test
test_bench_tensor_cores      4  fp16 GEMM rates at 4096 and 4095 against the exact product, the width rows
test_practice               12  the driver on the CPU (9 s here), bench_zero_grad and bench_batch_size on CUDA
test_bench_inference        15  the families on tiny (serving with its warm-up), 2 self-test runs, 3 refusals
test_bench_checkpoint       10  3 runs on tiny and the largest-batch probe
'
declare -A plan_test_estimate=()
plan_gpu_tests=()
while read -r plan_name plan_secs _; do
  [[ -n $plan_name ]] || continue
  plan_gpu_tests+=("$plan_name")
  plan_test_estimate[$plan_name]=$plan_secs
done <<<"$plan_gpu_test_table"
unset plan_name plan_secs

# The twin (scripts/twin_compare.py on CUDA): ~4 s for twin_compare and torch's import, per
# preset and batch a dump of the core's weights (4 s), per config and round the core's run
# (2.5 s) and PyTorch eager's (a Python with torch, its CUDA start-up and 25 steps: 5.5 s).
# The check's own configs unless TWIN_CONFIGS says otherwise: the core's default against
# PyTorch's (fp32, NCHW) and the tuned form (fp16, channels_last), at batch 128, 2 rounds.
plan_twin_configs="resnet18:128:fp32:nchw resnet18:128:fp16:nhwc" plan_twin_rounds=2
plan_twin_estimate() { # CONFIG...
  local dumps
  dumps=$(printf '%s\n' "$@" | cut -d: -f1,2 | sort -u | wc -l)
  echo $((4 + 4 * dumps + 8 * plan_twin_rounds * $#))
}

# The quick pass (run-suite.sh with BENCH_PLAN): each program's weight in quick-pass.txt is
# its estimate; around them run-suite lists every program first (0.4 s each), archives and
# compacts after each (0.3 s), and keeps the last 8 s for the summary and the report (its
# 5 s) and a cut program's kill (3 s).
plan_quick_pass=scripts/quick-pass.txt
plan_list_tenths=4 plan_after_program_tenths=3 plan_finish_s=8
declare -A plan_program_estimate=()
plan_programs=()
plan_read_quick_pass() {
  local name weight _
  plan_programs=() plan_program_estimate=()
  while read -r name weight _; do
    [[ -z $name || $name == \#* || $name == repetitions || $name == precision || $name == min_time ]] && continue
    plan_programs+=("$name")
    plan_program_estimate[$name]=$weight
  done <"$plan_quick_pass"
}
plan_read_quick_pass

# The phases' ends, in seconds from the start, for BUDGET and the shares (percent):
# sets plan_pack_reserve, plan_end_tests, plan_end_twin, plan_end_bench, plan_end_all.
# The last 5% of the budget (8-15 s) are for the leftover check, the summary and the archive.
plan_phases() { # BUDGET TEST_SHARE TWIN_SHARE CPU_TEST_SHARE
  local b=$1
  plan_pack_reserve=$((b / 20 < 8 ? 8 : b / 20 > 15 ? 15 : b / 20))
  plan_end_tests=$((b * $2 / 100))
  plan_end_twin=$((plan_end_tests + b * $3 / 100))
  plan_end_all=$((b - plan_pack_reserve))
  plan_end_bench=$((plan_end_all - b * $4 / 100))
}

# The most a rerun may take after a first run of BUDGET: the session less two cold starts,
# two calls' transfers and the first run.
plan_rerun_max() { # BUDGET
  echo $((plan_session_s - 2 * (plan_cold_start_s + plan_transfer_s) - $1))
}

# The budget of a rerun of NAMES (tests, programs, twin configs): their estimates, 20 s for
# the start (context, unpacking) and the end (summary, archive), at least 60 s, rounded up
# to 10 s, at most what the session leaves after a first run of BUDGET.
plan_rerun_budget() { # BUDGET NAME...
  local first=$1 need=20 n max; shift
  for n; do
    if [[ -n ${plan_test_estimate[$n]:-} ]]; then need=$((need + plan_test_estimate[$n]))
    elif [[ -n ${plan_program_estimate[$n]:-} ]]; then need=$((need + plan_program_estimate[$n] + 1))
    elif [[ $n == twin ]]; then need=$((need + $(plan_twin_estimate $plan_twin_configs)))
    elif [[ $n == *:*:*:* ]]; then need=$((need + 8 + 8 * plan_twin_rounds))
    else need=$((need + 10)); fi
  done
  need=$(((need + 9) / 10 * 10))
  ((need < 60)) && need=60
  max=$(plan_rerun_max "$first")
  ((max >= 60 && need > max)) && need=$max
  echo "$need"
}

# Prints the plan of a first run of BUDGET on an H200 with these shares, as the check would
# run it: each phase starts when the one before ends (by its estimate) and ends by its
# window; the quick pass's programs get their shares as run-suite gives them. Returns 1
# when something does not fit: a phase past its window, a program cut at its share.
plan_print() { # BUDGET TEST_SHARE TWIN_SHARE CPU_TEST_SHARE
  local budget=$1 twin_share=$3 fits=1 t=0 name est sum=0 line
  plan_phases "$@"
  local first_call=$((plan_cold_start_s + budget + plan_transfer_s))
  local left=$((plan_session_s - first_call)) rerun
  rerun=$(plan_rerun_max "$budget")
  echo "The GPU check's plan for a budget of ${budget}s on an H200 (estimates: scripts/device-plan.sh, scripts/quick-pass.txt)"
  echo "device time: ${plan_session_s}s = start ${plan_cold_start_s}s + this run ${budget}s + transfers ${plan_transfer_s}s" \
       "+ ${left}s left; a rerun on a fresh machine (start ${plan_cold_start_s}s, transfers ${plan_transfer_s}s)" \
       "may take up to ${rerun}s"
  ((rerun >= 60)) || { echo "  DOES NOT FIT: no room for a rerun of 60 s"; fits=0; }
  echo
  printf '%-34s %9s %9s  %s\n' "phase / item" "estimate" "window" "(seconds from the start)"
  # 1. the GPU tests
  for name in "${plan_gpu_tests[@]}"; do sum=$((sum + plan_test_estimate[$name])); done
  line=fits
  ((t + sum <= plan_end_tests)) || { line="DOES NOT FIT"; fits=0; }
  printf '%-34s %8ss %9s  %s\n' "1. GPU tests (${#plan_gpu_tests[@]})" "$sum" "0-$plan_end_tests" "$line"
  for name in "${plan_gpu_tests[@]}"; do printf '     %-29s %8ss\n' "$name" "${plan_test_estimate[$name]}"; done
  t=$((t + sum < plan_end_tests ? t + sum : plan_end_tests))
  # 2. the twin: its configs' rounds within its window (torch.compile only with 90 s or more)
  local configs
  read -r -a configs <<<"${TWIN_CONFIGS:-$plan_twin_configs}"
  est=$(plan_twin_estimate "${configs[@]}")
  if ((twin_share == 0)); then
    printf '%-34s %9s %9s  %s\n' "2. twin" "-" "-" "not run (DEVICE_CHECK_TWIN_SHARE=0)"
  else
    line=fits
    ((t + est <= plan_end_twin)) || { line="DOES NOT FIT"; fits=0; }
    ((plan_end_twin - t >= 90)) && line="$line; torch.compile in what is left"
    printf '%-34s %8ss %9s  %s\n' "2. twin (${#configs[@]} configs x $plan_twin_rounds rounds)" "$est" \
      "$t-$plan_end_twin" "$line"
    t=$((t + est < plan_end_twin ? t + est : plan_end_twin))
  fi
  # 3. the quick pass: run-suite's shares of what is left (tenths of seconds)
  local n=${#plan_programs[@]} weight_left=0 now remaining share limit i=0 cut=0 start=$t
  for name in "${plan_programs[@]}"; do weight_left=$((weight_left + plan_program_estimate[$name])); done
  local deadline10=$((plan_end_bench * 10)) finish10=$((plan_finish_s * 10))
  now=$((t * 10 + n * plan_list_tenths))
  local rows=()
  for name in "${plan_programs[@]}"; do
    i=$((i + 1))
    est=${plan_program_estimate[$name]}
    remaining=$((deadline10 - now - finish10))
    share=$((remaining * est / weight_left))
    limit=$((i < n ? share + share / 4 : remaining))
    ((limit > remaining - 50 * (n - i))) && limit=$((remaining - 50 * (n - i)))
    weight_left=$((weight_left - est))
    line=""
    if ((est * 10 > limit)); then line="cut at its share"; cut=1; now=$((now + limit))
    else now=$((now + est * 10)); fi
    now=$((now + plan_after_program_tenths))
    rows+=("$(printf '     %-29s %8ss %9s%s' "$name" "$est" "$((share / 10))/$((limit / 10))" "${line:+  $line}")")
  done
  now=$((now + finish10))
  local quick=$(((now + 9) / 10 - start))
  line=fits
  ((cut == 0 && (now + 9) / 10 <= plan_end_all)) || { line="DOES NOT FIT"; fits=0; }
  printf '%-34s %8ss %9s  %s\n' "3. quick pass ($n programs)" "$quick" "$start-$plan_end_bench" \
    "$line: listing 0.$plan_list_tenths s and archiving 0.$plan_after_program_tenths s per program, summary and report ${plan_finish_s}s"
  printf '     %-29s %9s %9s\n' "program" "estimate" "share/most"
  printf '%s\n' "${rows[@]}"
  t=$(((now + 9) / 10))
  # 4. the other tests, 5. the end
  local rest=$((plan_end_all - t))
  ((rest < 0)) && rest=0
  printf '%-34s %9s %9s  %s\n' "4. other tests" "${rest}s" "$t-$plan_end_all" \
    "what is left (they ran on the build machine; a cut is no failure)"
  printf '%-34s %9s %9s\n' "leftover check, summary, archive" "" "$plan_end_all-$budget"
  echo
  if ((fits)); then
    echo "the plan fits: the GPU tests, the twin and the quick pass end about ${t}s into the ${budget}s"
    return 0
  fi
  echo "the plan DOES NOT FIT a budget of ${budget}s (see above): trim scripts/quick-pass.txt, change the shares" \
       "(DEVICE_CHECK_TEST_SHARE, DEVICE_CHECK_TWIN_SHARE, DEVICE_CHECK_CPU_TEST_SHARE) or give the check more time"
  return 1
}
