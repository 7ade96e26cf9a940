#!/usr/bin/env python3
"""check_margins.py: how far each correctness check's observed difference is from its tolerance.

    python3 scripts/check_margins.py RESULTS_DIR [--out FILE]

Reads the tidy CSVs of a results folder (one row per benchmark instance) and, for every check
that records both a difference and its tolerance (check_rel_diff with check_tolerance,
check_loss_rel_diff with check_loss_tolerance), prints one line per practice and variant (a
results folder is one machine, so one backend): the rows checked (every parameter point), the
largest difference seen, the tolerance and their ratio
(tolerance / observed: how much room the check left). A ratio near 1 is a check about to fail
on legitimate differences; a very large one is a tolerance wider than the data needs, which
a bug could hide in. The GPU tolerances were set from CPU rounding figures and reasoning: the
first GPU run's margins are their calibration. A tolerance of 0 means bit for bit.
Writes the table as TSV to --out as well when given. Python's standard library only.
"""
import argparse
import csv
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from stats import num, tidy_inputs  # noqa: E402

CHECKS = (("check_rel_diff", "check_tolerance"), ("check_loss_rel_diff", "check_loss_tolerance"))


def margins(folder):
    """{(program, practice, variant, check): [rows, max observed, tolerance]}."""
    table = {}
    for path in sorted(tidy_inputs(folder)):
        name = os.path.basename(path)
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("status") != "ok":
                    continue
                for diff_key, tol_key in CHECKS:
                    diff, tol = num(row, diff_key), num(row, tol_key)
                    if diff is None or tol is None:
                        continue
                    key = (name[:-4], row.get("practice", ""), row.get("variant", ""), diff_key)
                    entry = table.setdefault(key, [0, 0.0, tol])
                    entry[0] += 1
                    entry[1] = max(entry[1], diff)
                    entry[2] = tol
    return table


def ratio_text(observed, tol):
    if tol == 0:
        return "bit for bit" if observed == 0 else "FAILS (bit for bit wanted)"
    if observed == 0:
        return "inf (0 observed)"
    return "%.3g" % (tol / observed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--out", help="also write the table as TSV here")
    args = parser.parse_args()
    if not os.path.isdir(args.folder):
        print("check_margins: no folder %s" % args.folder, file=sys.stderr)
        return 2
    table = margins(args.folder)
    header = ["program", "practice", "variant", "check", "rows",
              "max_observed", "tolerance", "tolerance_over_observed"]
    lines = []
    for key in sorted(table):
        rows, observed, tol = table[key]
        lines.append(list(key) + [str(rows), "%.3g" % observed, "%g" % tol, ratio_text(observed, tol)])
    if not lines:
        print("check margins: no checked rows with a recorded tolerance in %s" % args.folder)
    else:
        print("check margins (tolerance / largest observed difference; the first GPU run calibrates "
              "the GPU tolerances):")
        widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]
        for l in [header] + lines:
            print("  " + "  ".join(v.ljust(widths[i]) for i, v in enumerate(l)).rstrip())
    if args.out:
        with open(args.out, "w") as f:
            f.write("\t".join(header) + "\n")
            for l in lines:
                f.write("\t".join(l) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
