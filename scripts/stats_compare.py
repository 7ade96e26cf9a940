#!/usr/bin/env python3
"""stats_compare.py: the statistics of several results folders, for `stats.py compare` and
`stats.py index` (run them through stats.py; Python standard library only): a comparison
of machines (compare.md, speedups.csv, speedup_points.csv, times.csv, the charts' data)
and the index of a results root (README.md). The statistics themselves (medians,
bootstrap intervals, the U test) are stats.py's, imported from it; the verdicts and quoted
figures verdicts.py's.

A comparison is relative to one reference machine (--ref: a folder's name or its 1-based
position; default the first). Each machine's speedups are computed as its own summary
computes them (stats.summarize: the same groups, the same paired or unpaired statistics),
so a machine's figures here are those of its summary.csv and summary_by_variant.csv. Every
point any machine measured is listed; a machine that did not measure it says why in its
cell ("skipped: <reason>", "error: <reason>", "not measured"). Whether a machine differs
from the reference is a test per row, corrected for multiple comparisons by Holm's
step-down method over every comparison of the same table (the family); both the raw and the
adjusted p-value are written. Runs made by different code (the suite's commit in
command.txt) or by a different plan (command, repetitions and precision target, plan file,
arguments, budget) are named in a warning at the top of compare.md and on stderr.
"""
import datetime
import math
import os
import subprocess

from natural_order import natural_key, natural_sorted
from stats import (StatsError, bench_id, bootstrap_ratios, clean, compare_pair, fmt, geomean,
                   geomean_replicates, group_benches, interval, is_empty_csv, load_benches, mann_whitney_u, noise_cv,
                   num, read_csv, tidy_inputs, variant_verdict, warn)
from verdicts import ALPHA, equivalence_margin, figure_text, percent_text, relative_half_width, three_way


# ---- several results folders: compare ------------------------------------------------------

MACHINE_KEYS = [("gpu_name", "GPU"), ("driver_version", "driver"), ("cuda_runtime", "CUDA runtime"),
                ("cuda_driver_api", "CUDA driver API"), ("cudnn_version", "cuDNN"),
                ("cublas_version", "cuBLAS"), ("nccl_version", "NCCL"), ("host", "host"),
                ("host_cpu", "CPU"), ("cpu_kernels", "CPU kernels"), ("git", "code (git)"),
                ("repetitions", "repetitions"), ("run_date", "date")]
# what tells machines apart in their labels (legends, tables): those of these that differ
LABEL_KEYS = [("driver_version", "driver"), ("cuda_runtime", "CUDA"), ("cudnn_version", "cuDNN"),
              ("cublas_version", "cuBLAS"), ("nccl_version", "NCCL"), ("host_cpu", "CPU"),
              ("cpu_kernels", "CPU kernels"), ("host", "host"), ("run_date", "run")]
# how a run was made (command.txt): a difference is a warning. Absent: the older folders
# did not record it ("not recorded") or the run had none ("none").
PLAN_KEYS = [("command", "command", "not recorded"),
             ("repetitions", "repetitions and precision target", "not recorded"),
             ("plan", "plan file (BENCH_PLAN)", "none"), ("args", "BENCH_ARGS", "none"),
             ("budget", "budget (BENCH_BUDGET)", "none")]


def read_context(d):
    ctx = {}
    try:
        with open(os.path.join(d, "context.txt")) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    ctx.setdefault(k, v)
    except (OSError, UnicodeDecodeError):
        pass  # no context (a cut run) or not text: the CSVs' ctx_ columns stand in
    # the code and the repetitions, from command.txt ("git: 5e27181", "repetitions: 5 ...")
    for key, value in read_command(d).items():
        if key in ("git", "repetitions") and value:
            ctx.setdefault(key, value.split(" ")[0])
    return ctx


def read_command(d):
    """command.txt's "key: value" lines (the first of each key), {} without one."""
    out = {}
    try:
        with open(os.path.join(d, "command.txt")) as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition(": ")
                if sep and key not in out:
                    out[key] = value
    except (OSError, UnicodeDecodeError):
        pass
    return out


def read_statuses(path):
    """{(practice, variant, params): (status, reason)} of every row of a tidy CSV, measured
    or not (what a machine says for a point it did not measure)."""
    _, rows = read_csv(path, ["practice", "status"])
    return {(r["practice"], r.get("variant", ""), r.get("params", "")): (r["status"], r.get("reason", ""))
            for r in rows}


class Run:
    def __init__(self, d, label):
        self.dir = d
        self.label = label
        self.name = os.path.basename(os.path.normpath(d))
        self.ctx = read_context(d)
        self.cmd = read_command(d)
        self.benches = []
        self.status = {}
        for path in tidy_inputs(d):
            # accuracy-parity rows are compared on accuracy, not time (summary_accuracy.csv)
            self.benches.extend(b for b in load_benches(path, references=True) if not b.parity)
            if not is_empty_csv(path):  # an empty one: load_benches warned
                self.status.update(read_statuses(path))
        if not self.ctx and self.benches:
            self.ctx = {k[4:]: v for k, v in self.benches[0].row.items() if k.startswith("ctx_")}
        self.desc = ""

    def points(self):
        """{(practice, tuned, params): stats} as this run's own summary has them: the
        groups and statistics of stats.summarize (paired where the order is known)."""
        out = {}
        for k, g in group_benches(self.benches).items():
            base = g["baseline"]
            if base is None:
                continue
            for t in g["tuned"]:
                s = compare_pair(base, t, paired=True)
                s["base"], s["tuned"] = base, t
                out[(k[1], t.row.get("variant", ""), k[2])] = s
        return out

    def why_not(self, practice, variants, params):
        """What this machine says for a point it has no figure for: the first of the rows
        (tuned, then baseline) that it has and did not measure, else "not measured"."""
        for v in variants:
            st = self.status.get((practice, v, params))
            if st is None or st[0] in ("ok", "partial"):
                continue
            word = "skipped" if st[0] == "skipped" else "error"
            return "%s: %s" % (word, st[1]) if st[1] else word
        return "not measured"


def holm(pvalues):
    """Holm's step-down adjustment of a family of p-values (None: no test, left out of the
    family): the k-th smallest of m is multiplied by m - k + 1, capped at 1, and made
    non-decreasing in that order."""
    order = sorted((i for i, p in enumerate(pvalues) if p is not None), key=lambda i: pvalues[i])
    out, running, m = [None] * len(pvalues), 0.0, len(order)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def bootstrap_p(replicates, null=1.0):
    """The two-sided percentile-bootstrap p-value of "the ratio is `null`": twice the smaller
    share of replicates on either side of it (counting the observed), at most 1. Below 0.05
    exactly when the 95% percentile interval excludes `null`."""
    if not replicates:
        return None
    n = len(replicates)
    below = sum(1 for x in replicates if x <= null)
    above = sum(1 for x in replicates if x >= null)
    return min(1.0, 2.0 * (min(below, above) + 1) / (n + 1))


def differs_text(lo, hi, p_adj, na=False):
    """yes (the interval excludes 1 and the Holm-adjusted p < ALPHA), equivalent (the
    interval within the margin), inconclusive, or n/a."""
    if na or lo is None:
        return "n/a"
    return three_way(lo, hi, 1.0, equivalence_margin(), 1.0 if p_adj is None else p_adj, ("yes", "yes"))


def git_distance(a, b):
    """How many commits apart two of the suite's commits are (git rev-list --count a...b
    in this checkout), or None when git cannot tell."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        r = subprocess.run(["git", "-C", root, "rev-list", "--count", "%s...%s" % (a, b)],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    out = r.stdout.strip()
    return int(out) if r.returncode == 0 and out.isdigit() else None


def plan_of(run):
    plan = {k: run.cmd.get(k, absent) for k, _, absent in PLAN_KEYS}
    for k, v in run.cmd.items():
        if k.startswith("BENCH_ARGS_"):
            plan[k] = v
    return plan


def run_warnings(runs, ref):
    """The sentences of the warning at the top of compare.md: code and plan differences."""
    out = []
    commit = {r.label: r.cmd.get("git", "not recorded") for r in runs}
    for r in runs:
        if r is ref or commit[r.label] == commit[ref.label]:
            continue
        a, b = commit[ref.label], commit[r.label]
        ca, cb = a.replace("-dirty", ""), b.replace("-dirty", "")
        if "not recorded" in (a, b) or "unknown" in (a, b):
            how = "the suite's commit is not recorded for both"
        elif ca == cb:
            how = "the same commit, one with uncommitted changes"
        else:
            n = git_distance(ca, cb)
            how = "%d commits apart" % n if n is not None else "different commits"
        out.append("**Code differs**: %s ran %s, %s ran %s (%s): a difference may be the suite's, not the "
                   "machine's." % (ref.label, md(a), r.label, md(b), how))
    plans = {r.label: plan_of(r) for r in runs}
    names = {k: name for k, name, _ in PLAN_KEYS}
    keys = natural_sorted({k for p in plans.values() for k in p})
    for k in keys:
        vals = [plans[r.label].get(k, "none") for r in runs]
        if len(set(vals)) > 1:
            out.append("**Plan differs** (%s): %s: compare like with like (a quick pass against a full run "
                       "measures other points, with other repetitions and precision)." % (
                           names.get(k, k), "; ".join("%s %s" % (r.label, md(v)) for r, v in zip(runs, vals))))
    return out


def machine_descriptions(runs):
    """Each machine in words, by what tells it apart: its GPU (or "no GPU (<CPU>)"), then
    each of LABEL_KEYS whose value differs between the machines (the folder's name when
    nothing does)."""
    differing = [(k, name) for k, name in LABEL_KEYS if len({r.ctx.get(k, "unknown") for r in runs}) > 1]
    for r in runs:
        gpu = r.ctx.get("gpu_name", "unknown")
        cpu = r.ctx.get("host_cpu", "unknown CPU")
        parts = ["no GPU (%s)" % short_cpu(cpu) if gpu in ("none", "") else gpu]
        for k, name in differing:
            if k == "host_cpu" and gpu in ("none", ""):
                continue
            v = r.ctx.get(k, "unknown")
            parts.append("%s %s" % (name, v[:16].replace("T", " ") if k == "run_date" else v))
        if len({r2.ctx.get("gpu_name") for r2 in runs}) == 1 and not differing:
            parts.append(r.name)
        r.desc = ", ".join(parts)


def provenance(runs, ref):
    """Each machine's folder and the date of its run, two machines a line."""
    each = ["%s%s: %s (run %s)" % (r.label, " (reference)" if r is ref else "", r.name,
                                  r.ctx.get("run_date", "unknown")[:16].replace("T", " ")) for r in runs]
    return "\n".join("; ".join(each[i:i + 2]) for i in range(0, len(each), 2))


def short_cpu(name):
    """A CPU's name without its trademark marks and filler words: "Intel Xeon"."""
    words = name.replace("(R)", "").replace("(TM)", "").replace("(tm)", "").split()
    return " ".join(w for w in words if w not in ("CPU", "Processor")) or name


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


def points_na(pts):
    """The n/a verdict of the first point whose repetitions are too few, or None."""
    return next((s["verdict"] for s in pts if s["verdict"].startswith("n/a")), None)


def speedup_text(g):
    return "did not reach" if g is None else "%.2fx" % g


def human_time(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return "%.4g %s" % (seconds / scale, unit)
    return "%.4g ns" % (seconds / 1e-9)


def md(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def ci_text(lo, hi, value=None):
    """"0.93-1.23", or with the figure it bounds "0.93-1.23, ±13%" (its precision)."""
    if lo is None:
        return "n/a"
    w = relative_half_width(value, lo, hi)
    return "%.2f-%.2f" % (lo, hi) + ("" if w is None else ", " + percent_text(w))


def p_text(p):
    return "" if p is None else "%.3g" % p


def flags_text(noisy, contended):
    f = []
    if noisy:
        f.append("noisy")
    if contended:
        f.append("contended: " + contended)
    return "; ".join(f)


def pick_reference(runs, ref):
    """The reference run: `ref` is a folder (as given, or its name) or a 1-based position."""
    if ref in (None, ""):
        return runs[0]
    for r in runs:
        if ref in (r.dir, r.name) or os.path.normpath(ref) == os.path.normpath(r.dir):
            return r
    if ref.isdigit() and 1 <= int(ref) <= len(runs):
        return runs[int(ref) - 1]
    raise StatsError("usage: REF=%s is neither one of the folders compared (%s) nor a position 1-%d" % (
        ref, ", ".join(r.name for r in runs), len(runs)))


def vs_reference(reps, ref_reps):
    """The ratio replicates of a machine's figure over the reference's, or None."""
    if reps is None or ref_reps is None:
        return None
    return [a / b for a, b in zip(reps, ref_reps)]


def variant_rows(runs, ref, points):
    """One row per practice, tuned variant and machine: the geometric mean over the
    machine's own points (its summary_by_variant figure), and its ratio to the reference's
    over the points both measured."""
    rows = []
    keys = {(k[0], k[1]) for p in points.values() for k in p}
    for practice, tuned in sorted(keys, key=lambda k: (natural_key(k[0]), natural_key(k[1]))):
        own = {r.label: {k[2]: s for k, s in points[r.label].items() if k[:2] == (practice, tuned)} for r in runs}
        every = natural_sorted({p for o in own.values() for p in o})
        for r in runs:
            mine = own[r.label]
            row = dict(practice=practice, tuned=tuned, run=r, points=len(mine), g=None, lo=None, hi=None,
                       verdict="", noisy=False, contended="", vs=None, vlo=None, vhi=None, p=None, na=False,
                       common=0, missing="")
            if not mine:
                why = {r.why_not(practice, [tuned, baseline_of(points, (practice, tuned, p))], p) for p in every}
                row["missing"] = why.pop() if len(why) == 1 else (
                    "none of its %d points measured (the point table says why)" % len(every))
                rows.append(row)
                continue
            pts = [mine[p] for p in natural_sorted(mine)]
            row["g"], _, row["lo"], row["hi"], row["verdict"] = points_speedup(pts)
            row["noisy"] = any(s["noisy"] for s in pts)
            row["contended"] = "; ".join(s["contended"] for s in pts if s["contended"])
            if r is not ref:
                common = [p for p in natural_sorted(mine) if p in own[ref.label]]
                row["common"] = len(common)
                if common:
                    g, reps, _, _, _ = points_speedup([mine[p] for p in common])
                    rg, rreps, _, _, _ = points_speedup([own[ref.label][p] for p in common])
                    both = [mine[p] for p in common] + [own[ref.label][p] for p in common]
                    row["na"] = bool(points_na(both))
                    if g is not None and rg is not None and all(s["ratio"] is not None for s in both):
                        row["vs"] = g / rg
                        vreps = vs_reference(reps, rreps)
                        row["vlo"], row["vhi"] = interval(vreps)
                        row["p"] = None if row["na"] else bootstrap_p(vreps)
            rows.append(row)
    return rows


def point_rows(runs, ref, points):
    """One row per practice, tuned variant, parameter point and machine: the point's figures
    as the machine's summary.csv has them, or why it has none."""
    rows = []
    keys = {k for p in points.values() for k in p}
    for k in sorted(keys, key=lambda k: tuple(natural_key(x) for x in k)):
        rs = points[ref.label].get(k)
        for r in runs:
            s = points[r.label].get(k)
            row = dict(key=k, run=r, s=s, vs=None, vlo=None, vhi=None, p=None, na=False,
                       missing="" if s else r.why_not(k[0], [k[1], baseline_of(points, k)], k[2]))
            if s and r is not ref and rs and s["ratio"] is not None and rs["ratio"] is not None:
                row["vs"] = s["ratio"] / rs["ratio"]
                row["na"] = bool(points_na([s, rs]))
                vreps = vs_reference(s["reps"], rs["reps"])
                row["vlo"], row["vhi"] = interval(vreps)
                row["p"] = None if row["na"] else bootstrap_p(vreps)
            rows.append(row)
    return rows


def baseline_of(points, k):
    """The baseline variant's name of point k on any machine that measured it ("" if none)."""
    for p in points.values():
        if k in p:
            return p[k]["base"].row.get("variant", "")
    return ""


def time_rows(runs, ref):
    """One row per benchmark (practice, variant, params) any machine measured and machine:
    its median time, noise, and its ratio to the reference's with the U test's p-value."""
    index = {r.label: {(b.row["practice"], b.row.get("variant", ""), b.row.get("params", "")): b
                       for b in r.benches} for r in runs}
    keys = {k for i in index.values() for k in i}
    thr = noise_cv()
    rows = []
    for k in sorted(keys, key=lambda k: tuple(natural_key(x) for x in k)):
        a = index[ref.label].get(k)
        for r in runs:
            b = index[r.label].get(k)
            row = dict(key=k, run=r, b=b, rel=None, lo=None, hi=None, p=None, na=False,
                       noisy=b is not None and b.cv is not None and b.cv > thr,
                       missing="" if b else r.why_not(k[0], [k[1]], k[2]))
            if b is not None and not math.isfinite(b.median):
                row["missing"] = "did not reach (median)"
            elif b is not None and r is not ref and a is not None and math.isfinite(a.median):
                row["rel"] = b.median / a.median
                row["lo"], row["hi"] = interval(bootstrap_ratios(b.times, a.times, "times|" + bench_id(b)))
                _, row["p"] = mann_whitney_u(b.times, a.times)
            rows.append(row)
    return rows


def adjust(rows):
    """Holm over the rows' p-values (the table is the family), then each row's verdict."""
    for row, pa in zip(rows, holm([row["p"] for row in rows])):
        row["p_holm"] = pa
        row["differs"] = "" if row.get("vs", row.get("rel")) is None else differs_text(
            row["vlo"] if "vlo" in row else row["lo"], row["vhi"] if "vhi" in row else row["hi"], pa, row["na"])
    return sum(1 for row in rows if row["p"] is not None)


def overall_time_ratio(runs, ref):
    """Per machine, the geometric mean of its median times over the reference's, over the
    benchmarks both measured (finite medians): (ratio, count) or None."""
    a = {(b.row["practice"], b.row.get("variant", ""), b.row.get("params", "")): b.median for b in ref.benches}
    out = {}
    for r in runs:
        if r is ref:
            continue
        ratios = [b.median / a[k] for b in r.benches
                  for k in [(b.row["practice"], b.row.get("variant", ""), b.row.get("params", ""))]
                  if k in a and math.isfinite(b.median) and math.isfinite(a[k]) and a[k] > 0 and b.median > 0]
        out[r.label] = (geomean(ratios), len(ratios)) if ratios else None
    return out


def parse_compare_args(args):
    ref = None
    if args[:1] == ["--ref"]:
        if len(args) < 2:
            raise StatsError("usage: stats.py compare [--ref FOLDER|N] OUT_DIR RESULTS_DIR...")
        ref, args = args[1], args[2:]
    if len(args) < 3:
        raise StatsError("usage: compare.sh RESULTS_DIR RESULTS_DIR... (at least two results folders)")
    return ref, args[0], args[1:]


def rule_text(n):
    """How a table's *differs* is decided, with its family's size n."""
    margin = equivalence_margin()
    return ("*differs*: *yes* when the 95%% interval of the ratio excludes 1 and its p-value, Holm-adjusted "
            "over the %d comparisons of this table (the family), is below %g; *equivalent* when the interval "
            "lies within %.2f-%.2f (BENCH_EQUIVALENCE_MARGIN); else *inconclusive*; n/a without enough "
            "repetitions. *p*: the raw p-value, *p (Holm)*: adjusted." % (n, ALPHA, 1 - margin, 1 + margin))


def vs_cells(row, ref, value, lo, hi):
    """The markdown cells of a ratio to the reference: ratio, interval, p, p (Holm), differs."""
    return ["" if value is None else "%.2fx" % value, "" if value is None else ci_text(lo, hi, value),
            p_text(row["p"]), p_text(row["p_holm"]), row["differs"] or ("reference" if row["run"] is ref else "n/a")]


def table_row(cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def header_lines(runs, ref, warnings):
    """compare.md up to its tables: the title, the warning, the machines and what differs."""
    R = ref.label
    mdl = ["# Comparison of %d results folders" % len(runs), ""]
    if warnings:
        mdl += ["> **Warning: these runs were not made alike.**", ">"] + ["> - " + w for w in warnings]
        ratios = [(lab, v) for lab, v in overall_time_ratio(runs, ref).items() if v]
        if ratios:
            mdl.append("> - Overall, %s." % "; ".join(
                "%s's times are %.2fx %s's (geometric mean over the %d benchmarks both measured)" % (
                    lab, v[0], R, v[1]) for lab, v in ratios))
        mdl.append("")
    mdl += ["Written by `make compare` (scripts/compare.sh) on %s. The reference is machine **%s** (REF): "
            "every ratio is relative to it." % (
                datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), R), "",
            "## Machines", "",
            "| | folder | label | " + " | ".join(name for _, name in MACHINE_KEYS) + " |",
            "|---|---|---|" + "---|" * len(MACHINE_KEYS)]
    for r in runs:
        mdl.append(table_row(["%s%s" % (r.label, " (reference)" if r is ref else ""), md(r.name), md(r.desc)]
                             + [md(r.ctx.get(k, "unknown")) for k, _ in MACHINE_KEYS]))
    mdl += ["", "### What differs", ""]
    differs = []
    for k, name in MACHINE_KEYS:
        vals = [r.ctx.get(k, "unknown") for r in runs]
        if k != "run_date" and len(set(vals)) > 1:
            differs.append("- **%s differs**: %s" % (
                name, ", ".join("%s %s" % (r.label, md(v)) for r, v in zip(runs, vals))))
    return mdl + (differs or ["- GPU, driver, CUDA, cuDNN, cuBLAS, NCCL, host, CPU, code and repetitions are "
                              "the same on every machine."])


def variant_table(rows, ref, family):
    """The by-variant table: markdown lines, speedups.csv lines, and the bars of the charts
    ({practice: {variant: {machine label: (speedup, low, high)}}})."""
    R = ref.label
    mdl = ["", "## Speedups of each tuned variant on each machine", "",
           "Geometric mean over the parameter points the machine measured, with its 95% bootstrap interval: "
           "the figure of that machine's own summary_by_variant.csv. *vs " + R + "*: this machine's speedup "
           "divided by " + R + "'s over the *common* points both measured, its 95% interval and "
           "percentile-bootstrap p-value. " + rule_text(family), ""]
    out = ["practice,tuned,machine,folder,machine_label,reference,gpu_name,driver_version,points,speedup,"
           "ci_low,ci_high,verdict,noisy,contended,status,common_points,vs_ref,vs_ref_ci_low,vs_ref_ci_high,"
           "p_value,p_holm,differs"]
    bars = {}
    practice = None
    for row in rows:
        r = row["run"]
        if row["practice"] != practice:
            mdl += ([""] if practice else []) + ["### %s" % md(row["practice"]), "",
                                                 "| tuned variant | machine | points | speedup | 95% CI | verdict | "
                                                 "flags | common points | vs " + R + " | 95% CI | p | p (Holm) | "
                                                 "differs |", "|---" * 13 + "|"]
            practice = row["practice"]
        reached = row["g"] is not None and row["verdict"] != "did not reach"
        if row["missing"]:
            mdl.append(table_row([md(row["tuned"]), r.label, 0, md(row["missing"])] + [""] * 9))
        else:
            mdl.append(table_row([md(row["tuned"]), r.label, row["points"], speedup_text(row["g"]),
                                  ci_text(row["lo"], row["hi"], row["g"]), row["verdict"],
                                  md(flags_text(row["noisy"], row["contended"])), "" if r is ref else row["common"]]
                                 + vs_cells(row, ref, row["vs"], row["vlo"], row["vhi"])))
            if reached:
                bars.setdefault(practice, {}).setdefault(row["tuned"], {})[r.label] = (row["g"], row["lo"], row["hi"])
        out.append(",".join([
            clean(practice), clean(row["tuned"]), r.label, clean(r.name), clean(r.desc), "1" if r is ref else "0",
            clean(r.ctx.get("gpu_name", "")), clean(r.ctx.get("driver_version", "")), str(row["points"]),
            "%.4f" % row["g"] if reached else "", fmt(row["lo"]), fmt(row["hi"]), clean(row["verdict"]),
            "1" if row["noisy"] else "0", clean(row["contended"]), clean(row["missing"] or "measured"),
            "" if r is ref else str(row["common"]), fmt(row["vs"]), fmt(row["vlo"]), fmt(row["vhi"]),
            fmt(row["p"], "%.4g"), fmt(row["p_holm"], "%.4g"), row["differs"]]))
    return mdl, out, bars


def point_table(rows, ref, family):
    """The by-point table: markdown lines and speedup_points.csv lines."""
    R = ref.label
    mdl = ["", "## Speedups at each parameter point", "",
           "Each machine's figure for the point as its own summary.csv has it (speedup, 95% interval, verdict, "
           "the baseline's and tuned variant's CV, noisy), or what the machine says instead (`skipped: <reason>`, "
           "`error`, `not measured`). *vs " + R + "*: the ratio of the speedups. " + rule_text(family)]
    out = ["practice,tuned,params,machine,folder,status,speedup,ci_low,ci_high,verdict,precision,"
           "baseline_cv_pct,tuned_cv_pct,noisy,contended,vs_ref,vs_ref_ci_low,vs_ref_ci_high,p_value,p_holm,differs"]
    practice = None
    for row in rows:
        k, r, s = row["key"], row["run"], row["s"]
        if k[0] != practice:
            practice = k[0]
            mdl += ["", "### %s" % md(practice), "",
                    "| tuned variant | params | machine | speedup | 95% CI | verdict | baseline CV | tuned CV | "
                    "flags | vs " + R + " | 95% CI | p | p (Holm) | differs |", "|---" * 14 + "|"]
        if s is None:
            mdl.append(table_row([md(k[1]), md(k[2]), r.label, md(row["missing"])] + [""] * 10))
            out.append(",".join([clean(k[0]), clean(k[1]), clean(k[2]), r.label, clean(r.name),
                                 clean(row["missing"])] + [""] * 15))
            continue
        bcv, tcv = s["base"].cv, s["tuned"].cv
        mdl.append(table_row([md(k[1]), md(k[2]), r.label, speedup_text(s["ratio"]),
                              ci_text(s["lo"], s["hi"], s["ratio"]), s["verdict"],
                              "" if bcv is None else "%.1f%%" % (100 * bcv),
                              "" if tcv is None else "%.1f%%" % (100 * tcv), md(flags_text(s["noisy"], s["contended"]))]
                             + vs_cells(row, ref, row["vs"], row["vlo"], row["vhi"])))
        out.append(",".join([
            clean(k[0]), clean(k[1]), clean(k[2]), r.label, clean(r.name), "measured", fmt(s["ratio"]), fmt(s["lo"]),
            fmt(s["hi"]), clean(s["verdict"]), fmt(relative_half_width(s["ratio"], s["lo"], s["hi"])),
            fmt(None if bcv is None else 100 * bcv, "%.2f"), fmt(None if tcv is None else 100 * tcv, "%.2f"),
            "1" if s["noisy"] else "0", clean(s["contended"]), fmt(row["vs"]), fmt(row["vlo"]), fmt(row["vhi"]),
            fmt(row["p"], "%.4g"), fmt(row["p_holm"], "%.4g"), row["differs"]]))
    return mdl, out


def time_table(rows, ref, family):
    """The absolute times: markdown lines and times.csv lines."""
    R = ref.label
    mdl = ["", "## Absolute times relative to %s" % R, "",
           "Every benchmark any machine measured (natural order): each machine's median time, the CV of its "
           "repetitions (noisy above STATS_NOISE_CV, default 2%), its median divided by " + R + "'s with a 95% "
           "bootstrap interval (below 1: faster than " + R + "), and the U-test p-value of the two sets of "
           "repetitions. " + rule_text(family), "",
           "| benchmark | params | machine | median | CV | noisy | / " + R + " | 95% CI | p | p (Holm) | differs |",
           "|---" * 11 + "|"]
    out = ["practice,variant,params,machine,folder,status,median_s,cv_pct,noisy,contended,relative_to_ref,"
           "ci_low,ci_high,p_value,p_holm,differs"]
    for row in rows:
        k, r, b = row["key"], row["run"], row["b"]
        name = "%s/%s" % (md(k[0]), md(k[1]))
        if b is None:
            mdl.append(table_row([name, md(k[2]), r.label, md(row["missing"])] + [""] * 7))
            out.append(",".join([clean(k[0]), clean(k[1]), clean(k[2]), r.label, clean(r.name),
                                 clean(row["missing"])] + [""] * 10))
            continue
        finite = math.isfinite(b.median)
        rel = 1.0 if r is ref and finite else row["rel"]
        mdl.append(table_row([name, md(k[2]), r.label, human_time(b.median) if finite else "did not reach (median)",
                              "" if b.cv is None else "%.1f%%" % (100 * b.cv), "noisy" if row["noisy"] else "",
                              "" if rel is None else "%.3f" % rel,
                              "" if row["rel"] is None else ci_text(row["lo"], row["hi"], row["rel"])]
                             + vs_cells(row, ref, None, None, None)[2:]))
        out.append(",".join([
            clean(k[0]), clean(k[1]), clean(k[2]), r.label, clean(r.name), "measured" if finite else "did not reach",
            "%.6g" % b.median if finite else "", fmt(None if b.cv is None else 100 * b.cv, "%.2f"),
            "1" if row["noisy"] else "0", clean("; ".join(b.contended)), fmt(rel), fmt(row["lo"]), fmt(row["hi"]),
            fmt(row["p"], "%.4g"), fmt(row["p_holm"], "%.4g"), row["differs"]]))
    return mdl, out


def load_runs(dirs, ref_arg):
    """The runs of the folders, lettered A, B, ... in order, and the reference among them."""
    for d in dirs:
        if not os.path.isdir(d):
            raise StatsError("no results folder %s" % d)
    runs = [Run(d, chr(ord("A") + i) if i < 26 else "M%d" % i) for i, d in enumerate(dirs)]
    for r in runs:
        if not r.benches:  # a run cut before it measured anything: compared as "not measured"
            warn("%s has no measured benchmarks (empty or missing CSVs: %s)" % (
                r.dir, ", ".join(os.path.basename(p) for p in tidy_inputs(r.dir)) or "none"))
        if not r.ctx and not r.benches:
            raise StatsError("%s is not a results folder (no context.txt and no tidy CSV with rows)" % r.dir)
    machine_descriptions(runs)
    return runs, pick_reference(runs, ref_arg)


def cmd_compare(args):
    ref_arg, out_dir, dirs = parse_compare_args(args)
    runs, ref = load_runs(dirs, ref_arg)
    warnings = run_warnings(runs, ref)
    for w in warnings:
        warn("compare: " + w.replace("**", ""))
    points = {r.label: r.points() for r in runs}
    vrows, prows, trows = variant_rows(runs, ref, points), point_rows(runs, ref, points), time_rows(runs, ref)
    vmd, speed_csv, bars = variant_table(vrows, ref, adjust(vrows))
    pmd, point_csv = point_table(prows, ref, adjust(prows))
    tmd, times_csv = time_table(trows, ref, adjust(trows))
    mdl = header_lines(runs, ref, warnings) + vmd + pmd + tmd + [
        "", "## Files", "",
        "- `speedups.csv`: the speedups by tuned variant (one row per practice, tuned variant and machine)",
        "- `speedup_points.csv`: the speedups at each parameter point (one row per point and machine)",
        "- `times.csv`: the absolute times, one row per benchmark and machine",
        "- `charts/compare_<practice>.png|svg`: one group per tuned variant, one bar per machine, "
        "95% intervals as error bars", ""]
    os.makedirs(out_dir, exist_ok=True)
    write_bar_data(os.path.join(out_dir, "charts"), bars, runs, ref)
    for name, lines in (("speedups.csv", speed_csv), ("speedup_points.csv", point_csv), ("times.csv", times_csv)):
        with open(os.path.join(out_dir, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "compare.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(mdl) + "\n")
    print("compare: %d machines (reference %s), %d practices -> %s" % (
        len(runs), ref.label, len({row["practice"] for row in vrows}), out_dir))


def write_bar_data(chart_dir, bars, runs, ref):
    """charts/compare_<practice>.dat for scripts/compare.gp: tab-separated, one line per
    tuned variant (natural order), then speedup, low, high for each machine (an unknown
    interval is the speedup itself: a bar without a whisker); .ymax: the top of the y axis,
    with headroom above the highest whisker; .title: the chart's title, its second line the
    provenance (each machine and its run's date)."""
    os.makedirs(chart_dir, exist_ok=True)
    for old in os.listdir(chart_dir):  # an earlier comparison in the same folder: none of its charts stays
        if old.startswith("compare_"):
            os.remove(os.path.join(chart_dir, old))
    for practice, variants in bars.items():
        name = "compare_" + "".join(c if c.isalnum() or c in "_-." else "_" for c in practice)
        heads = ["%s%s: %s" % (r.label, " (reference)" if r is ref else "", r.desc) for r in runs]
        heads = [h.replace("\t", " ").replace("\n", " ") for h in heads]
        lines = ["variant\t" + "\t".join("%s\t%s low\t%s high" % (h, r.label, r.label) for h, r in zip(heads, runs))]
        top = 1.0
        for v in natural_sorted(variants):
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
        with open(os.path.join(chart_dir, name + ".title"), "w") as f:
            f.write("%s: speedup of each tuned variant on each machine (geometric mean over its points)\n%s\n" % (
                practice, provenance(runs, ref)))


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
             "speedup over its parameter points ([95% interval], ± its half-width relative to the "
             "speedup, when the run had repetitions; * = noisy or contended, see the report).", "",
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
                heads.append("%s/%s %s%s" % (practice, r["tuned"], figure_text(g, lo, hi), mark))
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
    with open(os.path.join(root, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("index: %d runs, %d comparisons -> %s" % (len(runs), len(comparisons), os.path.join(root, "README.md")))
