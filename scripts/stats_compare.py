#!/usr/bin/env python3
"""stats_compare.py: the statistics of several results folders, for `stats.py compare` and
`stats.py index` (run them through stats.py; Python standard library only): a comparison
of machines (compare.md, speedups.csv, times.csv, the charts' data) and the index of a
results root (README.md). The statistics themselves (medians, bootstrap intervals, the U
test) are stats.py's, imported from it; the verdicts and quoted figures verdicts.py's.
"""
import datetime
import math
import os

from stats import (StatsError, bench_id, bootstrap_ratios, clean, compare_pair, fmt, geomean,
                   geomean_replicates, interval, load_benches, mann_whitney_u, noise_cv, num,
                   read_csv, tidy_inputs, variant_verdict, warn)
from verdicts import equivalence_margin, figure_text, percent_text, relative_half_width, three_way


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


def ci_text(lo, hi, value=None):
    """"0.93-1.23", or with the figure it bounds "0.93-1.23, ±13%" (its precision)."""
    if lo is None:
        return "n/a"
    w = relative_half_width(value, lo, hi)
    return "%.2f-%.2f" % (lo, hi) + ("" if w is None else ", " + percent_text(w))


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
            "and whether they differ: *yes* when the interval excludes 1, *equivalent* when it lies "
            + "within %.2f-%.2f (BENCH_EQUIVALENCE_MARGIN), else *inconclusive*." % (
                1 - equivalence_margin(), 1 + equivalence_margin()), ""]
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
                        md(v), r.label, len(own), speedup_text(g), ci_text(lo, hi, g), verdict,
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
                    sig = "n/a" if vlo is None or na or first[2] else three_way(
                        vlo, vhi, 1.0, equivalence_margin(), None, ("yes", "yes"))
                mdl.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                    md(v), r.label, len(common), speedup_text(None if missed else g), ci_text(lo, hi, g), verdict,
                    "" if vs is None else "%.2fx" % vs, "" if vs is None else ci_text(vlo, vhi, vs), sig,
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
            cells.append("%.3f | %s | %s" % (rel, ci_text(lo, hi, rel), "n/a" if p is None else "%.3g" % p))
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
    with open(os.path.join(out_dir, "compare.md"), "w", encoding="utf-8") as f:
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
