#!/usr/bin/env python3
"""claims.py: sets the published claims (bench/claims.csv) against what a results folder
measured, for report.md and the end of `make bench` (Python standard library only).

  claims.py table RESULTS_DIR [CLAIMS_CSV]   markdown headline table: one row per claim
  claims.py speedups RESULTS_DIR             markdown table of every tuned variant's speedup
  claims.py digest RESULTS_DIR               the few lines `make bench` ends with
  claims.py status RESULTS_DIR               suite-status.tsv as markdown (partial programs named)
  claims.py pytorch RESULTS_DIR              the core's speedups beside PyTorch's, per practice
                                             (summary_pytorch.csv), with their agreement
  claims.py verdict SPEEDUP [CI_LOW CI_HIGH] [--claim LOW HIGH] [--slower] [--few]
                                             one verdict on fixed numbers (for tests; - for
                                             an open end of the range)
  claims.py verdicts                         the same, one case per line of stdin

claims.csv columns: practice; tuned (the variant the claim is about: a claim names it,
never "the best one measured", which would pick the luckiest); params (empty: the
geometric mean over the variant's points; else one point, e.g. size:10240, where the
source measured only that); kind (claim, or reference: a figure from elsewhere that this
practice's toggle cannot confirm, shown without a verdict); measure (speedup, or accuracy:
final held-out accuracy of the tuned variant against the baseline at equal epochs, from
summary_accuracy.csv); direction (faster: the claim says the tuned variant is faster;
slower: it says it is slower); claim (a few words); effect_low, effect_high (the claimed
speedup range, baseline time / tuned time, where the source gives one; either may be
empty for a one-sided "up to" or "at least"); source; hardware. params, kind and measure
may be absent (empty, claim, speedup).

The verdict rules (the measured speedup is the geometric mean over the variant's
parameter points, or the one point the claim names; its interval is the 95% interval of
scripts/stats.py, its verdict the summary's, scripts/verdicts.py's rules: faster, slower,
equivalent within the equivalence margin, inconclusive):
  1. No speedup measured for the practice: "not measured here (why)", the why taken from
     the results' skip or error reasons. A variant whose median run missed its target:
     "did not reach".
  2. No interval (a single repetition), or too few repetitions for stats.py to give a
     verdict (its verdict is n/a): "not enough data". A single sample never holds or
     reverses a claim.
  3. The summary's verdict is "equivalent" (the interval lies within the margin, 0.95-1.05
     by default): "no effect here" (unless the claimed range holds 1.00x too: "holds").
     Only then: an interval wider than the margin never says "no effect".
  4. It is "inconclusive" (neither significant nor within the margin): "inconclusive here
     (±N%)", N the interval's half-width relative to the speedup (unless the interval lies
     wholly within a claimed range that holds 1.00x: "holds").
  5. The interval lies wholly on the other side of 1.00x from the claim's direction:
     "reversed here".
  6. The claim gives no range (only a direction): "holds".
  7. Else the interval against the claimed range, as effect sizes (for a slower claim,
     1/speedup): overlapping "holds"; wholly below "smaller here"; wholly above
     "larger here".
A summary written before the three verdicts ("no significant difference") is read by the
interval alone, with the margin of the summary's equivalence_margin column or of
BENCH_EQUIVALENCE_MARGIN.
Accuracy claims ("the tuned variant reaches the baseline's accuracy"), at every point,
with a tolerated loss: effect_low where the claim gives one, else the equivalence margin
times the baseline's accuracy. The interval of the difference (tuned - baseline) wholly
below minus the tolerated loss is "reversed here"; wholly above it (no loss beyond the
tolerance) "holds"; across it "inconclusive here (±d)", d the interval's half-width in
accuracy (0.020: two points); too few repetitions "not enough data".
Every figure a reader may quote is shown with its interval and precision: "2.00x
[1.80-2.20], ±10%" (verdicts.figure_text).
"""
import csv
import math
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from verdicts import (MarginError, equivalence_margin, figure_text, percent_text,  # noqa: E402
                      relative_half_width, three_way)
from natural_order import natural_key  # noqa: E402  (the one natural sort)

THREE_VERDICTS = ("faster", "slower", "equivalent", "inconclusive")

CLAIM_FIELDS = ("practice", "tuned", "direction", "claim", "effect_low", "effect_high", "source", "hardware")
OPTIONAL_FIELDS = {"params": "", "kind": "claim", "measure": "speedup"}


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
        for k, default in OPTIONAL_FIELDS.items():
            c[k] = c.get(k, "") or default
        if not c["source"].strip():
            raise ClaimsError(f"{path}: line {i} ({c['practice']}): a claim without a source")
        if c["direction"] not in ("faster", "slower"):
            raise ClaimsError(f"{path}: line {i}: direction '{c['direction']}' is not faster/slower")
        if c["kind"] not in ("claim", "reference"):
            raise ClaimsError(f"{path}: line {i}: kind '{c['kind']}' is not claim/reference")
        if c["measure"] not in ("speedup", "accuracy"):
            raise ClaimsError(f"{path}: line {i}: measure '{c['measure']}' is not speedup/accuracy")
        if c["kind"] == "claim" and c["tuned"] in ("*", ""):
            raise ClaimsError(f"{path}: line {i} ({c['practice']}): the claim names no variant "
                              "(checking the best measured one would pick the luckiest)")
        low, high = number(c["effect_low"]), number(c["effect_high"])
        if (c["effect_low"] and (low is None or low <= 0)) or (c["effect_high"] and (high is None or high <= 0)) \
                or (low is not None and high is not None and high < low):
            raise ClaimsError(f"{path}: line {i}: effect range '{c['effect_low']}'-'{c['effect_high']}' is not 0 < low <= high")
    return claims


def verdict(speedup, ci_low=None, ci_high=None, claim_low=None, claim_high=None, slower=False, enough=True,
            measured=None, margin=None):
    """The verdict in words for a measured speedup (and interval) against a claim.
    measured: the summary's verdict (faster, slower, equivalent, inconclusive); anything
    else (absent, an older summary's words) is read from the interval alone with `margin`
    (None: BENCH_EQUIVALENCE_MARGIN's)."""
    if ci_low is None or ci_high is None or not enough:
        return "not enough data"
    lo, hi = ci_low, ci_high
    has_range = claim_low is not None or claim_high is not None
    if measured not in THREE_VERDICTS:
        measured = three_way(lo, hi, 1.0, equivalence_margin() if margin is None else margin)
    # only a two-sided range can hold 1.00x: "up to 3x" still claims an effect
    allows_none = claim_low is not None and claim_high is not None and claim_low <= 1.0 <= claim_high
    if measured == "equivalent":
        return "holds" if allows_none else "no effect here"
    if measured == "inconclusive":
        if allows_none and claim_low <= lo and hi <= claim_high:
            return "holds"  # wholly within a claimed range that allows no effect
        return f"inconclusive here ({percent_text(relative_half_width(speedup, lo, hi))})"
    if (measured == "faster") == slower:  # the side of 1.00x the summary found it on
        return "reversed here"
    if not has_range:
        return "holds"
    # a one-sided range ("up to 3x") is bounded on its other side by no effect
    claim_low = claim_low if claim_low is not None else (1.0 if not slower else 0.0)
    claim_high = claim_high if claim_high is not None else (math.inf if not slower else 1.0)
    if slower:  # compare effect sizes: a 0.5x slowdown is an effect of 2
        lo, hi = 1 / hi, 1 / lo
        claim_low, claim_high = 1 / claim_high, (math.inf if claim_low == 0 else 1 / claim_low)
    if hi < claim_low:
        return "smaller here"
    if lo > claim_high:
        return "larger here"
    return "holds"


def accuracy_verdict(row, tolerated_loss=None):
    """The verdict of one point of summary_accuracy.csv on "reaches the baseline's
    accuracy": reversed below the tolerated loss (effect_low, else the equivalence margin
    times the baseline's accuracy), holds above it, inconclusive across it."""
    lo, hi = number(row.get("diff_ci_low")), number(row.get("diff_ci_high"))
    acc, diff = number(row.get("accuracy")), number(row.get("difference"))
    if lo is None or hi is None or acc is None or diff is None or row.get("verdict", "").startswith("n/a"):
        return "not enough data"
    base = acc - diff  # the baseline's mean accuracy
    tolerance = tolerated_loss if tolerated_loss else margin_of(row) * base
    if hi < -tolerance:
        return "reversed here"
    if lo >= -tolerance:
        return "holds"
    return f"inconclusive here (±{(hi - lo) / 2:.3f})"


def margin_of(row):
    """The equivalence margin a summary row was judged with (its column), else the
    environment's (BENCH_EQUIVALENCE_MARGIN, default 0.05)."""
    m = number(row.get("equivalence_margin"))
    return m if m is not None and 0 < m < 1 else equivalence_margin()


# ---- results -----------------------------------------------------------------------------

def summary_rows(results, name="summary_by_variant.csv", need=("practice", "tuned", "geomean_speedup"),
                 value="geomean_speedup"):
    """The rows of one of stats.py's summaries (none when it is absent). A value is a
    positive number, or empty where there is none (a variant that did not reach)."""
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return []
    rows = read_csv(path, need)
    for i, r in enumerate(rows, start=2):
        if value and r[value] != "" and (number(r[value]) is None or float(r[value]) <= 0):
            raise ClaimsError(f"{path}: line {i}: speedup '{r[value]}' is not a positive number")
    return rows


def speedup_of(row):
    return number(row.get("geomean_speedup", row.get("speedup")))


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
        for r in rows:  # partial: rows a program cut at its deadline kept, measured
            status = "ok" if r["status"] == "partial" else r["status"]
            out.setdefault(r["practice"], []).append((status, r.get("reason", "")))
    return out


def short_reason(why):
    """'kernels/platform/pinned.c:12: no CUDA device (no NVIDIA driver ...)' -> 'no CUDA device'."""
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


def pick(rows, practice, tuned, params=""):
    """The summary row of a claim: its variant's (at its one point where it names one)."""
    for r in rows:
        if r["practice"] == practice and r["tuned"] == tuned and (not params or r.get("params") == params):
            return r
    return None


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


def not_enough(row):
    """stats.py's verdict says the repetitions cannot show a difference."""
    return row.get("verdict", "").startswith("n/a")


def effect_text(row):
    s = speedup_of(row)
    reached = row.get("reached") or row.get("tuned_reached") or ""
    if s is None:
        return f"{row.get('verdict', '') or 'no speedup'}" + (f" (reached {reached})" if reached else "")
    lo, hi = interval_of(row)
    text = figure_text(s, lo, hi) + ("" if lo is not None else " (no interval: 1 repetition)")
    flags = flags_of(row) + ([row["verdict"]] if not_enough(row) and lo is not None else [])
    if reached:
        flags.append(f"reached {reached}")
    return text + ("; " + "; ".join(flags) if flags else "")


def speedup_claim(c, rows, points):
    """(measured text, verdict) of a speedup claim, or None when it was not measured."""
    params = c["params"]
    row = pick(points, c["practice"], c["tuned"], params) if params else pick(rows, c["practice"], c["tuned"])
    if row is None:
        return None
    s = speedup_of(row)
    if s is None:  # no speedup: its median run missed the target
        word = "did not reach" if "did not reach" in row.get("verdict", "") else "not enough data"
    else:
        lo, hi = interval_of(row)
        word = verdict(s, lo, hi, number(c["effect_low"]), number(c["effect_high"]), c["direction"] == "slower",
                       enough=not not_enough(row), measured=row.get("verdict"), margin=margin_of(row))
    return f"{row['tuned']}: {effect_text(row)}", word


def accuracy_claim(c, accuracy):
    """(measured text, verdict) of an accuracy-parity claim over every point measured, or
    None. The worst point decides: reversed at any point is reversed."""
    mine = [r for r in accuracy if r["practice"] == c["practice"] and r["variant"] == c["tuned"]
            and (not c["params"] or r["params"] == c["params"])]
    if not mine:
        return None
    texts, words = [], []
    for r in mine:
        base = next((b for b in accuracy if b["practice"] == r["practice"] and b["params"] == r["params"]
                     and b["role"] == "baseline" and b.get("run") == r.get("run")), None)
        lo, hi = number(r.get("diff_ci_low")), number(r.get("diff_ci_high"))
        ci = (f" (95% CI {lo:.3f} to {hi:.3f}, ±{(hi - lo) / 2:.3f})" if lo is not None and hi is not None
              else " (no interval)")
        diff = number(r.get("difference"))
        texts.append(f"{r['params']}: accuracy {float(r['accuracy']):.3f}"
                     + (f" vs {float(base['accuracy']):.3f}" if base else "")
                     + (f", difference {diff:.3f}{ci}" if diff is not None else ""))
        words.append(accuracy_verdict(r, number(c["effect_low"])))
    for worst in ("reversed here", "inconclusive here", "not enough data", "holds"):
        hit = next((w for w in words if w.startswith(worst)), None)
        if hit:
            return "; ".join(texts), hit
    return "; ".join(texts), words[0]


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
    points = summary_rows(results, "summary.csv", ("practice", "params", "tuned", "speedup"), "speedup")
    accuracy = summary_rows(results, "summary_accuracy.csv", ("practice", "params", "variant", "role", "accuracy"), None)
    statuses = tidy_statuses(results)
    # with a PyTorch side (summary_pytorch.csv), PyTorch's figure of the claim's variant beside
    # the core's: the claims are checked on the core's; PyTorch's is shown, not judged
    twin = os.path.exists(os.path.join(results, "summary_pytorch.csv"))
    print("| practice | published claim | source (hardware) | measured here | verdict |"
          + (" PyTorch here |" if twin else ""))
    print("|---|---|---|---|---|" + ("---|" if twin else ""))
    for c in claims:
        source = f"{c['source']} ({c['hardware'] or 'hardware not stated'})"
        torch = ""
        if twin:
            row = None
            if c["kind"] != "reference" and c["measure"] == "speedup":
                row = (pick(points, PYTORCH_PREFIX + c["practice"], c["tuned"], c["params"]) if c["params"]
                       else pick(rows, PYTORCH_PREFIX + c["practice"], c["tuned"]))
            torch = f" {md(effect_text(row)) if row else '-'} |"
        if c["kind"] == "reference":
            print(f"| {md(c['practice'])} (reference) | {md(claim_text(c))} | {md(source)} | - | "
                  "reference figure (not a claim this toggle can confirm) |" + torch)
            continue
        name = f"{c['practice']} / {c['tuned']}" + (f" at {c['params']}" if c["params"] else "")
        found = accuracy_claim(c, accuracy) if c["measure"] == "accuracy" else speedup_claim(c, rows, points)
        if found is None:
            measured, word = "-", f"not measured here ({why_not_measured(c['practice'], statuses)})"
        else:
            measured, word = found
        print(f"| {md(name)} | {md(claim_text(c))} | {md(source)} | {md(measured)} | **{word}** |" + torch)
    m = margin_of(rows[0]) if rows else equivalence_margin()
    print()
    print(f"Equivalence margin: {1 - m:.2f}-{1 + m:.2f} (BENCH_EQUIVALENCE_MARGIN={m:g}"
          + (", as the summary was made)." if rows and number(rows[0].get("equivalence_margin")) else ")."))
    if twin:
        print()
        print("PyTorch here: the same variant's speedup in PyTorch (the PyTorch side of this run), shown "
              "beside the core's and not judged against the claim; the side-by-side section below says "
              "whether the two agree.")
    claimed = {c["practice"] for c in claims}
    unclaimed = sorted({r["practice"] for r in rows if not r["practice"].startswith(PYTORCH_PREFIX)} - claimed)
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
        s = speedup_of(r)
        w = relative_half_width(s, lo, hi)
        ci = "n/a" if lo is None else f"{lo:.2f}-{hi:.2f}" + ("" if w is None else f", {percent_text(w)}")
        print(f"| {md(r['practice'])} | {md(r['tuned'])} | {md(r.get('points', ''))} | "
              f"{'-' if s is None else f'{s:.2f}x'} | {ci} | {md(row_verdict(r) or 'n/a')} | "
              f"{md('; '.join(flags_of(r)))} |")


PYTORCH_PREFIX = "pytorch_"  # the PyTorch side's practices: pytorch_<the core's practice>
TORCH_CONTEXT = (("torch_version", "PyTorch"), ("torch_threads", "threads"), ("torch_device", "device"))


def torch_context(results):
    """{key: value} of the PyTorch side's context (torch_version, torch_threads,
    torch_device): the ctx_ columns of pytorch.csv's first row that has them, else
    context.txt's keys of those names; empty values left out."""
    out = {}
    try:
        rows = read_csv(os.path.join(results, "pytorch.csv"), ("practice",))
    except ClaimsError:
        rows = []
    for key, _ in TORCH_CONTEXT:
        out[key] = next((r["ctx_" + key] for r in rows if r.get("ctx_" + key)), "")
    try:
        with open(os.path.join(results, "context.txt"), encoding="utf-8") as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                if k in out and not out[k]:
                    out[k] = v
    except OSError:
        pass
    return {k: v for k, v in out.items() if v}


def suite_reason(results, program):
    """(status, reason) of a program in suite-status.tsv, or None."""
    try:
        with open(os.path.join(results, "suite-status.tsv"), newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f, delimiter="\t"):
                if r.get("program") == program:
                    return r.get("status", ""), r.get("reason", "")
    except OSError:
        pass
    return None


def side_text(row, side):
    """One side's speedup in the side-by-side table: "1.20x [1.19-1.21], ±0.9% (faster)"."""
    s = number(row[side + "_speedup"])
    if s is None:
        return "-"
    lo, hi = number(row[side + "_ci_low"]), number(row[side + "_ci_high"])
    ok = lo is not None and hi is not None and 0 < lo <= hi
    return figure_text(s, lo if ok else None, hi if ok else None) + (f" ({row[side + '_verdict']})"
                                                                     if row[side + "_verdict"] else "")


def cmd_pytorch(results):
    """The report's "PyTorch side by side" section, from summary_pytorch.csv (stats.py):
    per practice a table of its points, the core's speedup and PyTorch's, each with its 95%
    interval and verdict, their agreement, PyTorch's speedup over the core's, and what the
    difference means; then the PyTorch practices that measured nothing here, and why."""
    path = os.path.join(results, "summary_pytorch.csv")
    status = suite_reason(results, "pytorch")
    if not os.path.exists(path):
        if status and status[1]:
            print(f"No PyTorch side in this run: {status[1]} (`make bench` runs it where a torch is importable; "
                  "`BENCH_TWIN=0` turns it off).")
        else:
            print("No PyTorch side in this run (no pytorch.csv: `BENCH_TWIN=0`, no torch importable, or a run "
                  "made before the PyTorch side existed).")
        return
    ctx = torch_context(results)
    print("The same toggles measured in PyTorch itself, in the same run, beside the core's figures "
          "(docs/pytorch-side.md; the agreement rule is in docs/statistics.md). "
          + ("; ".join(f"{label}: {ctx[key]}" for key, label in TORCH_CONTEXT if key in ctx) or
             "PyTorch's version, threads and device were not recorded") + ".")
    print()
    print("Agreement: **agree** when the two 95% intervals overlap and both verdicts are the same "
          "(both faster, both slower, both equivalent); **differ** when the intervals are disjoint "
          "(PyTorch / core: the ratio of the two speedups, with its interval); **inconclusive** when a "
          "side's interval is too wide to tell; *PyTorch only* / *core only* where one side has no figure.")
    rows = read_csv(path, ("practice", "params", "baseline", "tuned", "agreement"))
    by_practice = {}
    for r in rows:
        by_practice.setdefault(r["practice"], []).append(r)
    for practice in sorted(by_practice, key=natural_key):
        print()
        print(f"### {practice}")
        print()
        print("| point | baseline -> tuned | core | PyTorch | agreement | PyTorch / core | what it means |")
        print("|---|---|---|---|---|---|---|")
        for r in by_practice[practice]:
            ratio, lo, hi = (number(r.get(k)) for k in ("effect_ratio", "effect_ratio_ci_low", "effect_ratio_ci_high"))
            rt = "-" if ratio is None else (f"{ratio:.2f}x" + (f" [{lo:.2f}-{hi:.2f}]" if lo and hi else ""))
            word = r["agreement"]
            shown = f"**{word}**" if word in ("agree", "differ", "inconclusive") else f"*{word}*"
            print(f"| {md(r['params'])} | {md(r['baseline'])} -> {md(r['tuned'])} | {md(side_text(r, 'core'))} | "
                  f"{md(side_text(r, 'pytorch'))} | {shown} | {rt} | {md(r.get('note', ''))} |")
    measured = {PYTORCH_PREFIX + r["practice"] for r in rows if number(r.get("pytorch_speedup")) is not None}
    statuses = tidy_statuses(results)
    missing = sorted((p for p in statuses if p.startswith(PYTORCH_PREFIX) and p not in measured), key=natural_key)
    if missing:
        print()
        print("Not measured in PyTorch here: " + "; ".join(
            f"{p[len(PYTORCH_PREFIX):]} ({why_not_measured(p, statuses)})" for p in missing) + ".")


def row_verdict(row):
    """A summary row's verdict; an older summary's "no significant difference" read again
    from its interval (verdicts.three_way): equivalent or inconclusive."""
    word = row.get("verdict", "")
    lo, hi = interval_of(row)
    if word == "no significant difference" and lo is not None:
        return three_way(lo, hi, 1.0, margin_of(row))
    return word


def partial_rows(results, program):
    """(rows_done, rows_planned) from RESULTS/<program>.partial, which the harness writes
    for a program cut at its deadline ("rows_done rows_planned"), or None."""
    if not program or "/" in program:
        return None
    try:
        with open(os.path.join(results, program + ".partial"), encoding="utf-8") as f:
            fields = f.read().split()
    except OSError:
        return None
    if len(fields) != 2 or not all(x.isdigit() for x in fields):
        return None
    return int(fields[0]), int(fields[1])


def cmd_status(results):
    """suite-status.tsv as a markdown table; a program cut short (its deadline, a stop) says so."""
    print("| program | status | ok | skipped | errors | seconds | reason |")
    print("|---|---|---|---|---|---|---|")
    with open(os.path.join(results, "suite-status.tsv"), newline="", encoding="utf-8") as f:
        table = [r for r in csv.reader(f, delimiter="\t") if r]
    for r in table[1:]:
        r = (r + [""] * 7)[:7]
        cut = partial_rows(results, r[0])
        if cut:
            r[1] = f"partial (cut short: {cut[0]} of {cut[1]} rows)"
        print("| " + " | ".join(md(x) for x in r) + " |")
    empty = [f"{r[0]} ({r[0]}.csv {why})" for r in sorted(table[1:]) if r and (why := csv_state(results, r[0]))]
    if empty:  # a program cut before its first row, or not run: a note, not a failure
        print()
        print("No rows from: " + ", ".join(empty) + ".")


def csv_state(results, program):
    """'missing' or 'empty' (no row: 0 bytes or a header only) for RESULTS/<program>.csv,
    or '' when it has rows."""
    path = os.path.join(results, program + ".csv")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [r for r in csv.reader(f) if r]
    except FileNotFoundError:
        return "missing"
    except (OSError, UnicodeDecodeError, csv.Error):
        return ""  # unreadable: summarize.sh and charts.sh say why
    return "empty" if len(rows) <= 1 else ""


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
    ran = skipped = failed = partial = 0
    try:
        with open(os.path.join(results, "suite-status.tsv"), newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f, delimiter="\t"):
                ran += int(number(r.get("ok")) or 0)
                skipped += int(number(r.get("skipped")) or 0)
                failed += int(number(r.get("errors")) or 0)
                if partial_rows(results, r.get("program", "")):
                    partial += 1  # cut short (its deadline, a stop): what it finished is kept
                elif r.get("status") == "failed" and not number(r.get("errors")):
                    failed += 1  # a program that crashed, timed out or was not run
    except OSError:
        pass
    cut = f"; {partial} program{'s' if partial != 1 else ''} partial (cut short)" if partial else ""
    print(f"Benchmarks: {ran} ran, {skipped} skipped, {failed} failed{cut}")
    try:
        rows = summary_rows(results)
    except ClaimsError:
        rows = []
    rows = [r for r in rows if speedup_of(r) is not None]
    effect = lambda r: abs(math.log(float(r["geomean_speedup"])))
    largest = {}  # each practice's largest effect, then the three largest of those
    for r in rows:
        if r["practice"] not in largest or effect(r) > effect(largest[r["practice"]]):
            largest[r["practice"]] = r
    top = []
    for r in sorted(largest.values(), key=effect, reverse=True)[:3]:
        s = float(r["geomean_speedup"])
        top.append(f"{r['practice']}/{r['tuned']} {figure_text(s, *interval_of(r))}"
                   + ("" if s >= 1 else f" ({1 / s:.1f}x slower)"))
    print("Largest:    " + ("; ".join(top) if top else "no speedup measured"))
    print(f"Report:     {os.path.join(results, 'report.md')}")


def main(argv):
    usage = ("usage: claims.py table RESULTS_DIR [CLAIMS_CSV] | speedups RESULTS_DIR | digest RESULTS_DIR | "
             "pytorch RESULTS_DIR\n"
             "       claims.py verdict SPEEDUP [CI_LOW CI_HIGH] [--claim LOW HIGH] [--slower]")
    try:
        if len(argv) >= 3 and argv[1] == "table" and len(argv) <= 4:
            default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "claims.csv")
            cmd_table(argv[2], argv[3] if len(argv) == 4 else default)
        elif len(argv) == 3 and argv[1] == "speedups":
            cmd_speedups(argv[2])
        elif len(argv) == 3 and argv[1] == "digest":
            cmd_digest(argv[2])
        elif len(argv) == 3 and argv[1] == "status":
            cmd_status(argv[2])
        elif len(argv) == 3 and argv[1] == "pytorch":
            cmd_pytorch(argv[2])
        elif len(argv) >= 3 and argv[1] == "verdict":
            print(verdict_of_args(argv[2:]))
        elif len(argv) == 2 and argv[1] == "verdicts":
            for line in sys.stdin:
                if line.strip():
                    print(verdict_of_args(line.split()))
        else:
            print(usage, file=sys.stderr)
            return 2
    except (ClaimsError, MarginError) as e:
        print(f"claims: {e}", file=sys.stderr)
        return 1
    return 0


def verdict_of_args(args):
    """The verdict of SPEEDUP [CI_LOW CI_HIGH] [--claim LOW HIGH] [--slower] [--few]
    (--few: stats.py said the repetitions are too few for a verdict)."""
    slower, few = "--slower" in args, "--few" in args
    args = [a for a in args if a not in ("--slower", "--few")]
    claim = (None, None)
    if "--claim" in args:
        i = args.index("--claim")
        claim = tuple(None if a == "-" else number(a) for a in args[i + 1:i + 3])
        if len(claim) != 2 or claim == (None, None) or any(
                c is None and a != "-" for c, a in zip(claim, args[i + 1:i + 3])):
            raise ClaimsError("--claim needs LOW HIGH numbers (- for an open end)")
        del args[i:i + 3]
    values = [number(a) for a in args]
    if len(values) not in (1, 3) or None in values or min(values) <= 0:
        raise ClaimsError("verdict needs a positive SPEEDUP and optionally CI_LOW CI_HIGH")
    ci = (values[1], values[2]) if len(values) == 3 else (None, None)
    return verdict(values[0], ci[0], ci[1], claim[0], claim[1], slower, enough=not few)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
