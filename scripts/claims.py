#!/usr/bin/env python3
"""claims.py: sets the published claims (bench/claims.csv) against what a results folder
measured, for report.md and the end of `make bench` (Python standard library only).

  claims.py table RESULTS_DIR [CLAIMS_CSV]   markdown headline table: one row per claim
  claims.py speedups RESULTS_DIR             markdown table of every tuned variant's speedup
  claims.py digest RESULTS_DIR               the few lines `make bench` ends with
  claims.py verdict SPEEDUP [CI_LOW CI_HIGH] [--claim LOW HIGH] [--slower]
                                             one verdict on fixed numbers (for tests)
  claims.py verdicts                         the same, one case per line of stdin

claims.csv columns: practice, tuned (a variant, or * for the practice's best measured
tuned variant), direction (faster: the claim says the tuned variant is faster; slower: it
says it is slower), claim (a few words), effect_low, effect_high (the claimed speedup
range, baseline time / tuned time, where the source gives one; empty where it does not),
source, hardware.

The verdict rules (the measured speedup is the geometric mean over the variant's
parameter points; its interval is the 95% interval of scripts/stats.py):
  1. No speedup measured for the practice: "not measured here (why)", the why taken from
     the results' skip or error reasons.
  2. The measured interval holds 1.00x: "no effect here" (unless the claimed range holds
     1.00x too: "holds"). Without an interval (a single repetition) the point is the
     interval, and a speedup within NO_INTERVAL_BAND (5%) of 1.00x counts as holding 1.
  3. The interval lies wholly on the other side of 1.00x from the claim's direction:
     "reversed here".
  4. The claim gives no range (only a direction): "holds".
  5. Else the interval against the claimed range, as effect sizes (for a slower claim,
     1/speedup): overlapping "holds"; wholly below "smaller here"; wholly above
     "larger here".
"""
import csv
import math
import os
import re
import sys

NO_INTERVAL_BAND = 1.05
CLAIM_FIELDS = ("practice", "tuned", "direction", "claim", "effect_low", "effect_high", "source", "hardware")


class ClaimsError(Exception):
    pass


def number(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_csv(path, need):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            table = [r for r in csv.reader(f) if r]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ClaimsError(f"{path}: {e}")
    if not table or any(c not in table[0] for c in need):
        raise ClaimsError(f"{path}: not the expected CSV (needs {', '.join(need)})")
    header = table[0]
    for i, r in enumerate(table[1:], start=2):
        if len(r) != len(header):
            raise ClaimsError(f"{path}: line {i} has {len(r)} fields, the header {len(header)}")
    return [dict(zip(header, r)) for r in table[1:]]


def read_claims(path):
    claims = read_csv(path, CLAIM_FIELDS)
    for i, c in enumerate(claims, start=2):
        if not c["source"].strip():
            raise ClaimsError(f"{path}: line {i} ({c['practice']}): a claim without a source")
        if c["direction"] not in ("faster", "slower"):
            raise ClaimsError(f"{path}: line {i}: direction '{c['direction']}' is not faster/slower")
        low, high = number(c["effect_low"]), number(c["effect_high"])
        if (c["effect_low"] or c["effect_high"]) and (low is None or high is None or low <= 0 or high < low):
            raise ClaimsError(f"{path}: line {i}: effect range '{c['effect_low']}'-'{c['effect_high']}' is not 0 < low <= high")
    return claims


def verdict(speedup, ci_low=None, ci_high=None, claim_low=None, claim_high=None, slower=False):
    """The verdict in words for a measured speedup (and interval) against a claim."""
    if ci_low is None or ci_high is None:
        lo = hi = speedup
        holds_one = 1 / NO_INTERVAL_BAND <= speedup <= NO_INTERVAL_BAND
    else:
        lo, hi = ci_low, ci_high
        holds_one = lo <= 1.0 <= hi
    has_range = claim_low is not None and claim_high is not None
    if holds_one:
        return "holds" if has_range and claim_low <= 1.0 <= claim_high else "no effect here"
    if (lo > 1.0) == slower:
        return "reversed here"
    if not has_range:
        return "holds"
    if slower:  # compare effect sizes: a 0.5x slowdown is an effect of 2
        lo, hi, claim_low, claim_high = 1 / hi, 1 / lo, 1 / claim_high, 1 / claim_low
    if hi < claim_low:
        return "smaller here"
    if lo > claim_high:
        return "larger here"
    return "holds"


# ---- results -----------------------------------------------------------------------------

def summary_rows(results):
    path = os.path.join(results, "summary_by_variant.csv")
    if not os.path.exists(path):
        return []
    rows = read_csv(path, ("practice", "tuned", "geomean_speedup"))
    for i, r in enumerate(rows, start=2):
        if number(r["geomean_speedup"]) is None or float(r["geomean_speedup"]) <= 0:
            raise ClaimsError(f"{path}: line {i}: speedup '{r['geomean_speedup']}' is not a positive number")
    return rows


def tidy_statuses(results):
    """{practice: [(status, reason)]} over the results folder's tidy CSVs."""
    out = {}
    for name in sorted(os.listdir(results)):
        if not name.endswith(".csv") or name.startswith("summary") or name.count(".") > 1:
            continue
        try:
            rows = read_csv(os.path.join(results, name), ("practice", "status"))
        except ClaimsError:
            continue  # charts.sh and summarize.sh report a broken CSV; the table says why not
        for r in rows:
            out.setdefault(r["practice"], []).append((r["status"], r.get("reason", "")))
    return out


def short_reason(why):
    """'kernels/pinned.c:12: no CUDA device (no NVIDIA driver ...)' -> 'no CUDA device'."""
    why = re.sub(r"^.*?[\w.-]+\.(c|cu|cc|h):\d+: ", "", why.strip())
    return why.split(" (")[0] or why


def why_not_measured(practice, statuses):
    rows = statuses.get(practice)
    if not rows:
        return "not in this run"
    for wanted, prefix in (("skipped", ""), ("error", "failed: ")):
        reasons = [why for status, why in rows if status == wanted and why]
        if reasons and not any(status == "ok" for status, _ in rows):
            return prefix + short_reason(reasons[0])
    if any(status == "ok" for status, _ in rows):
        return "no baseline and tuned variant both measured"
    return "nothing measured"


def pick(rows, practice, tuned):
    """The summary row of a claim: its variant, or the practice's best one for *."""
    mine = [r for r in rows if r["practice"] == practice and (tuned in ("*", "") or r["tuned"] == tuned)]
    return max(mine, key=lambda r: float(r["geomean_speedup"])) if mine else None


def interval_of(row):
    lo, hi = number(row.get("ci_low")), number(row.get("ci_high"))
    return (lo, hi) if lo is not None and hi is not None and 0 < lo <= hi else (None, None)


def flags_of(row):
    flags = []
    if row.get("noisy", "") not in ("", "0"):
        flags.append("noisy")
    if row.get("contended", "") not in ("", "0"):
        flags.append("contended: " + row["contended"])
    return flags


def effect_text(row):
    s = float(row["geomean_speedup"])
    lo, hi = interval_of(row)
    text = f"{s:.2f}x" + (f" (95% CI {lo:.2f}-{hi:.2f})" if lo is not None else " (no interval: 1 repetition)")
    flags = flags_of(row)
    return text + ("; " + "; ".join(flags) if flags else "")


def md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def claim_text(c):
    low, high = number(c["effect_low"]), number(c["effect_high"])
    rng = ""
    if low is not None and high is not None:
        rng = f" [{low:g}x]" if low == high else f" [{low:g}-{high:g}x]"
    return f"{c['claim']}{rng}"


def cmd_table(results, claims_path):
    claims = read_claims(claims_path)
    rows = summary_rows(results)
    statuses = tidy_statuses(results)
    print("| practice | published claim | source (hardware) | measured here | verdict |")
    print("|---|---|---|---|---|")
    for c in claims:
        row = pick(rows, c["practice"], c["tuned"])
        name = c["practice"] + ("" if c["tuned"] in ("*", "") else f" / {c['tuned']}")
        source = f"{c['source']} ({c['hardware'] or 'hardware not stated'})"
        if row is None:
            measured, word = "-", f"not measured here ({why_not_measured(c['practice'], statuses)})"
        else:
            lo, hi = interval_of(row)
            word = verdict(float(row["geomean_speedup"]), lo, hi, number(c["effect_low"]),
                           number(c["effect_high"]), c["direction"] == "slower")
            measured = f"{row['tuned']}: {effect_text(row)}"
            if c["tuned"] in ("*", ""):
                name = c["practice"]
        print(f"| {md(name)} | {md(claim_text(c))} | {md(source)} | {md(measured)} | **{word}** |")
    claimed = {c["practice"] for c in claims}
    unclaimed = sorted({r["practice"] for r in rows} - claimed)
    if unclaimed:
        print()
        print("Measured here without a published claim to check: " + ", ".join(unclaimed) +
              " (their speedups are below).")


def cmd_speedups(results):
    rows = summary_rows(results)
    if not rows:
        print("No speedups: no practice had both a measured baseline and a measured tuned variant.")
        return
    print("Geometric mean over each variant's parameter points (baseline time / tuned time);")
    print("the per-point table, with p-values, is summary.csv.")
    print()
    print("| practice | tuned variant | points | speedup | 95% interval | verdict | flags |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = interval_of(r)
        ci = f"{lo:.2f}-{hi:.2f}" if lo is not None else "n/a"
        print(f"| {md(r['practice'])} | {md(r['tuned'])} | {md(r.get('points', ''))} | "
              f"{float(r['geomean_speedup']):.2f}x | {ci} | {md(r.get('verdict', '') or 'n/a')} | "
              f"{md('; '.join(flags_of(r)))} |")


def cmd_digest(results):
    ctx = {}
    try:
        with open(os.path.join(results, "context.txt"), encoding="utf-8") as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                ctx.setdefault(k, v)
    except OSError:
        pass
    if ctx.get("gpu_name", "none") not in ("", "none"):
        machine = f"{ctx['gpu_name']}, driver {ctx.get('driver_version', '?')}, host {ctx.get('host', '?')}"
    else:
        machine = (f"no GPU ({ctx.get('no_gpu_reason', 'none found')}); host {ctx.get('host', '?')}, "
                   f"{ctx.get('host_cpu', '?')}, {ctx.get('host_cores', '?')} cores")
    print(f"Machine:    {machine}")
    ran = skipped = failed = 0
    try:
        with open(os.path.join(results, "suite-status.tsv"), newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f, delimiter="\t"):
                ran += int(number(r.get("ok")) or 0)
                skipped += int(number(r.get("skipped")) or 0)
                failed += int(number(r.get("errors")) or 0)
                if r.get("status") == "failed" and not number(r.get("errors")):
                    failed += 1  # a program that crashed, timed out or was not run
    except OSError:
        pass
    print(f"Benchmarks: {ran} ran, {skipped} skipped, {failed} failed")
    try:
        rows = summary_rows(results)
    except ClaimsError:
        rows = []
    effect = lambda r: abs(math.log(float(r["geomean_speedup"])))
    largest = {}  # each practice's largest effect, then the three largest of those
    for r in rows:
        if r["practice"] not in largest or effect(r) > effect(largest[r["practice"]]):
            largest[r["practice"]] = r
    top = []
    for r in sorted(largest.values(), key=effect, reverse=True)[:3]:
        s = float(r["geomean_speedup"])
        lo, hi = interval_of(r)
        ci = f" [{lo:.2f}-{hi:.2f}]" if lo is not None else ""
        top.append(f"{r['practice']}/{r['tuned']} {s:.2f}x{ci}" + ("" if s >= 1 else f" ({1 / s:.1f}x slower)"))
    print("Largest:    " + ("; ".join(top) if top else "no speedup measured"))
    print(f"Report:     {os.path.join(results, 'report.md')}")


def main(argv):
    usage = ("usage: claims.py table RESULTS_DIR [CLAIMS_CSV] | speedups RESULTS_DIR | digest RESULTS_DIR\n"
             "       claims.py verdict SPEEDUP [CI_LOW CI_HIGH] [--claim LOW HIGH] [--slower]")
    try:
        if len(argv) >= 3 and argv[1] == "table" and len(argv) <= 4:
            default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "claims.csv")
            cmd_table(argv[2], argv[3] if len(argv) == 4 else default)
        elif len(argv) == 3 and argv[1] == "speedups":
            cmd_speedups(argv[2])
        elif len(argv) == 3 and argv[1] == "digest":
            cmd_digest(argv[2])
        elif len(argv) >= 3 and argv[1] == "verdict":
            print(verdict_of_args(argv[2:]))
        elif len(argv) == 2 and argv[1] == "verdicts":
            for line in sys.stdin:
                if line.strip():
                    print(verdict_of_args(line.split()))
        else:
            print(usage, file=sys.stderr)
            return 2
    except ClaimsError as e:
        print(f"claims: {e}", file=sys.stderr)
        return 1
    return 0


def verdict_of_args(args):
    """The verdict of SPEEDUP [CI_LOW CI_HIGH] [--claim LOW HIGH] [--slower]."""
    slower = "--slower" in args
    args = [a for a in args if a != "--slower"]
    claim = (None, None)
    if "--claim" in args:
        i = args.index("--claim")
        claim = tuple(number(a) for a in args[i + 1:i + 3])
        if len(claim) != 2 or None in claim:
            raise ClaimsError("--claim needs LOW HIGH numbers")
        del args[i:i + 3]
    values = [number(a) for a in args]
    if len(values) not in (1, 3) or None in values or min(values) <= 0:
        raise ClaimsError("verdict needs a positive SPEEDUP and optionally CI_LOW CI_HIGH")
    ci = (values[1], values[2]) if len(values) == 3 else (None, None)
    return verdict(values[0], ci[0], ci[1], claim[0], claim[1], slower)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
