#!/usr/bin/env bash
# Draws the charts of a results folder with gnuplot, PNG and SVG, into DIR/charts/:
# scripts/charts/<name>.gp for each DIR/<name>.csv that has measured rows, and the
# speedup overview from DIR/summary_by_variant.csv.
# usage: charts.sh [RESULTS_DIR]   (default: the newest folder under results/)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$(ls -1td results/*/ 2>/dev/null | head -n 1)}
dir=${dir%/}
if [[ -z $dir || ! -d $dir ]]; then
  echo "charts: no results folder (run make bench first, or pass RESULTS=dir)" >&2
  exit 1
fi
command -v gnuplot >/dev/null || { echo "charts: gnuplot is not installed (make deps)" >&2; exit 1; }
mkdir -p "$dir/charts"
failed=0 drawn=0
has_rows() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "status") s = i; next }
                      $s == "ok" { found = 1; exit } END { exit !found }' "$1"; }
draw() { # script csv
  local log
  if log=$(gnuplot -e "csv='$2'; outdir='$dir/charts'" "$1" 2>&1); then
    drawn=$((drawn + 1))
  else
    echo "charts: $(basename "$1") failed: $log" >&2
    failed=1
  fi
}
shopt -s nullglob
for csv in "$dir"/*.csv; do
  name=$(basename "$csv" .csv)
  [[ $name == summary* ]] && continue
  script="$here/charts/$name.gp"
  [[ -f $script ]] || continue
  if has_rows "$csv"; then draw "$script" "$csv"
  else echo "charts: $name: nothing measured (all skipped), no chart"; fi
done
if [[ -s $dir/summary_by_variant.csv ]] && (($(wc -l <"$dir/summary_by_variant.csv") > 1)); then
  draw "$here/charts/summary.gp" "$dir/summary_by_variant.csv"
fi
echo "charts: $drawn chart scripts ran -> $dir/charts"
exit $failed
