#!/usr/bin/env bash
# The GPU check, run on the GPU machine in the repository root:
#   bash scripts/device-check.sh [BUDGET_SECONDS]
# runs every test (GPU tests included) and a quick pass of `make bench` from the
# prebuilt build-device/ (scripts/device-stage.sh), within the budget, and packs the
# logs and the results folder into $OUT/device-check.tar.gz. Draw the charts back
# home with `make charts RESULTS=results/<folder>`.
set -uo pipefail
budget=${1:-420}
out=${OUT:-/tmp/device-out}
build=${BUILD:-build-device}
mkdir -p "$out"
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
log="$out/device-check.log"
exec > >(tee "$log") 2>&1

# CUDA libraries: the toolkit's, and cuDNN/NCCL from wherever the machine has them.
libdirs=$(find / \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' -o -name 'libcublas.so.13' \) \
          -not -path '*/proc/*' 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$PWD/device-stage/lib:${libdirs}${LD_LIBRARY_PATH:-}"
echo "device-check: budget ${budget}s; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm --format=csv || true
"$build/context" || echo "device-check: $build/context failed (missing libraries? see ldd below)"
ldd "$build/context" | grep 'not found' || true

echo "== tests ($(left)s left)"
TEST_TIMEOUT=$(( $(left) / 3 )) bash scripts/run-tests.sh "$build"
tests_rc=$?

echo "== quick bench ($(left)s left)"
results="results/$("$build/context" --slug)_$(date -u +%Y%m%d-%H%M)"
BENCH_TIMEOUT=$(( $(left) - 30 )) BENCH_NO_CHARTS=1 RESULTS_DIR="$results" \
  BENCH_ARGS="${BENCH_ARGS:---benchmark_min_time=0.05}" bash scripts/run-suite.sh "$build"
bench_rc=$?

echo "device-check: tests exit $tests_rc, bench exit $bench_rc, $((SECONDS - start))s"
tar -czf "$out/device-check.tar.gz" "$results" "$log" 2>/dev/null
exit $((tests_rc || bench_rc))
