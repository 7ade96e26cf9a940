#!/usr/bin/env bash
# Writes DIR/report.md: how the results were made (command, GPU, driver, libraries),
# what ran and what was skipped and why, the speedups, and the charts.
# usage: report.sh [RESULTS_DIR]   (default: the newest folder under results/)
set -uo pipefail
dir=${1:-$(ls -1td results/*/ 2>/dev/null | head -n 1)}
dir=${dir%/}
if [[ -z $dir || ! -d $dir ]]; then
  echo "report: no results folder (run make bench first, or pass RESULTS=dir)" >&2
  exit 1
fi
report="$dir/report.md"
ctx() { sed -n "s/^$1=//p" "$dir/context.txt" 2>/dev/null | head -n 1; }
{
  echo "# Tuning-practice benchmarks: $(basename "$dir")"
  echo
  if [[ -f $dir/command.txt ]]; then
    echo '```'; cat "$dir/command.txt"; echo '```'; echo
  fi
  echo "## Machine"
  echo
  echo "| key | value |"
  echo "|---|---|"
  if [[ -f $dir/context.txt ]]; then
    sed 's/|/\\|/g; s/^\([^=]*\)=\(.*\)$/| \1 | \2 |/' "$dir/context.txt"
  fi
  echo
  if [[ -n $(ctx no_gpu_reason) ]]; then
    echo "**No GPU here: $(ctx no_gpu_reason).** GPU benchmarks were skipped; the CPU ones ran."
    echo
  fi

  echo "## What ran"
  echo
  if [[ -f $dir/suite-status.tsv ]]; then
    echo "| program | status | ok | skipped | errors | seconds | reason |"
    echo "|---|---|---|---|---|---|---|"
    tail -n +2 "$dir/suite-status.tsv" | sed 's/|/\\|/g; s/\t/ | /g; s/^/| /; s/$/ |/'
  else
    echo "(no suite-status.tsv: this folder was not written by make bench)"
  fi
  echo

  echo "## Speedups (baseline time / tuned time)"
  echo
  if [[ -f $dir/summary_by_variant.csv ]] && (($(wc -l <"$dir/summary_by_variant.csv") > 1)); then
    echo "Geometric mean over each variant's parameter points; the per-point table is summary.csv."
    echo
    echo "| practice | tuned variant | points | speedup |"
    echo "|---|---|---|---|"
    awk -F, 'NR > 1 { printf "| %s | %s | %s | %.2fx |\n", $1, $2, $5, $6 }' "$dir/summary_by_variant.csv"
  else
    echo "No speedups: no practice had both a measured baseline and a measured tuned variant."
  fi
  echo

  echo "## Charts"
  echo
  shopt -s nullglob
  pngs=("$dir"/charts/*.png)
  if ((${#pngs[@]} == 0)); then
    echo "No charts: nothing was measured that has a chart."
  fi
  for png in "${pngs[@]}"; do
    name=$(basename "$png" .png)
    echo "### $name"
    echo
    echo "![$name](charts/$name.png) ([SVG](charts/$name.svg))"
    echo
  done

  echo "## Files"
  echo
  echo "- \`<practice>.json\`: Google Benchmark JSON (works with its tools/compare.py)"
  echo "- \`<practice>.csv\`: tidy CSV, one row per benchmark instance, context on every row"
  echo "- \`summary.csv\`, \`summary_by_variant.csv\`: speedups; \`logs/\`: console output"
} >"$report" || { echo "report: cannot write $report" >&2; exit 1; }
echo "report: $report"
