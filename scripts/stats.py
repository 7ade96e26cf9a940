#!/usr/bin/env python3
"""stats.py: the statistics of the results pipeline (Python standard library only).

  stats.py summarize RESULTS_DIR            -> RESULTS_DIR/summary.csv, summary_by_variant.csv,
                                              summary_accuracy.csv
  stats.py summarize -o OUT.csv TIDY.csv... -> OUT.csv and OUT_by_variant.csv
  stats.py compare OUT_DIR RESULTS_DIR...   -> OUT_DIR/compare.md, speedups.csv, times.csv
  stats.py index RESULTS_ROOT               -> RESULTS_ROOT/README.md, one line per run

Every benchmark's repetitions come from the sibling per-repetition file <name>.reps.csv
that the harness writes next to each tidy CSV <name>.csv (one row per repetition); an
older folder without it has one value per benchmark, the tidy row's time, and its
intervals and p-values are "n/a".

A speedup is the ratio of medians, baseline / tuned, over the repetitions. Its 95%
interval is a percentile bootstrap (resampling each side's repetitions with replacement,
BOOTSTRAP_RESAMPLES times, from a fixed seed, so the same data always give the same
interval). Its p-value is the two-sided Mann-Whitney U test of the two sets of times
(exact distribution without ties, else the normal approximation with tie and continuity
corrections, as scipy.stats.mannwhitneyu). Verdict: p < ALPHA gives faster or slower (by
the side of 1 the median ratio is on), else "no significant difference" -- but only with
at least MIN_REPETITIONS (4) a side, the first count where a difference can be shown (the
smallest p is 2 / C(n1+n2, n1): 0.1 at 3 a side, 0.029 at 4): with one repetition on a
side "n/a (1 repetition)", with 2 or 3 on either side "n/a (too few repetitions)". A geometric mean over parameter
points takes its interval from the same bootstrap replicates (the geometric mean of every
replicate), and its verdict from whether that interval holds 1 (n/a where any point is).
The bootstrap seed is salted with the run (the results folder's name) and the benchmark,
and groups are keyed by run, program (CSV), practice, params and machine: two runs never
share resamples or baselines, and two baselines in one group of one run are an error.

Runs to a target (a reached_target column): a run that missed is kept, its time censored
(+infinity: ranked after every run that reached); the summary says "reached k of n" for
each side; a side whose median run missed has no speedup: "did not reach". Runs at a fixed
budget for accuracy parity (accuracy_parity = 1) go to summary_accuracy.csv instead: mean
final held-out accuracy per variant with its bootstrap interval, and each tuned variant's
difference from the baseline (interval, U test, verdict as above).

A cut run is partial, not broken: rows with status "partial" are measured rows, and a
CSV with no rows (0 bytes or a header only) is a warning naming it.

Flags: noisy = the coefficient of variation (sample stddev / mean) of the baseline's or
the tuned variant's repetitions exceeds NOISE_CV (2%, env STATS_NOISE_CV in percent).
contended = the machine did not give the run its resources: a loader run whose
cpu_cores_used is below CONTENDED_FRACTION (75%) of the cores its workers could use
(min(num_workers, host cores)), in any repetition; a GPU run whose SM clock after the
run was below CONTENDED_FRACTION of the maximum; a GPU that reported thermal, hardware
slowdown or power-brake throttling after the run.

Zero, negative or non-numeric times of measured rows, rows with the wrong number of
fields, and files that are not tidy CSVs are errors (exit status 2), never a speedup.
"""
import csv
import datetime
import math
import os
import random
import sys
import zlib

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261130
CONTENDED_FRACTION = 0.75
# NVML clock event (throttle) reasons that mean the GPU was held back by its environment:
# hardware slowdown, software and hardware thermal slowdown, hardware power brake.
# (Power capping, 0x4, is how a busy GPU normally runs and is not flagged.)
THROTTLE_BAD = {0x8: "hardware slowdown", 0x20: "thermal (software)",
                0x40: "thermal (hardware)", 0x80: "power brake"}
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class StatsError(Exception):
    pass


def noise_cv():
    v = os.environ.get("STATS_NOISE_CV", "2")
    try:
        x = float(v)
    except ValueError:
        raise StatsError("STATS_NOISE_CV='%s' is not a percentage" % v)
    if not (x > 0 and math.isfinite(x)):
        raise StatsError("STATS_NOISE_CV='%s' is not a positive percentage" % v)
    return x / 100.0


# ---- statistics ------------------------------------------------------------------------

def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def cv(xs):
    """Sample coefficient of variation, or None with fewer than 2 values."""
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return math.sqrt(var) / m if m > 0 else None


def quantile(sorted_xs, q):
    """Linear interpolation between order statistics (numpy's default)."""
    pos = q * (len(sorted_xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def bootstrap_rng(salt):
    """The resampling generator for `salt`: BOOTSTRAP_SEED mixed with what is compared, on
    which machine and in which run, so that the same data always give the same interval
    while independent measurements (other points, other machines, another run on the
    same host) get independent resamples: two runs that shared their resample indices
    would give a comparison of the two an interval that is too narrow."""
    return random.Random(BOOTSTRAP_SEED ^ zlib.crc32(salt.encode()))


def bootstrap_ratios(num, den, salt="", resamples=BOOTSTRAP_RESAMPLES):
    """Replicates of median(num*) / median(den*), or None when a side has < 2 values or
    holds a censored (infinite) time."""
    if len(num) < 2 or len(den) < 2 or not all(math.isfinite(x) for x in list(num) + list(den)):
        return None
    rng = bootstrap_rng(salt)
    out = []
    for _ in range(resamples):
        a = median([num[rng.randrange(len(num))] for _ in num])
        b = median([den[rng.randrange(len(den))] for _ in den])
        out.append(a / b)
    return out


def interval(replicates, level=0.95):
    if not replicates:
        return None, None
    s = sorted(replicates)
    return quantile(s, (1 - level) / 2), quantile(s, 1 - (1 - level) / 2)


_exact_cache = {}


def _u_counts(n1, n2):
    """Number of orderings of n1 x's and n2 y's with each value of U (x above y)."""
    key = (n1, n2)
    if key not in _exact_cache:
        # f[m][n] is the count list for sizes m, n: f(m,n,u) = f(m-1,n,u-n) + f(m,n-1,u)
        prev_row = [[1] for _ in range(n2 + 1)]  # m = 0: U is 0 whatever n
        for m in range(1, n1 + 1):
            row = [[1]]  # n = 0
            for n in range(1, n2 + 1):
                a, b = prev_row[n], row[n - 1]
                size = m * n + 1
                c = [0] * size
                for u, cnt in enumerate(a):
                    c[u + n] += cnt
                for u, cnt in enumerate(b):
                    c[u] += cnt
                row.append(c)
            prev_row = row
        _exact_cache[key] = prev_row[n2]
    return _exact_cache[key]


def mann_whitney_u(x, y):
    """Two-sided Mann-Whitney U test: (U of x, p-value), or (None, None) below 2 + 2 values."""
    n1, n2 = len(x), len(y)
    if n1 < 2 or n2 < 2:
        return None, None
    allv = sorted((v, i) for i, v in enumerate(list(x) + list(y)))
    ranks = [0.0] * (n1 + n2)
    ties = []
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1][0] == allv[i][0]:
            j += 1
        r = (i + j) / 2.0 + 1
        for k in range(i, j + 1):
            ranks[allv[k][1]] = r
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    r1 = sum(ranks[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2.0
    u2 = n1 * n2 - u1
    big = max(u1, u2)
    if not ties and n1 + n2 <= 60:
        counts = _u_counts(n1, n2)
        total = sum(counts)
        tail = sum(counts[int(round(big)):])
        return u1, min(1.0, 2.0 * tail / total)
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return u1, 1.0
    z = (big - n1 * n2 / 2.0 - 0.5) / sigma
    return u1, min(1.0, math.erfc(z / math.sqrt(2)))


def smallest_p(n1, n2):
    """The smallest two-sided exact Mann-Whitney p-value n1 and n2 values can give (every
    value of one side above every value of the other): 2 / C(n1 + n2, n1)."""
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


MIN_REPETITIONS = 4  # a side; below it the verdict is n/a


def too_few(n1, n2):
    """The n/a verdict when n1 and n2 repetitions are too few for one, else None. One
    repetition has no spread at all; with 3 a side the smallest p is 0.1, so "no
    significant difference" would be a foregone conclusion, not a finding (n = 4 a side is
    the first with p < 0.05 attainable). The rule is MIN_REPETITIONS on each side, as the
    docs say: with 3 against 5 the smallest p (2 / C(8, 3) = 0.036) is below ALPHA, but one
    side would still rest on 3 samples."""
    if min(n1, n2) < 2:
        return "n/a (1 repetition)"
    if min(n1, n2) < MIN_REPETITIONS or smallest_p(n1, n2) >= ALPHA:
        return "n/a (too few repetitions)"
    return None


def verdict_from_p(ratio, p, n1, n2):
    na = too_few(n1, n2)
    if na:
        return na
    if p is None or p >= ALPHA:
        return "no significant difference"
    return "faster" if ratio > 1 else "slower"


def verdict_from_interval(ratio, lo, hi, na=None):
    if na:
        return na
    if lo is None:
        return "n/a (no interval)"
    if lo > 1:
        return "faster"
    if hi < 1:
        return "slower"
    return "no significant difference"


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def geomean_replicates(rep_lists):
    """Per-replicate geometric means over points, or None if any point has none."""
    if not rep_lists or any(r is None for r in rep_lists):
        return None
    return [geomean(vals) for vals in zip(*rep_lists)]


# ---- reading results ----------------------------------------------------------------------

def fmt(x, spec="%.4f"):
    return "" if x is None else spec % x


def clean(s):
    """A CSV field without commas, quotes or newlines (the pipeline splits on ',')."""
    return s.replace(",", ";").replace('"', "").replace("\n", " ").replace("\r", " ")


def read_csv(path, required):
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as e:
        raise StatsError("cannot read %s: %s" % (path, e))
    if not rows or any(c not in rows[0] for c in required):
        raise StatsError("%s is not a tidy CSV (no %s columns)" % (path, "/".join(required)))
    header = rows[0]
    out = []
    for lineno, r in enumerate(rows[1:], start=2):
        if not r:
            continue
        if len(r) != len(header):
            raise StatsError("%s line %d: %d fields, the header has %d" % (path, lineno, len(r), len(header)))
        d = dict(zip(header, r))
        d["_line"] = lineno
        out.append(d)
    return header, out


def seconds_of(path, row, time_key="time"):
    unit = row.get("time_unit", "")
    what = "%s line %d (%s/%s)" % (path, row["_line"], row.get("practice", ""), row.get("variant", ""))
    if unit not in UNIT_SECONDS:
        raise StatsError("%s: time unit '%s' is not ns, us, ms or s" % (what, unit))
    try:
        t = float(row[time_key])
    except ValueError:
        raise StatsError("%s: time '%s' is not a number" % (what, row[time_key]))
    if not math.isfinite(t) or t <= 0:
        raise StatsError("%s: time '%s' is not a positive number" % (what, row[time_key]))
    return t * UNIT_SECONDS[unit]


def reps_path(tidy_path):
    stem = tidy_path[:-4] if tidy_path.endswith(".csv") else tidy_path
    return stem + ".reps.csv"


def num(row, key):
    try:
        v = float(row.get(key, ""))
        return v if math.isfinite(v) else None
    except ValueError:
        return None


def contended_reasons(rows):
    """Why the machine did not give these repetitions (or tidy row) their resources: one
    line per kind, over the repetitions it concerns (e.g. "loader used 0.25-0.80 of the 2
    cores its workers could use (3 of 5 repetitions)").

    A loader counts only where it was the bottleneck: alone (no step_ms), or feeding
    training steps that waited for its batches (wait_ms_per_step over 10% of step_ms); a
    loader that keeps up with training idles by design."""
    loader, clock, throttled = [], [], []
    expected_cores = None
    for r in rows:
        used, workers, cores = num(r, "cpu_cores_used"), num(r, "num_workers"), num(r, "ctx_host_cores")
        step, wait = num(r, "step_ms"), num(r, "wait_ms_per_step")
        bottleneck = step is None or (wait is not None and wait > 0.1 * step)
        if used is not None and workers is not None and workers >= 1 and bottleneck:
            expected = min(workers, cores) if cores else workers
            if used < CONTENDED_FRACTION * expected:
                loader.append(used)
                expected_cores = expected
        sm, sm_max = num(r, "gpu_sm_clock_after_mhz"), num(r, "ctx_gpu_sm_clock_max_mhz")
        if sm and sm_max and sm < CONTENDED_FRACTION * sm_max:
            clock.append((sm, sm_max))
        throttle = num(r, "gpu_throttle_after")
        if throttle:
            bad = [name for bit, name in sorted(THROTTLE_BAD.items()) if int(throttle) & bit]
            if bad:
                throttled.append(" + ".join(bad))
    n = len(rows)
    where = lambda k: "" if n <= 1 else " (%d of %d repetitions)" % (k, n)
    span = lambda lo, hi, fmt: fmt % lo if abs(hi - lo) < 1e-9 else (fmt + "-" + fmt) % (lo, hi)
    reasons = []
    if loader:
        reasons.append("loader used %s of the %d cores its workers could use%s"
                       % (span(min(loader), max(loader), "%.2f"), expected_cores, where(len(loader))))
    if clock:
        lo, hi = min(c[0] for c in clock), max(c[0] for c in clock)
        reasons.append("SM clock %s of %d MHz after the run%s" % (span(lo, hi, "%d"), clock[0][1], where(len(clock))))
    if throttled:
        reasons.append("GPU throttled: %s%s" % (", ".join(sorted(set(throttled))), where(len(throttled))))
    return reasons


class Bench:
    """One measured benchmark instance (a tidy row) with its repetitions in seconds.

    A run to a target that missed it (reached_target = 0) is a result, not a dropped row:
    its time is censored, +infinity (it is known only to be more than its budget), so it
    ranks after every run that reached the target; `reached` counts the runs that did.
    A run at a fixed budget for accuracy parity (accuracy_parity = 1) carries its final
    held-out accuracies instead: its time is the budget's, no time to a target."""

    def __init__(self, row, times, rep_rows, run, source=""):
        self.row = row
        self.run = run
        self.source = source
        self.rep_rows = rep_rows or [row]
        self.target = any(r.get("reached_target", "") != "" for r in self.rep_rows)
        self.parity = any(num(r, "accuracy_parity") == 1 for r in self.rep_rows)
        self.reached = None
        if self.target:
            hits = [num(r, "reached_target") != 0 for r in self.rep_rows]
            times = [t if hit else math.inf for t, hit in zip(times, hits)]
            self.reached = sum(hits)
        self.times = times
        self.accuracies = [a for a in (num(r, "final_accuracy") for r in self.rep_rows) if a is not None]
        self.median = median(times)
        finite = [t for t in times if math.isfinite(t)]
        self.cv = cv(times) if len(finite) == len(times) else None
        self.contended = contended_reasons(rep_rows or [row])

    def key(self):
        """Its group: run, practice, params, machine, and the program's CSV (a baseline
        pairs with the tuned rows of its own program: the same process, interleaved)."""
        r = self.row
        return (self.run, r["practice"], r.get("params", ""), machine_of(r), self.source)

    def reach_text(self):
        return "" if self.reached is None else "%d of %d" % (self.reached, len(self.times))


def machine_of(r):
    return (r.get("ctx_gpu_name", ""), r.get("ctx_driver_version", ""), r.get("ctx_host", ""))


def run_of(path):
    """The run a tidy CSV belongs to: the name of its results folder."""
    return os.path.basename(os.path.dirname(os.path.abspath(path)))


MEASURED = ("ok", "partial")  # partial: a program cut at its deadline kept these rows


def warn(message):
    sys.stderr.write("warning: %s\n" % message)


def is_empty_csv(path):
    """A CSV without a single row: 0 bytes (a program cut before its first write) or a
    header only. A cut run is partial, not broken: the caller warns and goes on."""
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if r]
    except (OSError, UnicodeDecodeError, csv.Error):
        return False  # read_csv says what is wrong with it
    return len(rows) <= 1 and (not rows or "practice" in rows[0])


def load_benches(path, references=False):
    """The measured rows of a tidy CSV (with repetitions) that can give a speedup (or, with
    references, also the yardsticks, whose times compare across machines)."""
    if is_empty_csv(path):
        warn("%s has no rows (a program cut before it wrote any?): nothing from it" % path)
        return []
    _, rows = read_csv(path, ["practice", "status", "time"])
    reps = {}
    rp = reps_path(path)
    if os.path.exists(rp) and not is_empty_csv(rp):
        _, rrows = read_csv(rp, ["practice", "variant", "params", "time", "time_unit"])
        for r in rrows:
            reps.setdefault((r["practice"], r["variant"], r.get("params", "")), []).append(r)
    out = []
    run = run_of(path)
    for r in rows:
        if r["status"] not in MEASURED or (r.get("role") == "reference" and not references):
            continue
        if r["time"] == "":
            raise StatsError("%s line %d (%s/%s): status %s but no time" % (path, r["_line"], r["practice"],
                                                                          r.get("variant", ""), r["status"]))
        tidy_time = seconds_of(path, r)  # checked even when the repetitions give the times
        rr = reps.get((r["practice"], r.get("variant", ""), r.get("params", "")))
        if rr:
            times = [seconds_of(rp, x) for x in rr]
            for x in rr:  # the repetitions carry the context of their tidy row
                for k, v in r.items():
                    if k.startswith("ctx_"):
                        x.setdefault(k, v)
        else:
            times = [tidy_time]
        out.append(Bench(r, times, rr, run, os.path.basename(path)))
    return out


# ---- summarize --------------------------------------------------------------------------------

SUMMARY_HEADER = ("practice,params,baseline,tuned,baseline_s,tuned_s,speedup,gpu_name,driver_version,host,"
                  "ci_low,ci_high,p_value,verdict,repetitions,noisy,contended,baseline_cv_pct,tuned_cv_pct,"
                  "run,baseline_reached,tuned_reached")
BY_VARIANT_HEADER = ("practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended,"
                     "repetitions,reached,run")
ACCURACY_HEADER = ("practice,params,variant,role,repetitions,accuracy,ci_low,ci_high,difference,diff_ci_low,"
                   "diff_ci_high,p_value,verdict,gpu_name,host,run")


def bench_id(b):
    r = b.row
    return "|".join([b.run, r.get("practice", ""), r.get("variant", ""), r.get("params", "")] + list(machine_of(r)))


def compare_pair(base, tuned):
    """Speedup statistics of tuned over base (Bench objects). A side whose median time is
    censored (most of its runs missed the target) has no speedup: "did not reach"."""
    n1, n2 = len(base.times), len(tuned.times)
    thr = noise_cv()
    noisy = any(c is not None and c > thr for c in (base.cv, tuned.cv))
    contended = ["baseline " + x for x in base.contended] + ["tuned " + x for x in tuned.contended]
    out = dict(noisy=noisy, contended="; ".join(contended), n=min(n1, n2), ratio=None, reps=None,
               lo=None, hi=None, p=None)
    _, out["p"] = mann_whitney_u(base.times, tuned.times)
    if not math.isfinite(tuned.median):
        out["verdict"] = "did not reach"
    elif not math.isfinite(base.median):
        out["verdict"] = "baseline did not reach"
    else:
        out["ratio"] = base.median / tuned.median
        out["reps"] = bootstrap_ratios(base.times, tuned.times, bench_id(tuned))
        out["lo"], out["hi"] = interval(out["reps"])
        out["verdict"] = verdict_from_p(out["ratio"], out["p"], n1, n2)
    return out


def group_benches(benches):
    """{(run, practice, params, machine, csv): {"baseline": Bench, "tuned": [Bench]}} in
    input order. Two baselines in one group of one run cannot both be right: an error."""
    groups = {}
    for b in benches:
        g = groups.setdefault(b.key(), {"baseline": None, "tuned": []})
        if b.row.get("role") == "baseline":
            if g["baseline"] is not None:
                old = g["baseline"].row
                raise StatsError("two baselines for %s (%s) in run %s, %s: %s (line %d) and %s (line %d); "
                                 "a results folder holds one run" % (
                                     b.row["practice"], b.row.get("params", ""), b.run, b.source,
                                     old.get("variant", ""), old["_line"], b.row.get("variant", ""), b.row["_line"]))
            g["baseline"] = b
        elif b.row.get("role") == "tuned":
            g["tuned"].append(b)
    return groups


def variant_verdict(pts):
    """The verdict over a tuned variant's points: n/a when any point has too few
    repetitions, "did not reach" when no point has a speedup, else the interval's."""
    for na in ("n/a (1 repetition)", "n/a (too few repetitions)"):
        if any(s["verdict"] == na for s in pts):
            return na
    if all(s["ratio"] is None for s in pts):
        return "did not reach" if any(s["verdict"] == "did not reach" for s in pts) else pts[0]["verdict"]
    if any(s["ratio"] is None for s in pts):
        return "did not reach"  # at some point: no speedup over the others alone
    g = geomean([s["ratio"] for s in pts])
    return verdict_from_interval(g, *interval(geomean_replicates([s["reps"] for s in pts])))


def summary_line(k, base, t, s):
    r = t.row
    return ",".join([
        clean(k[1]), clean(k[2]), clean(base.row.get("variant", "")), clean(r.get("variant", "")),
        fmt(base.median if math.isfinite(base.median) else None, "%.6g"),
        fmt(t.median if math.isfinite(t.median) else None, "%.6g"), fmt(s["ratio"]),
        clean(k[3][0]), clean(k[3][1]), clean(k[3][2]),
        fmt(s["lo"]), fmt(s["hi"]), fmt(s["p"], "%.4g"), s["verdict"], str(s["n"]),
        "1" if s["noisy"] else "0", clean(s["contended"]),
        fmt(None if base.cv is None else 100 * base.cv, "%.2f"),
        fmt(None if t.cv is None else 100 * t.cv, "%.2f"),
        clean(k[0]), base.reach_text(), t.reach_text()])


def by_variant_line(vk, pts):
    with_ratio = [s for s in pts if s["ratio"] is not None]
    g = geomean([s["ratio"] for s in with_ratio]) if with_ratio else None
    lo, hi = (None, None)
    if with_ratio and len(with_ratio) == len(pts):
        lo, hi = interval(geomean_replicates([s["reps"] for s in pts]))
    contended = [s["contended"] for s in pts if s["contended"]]
    ctext = "" if not contended else "%d of %d points: %s" % (len(contended), len(pts), contended[0])
    reached = [s["reached"] for s in pts if s["reached"] is not None]
    rtext = "" if not reached else "%d of %d" % (sum(x[0] for x in reached), sum(x[1] for x in reached))
    return ",".join([clean(vk[1]), clean(vk[2]), clean(vk[3]), clean(vk[4]), str(len(pts)),
                     fmt(g), fmt(lo), fmt(hi), variant_verdict(pts),
                     "1" if any(s["noisy"] for s in pts) else "0", clean(ctext),
                     str(min(s["n"] for s in pts)), rtext, clean(vk[0])])


def mean(xs):
    return sum(xs) / len(xs)


def bootstrap_means(xs, salt, resamples=BOOTSTRAP_RESAMPLES):
    if len(xs) < 2:
        return None
    rng = bootstrap_rng(salt)
    return [mean([xs[rng.randrange(len(xs))] for _ in xs]) for _ in range(resamples)]


def accuracy_lines(groups):
    """summary_accuracy.csv: accuracy parity at equal epochs. Each variant's mean final
    held-out accuracy over its repetitions with a 95% percentile-bootstrap interval; for a
    tuned variant, its difference from the baseline's (tuned - baseline) with the
    bootstrap interval of the difference and the U test of the two sets."""
    lines = [ACCURACY_HEADER]
    for k, g in groups.items():
        base = g["baseline"]
        for b in ([base] if base else []) + g["tuned"]:
            if not b.parity or not b.accuracies:
                continue
            acc = b.accuracies
            lo, hi = interval(bootstrap_means(acc, "accuracy|" + bench_id(b)))
            diff = dlo = dhi = p = None
            verdict = ""
            if b is not base and base is not None and base.accuracies:
                bacc = base.accuracies
                diff = mean(acc) - mean(bacc)
                a_reps = bootstrap_means(acc, "accuracy|" + bench_id(b))
                b_reps = bootstrap_means(bacc, "accuracy|base|" + bench_id(b))
                if a_reps and b_reps:
                    dlo, dhi = interval([x - y for x, y in zip(a_reps, b_reps)])
                _, p = mann_whitney_u(bacc, acc)
                verdict = too_few(len(bacc), len(acc)) or (
                    "no significant difference" if p is None or p >= ALPHA
                    else ("higher accuracy" if diff > 0 else "lower accuracy"))
            r = b.row
            lines.append(",".join([clean(k[1]), clean(k[2]), clean(r.get("variant", "")), clean(r.get("role", "")),
                                   str(len(acc)), "%.6g" % mean(acc), fmt(lo, "%.6g"), fmt(hi, "%.6g"),
                                   fmt(diff, "%.6g"), fmt(dlo, "%.6g"), fmt(dhi, "%.6g"), fmt(p, "%.4g"), verdict,
                                   clean(k[3][0]), clean(k[3][2]), clean(k[0])]))
    return lines


def summarize(inputs, out_path):
    benches = []
    for path in inputs:
        benches.extend(load_benches(path))
    groups = group_benches(benches)
    time_groups = {k: {"baseline": g["baseline"] if g["baseline"] and not g["baseline"].parity else None,
                       "tuned": [t for t in g["tuned"] if not t.parity]} for k, g in groups.items()}
    lines = [SUMMARY_HEADER]
    variants, vorder = {}, []
    for k, g in time_groups.items():
        base = g["baseline"]
        if base is None:
            continue
        for t in g["tuned"]:
            s = compare_pair(base, t)
            s["reached"] = None if t.reached is None else (t.reached, len(t.times))
            lines.append(summary_line(k, base, t, s))
            vk = (k[0], k[1], t.row.get("variant", ""), k[3][0], k[3][2])
            if vk not in variants:
                variants[vk] = []
                vorder.append(vk)
            variants[vk].append(s)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    by_variant = [BY_VARIANT_HEADER] + [by_variant_line(vk, variants[vk]) for vk in sorted(vorder)]
    base, ext = os.path.splitext(out_path)
    with open(base + "_by_variant" + ext, "w") as f:
        f.write("\n".join(by_variant) + "\n")
    with open(base + "_accuracy" + ext, "w") as f:
        f.write("\n".join(accuracy_lines(groups)) + "\n")
    return len(lines) - 1


def tidy_inputs(directory):
    names = sorted(os.listdir(directory))
    return [os.path.join(directory, n) for n in names
            if n.endswith(".csv") and not n.startswith("summary") and not n.endswith(".curves.csv")
            and not n.endswith(".reps.csv") and os.path.isfile(os.path.join(directory, n))]


def cmd_summarize(args):
    usage = "usage: summarize.sh RESULTS_DIR | summarize.sh -o OUT.csv TIDY.csv..."
    if args and args[0] == "-o":
        if len(args) < 2 or not args[1]:
            raise StatsError("-o needs an output file; " + usage)
        out, inputs, where = args[1], args[2:], ""
    else:
        if not args or not args[0]:
            raise StatsError(usage)
        d = args[0]
        if not os.path.isdir(d):
            raise StatsError("no results folder %s" % d)
        out, inputs, where = os.path.join(d, "summary.csv"), tidy_inputs(d), "in %s " % d
    # A results folder (it has the run's context.txt) whose every program was cut before its
    # first row has no rows, which is a result; any other folder without CSVs is a mistake.
    if not inputs and not (where and os.path.isfile(os.path.join(args[0], "context.txt"))):
        raise StatsError("no tidy CSV files %sgiven" % where)
    if not inputs:
        warn("no tidy CSV files %s(every program was cut or not run): an empty summary" % where)
    for f in inputs:
        if not os.path.isfile(f) or not os.access(f, os.R_OK):
            raise StatsError("cannot read %s" % f)
    n = summarize(inputs, out)
    if where:  # a results folder: name its programs that were cut
        note_partial(args[0])
    print("summarize: %d speedups -> %s" % (n, out))


def note_partial(d):
    """Names the programs of folder d that were cut at their deadline: the harness writes
    <program>.partial ("rows_done rows_planned") beside its CSV."""
    for name in sorted(os.listdir(d)):
        if not name.endswith(".partial"):
            continue
        try:
            with open(os.path.join(d, name)) as f:
                fields = f.read().split()
        except OSError:
            fields = []
        if len(fields) == 2 and all(x.isdigit() for x in fields):
            warn("%s: cut at the deadline (%s of %s rows)" % (name[:-len(".partial")], fields[0], fields[1]))
        else:
            warn("%s is not 'rows_done rows_planned'" % os.path.join(d, name))


# ---- several results folders: compare ------------------------------------------------------

MACHINE_KEYS = [("gpu_name", "GPU"), ("driver_version", "driver"), ("cuda_runtime", "CUDA runtime"),
                ("cuda_driver_api", "CUDA driver API"), ("cudnn_version", "cuDNN"),
                ("cublas_version", "cuBLAS"), ("nccl_version", "NCCL"), ("host", "host"),
                ("host_cpu", "CPU"), ("git", "code (git)"), ("repetitions", "repetitions"),
                ("run_date", "date")]


def read_context(d):
    ctx = {}
    try:
        with open(os.path.join(d, "context.txt")) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    ctx.setdefault(k, v)
    except OSError:
        pass
    # the code and the repetitions, from command.txt ("git: 5e27181", "repetitions: 5 ...")
    try:
        with open(os.path.join(d, "command.txt")) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition(": ")
                if key in ("git", "repetitions") and value:
                    ctx.setdefault(key, value.split(" ")[0])
    except OSError:
        pass
    return ctx


class Run:
    def __init__(self, d, label):
        self.dir = d
        self.label = label
        self.name = os.path.basename(os.path.normpath(d))
        self.ctx = read_context(d)
        self.benches = []
        for path in tidy_inputs(d):
            # accuracy-parity rows are compared on accuracy, not time (summary_accuracy.csv)
            self.benches.extend(b for b in load_benches(path, references=True) if not b.parity)
        if not self.ctx and self.benches:
            self.ctx = {k[4:]: v for k, v in self.benches[0].row.items() if k.startswith("ctx_")}

    def speedups(self):
        """(practice, tuned) -> {params: stats} of this run."""
        base, out = {}, {}
        for b in self.benches:
            if b.row.get("role") == "baseline":
                base[(b.row["practice"], b.row.get("params", ""))] = b
        for b in self.benches:
            if b.row.get("role") != "tuned":
                continue
            k = (b.row["practice"], b.row.get("params", ""))
            if k in base:  # a point that did not reach its target stays, with no speedup
                out.setdefault((b.row["practice"], b.row["variant"]), {})[k[1]] = compare_pair(base[k], b)
        return out


def points_na(pts):
    """The n/a verdict of the first point whose repetitions are too few, or None."""
    return next((s["verdict"] for s in pts if s["verdict"].startswith("n/a")), None)


def points_speedup(pts):
    """A variant's points on one machine as summarize's by-variant line has them: the
    geometric mean over the points with a speedup (None when none has one), its bootstrap
    replicates and 95% interval only when every point has one, and variant_verdict's
    verdict ("did not reach" where a point missed its target)."""
    with_ratio = [x for x in pts if x["ratio"] is not None]
    g = geomean([x["ratio"] for x in with_ratio]) if with_ratio else None
    reps = geomean_replicates([x["reps"] for x in pts]) if len(with_ratio) == len(pts) else None
    lo, hi = interval(reps)
    return g, reps, lo, hi, variant_verdict(pts)


def speedup_text(g):
    return "did not reach" if g is None else "%.2fx" % g


def human_time(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return "%.4g %s" % (seconds / scale, unit)
    return "%.4g ns" % (seconds / 1e-9)


def md(s):
    return str(s).replace("|", "\\|")


def ci_text(lo, hi):
    return "n/a" if lo is None else "%.2f-%.2f" % (lo, hi)


def flags_text(noisy, contended):
    f = []
    if noisy:
        f.append("noisy")
    if contended:
        f.append("contended: " + contended)
    return "; ".join(f)


def cmd_compare(args):
    if len(args) < 3:
        raise StatsError("usage: compare.sh RESULTS_DIR RESULTS_DIR... (at least two results folders)")
    out_dir, dirs = args[0], args[1:]
    for d in dirs:
        if not os.path.isdir(d):
            raise StatsError("no results folder %s" % d)
    runs = [Run(d, chr(ord("A") + i) if i < 26 else "M%d" % i) for i, d in enumerate(dirs)]
    for r in runs:
        if not r.benches:  # a run cut before it measured anything: compared as "not measured"
            warn("%s has no measured benchmarks (empty or missing CSVs: %s)" % (
                r.dir, ", ".join(os.path.basename(p) for p in tidy_inputs(r.dir)) or "none"))
    os.makedirs(out_dir, exist_ok=True)
    mdl = ["# Comparison of %d results folders" % len(runs), "",
           "Written by `make compare` (scripts/compare.sh) on %s. Machine A is the reference: "
           "every ratio is relative to it." % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "",
           "## Machines", "",
           "| | folder | " + " | ".join(name for _, name in MACHINE_KEYS) + " |",
           "|---|---|" + "---|" * len(MACHINE_KEYS)]
    for r in runs:
        mdl.append("| %s | %s | %s |" % (r.label, md(r.name), " | ".join(md(r.ctx.get(k, "unknown")) for k, _ in MACHINE_KEYS)))
    mdl += ["", "### What differs", ""]
    differs = []
    for k, name in MACHINE_KEYS:
        if k in ("run_date",):
            continue
        vals = [r.ctx.get(k, "unknown") for r in runs]
        if len(set(vals)) > 1:
            differs.append("- **%s differs**: %s" % (name, ", ".join("%s %s" % (r.label, md(v)) for r, v in zip(runs, vals))))
    mdl += differs or ["- GPU, driver, CUDA, cuDNN, cuBLAS, NCCL, host, code and repetitions are the same on every machine."]
    mdl += ["", "## Speedups of each tuned variant on each machine", "",
            "Geometric mean over the parameter points measured on every machine, with its 95% "
            "bootstrap interval. *vs A*: this machine's speedup divided by A's, its 95% interval, "
            "and whether the difference is significant (the interval excludes 1).", ""]
    sp = [r.speedups() for r in runs]
    speed_rows = ["practice,tuned,machine,folder,gpu_name,driver_version,points,speedup,ci_low,ci_high,verdict,"
                  "noisy,contended,vs_first,vs_first_ci_low,vs_first_ci_high,vs_first_significant"]
    practices = sorted({k[0] for s in sp for k in s})
    bars = {}  # practice -> variant -> machine label -> (speedup, low, high)
    for practice in practices:
        variants = sorted({k[1] for s in sp for k in s if k[0] == practice})
        mdl += ["### %s" % md(practice), "",
                "| tuned variant | machine | points | speedup | 95% CI | verdict | vs A | 95% CI | differs | flags |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for v in variants:
            per = [s.get((practice, v), {}) for s in sp]
            common = set(per[0].keys())
            for p in per[1:]:
                common &= set(p.keys())
            common = sorted(common)
            first = None
            for r, p in zip(runs, per):
                if not common:  # each machine's own points, not comparable: no "vs A"
                    if not p:
                        mdl.append("| %s | %s | 0 | | | not measured here | | | | |" % (md(v), r.label))
                        continue
                    own = [p[c] for c in sorted(p)]
                    g, _, lo, hi, verdict = points_speedup(own)
                    mdl.append("| %s | %s | %d | %s | %s | %s | n/a | | not measured on every machine | %s |" % (
                        md(v), r.label, len(own), speedup_text(g), ci_text(lo, hi), verdict,
                        md(flags_text(any(x["noisy"] for x in own), "; ".join(x["contended"] for x in own if x["contended"])))))
                    continue
                pts = [p[c] for c in common]
                g, reps, lo, hi, verdict = points_speedup(pts)
                missed = any(s["ratio"] is None for s in pts)  # a point that did not reach its target
                na = points_na(pts)
                noisy = any(s["noisy"] for s in pts)
                cont = "; ".join(s["contended"] for s in pts if s["contended"])
                if first is None:
                    first = (g, reps, na or missed)
                    vs = vlo = vhi = None
                    sig = ""
                elif missed or first[2] is True or first[0] is None:  # no speedup to set against A's
                    vs = vlo = vhi = None
                    sig = "n/a"
                else:
                    vs = g / first[0]
                    vreps = None if reps is None or first[1] is None else [a / b for a, b in zip(reps, first[1])]
                    vlo, vhi = interval(vreps)
                    sig = "n/a" if vlo is None or na or first[2] else ("yes" if vlo > 1 or vhi < 1 else "no")
                mdl.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                    md(v), r.label, len(common), speedup_text(None if missed else g), ci_text(lo, hi), verdict,
                    "" if vs is None else "%.2fx" % vs, "" if vs is None else ci_text(vlo, vhi), sig,
                    md(flags_text(noisy, cont))))
                if not missed:
                    bars.setdefault(practice, {}).setdefault(v, {})[r.label] = (g, lo, hi)
                speed_rows.append(",".join([clean(practice), clean(v), r.label, clean(r.name),
                                            clean(r.ctx.get("gpu_name", "")), clean(r.ctx.get("driver_version", "")),
                                            str(len(common)), "" if missed else "%.4f" % g, fmt(lo), fmt(hi),
                                            verdict, "1" if noisy else "0", clean(cont),
                                            fmt(vs), fmt(vlo), fmt(vhi), sig]))
        mdl.append("")
    # absolute times of the same benchmark, relative to machine A
    mdl += ["## Absolute times relative to A", "",
            "Median time on each machine divided by A's, with its 95% bootstrap interval and the "
            "U-test p-value of the two sets of repetitions (below 1: faster than A).", "",
            "| benchmark | params | A median | " + " | ".join("%s / A | 95%% CI | p" % r.label for r in runs[1:]) + " |",
            "|---|---|---|" + "---|---|---|" * (len(runs) - 1)]
    time_rows = ["practice,variant,params,machine,folder,median_s,relative_to_first,ci_low,ci_high,p_value,noisy,contended"]
    index = [{(b.row["practice"], b.row.get("variant", ""), b.row.get("params", "")): b for b in r.benches} for r in runs]
    thr = noise_cv()
    for key in sorted(index[0]):
        a = index[0][key]
        cells = []
        time_rows.append(",".join([clean(key[0]), clean(key[1]), clean(key[2]), runs[0].label, clean(runs[0].name),
                                   "%.6g" % a.median, "1.0000", "", "", "",
                                   "1" if a.cv is not None and a.cv > thr else "0", clean("; ".join(a.contended))]))
        for r, idx in zip(runs[1:], index[1:]):
            b = idx.get(key)
            if b is None:
                cells.append("not measured | | ")
                continue
            if not (math.isfinite(a.median) and math.isfinite(b.median)):
                cells.append("did not reach (median) | | ")  # most runs missed their target
                continue
            rel = b.median / a.median
            lo, hi = interval(bootstrap_ratios(b.times, a.times, "times|" + bench_id(b)))
            _, p = mann_whitney_u(b.times, a.times)
            cells.append("%.3f | %s | %s" % (rel, ci_text(lo, hi), "n/a" if p is None else "%.3g" % p))
            time_rows.append(",".join([clean(key[0]), clean(key[1]), clean(key[2]), r.label, clean(r.name),
                                       "%.6g" % b.median, "%.4f" % rel, fmt(lo), fmt(hi), fmt(p, "%.4g"),
                                       "1" if b.cv is not None and b.cv > thr else "0",
                                       clean("; ".join(b.contended))]))
        mdl.append("| %s/%s | %s | %s | %s |" % (md(key[0]), md(key[1]), md(key[2]), human_time(a.median), " | ".join(cells)))
    mdl += ["", "## Files", "",
            "- `speedups.csv`: the speedup table above (one row per practice, tuned variant and machine)",
            "- `times.csv`: the absolute times, one row per benchmark and machine",
            "- `charts/compare_<practice>.png|svg`: one group per tuned variant, one bar per machine, "
            "95% intervals as error bars", ""]
    write_bar_data(os.path.join(out_dir, "charts"), bars, runs)
    with open(os.path.join(out_dir, "speedups.csv"), "w") as f:
        f.write("\n".join(speed_rows) + "\n")
    with open(os.path.join(out_dir, "times.csv"), "w") as f:
        f.write("\n".join(time_rows) + "\n")
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write("\n".join(mdl) + "\n")
    print("compare: %d machines, %d practices -> %s" % (len(runs), len(practices), out_dir))


def write_bar_data(chart_dir, bars, runs):
    """charts/compare_<practice>.dat for scripts/charts/compare.gp: tab-separated, one line
    per tuned variant, then speedup, low, high for each machine (an unknown interval is
    the speedup itself: a bar without a whisker); charts/compare_<practice>.ymax: the top
    of the y axis, with headroom above the highest whisker."""
    os.makedirs(chart_dir, exist_ok=True)
    for practice, variants in bars.items():
        name = "compare_" + "".join(c if c.isalnum() or c in "_-." else "_" for c in practice)
        heads = ["%s: %s %s" % (r.label, r.ctx.get("gpu_name", "?"), r.ctx.get("driver_version", "?")) for r in runs]
        lines = ["variant\t" + "\t".join("%s\t%s low\t%s high" % (h, r.label, r.label) for h, r in zip(heads, runs))]
        top = 1.0
        for v in sorted(variants):
            cells = []
            for r in runs:
                g, lo, hi = variants[v].get(r.label, (None, None, None))
                if g is None:
                    cells += ["NaN"] * 3
                    continue
                lo, hi = (g, g) if lo is None else (lo, hi)
                top = max(top, hi, g)
                cells += ["%.6g" % g, "%.6g" % lo, "%.6g" % hi]
            lines.append(clean(v).replace("\t", " ") + "\t" + "\t".join(cells))
        with open(os.path.join(chart_dir, name + ".dat"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(chart_dir, name + ".ymax"), "w") as f:
            f.write("%.6g\n" % (top * 1.2))


# ---- results/README.md: the index ------------------------------------------------------------

def cmd_index(args):
    if len(args) != 1 or not os.path.isdir(args[0]):
        raise StatsError("usage: stats.py index RESULTS_ROOT (an existing folder)")
    root = args[0]
    runs, comparisons = [], []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.isdir(d):
            continue
        if os.path.isfile(os.path.join(d, "compare.md")):
            comparisons.append(name)
        elif os.path.isfile(os.path.join(d, "context.txt")):
            runs.append(name)
    lines = ["# Results", "",
             "One line per results folder (`make bench` writes one, `make compare` a comparison); "
             "regenerated by both. Headline: each practice's best tuned variant, geometric-mean "
             "speedup over its parameter points (95% interval when the run had repetitions; "
             "* = noisy or contended, see the report).", "",
             "| run | GPU | driver | date | headline speedups |", "|---|---|---|---|---|"]
    for name in runs:
        d = os.path.join(root, name)
        ctx = read_context(d)
        heads = []
        path = os.path.join(d, "summary_by_variant.csv")
        if os.path.isfile(path):
            try:
                _, rows = read_csv(path, ["practice", "tuned", "geomean_speedup"])
            except StatsError:
                rows = []
            best = {}
            for r in rows:
                g = num(r, "geomean_speedup")
                if g is not None and (r["practice"] not in best or g > best[r["practice"]][0]):
                    best[r["practice"]] = (g, r)
            for practice in sorted(best):
                g, r = best[practice]
                lo, hi = num(r, "ci_low"), num(r, "ci_high")
                mark = "*" if r.get("noisy") == "1" or r.get("contended") else ""
                heads.append("%s/%s %.2fx%s%s" % (practice, r["tuned"], g,
                                                  " [%.2f-%.2f]" % (lo, hi) if lo is not None and hi is not None else "",
                                                  mark))
        link = "[%s](%s/report.md)" % (md(name), name) if os.path.isfile(os.path.join(d, "report.md")) else md(name)
        date = ctx.get("run_date", "")[:10] or "unknown"
        gpu = ctx.get("gpu_name", "unknown")
        if gpu == "none":
            gpu = "no GPU (%s)" % ctx.get("host_cpu", "CPU")
        lines.append("| %s | %s | %s | %s | %s |" % (link, md(gpu),
                                                     md(ctx.get("driver_version", "unknown")), date,
                                                     md("; ".join(heads)) or "no speedups"))
    if comparisons:
        lines += ["", "## Comparisons", ""]
        for name in comparisons:
            lines.append("- [%s](%s/compare.md)" % (md(name), name))
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("index: %d runs, %d comparisons -> %s" % (len(runs), len(comparisons), os.path.join(root, "README.md")))


def main(argv):
    commands = {"summarize": cmd_summarize, "compare": cmd_compare, "index": cmd_index}
    if len(argv) < 2 or argv[1] not in commands:
        sys.stderr.write("usage: stats.py summarize|compare|index ARGS... (see the top of the file)\n")
        return 1
    name = argv[1]
    try:
        commands[name](argv[2:])
    except StatsError as e:
        msg = str(e)
        sys.stderr.write("%s: %s\n" % (name, msg))
        # usage errors: 1; bad data: 2
        return 1 if msg.startswith(("usage", "-o needs", "no results folder", "no tidy CSV", "cannot read")) else 2
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (name, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
