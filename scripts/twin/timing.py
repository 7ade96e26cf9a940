"""twin/timing.py: the stopping rule of a row group's repetitions, ported from
bench/driver/precision.c (docs/statistics.md, "How many repetitions"), so that the PyTorch
side stops where the core's harness would on the same times. Standard library only; the
functions mirror precision.h one for one (tests/test_twin_bench.c compares their decisions
with the C rule's on the same inputs).
"""
import math

PRECISION_MIN_PAIRS = 6

GO_ON, TARGET_MET, NO_TARGET, CAP_REPETITIONS, CAP_TIME = range(5)
DECISION_NAMES = {
    GO_ON: "going on",
    TARGET_MET: "target met",
    NO_TARGET: "no target",
    CAP_REPETITIONS: "target not met: capped at the most repetitions",
    CAP_TIME: "target not met: capped at the row's time",
}


def _binomial_half_pmf(n, i):
    return math.exp(math.lgamma(n + 1.0) - math.lgamma(i + 1.0) - math.lgamma(n - i + 1.0) - n * math.log(2.0))


def median_interval(x):
    """(median, lo, hi, covers): precision_median_interval; x non-empty."""
    s = sorted(x)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    k, below = 0, 0.0
    while k < n // 2:
        below += _binomial_half_pmf(n, k)
        if below > 0.025:
            break
        k += 1
    covers = k >= 1
    if not covers:
        k = 1
    return med, s[k - 1], s[n - k], covers


def precision_of_median(x):
    if len(x) < 2:
        return math.inf
    m, lo, hi, _ = median_interval(x)
    return (hi - lo) / 2 / m if m > 0 and math.isfinite(lo) else math.inf


def precision_of_paired_speedup(base, tuned):
    """(relative half-width, speedup) from pairs base[i] / tuned[i], i < min(len)."""
    n = min(len(base), len(tuned))
    if n < 2:
        return math.inf, math.nan
    if any(not (b > 0) or not (t > 0) for b, t in zip(base[:n], tuned[:n])):
        return math.inf, math.nan
    r = [b / t for b, t in zip(base[:n], tuned[:n])]
    sp, lo, hi, _ = median_interval(r)
    return ((hi - lo) / 2 / sp if sp > 0 else math.inf), sp


def precision_next(target, done, max_repetitions, seconds_used, seconds_cap, reached):
    """(decision, more): precision_next on a PrecisionBudget's fields."""
    if not (target > 0):
        return NO_TARGET, 0
    if reached <= target:
        return TARGET_MET, 0
    n = done if done > 0 else 1
    want = 1.2 * n * (reached / target) * (reached / target) - n if math.isfinite(reached) else n
    add = n if want > n else int(math.ceil(want))
    if add < 2:
        add = 2
    if add > max_repetitions - done:
        add = max_repetitions - done
    if add <= 0:
        return CAP_REPETITIONS, 0
    if seconds_cap > 0:
        per, left = seconds_used / n, seconds_cap - seconds_used
        fit = int(math.floor(left / per)) if per > 0 else add
        if fit < add:
            add = fit
        if add <= 0:
            return CAP_TIME, 0
    return GO_ON, add


def group_cap(share_s, left_s, used_s):
    """A row group's time cap after its first block (harness_schedule.cc run_schedule): what
    is left of its practice's share of the budget (precision first: the groups after it that
    find less of the share left than it took are not run), never less than the first block took; without a
    budget 3x its first block."""
    if share_s <= 0:
        return 3 * used_s
    return max(left_s, used_s)
