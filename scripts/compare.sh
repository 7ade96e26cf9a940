#!/usr/bin/env bash
# `make compare RESULTS="results/A results/B ..."`: the same benchmarks on several machines
# (GPUs, drivers, library versions) side by side, relative to one reference machine (REF: a
# folder's name or its 1-based position; default the first). Writes a comparison folder with
#   compare.md    a warning first when the runs were made by different code or plans; each
#                 machine by GPU, driver, CUDA, cuDNN, cuBLAS, NCCL, CPU and date, and what
#                 differs; the speedup of every tuned variant on every machine and at every
#                 parameter point any machine measured (a machine that did not says why), its
#                 ratio to the reference's and whether they differ (Holm-corrected over the
#                 table); every benchmark's absolute time relative to the reference
#   speedups.csv, speedup_points.csv, times.csv   the same tables as CSV
#   charts/compare_<practice>.png|svg   grouped bars: a group per variant, a bar per machine
# and, when it is written in the repository's results/, regenerates its index (README.md).
# It needs python3 (and gnuplot for the charts), never the CUDA toolkit.
# usage: compare.sh [-o OUT_DIR] [-r REF] RESULTS_DIR RESULTS_DIR...
#    or: RESULTS="DIR DIR..." compare.sh   (what `make compare` does; newlines apart names with spaces)
#   OUT_DIR default: $COMPARE_OUT, else results/compare_<yyyymmdd-hhmm>; REF default: $REF, else
#   the first folder. The statistics: scripts/stats.py and scripts/stats_compare.py.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: compare.sh [-o OUT_DIR] [-r REF] RESULTS_DIR RESULTS_DIR... (two or more results folders; or RESULTS=\"DIR DIR...\")"
out="" ref=${REF:-}
while [[ ${1:-} == -o || ${1:-} == -r ]]; do
  [[ -n ${2:-} ]] || { echo "compare: $1 needs a value; $usage" >&2; exit 1; }
  if [[ $1 == -o ]]; then out=$2; else ref=$2; fi
  shift 2
done
# `make compare` passes the folders in RESULTS (the environment, never a shell line): apart
# by newlines when there is one (names with spaces), else by spaces; no globbing either way.
if (($# == 0)) && [[ -n ${RESULTS:-} ]]; then
  if [[ $RESULTS == *$'\n'* ]]; then
    mapfile -t dirs <<<"$RESULTS"
  else
    read -r -a dirs <<<"$RESULTS"
  fi
  set --
  for d in "${dirs[@]}"; do [[ -n $d ]] && set -- "$@" "$d"; done
fi
if (($# < 2)); then
  echo "compare: $usage" >&2
  exit 1
fi
for d in "$@"; do
  [[ -d $d ]] || { echo "compare: no results folder $d" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "compare: python3 is not installed" >&2; exit 1; }
out=${out:-${COMPARE_OUT:-results/compare_$(date -u +%Y%m%d-%H%M)}}
python3 "$here/stats.py" compare --ref "$ref" "$out" "$@" || exit $?

status=0
if command -v gnuplot >/dev/null; then
  drawn=0
  shopt -s nullglob
  for dat in "$out"/charts/compare_*.dat; do
    stem=${dat%.dat}
    practice=${stem##*/compare_}
    if log=$(gnuplot -c "$here/compare.gp" "$dat" "$stem" "$(cat "$stem.title")" "$#" "$(cat "$stem.ymax")" 2>&1); then
      drawn=$((drawn + 1))
    else
      echo "compare: chart of $practice failed: $log" >&2
      status=1
    fi
  done
  echo "compare: $drawn charts -> $out/charts"
else
  echo "compare: gnuplot is not installed: no charts (the tables are in $out/compare.md)"
fi
# The index (README.md) lives only in the repository's results/: a comparison written
# elsewhere writes nothing outside its own folder.
if [[ $(cd "$(dirname "$out")" && pwd -P) == "$(cd "$here/.." && pwd -P)/results" ]]; then
  python3 "$here/stats.py" index "$(dirname "$out")" || status=1
fi
exit $status
