#!/usr/bin/env bash
# Speedups of every tuned variant over its practice's baseline, for matching
# parameters on the same machine: speedup = median baseline time / median tuned time over
# the repetitions, with a 95% bootstrap interval, a Mann-Whitney U p-value, a verdict
# (faster / slower / no significant difference) and noisy / contended flags; geometric
# means over parameter points with their intervals. Reference rows (yardsticks such as
# raw decode) and runs to a target that did not reach it (reached_target = 0) give no
# speedup. Zero, negative or non-numeric times and malformed CSVs are errors (exit 2).
# The statistics are in scripts/stats.py (its header says exactly how they are computed).
# usage: summarize.sh RESULTS_DIR   (reads RESULTS_DIR/*.csv and their *.reps.csv, writes
#        RESULTS_DIR/summary.csv and RESULTS_DIR/summary_by_variant.csv)
#    or: summarize.sh -o OUT.csv TIDY.csv...   (any tidy CSVs, e.g. from several machines)
# Environment: STATS_NOISE_CV  the coefficient of variation, in percent, above which a
#              row is noisy (default 2)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "summarize: python3 is not installed" >&2; exit 1; }
exec python3 "$here/stats.py" summarize "$@"
