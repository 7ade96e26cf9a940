#!/usr/bin/env bash
# `make guide RESULTS="results/A results/B ..."`: a tuning-guide folder from one or more
# results folders (one per machine): guide.md with the machines, per practice the claim, a
# chart across machines, a practice x machine table and a recommendation per machine, and
# the absolute throughput (scripts/guide.py; docs/guide.md).
# usage: guide.sh [-o OUT_DIR] RESULTS_DIR [RESULTS_DIR...]
#    or: RESULTS="DIR DIR..." guide.sh   (what `make guide` does; newlines apart names with spaces)
# Environment: GUIDE_DIR  the folder to write (default results/guide_<yyyymmdd-hhmm>: a
#                         guide_* folder is never a run, so `make charts` never picks it)
#              GUIDE_PNG=1  PNG charts beside the SVG ones
#              CLAIMS_CSV   the claims file (default bench/claims.csv)
# Needs python3 and gnuplot; no CUDA compiler, no build.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: guide.sh [-o OUT_DIR] RESULTS_DIR [RESULTS_DIR...] (or RESULTS=\"DIR DIR...\")"
out=""
if [[ ${1:-} == -o ]]; then
  out=${2:-}
  [[ -n $out ]] || { echo "guide: -o needs a folder; $usage" >&2; exit 1; }
  shift 2
fi
# RESULTS comes through the environment, never a shell line: apart by newlines when there
# is one (names with spaces), else by spaces; no globbing either way.
if (($# == 0)) && [[ -n ${RESULTS:-} ]]; then
  if [[ $RESULTS == *$'\n'* ]]; then
    mapfile -t dirs <<<"$RESULTS"
  else
    read -r -a dirs <<<"$RESULTS"
  fi
  for d in "${dirs[@]}"; do [[ -n $d ]] && set -- "$@" "$d"; done
fi
(($# >= 1)) || { echo "guide: $usage" >&2; exit 1; }
for d in "$@"; do
  [[ -d $d ]] || { echo "guide: no results folder $d" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "guide: python3 is not installed (make deps)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "guide: gnuplot is not installed (make deps): the guide's charts need it" >&2; exit 1; }
out=${out:-${GUIDE_DIR:-results/guide_$(date -u +%Y%m%d-%H%M)}}
mkdir -p -- "$out" || { echo "guide: cannot create $out" >&2; exit 1; }
exec python3 "$here/guide.py" "$out" "$@"
