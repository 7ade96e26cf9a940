#!/usr/bin/env bash
# Speedups of every tuned variant over its practice's baseline, for matching
# parameters on the same machine: speedup = baseline time / tuned time. Reference rows
# (yardsticks such as raw decode) and runs to a target that did not reach it
# (reached_target = 0: missed or diverged) give no speedup.
# usage: summarize.sh RESULTS_DIR   (reads RESULTS_DIR/*.csv, writes
#        RESULTS_DIR/summary.csv and RESULTS_DIR/summary_by_variant.csv)
#    or: summarize.sh -o OUT.csv TIDY.csv...   (any tidy CSVs, e.g. from several machines)
set -euo pipefail
usage="usage: summarize.sh RESULTS_DIR | summarize.sh -o OUT.csv TIDY.csv..."
if [[ ${1:-} == -o ]]; then
  out=${2:-}
  [[ -n $out ]] || { echo "summarize: -o needs an output file; $usage" >&2; exit 1; }
  shift 2; inputs=("$@")
else
  dir=${1:-}
  [[ -n $dir ]] || { echo "summarize: $usage" >&2; exit 1; }
  [[ -d $dir ]] || { echo "summarize: no results folder $dir" >&2; exit 1; }
  out="$dir/summary.csv"
  inputs=()
  shopt -s nullglob
  for f in "$dir"/*.csv; do
    case $(basename "$f") in summary*.csv | *.curves.csv) ;; *) inputs+=("$f") ;; esac
  done
fi
if ((${#inputs[@]} == 0)); then
  echo "summarize: no tidy CSV files ${dir:+in $dir }given" >&2
  exit 1
fi
for f in "${inputs[@]}"; do
  [[ -r $f && ! -d $f ]] || { echo "summarize: cannot read $f" >&2; exit 1; }
done

awk -F, -v OFS=, '
  function seconds(t, unit) {
    return t * (unit == "ns" ? 1e-9 : unit == "us" ? 1e-6 : unit == "ms" ? 1e-3 : 1)
  }
  FNR == 1 {
    delete col
    for (i = 1; i <= NF; i++) col[$i] = i
    if (!("practice" in col) || !("status" in col) || !("time" in col)) {
      printf "summarize: %s is not a tidy CSV (no practice/status/time columns)\n", FILENAME > "/dev/stderr"
      bad = 1; nextfile
    }
    next
  }
  $col["status"] != "ok" || $col["time"] == "" || $col["role"] == "reference" { next }
  ("reached_target" in col) && $col["reached_target"] != "" && $col["reached_target"] + 0 == 0 { next }
  {
    machine = $col["ctx_gpu_name"] ";" $col["ctx_driver_version"] ";" $col["ctx_host"]
    key = $col["practice"] SUBSEP $col["params"] SUBSEP machine
    t = seconds($col["time"] + 0, $col["time_unit"])
    if ($col["role"] == "baseline") {
      base[key] = t; base_variant[key] = $col["variant"]
    } else {
      n = ++ntuned[key]
      tuned_variant[key, n] = $col["variant"]; tuned_time[key, n] = t
      if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key; gpu[key] = $col["ctx_gpu_name"]
                            driver[key] = $col["ctx_driver_version"]; host[key] = $col["ctx_host"] }
    }
  }
  END {
    print "practice,params,baseline,tuned,baseline_s,tuned_s,speedup,gpu_name,driver_version,host"
    rows = 0
    for (k = 1; k <= nkeys; k++) {
      key = order[k]
      if (!(key in base)) continue
      split(key, part, SUBSEP)
      for (j = 1; j <= ntuned[key]; j++) {
        t = tuned_time[key, j]
        if (t <= 0) continue
        print part[1], part[2], base_variant[key], tuned_variant[key, j], \
              sprintf("%.6g", base[key]), sprintf("%.6g", t), sprintf("%.4f", base[key] / t), \
              gpu[key], driver[key], host[key]
        rows++
      }
    }
    if (bad) exit 2
  }' "${inputs[@]}" >"$out"

# Geometric-mean speedup of each tuned variant over all of its parameter points.
awk -F, -v OFS=, '
  NR == 1 { next }
  { key = $1 "," $4 "," $8 "," $10; s[key] += log($7); n[key]++ }
  END {
    print "practice,tuned,gpu_name,host,points,geomean_speedup"
    for (k in s) { split(k, p, ","); print p[1], p[2], p[3], p[4], n[k], sprintf("%.4f", exp(s[k] / n[k])) }
  }' "$out" | { read -r header; echo "$header"; sort; } >"${out%.csv}_by_variant.csv"

echo "summarize: $(($(wc -l <"$out") - 1)) speedups -> $out"
