#!/usr/bin/env bash
# Speedups of every tuned variant over its practice's baseline, for matching
# parameters on the same machine: speedup = median baseline time / median tuned time over
# the repetitions, with a 95% bootstrap interval, a Mann-Whitney U p-value, a verdict
# (faster / slower, equivalent within the equivalence margin, inconclusive: the rules are
# scripts/verdicts.py's) and noisy / contended flags; geometric
# means over parameter points with their intervals; n/a where the repetitions are too few
# to show a difference. Reference rows (yardsticks such as raw decode) give no speedup;
# runs that missed their target are counted ("reached 3 of 5") and censored, never dropped;
# accuracy-parity runs go to summary_accuracy.csv. An empty CSV (a program cut at its
# deadline) is a warning; zero, negative or non-numeric times and malformed CSVs are
# errors (exit 2), and so are two baselines of one group in one run.
# The statistics are in scripts/stats.py (its header says exactly how they are computed).
# usage: summarize.sh RESULTS_DIR   (reads RESULTS_DIR/*.csv and their *.reps.csv, writes
#        RESULTS_DIR/summary.csv, summary_by_variant.csv and summary_accuracy.csv)
#    or: summarize.sh -o OUT.csv TIDY.csv...   (any tidy CSVs, e.g. from several machines)
# Environment: STATS_NOISE_CV  the coefficient of variation, in percent, above which a
#              row is noisy (default 2)
#              BENCH_EQUIVALENCE_MARGIN  a fraction m (default 0.05): a speedup whose 95%
#              interval lies within 1 - m to 1 + m is equivalent
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "summarize: python3 is not installed" >&2; exit 1; }
exec python3 "$here/stats.py" summarize "$@"
