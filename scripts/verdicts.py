"""verdicts.py: what a comparison's data can tell, in words, and how a figure is quoted with
its precision (Python standard library only). One set of rules for every script that says
it: stats.py (summary.csv, summary_by_variant.csv, summary_accuracy.csv), stats_compare.py
(make compare), claims.py (the claims table, the speedups table, the digest) and
charts/render.py (the headline chart's labels).

Three outcomes for a comparison with enough repetitions (three_way):
  faster / slower   p < ALPHA (the two-sided Mann-Whitney U test of the two sets, or for
                    repetitions paired in the order they ran, the Wilcoxon signed-rank test
                    of the pairs' log ratios) and the
                    95% interval lies wholly above / below 1 (for a difference: 0);
  equivalent        the 95% interval lies within the equivalence margin, 1 - m to 1 + m
                    (both ends included; m = BENCH_EQUIVALENCE_MARGIN, a fraction, default
                    0.05: 0.95-1.05). This is two one-sided tests (TOST), each at 2.5%, read
                    off the 95% percentile-bootstrap interval: its lower end at or above
                    1 - m rejects "the speedup is below 1 - m", its upper end at or below
                    1 + m rejects "it is above 1 + m". The textbook TOST at 5% would use the
                    90% interval; this rule is stricter, so that the interval printed beside
                    the verdict is the one that decided it;
  inconclusive      neither: the data cannot tell. Never "no difference" or "no effect".
faster/slower come first: a significant difference inside the margin is still a difference
(its interval shows how small). An interval alone (a geometric mean over points, a ratio of
two machines' speedups: no test) is faster/slower when it excludes 1. Below
MIN_REPETITIONS (4) on either side the verdict is n/a (too_few); paired, below MIN_PAIRS (6)
pairs (too_few_pairs: the signed-rank test's smallest p with n pairs is 2 / 2^n). A side with a censored
run (a miss of a run to a target) has no bootstrap interval: the U test alone, which ranks
the misses last, gives faster/slower at p < ALPHA, else inconclusive (speedup_verdict).

Precision: an interval's half-width relative to its figure, (high - low) / 2 / figure
(relative_half_width), quoted beside it as "1.96x [1.56-2.25], ±18%" (figure_text).

The core against PyTorch (agreement, agreement_note): the same toggle's speedup in the core
and in PyTorch, each with its interval and verdict, agree (overlapping intervals, the same
decided verdict), differ (disjoint intervals) or are inconclusive (a side too wide or too
few to tell); the rule is agreement's docstring and docs/statistics.md.
"""
import math
import os

ALPHA = 0.05
MIN_REPETITIONS = 4  # a side; below it the verdict is n/a
MIN_PAIRS = 6  # paired repetitions; below it the verdict is n/a (2 / 2^5 = 0.0625 >= ALPHA)
DEFAULT_EQUIVALENCE_MARGIN = 0.05  # equivalent: the interval within 1 -/+ this


class MarginError(Exception):
    """BENCH_EQUIVALENCE_MARGIN is not a usable margin (the message says why)."""


def equivalence_margin():
    """The equivalence margin m, a fraction (0 < m < 1): BENCH_EQUIVALENCE_MARGIN, else
    DEFAULT_EQUIVALENCE_MARGIN."""
    v = os.environ.get("BENCH_EQUIVALENCE_MARGIN", "").strip()
    if v == "":
        return DEFAULT_EQUIVALENCE_MARGIN
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not 0 < x < 1:
        raise MarginError("BENCH_EQUIVALENCE_MARGIN='%s' is not a fraction between 0 and 1 (e.g. 0.05: "
                          "equivalent within 0.95-1.05)" % v)
    return x


def smallest_p(n1, n2):
    """The smallest two-sided exact Mann-Whitney p-value n1 and n2 values can give (every
    value of one side above every value of the other): 2 / C(n1 + n2, n1)."""
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def too_few(n1, n2):
    """The n/a verdict when n1 and n2 repetitions are too few for one, else None. One
    repetition has no spread at all; with 3 a side the smallest p is 0.1, so no difference
    could be shown and any verdict would be a foregone conclusion, not a finding (n = 4 a
    side is the first with p < 0.05 attainable). The rule is MIN_REPETITIONS on each side:
    with 3 against 5 the smallest p (2 / C(8, 3) = 0.036) is below ALPHA, but one side would
    still rest on 3 samples."""
    if min(n1, n2) < 2:
        return "n/a (1 repetition)"
    if min(n1, n2) < MIN_REPETITIONS or smallest_p(n1, n2) >= ALPHA:
        return "n/a (too few repetitions)"
    return None


def too_few_pairs(n):
    """The n/a verdict for n pairs (the signed-rank test cannot reach ALPHA below
    MIN_PAIRS: its smallest two-sided p is 2 / 2^n), else None."""
    if n < 2:
        return "n/a (1 repetition)"
    if n < MIN_PAIRS:
        return "n/a (too few repetitions)"
    return None


def three_way(lo, hi, center, margin, p=None, words=("faster", "slower")):
    """The verdict of the 95% interval [lo, hi] of an effect whose "no effect" is `center`
    (1 for a speedup, 0 for a difference): words[0] / words[1] when it lies wholly above /
    below center and, where a test gave a p-value, p < ALPHA (p None: the interval alone);
    else "equivalent" when it lies within center -/+ margin (in the effect's units, both
    ends included); else "inconclusive". "n/a (no interval)" without one."""
    if lo is None or hi is None:
        return "n/a (no interval)"
    if (p is None or p < ALPHA) and (lo > center or hi < center):
        return words[0] if lo > center else words[1]
    if center - margin <= lo and hi <= center + margin:
        return "equivalent"
    return "inconclusive"


def speedup_verdict(ratio, lo, hi, p, n1, n2, margin, paired=False):
    """The verdict of a speedup (baseline / tuned median time) with its interval and U-test
    p-value over n1 and n2 repetitions: n/a below MIN_REPETITIONS a side, else three_way.
    Paired (n1 = n2 pairs, the signed-rank test's p-value): n/a below MIN_PAIRS pairs.
    Without an interval (a side with a censored run) the U test alone: faster/slower when
    p < ALPHA, else inconclusive (equivalence needs an interval)."""
    na = too_few_pairs(min(n1, n2)) if paired else too_few(n1, n2)
    if na:
        return na
    if lo is None or hi is None:
        if p is not None and p < ALPHA and ratio != 1:
            return "faster" if ratio > 1 else "slower"
        return "inconclusive"
    return three_way(lo, hi, 1.0, margin, p)


# ---- the core against PyTorch (summary_pytorch.csv) ---------------------------------------

DECIDED = ("faster", "slower", "equivalent")


def agreement(core, torch):
    """Whether the core's speedup and PyTorch's of the same toggle at the same point agree.
    core, torch: (speedup, ci_low, ci_high, verdict). The rule, in order:
      inconclusive  a side cannot be read: no speedup or interval, or its verdict is not one
                    of faster / slower / equivalent / inconclusive (n/a: too few
                    repetitions; did not reach);
      differ        the two 95% intervals are disjoint (one ends below where the other
                    starts): the effects differ, whatever each verdict says;
      agree         the intervals overlap (touching ends count) and both verdicts are the
                    same decided word (both faster, both slower, both equivalent);
      inconclusive  otherwise: the intervals overlap but a side is inconclusive (too wide
                    to tell) or the two verdicts differ (faster against equivalent) without
                    the intervals showing it.
    Returns (word, why): why is a sentence for the report (agreement_note)."""
    (cs, clo, chi, cv), (ts, tlo, thi, tv) = core, torch
    readable = DECIDED + ("inconclusive",)
    for side, (s, lo, hi, v) in (("the core", core), ("PyTorch", torch)):
        if s is None or lo is None or hi is None or v not in readable:
            return "inconclusive", "%s has no usable interval (%s)" % (side, v or "no verdict")
    if chi < tlo or thi < clo:
        return "differ", ""
    if cv == tv and cv in DECIDED:
        return "agree", ""
    if "inconclusive" in (cv, tv):
        wide = [(side, relative_half_width(s, lo, hi)) for side, s, lo, hi, v in
                (("the core", cs, clo, chi, cv), ("PyTorch", ts, tlo, thi, tv)) if v == "inconclusive"]
        return "inconclusive", " and ".join("%s's interval is too wide (%s)" % (side, percent_text(w))
                                            for side, w in wide)
    return "inconclusive", "the intervals overlap, so %s against %s is not shown to be a difference" % (cv, tv)


def agreement_note(word, why, core, torch):
    """What the agreement means, in a sentence without commas (summary_pytorch.csv's note,
    the report)."""
    if word == "inconclusive":
        return "cannot tell: " + why
    cs, ts = core[0], torch[0]
    ratio = ts / cs
    if word == "agree":
        return "the same effect in PyTorch (its speedup %.2fx the core's): the figure holds for PyTorch practice" % ratio
    cv, tv = core[3], torch[3]
    if cv in ("faster", "slower") and tv == "equivalent":
        return ("PyTorch's overhead hides the effect: %s in the core but within the margin in PyTorch "
                "(%.2fx the core's speedup)" % (cv, ratio))
    if cv == "equivalent" and tv in ("faster", "slower"):
        return ("PyTorch is %s where the core is not: the core does not model what the toggle changes in "
                "PyTorch (%.2fx the core's speedup)" % (tv, ratio))
    if (cs - 1) * (ts - 1) < 0:
        return ("opposite directions (core %.2fx against PyTorch %.2fx): one side does something the other does "
                "not model" % (cs, ts))
    more = abs(math.log(ts)) > abs(math.log(cs))
    gains = "gains" if max(cs, ts) > 1 else "loses"
    if more:
        return "PyTorch %s more: its speedup is %.2fx the core's" % (gains, ratio)
    return "PyTorch %s less: its speedup is %.2fx the core's (its overhead dilutes the effect)" % (gains, ratio)


def relative_half_width(value, lo, hi):
    """The interval's half-width relative to its figure, (hi - lo) / 2 / |value| (0.18: the
    figure is known to ±18%), or None without an interval."""
    if value is None or lo is None or hi is None or value == 0:
        return None
    return (hi - lo) / 2.0 / abs(value)


def percent_text(fraction):
    """A relative half-width as it is quoted: "±18%" (10% and over), "±4.2%" (under)."""
    pct = 100.0 * fraction
    return "±%.1f%%" % pct if pct < 9.95 else "±%.0f%%" % pct


def figure_text(value, lo, hi):
    """A speedup as a reader may quote it: "1.96x [1.56-2.25], ±18%"; "1.96x" without an
    interval."""
    w = relative_half_width(value, lo, hi)
    if w is None:
        return "%.2fx" % value
    return "%.2fx [%.2f-%.2f], %s" % (value, lo, hi, percent_text(w))


def main(argv):
    """verdicts.py speedup RATIO CI_LOW CI_HIGH P N_BASE N_TUNED | figure VALUE CI_LOW CI_HIGH |
    agreement CORE LOW HIGH VERDICT PYTORCH LOW HIGH VERDICT:
    one verdict, quoted figure or agreement (with its note) on fixed numbers (- for a missing interval or p), with
    BENCH_EQUIVALENCE_MARGIN as the summaries read it; for tests and for checking a rule."""
    import sys
    value = lambda a: None if a == "-" else float(a)
    try:
        if len(argv) == 8 and argv[1] == "speedup":
            ratio, lo, hi, p = (value(a) for a in argv[2:6])
            print(speedup_verdict(ratio, lo, hi, p, int(argv[6]), int(argv[7]), equivalence_margin()))
        elif len(argv) == 5 and argv[1] == "figure":
            print(figure_text(*(value(a) for a in argv[2:5])))
        elif len(argv) == 10 and argv[1] == "agreement":
            core = tuple(value(a) for a in argv[2:5]) + (argv[5],)
            torch = tuple(value(a) for a in argv[6:9]) + (argv[9],)
            for side in (core, torch):
                if any(v is not None and not v > 0 for v in side[:3]):
                    raise ValueError("a speedup and its interval are positive numbers (- for none)")
            word, why = agreement(core, torch)
            print("%s: %s" % (word, agreement_note(word, why, core, torch)))
        else:
            sys.stderr.write("usage: verdicts.py speedup RATIO CI_LOW CI_HIGH P N_BASE N_TUNED | "
                             "figure VALUE CI_LOW CI_HIGH | agreement CORE LOW HIGH VERDICT "
                             "PYTORCH LOW HIGH VERDICT (- for a missing value)\n")
            return 2
    except (ValueError, MarginError) as e:
        sys.stderr.write("verdicts: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv))
