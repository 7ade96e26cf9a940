#!/usr/bin/env python3
"""stats.py: the statistics of the results pipeline (Python standard library only).

  stats.py summarize RESULTS_DIR            -> RESULTS_DIR/summary.csv, summary_by_variant.csv,
                                              summary_accuracy.csv, and with a PyTorch side
                                              (practices pytorch_*) summary_pytorch.csv
  stats.py summarize -o OUT.csv TIDY.csv... -> OUT.csv and OUT_by_variant.csv (OUT_accuracy.csv,
                                              OUT_pytorch.csv likewise)
  stats.py compare OUT_DIR RESULTS_DIR...   -> OUT_DIR/compare.md, speedups.csv, times.csv
  stats.py index RESULTS_ROOT               -> RESULTS_ROOT/README.md, one line per run
(compare and index: scripts/stats_compare.py, on this file's statistics)

Every benchmark's repetitions come from the sibling per-repetition file <name>.reps.csv
that the harness writes next to each tidy CSV <name>.csv (one row per repetition); an
older folder without it has one value per benchmark, the tidy row's time, and its
intervals and p-values are "n/a".

A speedup of repetitions that ran paired (the reps file's `sequence`: the harness runs a
row's baseline and tuned repetitions interleaved in blocks, docs/statistics.md) is the
median of the pairs' ratios, baseline / tuned, the k-th repetition of each side in the order
they ran making pair k; its 95% interval a percentile bootstrap resampling the pairs; its
p-value the two-sided Wilcoxon signed-rank test of the pairs' log ratios (exact without
ties or zeros up to 50 pairs, else the normal approximation with tie correction, as
scipy.stats.wilcoxon). Without the order (older folders) the speedup is the ratio of
medians, baseline / tuned, over the repetitions. Its 95%
interval is a percentile bootstrap (resampling each side's repetitions with replacement,
BOOTSTRAP_RESAMPLES times, from a fixed seed, so the same data always give the same
interval). Its p-value is the two-sided Mann-Whitney U test of the two sets of times
(exact distribution without ties, else the normal approximation with tie and continuity
corrections, as scipy.stats.mannwhitneyu).
Each summary row records the precision reached (the interval's relative half-width), the
harness's target and whether it was met, and why the row's repetitions stopped.
Repetitions measured while the GPU was throttled (the reps file's gpu_throttled = 1; the
harness redid them) are left out of every statistic and counted (column discarded). The verdicts (faster / slower, equivalent
within BENCH_EQUIVALENCE_MARGIN, inconclusive, n/a below 4 repetitions a side) and the
quoted precision ("1.96x [1.56-2.25], ±18%") are scripts/verdicts.py's, whose header states
the rules. A geometric mean over parameter points takes its interval from the same
bootstrap replicates (the geometric mean of every replicate), and its verdict from that
interval alone (n/a where any point is). Every summary records the margin it used (column
equivalence_margin).
The bootstrap seed is salted with the run (the results folder's name) and the benchmark,
and groups are keyed by run, program (CSV), practice, params and machine: two runs never
share resamples or baselines, and two baselines in one group of one run are an error.

Runs to a target (a reached_target column): a run that missed is kept, its time censored
(+infinity: ranked after every run that reached); the summary says "reached k of n" for
each side; a side whose median run missed has no speedup: "did not reach". Runs at a fixed
budget for accuracy parity (accuracy_parity = 1) go to summary_accuracy.csv instead: mean
final held-out accuracy per variant with its bootstrap interval, and each tuned variant's
difference from the baseline (interval, U test, and a verdict as above in the words
"higher accuracy" / "lower accuracy" / "equivalent" / "inconclusive", the margin there being
the equivalence margin times the baseline's mean accuracy).
Time-to-accuracy repetitions each train from their own seed (the driver's rule: repetition
k from the preset's seed + k, recorded in the reps file's `seed` column): the summary
counts the distinct seeds of each side (baseline_seeds, tuned_seeds; summary_accuracy.csv:
seeds), empty where the rows record none.

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
import math
import os
import random
import sys
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from verdicts import (MarginError, agreement, agreement_note, equivalence_margin, relative_half_width,  # noqa: E402
                      speedup_verdict, three_way, too_few)
from natural_order import natural_key  # noqa: E402  (the one natural sort)

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


_signed_rank_cache = {}


def _signed_rank_counts(n):
    """Number of sign patterns of ranks 1..n with each value of the positive rank sum."""
    if n not in _signed_rank_cache:
        c = [1]
        for r in range(1, n + 1):
            nxt = c + [0] * r
            for t, cnt in enumerate(c):
                nxt[t + r] += cnt
            c = nxt
        _signed_rank_cache[n] = c
    return _signed_rank_cache[n]


def wilcoxon_signed_rank(d):
    """Two-sided Wilcoxon signed-rank test of the differences d (zeros dropped, as scipy's
    zero_method="wilcox"): (T = the smaller rank sum, p-value), or (None, None) below 2
    non-zero differences. Exact without ties up to 50 differences, else the normal
    approximation with the tie correction and no continuity correction (scipy's defaults)."""
    d = [x for x in d if x != 0]
    n = len(d)
    if n < 2:
        return None, None
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks = [0.0] * n
    ties = []
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    r_plus = sum(r for r, x in zip(ranks, d) if x > 0)
    r_minus = sum(r for r, x in zip(ranks, d) if x < 0)
    t = min(r_plus, r_minus)
    if not ties and n <= 50:
        counts = _signed_rank_counts(n)
        tail = sum(counts[:int(round(t)) + 1])
        return t, min(1.0, 2.0 * tail / 2 ** n)
    mn = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - sum(k ** 3 - k for k in ties) / 48.0
    if var <= 0:
        return t, 1.0
    z = (t - mn) / math.sqrt(var)
    return t, min(1.0, math.erfc(abs(z) / math.sqrt(2)))


def bootstrap_paired(ratios, salt="", resamples=BOOTSTRAP_RESAMPLES):
    """Replicates of the median of the pairs' ratios, resampling pairs, or None below 2."""
    if len(ratios) < 2:
        return None
    rng = bootstrap_rng(salt)
    return [median([ratios[rng.randrange(len(ratios))] for _ in ratios]) for _ in range(resamples)]


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
        # distinct seeds of the repetitions (time to accuracy records one each), or None
        self.seeds = len({r["seed"] for r in rep_rows or [] if r.get("seed", "") != ""}) or None
        # the order the repetitions ran in (the reps file's `sequence`), or None
        seq = [num(r, "sequence") for r in rep_rows or []]
        self.sequence = seq if rep_rows and all(x is not None for x in seq) else None
        self.discarded = 0  # repetitions left out: the GPU was throttled (load_benches)

    def in_order(self):
        """The times in the order the repetitions ran (None when it is not known)."""
        if self.sequence is None:
            return None
        return [t for _, t in sorted(zip(self.sequence, self.times))]

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
        discarded = 0
        if rr:  # repetitions the GPU was throttled in were redone: the redone ones count
            kept = [x for x in rr if num(x, "gpu_throttled") != 1]
            discarded = len(rr) - len(kept)
            rr = kept or rr
        if rr:
            times = [seconds_of(rp, x) for x in rr]
            for x in rr:  # the repetitions carry the context of their tidy row
                for k, v in r.items():
                    if k.startswith("ctx_"):
                        x.setdefault(k, v)
        else:
            times = [tidy_time]
        b = Bench(r, times, rr, run, os.path.basename(path))
        b.discarded = discarded
        out.append(b)
    return out


# ---- summarize --------------------------------------------------------------------------------

SUMMARY_HEADER = ("practice,params,baseline,tuned,baseline_s,tuned_s,speedup,gpu_name,driver_version,host,"
                  "ci_low,ci_high,p_value,verdict,repetitions,noisy,contended,baseline_cv_pct,tuned_cv_pct,"
                  "run,baseline_reached,tuned_reached,equivalence_margin,baseline_seeds,tuned_seeds,"
                  "pairs,baseline_repetitions,tuned_repetitions,precision,precision_target,target_met,stop,discarded")
BY_VARIANT_HEADER = ("practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended,"
                     "repetitions,reached,run,equivalence_margin")
ACCURACY_HEADER = ("practice,params,variant,role,repetitions,accuracy,ci_low,ci_high,difference,diff_ci_low,"
                   "diff_ci_high,p_value,verdict,gpu_name,host,run,seeds,equivalence_margin")


def bench_id(b):
    r = b.row
    return "|".join([b.run, r.get("practice", ""), r.get("variant", ""), r.get("params", "")] + list(machine_of(r)))


def compare_pair(base, tuned, paired=False):
    """Speedup statistics of tuned over base (Bench objects). A side whose median time is
    censored (most of its runs missed the target) has no speedup: "did not reach".
    paired: where both sides know the order their repetitions ran in and none is censored,
    the median of the pairs' ratios with the signed-rank test (out["pairs"] > 0); two
    machines' runs (make compare) are never paired."""
    n1, n2 = len(base.times), len(tuned.times)
    bo, to = base.in_order(), tuned.in_order()
    finite = all(math.isfinite(x) for x in base.times + tuned.times)
    if paired and bo and to and finite:
        return compare_paired(base, tuned, bo, to)
    thr = noise_cv()
    noisy = any(c is not None and c > thr for c in (base.cv, tuned.cv))
    contended = ["baseline " + x for x in base.contended] + ["tuned " + x for x in tuned.contended]
    out = dict(noisy=noisy, contended="; ".join(contended), n=min(n1, n2), ratio=None, reps=None,
               lo=None, hi=None, p=None, pairs=0)
    _, out["p"] = mann_whitney_u(base.times, tuned.times)
    if not math.isfinite(tuned.median):
        out["verdict"] = "did not reach"
    elif not math.isfinite(base.median):
        out["verdict"] = "baseline did not reach"
    else:
        out["ratio"] = base.median / tuned.median
        out["reps"] = bootstrap_ratios(base.times, tuned.times, bench_id(tuned))
        out["lo"], out["hi"] = interval(out["reps"])
        out["verdict"] = speedup_verdict(out["ratio"], out["lo"], out["hi"], out["p"], n1, n2, equivalence_margin())
    return out


def compare_paired(base, tuned, bo, to):
    """compare_pair for repetitions paired in the order they ran (bo, to: each side's times
    in that order; pair k = the k-th of each; a side's extra repetitions are left out)."""
    n = min(len(bo), len(to))
    ratios = [b / t for b, t in zip(bo[:n], to[:n])]
    thr = noise_cv()
    contended = ["baseline " + x for x in base.contended] + ["tuned " + x for x in tuned.contended]
    out = dict(noisy=any(c is not None and c > thr for c in (base.cv, tuned.cv)),
               contended="; ".join(contended), n=n, pairs=n, ratio=median(ratios), p=None)
    _, out["p"] = wilcoxon_signed_rank([math.log(r) for r in ratios])
    out["reps"] = bootstrap_paired(ratios, bench_id(tuned))
    out["lo"], out["hi"] = interval(out["reps"])
    out["verdict"] = speedup_verdict(out["ratio"], out["lo"], out["hi"], out["p"], n, n, equivalence_margin(),
                                     paired=True)
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
    return three_way(*interval(geomean_replicates([s["reps"] for s in pts])), 1.0, equivalence_margin())


def summary_line(k, base, t, s):
    """One row of summary.csv. precision: the interval's relative half-width; target (the
    harness's precision_target, empty for rows measured without one) met when precision is
    within it: "yes", "no", or empty."""
    r = t.row
    precision = relative_half_width(s["ratio"], s["lo"], s["hi"])
    target = num(r, "precision_target")
    met = "" if target is None else ("no" if precision is None or precision > target else "yes")
    return ",".join([
        clean(k[1]), clean(k[2]), clean(base.row.get("variant", "")), clean(r.get("variant", "")),
        fmt(base.median if math.isfinite(base.median) else None, "%.6g"),
        fmt(t.median if math.isfinite(t.median) else None, "%.6g"), fmt(s["ratio"]),
        clean(k[3][0]), clean(k[3][1]), clean(k[3][2]),
        fmt(s["lo"]), fmt(s["hi"]), fmt(s["p"], "%.4g"), s["verdict"], str(s["n"]),
        "1" if s["noisy"] else "0", clean(s["contended"]),
        fmt(None if base.cv is None else 100 * base.cv, "%.2f"),
        fmt(None if t.cv is None else 100 * t.cv, "%.2f"),
        clean(k[0]), base.reach_text(), t.reach_text(), "%g" % equivalence_margin(),
        fmt(base.seeds, "%d"), fmt(t.seeds, "%d"),
        str(s["pairs"]) if s["pairs"] else "", str(len(base.times)), str(len(t.times)),
        fmt(precision, "%.4f"), fmt(target, "%g"), met, clean(t.row.get("stop", "")),
        str(base.discarded + t.discarded)])


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
                     str(min(s["n"] for s in pts)), rtext, clean(vk[0]), "%g" % equivalence_margin()])


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
    bootstrap interval of the difference, the U test of the two sets and three_way's
    verdict, equivalent within the margin times the baseline's mean accuracy."""
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
                verdict = too_few(len(bacc), len(acc)) or three_way(
                    dlo, dhi, 0.0, equivalence_margin() * mean(bacc), p, ("higher accuracy", "lower accuracy"))
            r = b.row
            lines.append(",".join([clean(k[1]), clean(k[2]), clean(r.get("variant", "")), clean(r.get("role", "")),
                                   str(len(acc)), "%.6g" % mean(acc), fmt(lo, "%.6g"), fmt(hi, "%.6g"),
                                   fmt(diff, "%.6g"), fmt(dlo, "%.6g"), fmt(dhi, "%.6g"), fmt(p, "%.4g"), verdict,
                                   clean(k[3][0]), clean(k[3][2]), clean(k[0]), fmt(b.seeds, "%d"),
                                   "%g" % equivalence_margin()]))
    return lines


# ---- the core against PyTorch: summary_pytorch.csv ------------------------------------------

PYTORCH_PREFIX = "pytorch_"  # the PyTorch side's practice names: pytorch_<the core's practice>
PYTORCH_HEADER = ("practice,params,baseline,tuned,core_speedup,core_ci_low,core_ci_high,core_verdict,"
                  "pytorch_speedup,pytorch_ci_low,pytorch_ci_high,pytorch_verdict,agreement,effect_ratio,"
                  "effect_ratio_ci_low,effect_ratio_ci_high,note,core_pairs,pytorch_pairs,host,run,"
                  "equivalence_margin")


def row_statuses(inputs):
    """{(run, practice, params, variant): (status, reason)} of every tidy row of the inputs
    (skipped and failed rows too: why a side has no speedup)."""
    out = {}
    for path in inputs:
        if is_empty_csv(path):
            continue
        _, rows = read_csv(path, ["practice", "status", "time"])
        for r in rows:
            out[(run_of(path), r["practice"], r.get("params", ""), r.get("variant", ""))] = (
                r["status"], r.get("reason", ""))
    return out


def why_missing(statuses, run, practice, params, variants, side):
    """Why `side` ("the core", "PyTorch") has no speedup of the tuned variant (the last of
    `variants`) at this point: its rows' skip or failure reason, else what it lacks."""
    for v in reversed(variants):
        st = statuses.get((run, practice, params, v))
        if st and st[0] == "skipped":
            return "%s skipped: %s" % (side, st[1].replace("skipped: ", "", 1) or "no reason given")
        if st and st[0] == "error":
            return "%s failed: %s" % (side, st[1] or "no reason given")
    keys = [k for k in statuses if k[0] == run and k[1] == practice]
    if not keys:
        return "%s has no practice %s in this run" % (side, practice)
    if not any(k[2] == params for k in keys):
        return "%s did not measure this point" % side
    return "%s has no variant %s here" % (side, variants[-1])


def pytorch_lines(points, statuses):
    """summary_pytorch.csv: per point of a practice the PyTorch side measured (or tried:
    its rows skipped or failed), the core's speedup beside PyTorch's, each with its interval
    and verdict, their agreement (verdicts.agreement) and the ratio of the effects, PyTorch's
    speedup / the core's, with a 95% interval from the two sides' independent bootstrap
    replicates (replicate k of one over replicate k of the other: the percentile interval
    of the ratio of two independent estimates). A point measured on one side only is
    "PyTorch only" or "core only", its note saying why the other side has none.
    points: {(run, practice, params, baseline, tuned): (summary stats, tuned Bench)}.
    None when no input has a PyTorch row."""
    twinned = {(k[0], k[1][len(PYTORCH_PREFIX):]) for k in statuses if k[1].startswith(PYTORCH_PREFIX)}
    if not twinned:
        return None
    lines = [PYTORCH_HEADER]
    m = "%g" % equivalence_margin()
    side = lambda s: (s["ratio"], s["lo"], s["hi"], s["verdict"]) if s else (None, None, None, "")
    keys = {}  # the points by the core's name, each once (a dict keeps them unique)
    for (run, practice, params, baseline, tuned) in points:
        core_name = practice[len(PYTORCH_PREFIX):] if practice.startswith(PYTORCH_PREFIX) else practice
        if (run, core_name) in twinned:
            keys[(run, core_name, params, baseline, tuned)] = True
    for run, practice, params, baseline, tuned in sorted(keys, key=lambda k: [natural_key(x) for x in k]):
        core = points.get((run, practice, params, baseline, tuned))
        torch = points.get((run, PYTORCH_PREFIX + practice, params, baseline, tuned))
        cs, ts = (core or (None, None))[0], (torch or (None, None))[0]
        ratio = lo = hi = None
        if core and torch:
            word, why = agreement(side(cs), side(ts))
            note = agreement_note(word, why, side(cs), side(ts))
            if cs["ratio"] and ts["ratio"]:
                ratio = ts["ratio"] / cs["ratio"]
                if cs["reps"] and ts["reps"]:
                    lo, hi = interval([t / c for t, c in zip(ts["reps"], cs["reps"])])
        elif torch:
            word = "PyTorch only"
            note = "measured in PyTorch alone: " + why_missing(statuses, run, practice, params, [baseline, tuned],
                                                               "the core")
        else:
            word = "core only"
            note = "no PyTorch figure: " + why_missing(statuses, run, PYTORCH_PREFIX + practice, params,
                                                       [baseline, tuned], "PyTorch")
        host = (core or torch)[1].row.get("ctx_host", "")
        cells = []
        for s in (cs, ts):
            cells += [fmt(s and s["ratio"]), fmt(s and s["lo"]), fmt(s and s["hi"]), s["verdict"] if s else ""]
        lines.append(",".join([clean(practice), clean(params), clean(baseline), clean(tuned)] + cells + [
            word, fmt(ratio), fmt(lo), fmt(hi), clean(note), str(cs["pairs"]) if cs and cs["pairs"] else "",
            str(ts["pairs"]) if ts and ts["pairs"] else "", clean(host), clean(run), m]))
    return lines


def summarize(inputs, out_path):
    benches = []
    for path in inputs:
        benches.extend(load_benches(path))
    groups = group_benches(benches)
    time_groups = {k: {"baseline": g["baseline"] if g["baseline"] and not g["baseline"].parity else None,
                       "tuned": [t for t in g["tuned"] if not t.parity]} for k, g in groups.items()}
    lines = [SUMMARY_HEADER]
    variants, vorder, points = {}, [], {}
    for k, g in time_groups.items():
        base = g["baseline"]
        if base is None:
            continue
        for t in g["tuned"]:
            s = compare_pair(base, t, paired=True)
            s["reached"] = None if t.reached is None else (t.reached, len(t.times))
            lines.append(summary_line(k, base, t, s))
            points[(k[0], k[1], k[2], base.row.get("variant", ""), t.row.get("variant", ""))] = (s, t)
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
    twin = pytorch_lines(points, row_statuses(inputs))
    twin_path = base + "_pytorch" + ext
    if twin:
        with open(twin_path, "w") as f:
            f.write("\n".join(twin) + "\n")
    elif os.path.exists(twin_path):
        os.remove(twin_path)  # no PyTorch side in these inputs: no stale comparison left
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
            warn("%s: cut short (%s of %s rows)" % (name[:-len(".partial")], fields[0], fields[1]))
        else:
            warn("%s is not 'rows_done rows_planned'" % os.path.join(d, name))


def main(argv):
    # compare and index live in stats_compare.py, which imports this module as `stats`: run
    # as a script, this module is __main__, so it is registered under its name first
    sys.modules.setdefault("stats", sys.modules[__name__])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import stats_compare
    commands = {"summarize": cmd_summarize, "compare": stats_compare.cmd_compare, "index": stats_compare.cmd_index}
    if len(argv) < 2 or argv[1] not in commands:
        sys.stderr.write("usage: stats.py summarize|compare|index ARGS... (see the top of the file)\n")
        return 1
    name = argv[1]
    try:
        equivalence_margin()  # a bad BENCH_EQUIVALENCE_MARGIN is refused before any work
        commands[name](argv[2:])
    except MarginError as e:
        sys.stderr.write("%s: %s\n" % (name, e))
        return 1
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
