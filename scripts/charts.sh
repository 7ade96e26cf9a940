#!/usr/bin/env bash
# Draws the charts of a results folder with gnuplot into DIR/charts/, as SVG (CHART_FORMATS:
# "svg png" for both, "png" for PNG only): every
# chart described in scripts/charts/<csvname>.charts (from DIR/<csvname>.csv), and the
# headline chart summary_speedup (each practice's claimed, else best, tuned variant against the published
# claims of bench/claims.csv). The renderer is scripts/charts/render.py (its header
# describes the description format); paths reach it as arguments, never as gnuplot code.
# A run cut at its deadline draws what exists: an empty CSV is a warning naming it, rows
# with status partial are drawn, and the exit status is 0 unless a CSV is garbage.
# Without gnuplot (the GPU machine has none) it fails, naming it, unless the folder has no
# CSV rows to draw anyway (a run cut before its first row): then it says so and exits 0.
# usage: charts.sh [RESULTS_DIR]   (default: the newest run under results/, scripts/results-dir.sh:
#                                   never a comparison or a guide folder)
# Environment: CLAIMS_CSV  the claims file (default bench/claims.csv)
#              CHARTS_OUT  write the charts here instead of RESULTS_DIR/charts
#              CHARTS_DESCRIPTIONS  the folder of *.charts descriptions (default scripts/charts)
#              CHART_FORMATS  svg (default), png, or both ("svg png")
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$(bash "$here/results-dir.sh" newest results 2>/dev/null)}
dir=${dir%/}
if [[ -z $dir || ! -d $dir ]]; then
  echo "charts: no results folder (run make bench first, or pass RESULTS=dir)" >&2
  exit 1
fi
# A comparison or a guide draws its own charts (make compare, make guide): not a run's.
case ${dir##*/} in
  compare_* | guide_*)
    echo "charts: $dir is a comparison or a guide, not a run (make compare / make guide draw its charts)" >&2
    exit 1 ;;
esac
# Whether any results CSV of the folder has a row (a header alone draws nothing).
has_rows() {
  local f
  for f in "$dir"/*.csv; do
    case ${f##*/} in summary*.csv | *.reps.csv | *.curves.csv) continue ;; esac
    (($(head -n 2 -- "$f" | wc -l) >= 2)) && return 0
  done
  return 1
}
if ! command -v gnuplot >/dev/null; then
  if ! has_rows; then
    echo "charts: skipped: gnuplot is not installed, and $dir has no results CSV with rows to draw anyway"
    exit 0
  fi
  echo "charts: gnuplot is not installed (make deps; or draw the charts elsewhere: make charts RESULTS=$dir)" >&2
  exit 1
fi
command -v python3 >/dev/null || { echo "charts: python3 is not installed (make deps)" >&2; exit 1; }
out=${CHARTS_OUT:-$dir/charts}
mkdir -p -- "$out" || { echo "charts: cannot create $out" >&2; exit 1; }
# The results folder's own charts are all redrawn: none left over from an older description.
[[ -z ${CHARTS_OUT:-} ]] && rm -f -- "$out"/*.png "$out"/*.svg
python3 "$here/charts/render.py" "$dir" "$out" "${CHARTS_DESCRIPTIONS:-$here/charts}" "${CLAIMS_CSV:-$here/../bench/claims.csv}"
rc=$?
((rc == 0)) && echo "charts: -> $out"
exit $((rc == 0 ? 0 : 1))
