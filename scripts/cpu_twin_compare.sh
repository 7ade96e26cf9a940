#!/usr/bin/env bash
# cpu_twin_compare.sh: the core's CPU backends against PyTorch on the CPU, step for step.
# For each preset (and batch size): build/steptime --dump writes the core's initial
# weights and batch, scripts/torch_cpu_twin.py --check replays the core's first steps in
# PyTorch (loss and parameters must agree), then ROUNDS rounds run, interleaved so that
# load from anything else on the machine falls on both alike: for each thread count and
# zero-grad mode, the fast core then PyTorch (and the reference backend in the first
# REF_ROUNDS rounds). Each run reports its median step; the table gives the median of
# those over the rounds.
# usage: cpu_twin_compare.sh [BUILD] [ROUNDS] [PRESET...]   (default: build 5 tiny mlp small)
# env:   PYTHON      a Python with torch (default python3)
#        THREADS     thread counts (default "1 2")
#        ZERO_GRADS  zero-grad modes, both sides (default "memset"; e.g. "memset set_to_none")
#        BATCHES     batch sizes (default: each preset's own)
#        REF_ROUNDS  rounds that also time the reference backend (default 1; 0: never)
#        OUT         keep the raw log there (default: printed at the end)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
shift $(($# >= 2 ? 2 : $#))
presets=("$@")
((${#presets[@]})) || presets=(tiny mlp small)
python=${PYTHON:-python3}
read -r -a threads <<<"${THREADS:-1 2}"
read -r -a zero_grads <<<"${ZERO_GRADS:-memset}"
read -r -a batches <<<"${BATCHES:-0}"
ref_rounds=${REF_ROUNDS:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "cpu_twin_compare: ROUNDS must be a number >= 1" >&2; exit 1; }
[[ -x $build/steptime ]] || { echo "cpu_twin_compare: no $build/steptime (make first)" >&2; exit 1; }
"$python" -c 'import torch' 2>/dev/null ||
  { echo "cpu_twin_compare: $python has no torch (pip install torch; PYTHON=...)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=${OUT:-$work/log.txt}
: >"$log"

# Timed steps per run (about a second of work or more), and for the slow reference.
steps_of() { case $1 in tiny) echo 40 ;; mlp) echo 200 ;; small) echo 5 ;; *) echo 3 ;; esac; }
ref_steps_of() { case $1 in tiny) echo 10 ;; mlp) echo 40 ;; *) echo 1 ;; esac; }
batch_flag() { if (($1 > 0)); then echo "--batch-size $1"; fi; }

echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) cores: $rounds rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
for p in "${presets[@]}"; do
  for b in "${batches[@]}"; do
    # shellcheck disable=SC2046
    "$build/steptime" --preset "$p" $(batch_flag "$b") --dump "$work/$p-$b" --steps 1 --warmup 0 >/dev/null
    "$python" "$here/torch_cpu_twin.py" --dump "$work/$p-$b" --check --steps 1 --warmup 0 |
      grep twin-check | tee -a "$log"
  done
done
for ((r = 1; r <= rounds; r++)); do
  for p in "${presets[@]}"; do
    for b in "${batches[@]}"; do
      s=$(steps_of "$p")
      for z in "${zero_grads[@]}"; do
        for t in "${threads[@]}"; do
          # shellcheck disable=SC2046
          echo "round $r $("$build/steptime" --preset "$p" $(batch_flag "$b") --backend cpu --threads "$t" --zero-grad "$z" --steps "$s")" >>"$log"
          echo "round $r $("$python" "$here/torch_cpu_twin.py" --dump "$work/$p-$b" --threads "$t" --zero-grad "$z" --steps "$s")" >>"$log"
        done
        if ((r <= ref_rounds)); then
          # shellcheck disable=SC2046
          echo "round $r $("$build/steptime" --preset "$p" $(batch_flag "$b") --backend cpu-ref --zero-grad "$z" --steps "$(ref_steps_of "$p")" --warmup 1)" >>"$log"
        fi
      done
    done
  done
  echo "# round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
done

# Each run line: "round R steptime:|twin: key value key value ...".
awk '
  function med(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  /^round/ {
    delete kv
    for (i = 4; i < NF; i += 2) kv[$i] = $(i + 1)
    who = $3 == "twin:" ? "torch" : (kv["backend"] == "cpu-ref" ? "ref" : "core")
    c = kv["preset"] " " kv["batch"] " " kv["zero_grad"]
    if (!(c in seen)) { seen[c] = 1; cases[++nc] = c }
    if (who != "ref" && !((kv["threads"] + 0) in tseen)) { tseen[kv["threads"] + 0] = 1; ts[++nt] = kv["threads"] + 0 }
    key = c SUBSEP (who == "ref" ? 0 : kv["threads"] + 0) SUBSEP who
    ms[key] = ms[key] " " kv["median_ms"]
  }
  END {
    printf "%-8s %6s %-12s %7s %12s %12s %12s %10s %10s %12s %12s\n", "preset", "batch", "zero_grad", "threads",
           "core_cpu_ms", "torch_ms", "core_ref_ms", "cpu/torch", "ref/torch", "cpu_img/s", "torch_img/s"
    for (k = 1; k <= nc; k++) {
      split(cases[k], f, " ")
      r = ms[cases[k] SUBSEP 0 SUBSEP "ref"]; rm = r == "" ? 0 : med(r)
      for (u = 1; u <= nt; u++) {
        c = ms[cases[k] SUBSEP ts[u] SUBSEP "core"]; q = ms[cases[k] SUBSEP ts[u] SUBSEP "torch"]
        if (c == "" || q == "") continue
        cm = med(c); qm = med(q)
        printf "%-8s %6d %-12s %7d %12.3f %12.3f %12s %10.2f %10s %12.1f %12.1f\n", f[1], f[2], f[3], ts[u],
               cm, qm, r == "" ? "-" : sprintf("%.3f", rm), cm / qm, r == "" ? "-" : sprintf("%.1f", rm / qm),
               1e3 * f[2] / cm, 1e3 * f[2] / qm
      }
    }
  }' "$log"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg); median over rounds of each run's median step"
if [[ -n ${OUT:-} ]]; then echo "# raw runs: $log"; else grep '^round' "$log" | sed 's/^/#   /'; fi
