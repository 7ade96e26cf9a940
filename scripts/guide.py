#!/usr/bin/env python3
"""guide.py: a tuning-guide folder from one or more results folders (one per machine), for
`make guide` (scripts/guide.sh; Python standard library + gnuplot; docs/guide.md).

  guide.py OUT_DIR RESULTS_DIR [RESULTS_DIR...]

Writes OUT_DIR/guide.md and its charts (OUT_DIR/charts/*.svg; GUIDE_PNG=1 adds PNGs):
  - the machines: what differs between the runs (GPU, memory, clocks, power limit, driver,
    CUDA, cuDNN, cuBLAS, NCCL, host CPU, the suite's commit, plan, repetitions), from each
    run's context.txt and command.txt;
  - per practice: the published claim and its source (CLAIMS_CSV, default bench/claims.csv),
    one chart across machines (tuned variants in natural order, a colour per machine that
    is the same in every chart, 95% intervals, a 1x line, the baseline and the measured
    quantity named), a variant x machine table (the effect with its interval and verdict; a
    machine that did not measure a variant says so), and a recommendation per machine
    derived from the verdicts;
  - absolute throughput (images/s or items/s, where rows record them): a table and a chart
    per workload.
The figures are the runs' summaries (summary_by_variant.csv, summary.csv: stats.py's
intervals and verdicts); nothing is re-derived here. A folder that is not a results folder
(no summary_by_variant.csv and no context.txt), or a summary that is not one, is an error
(exit 1, naming it); a chart gnuplot cannot draw is an error too. Exit 2: bad arguments.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "charts"))
import claims as cl  # noqa: E402
import render  # noqa: E402  (scripts/charts/render.py: quoting, colours, gnuplot, number formats)
from natural_order import natural_key, natural_sorted  # noqa: E402
from stats_compare import read_context  # noqa: E402
from verdicts import figure_text, percent_text, relative_half_width  # noqa: E402

# What differs between machines: (context key, heading).
MACHINE_KEYS = [("gpu_name", "GPU"), ("gpu_memory_mib", "GPU memory (MiB)"),
                ("gpu_sm_clock_max_mhz", "SM clock max (MHz)"), ("gpu_sm_clock_mhz", "SM clock (MHz)"),
                ("gpu_app_sm_clock_mhz", "SM application clock (MHz)"), ("gpu_clocks_locked", "clocks locked"),
                ("gpu_power_limit_w", "power limit (W)"), ("gpu_count", "GPUs"),
                ("driver_version", "driver"), ("cuda_runtime", "CUDA"), ("cudnn_version", "cuDNN"),
                ("cublas_version", "cuBLAS"), ("nccl_version", "NCCL"), ("host", "host"),
                ("host_cpu", "host CPU"), ("host_cores", "host cores"), ("cpu_kernels", "CPU kernels"),
                ("cpu_threads", "CPU threads"), ("git", "suite commit"),
                ("command", "plan (command)"), ("repetitions", "repetitions"), ("run_date", "date")]
THROUGHPUT = (("images_per_second", "images/s"), ("items_per_second", "items/s"))


class GuideError(Exception):
    pass


def md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


# ---- a run ---------------------------------------------------------------------------------

class Run:
    def __init__(self, path):
        self.dir = path
        self.name = os.path.basename(os.path.normpath(path))
        if not os.path.isdir(path):
            raise GuideError(f"{path}: no such results folder")
        has_summary = os.path.exists(os.path.join(path, "summary_by_variant.csv"))
        if not has_summary and not os.path.exists(os.path.join(path, "context.txt")):
            raise GuideError(f"{path}: not a results folder (no summary_by_variant.csv, no context.txt)")
        try:
            self.by_variant = cl.summary_rows(path)
            self.points = cl.summary_rows(path, "summary.csv", ("practice", "baseline", "tuned", "speedup"),
                                          "speedup")
            self.statuses = cl.tidy_statuses(path)
        except cl.ClaimsError as e:
            raise GuideError(str(e))
        self.ctx = read_context(path)
        try:
            with open(os.path.join(path, "command.txt"), encoding="utf-8") as f:
                for line in f:
                    key, _, value = line.rstrip("\n").partition(": ")
                    if key == "command" and value:
                        self.ctx.setdefault("command", value)
        except OSError:
            pass
        gpu = self.ctx.get("gpu_name", "")
        self.machine = gpu if gpu not in ("", "none") else f"CPU {self.ctx.get('host', self.name)}"

    def row(self, practice, tuned):
        return cl.pick(self.by_variant, practice, tuned)

    def baseline(self, practice):
        names = [r["baseline"] for r in self.points if r["practice"] == practice and r.get("baseline")]
        return names[0] if names else None


def label_runs(runs):
    """A unique, short label per run: its machine, with the date (then the folder name)
    where two runs share one."""
    machines = [r.machine for r in runs]
    labels = [f"{r.machine} ({r.ctx.get('run_date', '')[:10] or r.name})" if machines.count(r.machine) > 1
              else r.machine for r in runs]
    labels = [f"{r.machine} ({r.name})" if labels.count(label) > 1 else label for r, label in zip(runs, labels)]
    for r, label in zip(runs, labels):
        r.label = label


# ---- charts ---------------------------------------------------------------------------------

def provenance(runs):
    """The subtitle every chart carries: each machine's date and library versions."""
    parts = []
    for r in runs:
        c = r.ctx
        libs = ", ".join(f"{k} {c[v]}" for k, v in (("driver", "driver_version"), ("CUDA", "cuda_runtime"),
                                                       ("cuDNN", "cudnn_version")) if c.get(v, "none") != "none")
        parts.append(f"{r.label}: {c.get('run_date', '')[:10] or 'undated'}" + (f", {libs}" if libs else ""))
    return "\n".join(parts)  # a line per machine


def grouped_bars(out_dir, name, title, subtitle, ylabel, groups, runs, values, one_line, interval_note):
    """A grouped bar chart: a group per category (`groups`, in order), a bar per run (its
    colour its index in `runs`, the same in every chart). values[(group, run index)] =
    (value, low, high) or absent (not measured: no bar). Drawn by gnuplot into out_dir."""
    ys = [v for t in values.values() for v in t if v is not None] + ([1.0] if one_line else [])
    has_err = any(t[1] is not None for t in values.values())
    # a log axis where the values span orders of magnitude (throughput of tiny and large models)
    logy = min(ys) > 0 and max(ys) / min(ys) > 30
    lo, hi = (min(ys) / 2, max(ys) * 2) if logy else (min(ys + [0.0]) * 1.1, max(ys) * 1.25 if max(ys) > 0 else 1.0)
    n = len(runs)
    width = 0.8 / n
    height = 560 + 14 * max(0, n - 4)
    widest = max(len(g) for g in groups)
    width_px = min(1600, max(900, 150 + len(groups) * max(60 * n, 8 * widest + 12)))
    with render.tempfile.TemporaryDirectory(prefix="guide-") as tmp:
        plots = []
        for j, run in enumerate(runs):
            path = os.path.join(tmp, f"s{j}.dat")
            with open(path, "w", encoding="utf-8") as f:
                for i, g in enumerate(groups):
                    v = values.get((g, j))
                    if v is None:
                        continue
                    y, low, high = v
                    pos = i + (j - (n - 1) / 2) * width
                    bottom = lo if logy else 0.0
                    f.write(f"{pos!r}\t{y!r}\t{pos - width * 0.45!r}\t{pos + width * 0.45!r}\t{min(bottom, y)!r}\t"
                            f"{max(bottom, y)!r}\t{render.nan(low)}\t{render.nan(high)}\n")
            color = render.COLORS[j % len(render.COLORS)]
            plots.append(f"{render.q(path)} using 1:2:3:4:5:6 with boxxyerror lc rgb {render.q(color)} "
                         f"title {render.q(run.label)}")
            if has_err:
                plots.append(f"{render.q(path)} using 1:2:7:8 with yerrorbars pt 0 lc rgb 'black' "
                             + ("title " + render.q(interval_note) if j == 0 else "notitle"))
        cmds = ["set datafile separator tab", "set grid ytics", "set key below noenhanced",
                "set title " + " . \"\\n\" . ".join(render.q(t) for t in [title] + subtitle.split("\n")),
                "set ylabel " + render.q(ylabel), "set style fill solid 0.85 border -1",
                f"set yrange [{lo!r}:{hi!r}]", "set format y " + render.q(render.tick_format(lo, hi, logy)),
                "set lmargin 12"] + (["set logscale y"] if logy else []) + [
                f"set xrange [-0.6:{len(groups) - 0.4}]",
                "set xtics (" + ", ".join(f"{render.q(g)} {i}" for i, g in enumerate(groups)) + ")"]
        if widest * 8 > (width_px - 150) / len(groups):  # labels wider than their slot
            cmds.append("set xtics rotate by 30 right")
            cmds.append(f"set lmargin {max(12, int(widest * 0.7))}")
        if one_line:  # in the legend, not over the bars
            plots.append("1 with lines dt 2 lw 1.5 lc rgb '#555555' title '1x = no effect'")
        try:
            render.run_gnuplot(render.render_script(cmds, plots, tmp, width_px, height), tmp, out_dir, name)
        except render.ChartError as e:
            raise GuideError(str(e))


# ---- the guide's sections -----------------------------------------------------------------

def machines_table(runs):
    lines = ["| | " + " | ".join(md(r.label) for r in runs) + " |", "|---|" + "---|" * len(runs)]
    for key, heading in MACHINE_KEYS:
        vals = [r.ctx.get(key, "") or "-" for r in runs]
        if all(v == "-" for v in vals):
            continue
        differs = len(set(vals)) > 1
        lines.append(f"| {'**' + heading + '**' if differs else heading} | "
                     + " | ".join(md(v) for v in vals) + " |")
    lines += ["", "Rows in bold differ between the machines. Folders: "
              + ", ".join(f"{md(r.label)} = `{md(r.name)}`" for r in runs) + "."]
    return lines


def verdict_word(row):
    return cl.row_verdict(row) if row else ""


def cell(run, practice, tuned):
    row = run.row(practice, tuned)
    if row is None:
        why = cl.why_not_measured(practice, run.statuses)
        return f"not measured here ({why})"
    word = verdict_word(row)
    return f"{cl.effect_text(row)} — {word}" if word else cl.effect_text(row)


def recommendation(run, practice, variants, slower_claimed=()):
    """One line: what to do on this machine, from the verdicts of its variants. A variant
    whose claim says it is slower (a trade: activation checkpointing buys memory with time)
    is not "left off" for being slower: the line says it costs what was claimed."""
    parts = []
    for v in variants:
        row = run.row(practice, v)
        if row is None:
            continue
        s = cl.speedup_of(row)
        lo, hi = cl.interval_of(row)
        word = verdict_word(row)
        if s is None:
            parts.append(f"{v} did not reach its target")
        elif word == "faster":
            parts.append(f"turn on {v} ({s:.2f}x [{lo:.2f}-{hi:.2f}])")
        elif word == "slower" and v in slower_claimed:
            parts.append(f"{v} costs time as its claim says ({s:.2f}x [{lo:.2f}-{hi:.2f}]): "
                         "worth it only for what it trades the time for")
        elif word == "slower":
            parts.append(f"leave {v} off: slower ({s:.2f}x [{lo:.2f}-{hi:.2f}])")
        elif word == "equivalent":
            parts.append(f"{v} makes no difference (equivalent within ±{cl.margin_of(row) * 100:.0f}%)")
        elif word == "inconclusive":
            w = relative_half_width(s, lo, hi)
            parts.append(f"{v} inconclusive ({percent_text(w) if w is not None else 'no interval'})")
        else:
            parts.append(f"{v}: not enough data ({word or 'no verdict'})")
    return "; ".join(parts) if parts else f"not measured here ({cl.why_not_measured(practice, run.statuses)})"


def practice_section(practice, runs, claims, charts_dir, subtitle):
    variants = natural_sorted({r["tuned"] for run in runs for r in run.by_variant if r["practice"] == practice})
    baselines = natural_sorted({b for b in (run.baseline(practice) for run in runs) if b})
    base = " / ".join(baselines) if baselines else "its baseline"
    lines = [f"### {practice}", ""]
    mine = [c for c in claims if c["practice"] == practice]
    for c in mine:
        what = "Reference figure" if c["kind"] == "reference" else "Claim"
        about = f" (about `{c['tuned']}`" + (f" at {c['params']}" if c["params"] else "") + ")" \
            if c["tuned"] not in ("", "*") else ""
        rng = ""
        if c["effect_low"] or c["effect_high"]:
            lo, hi = c["effect_low"], c["effect_high"]
            rng = (f" Claimed {c['measure']}: {lo}-{hi}x." if lo and hi and lo != hi
                   else f" Claimed {c['measure']}: {lo}x." if lo and hi
                   else f" Claimed {c['measure']}: up to {hi}x." if hi
                   else f" Claimed {c['measure']}: at least {lo}x.")
        lines.append(f"- {what}{about}: {md(c['claim'])}.{rng} Source: {md(c['source'])}"
                     + (f" (hardware: {md(c['hardware'])})" if c.get("hardware") else "") + ".")
    if not mine:
        lines.append("- No published claim in the claims file: measured for context.")
    base_text = f"`{base}`" if baselines else "the baseline"
    quantity = (f"speedup = median time of {base_text} / median time of the tuned variant "
                "(geometric mean over the practice's points; > 1: the tuned variant is faster)")
    lines += ["", f"Measured: {quantity}. Intervals: 95% (bootstrap, scripts/stats.py).", ""]
    values = {}
    for v in variants:
        for j, run in enumerate(runs):
            row = run.row(practice, v)
            s = cl.speedup_of(row) if row else None
            if s is not None:
                lo, hi = cl.interval_of(row)
                values[(v, j)] = (s, lo, hi)
    if values:
        name = f"guide_{practice}"
        grouped_bars(charts_dir, name, f"{practice}: speedup of each tuned variant over {base}", subtitle,
                     f"speedup over {base}", variants, runs, values, True,
                     "95% interval (bootstrap, scripts/stats.py)")
        lines += [f"![{practice}: speedup over {base} on each machine](charts/{name}.svg)", ""]
    lines += ["| tuned variant | " + " | ".join(md(r.label) for r in runs) + " |", "|---|" + "---|" * len(runs)]
    for v in variants:
        lines.append(f"| `{md(v)}` | " + " | ".join(md(cell(run, practice, v)) for run in runs) + " |")
    if not variants:  # no machine measured a speedup: each says why
        lines.append("| (every variant) | " + " | ".join(
            md(f"not measured here ({cl.why_not_measured(practice, run.statuses)})") for run in runs) + " |")
    lines += ["", "Recommendation:"]
    for run in runs:
        slower = {c["tuned"] for c in mine if c["direction"] == "slower" and c["kind"] == "claim"}
        lines.append(f"- on {md(run.label)}: {md(recommendation(run, practice, variants, slower))}")
    lines.append("")
    return lines


def throughput_rows(run):
    """{(practice, variant, params, unit): value} of a run's measured rows with a throughput."""
    out = {}
    for path in render_tidy(run.dir):
        try:
            header, rows = render.read_csv(path, ("practice", "status"))
        except render.ChartError as e:
            raise GuideError(f"{run.dir}: {e}")
        for r in rows:
            for col, unit in THROUGHPUT:  # the first the row records: images/s over items/s
                v = render.number(r.get(col)) if col in header else None
                if r["status"] in render.MEASURED and v is not None and v > 0:
                    out.setdefault((r["practice"], r.get("variant", ""), r.get("params", ""), unit), []).append(v)
                    break
    return {k: render.median(v) for k, v in out.items()}


def render_tidy(d):
    return [os.path.join(d, n) for n in sorted(os.listdir(d))
            if n.endswith(".csv") and not n.startswith("summary") and n.count(".") == 1]


def throughput_section(runs, charts_dir, subtitle):
    per_run = [throughput_rows(r) for r in runs]
    keys = {k for t in per_run for k in t}
    practices = natural_sorted({k[0] for k in keys})
    lines = ["## Absolute throughput", "",
             "Per workload, the median throughput each machine recorded (images/s or items/s, wall "
             "clock; the medians of the tidy rows). A dash: not measured on that machine.", ""]
    if not practices:
        return lines + ["No row of these runs records a throughput.", ""]
    for p in practices:
        mine = sorted((k for k in keys if k[0] == p), key=lambda k: (natural_key(k[1]), natural_key(k[2]), k[3]))
        unit = mine[0][3]
        lines += [f"### {p} ({unit})", "",
                  "| variant | point | " + " | ".join(md(r.label) for r in runs) + " |",
                  "|---|---|" + "---|" * len(runs)]
        values, groups = {}, []
        for k in mine:
            lines.append(f"| `{md(k[1])}` | {md(k[2]) or '-'} | "
                         + " | ".join(render.value_text(t[k]) if k in t else "-" for t in per_run) + " |")
            if k[3] == unit:
                g = f"{k[1]} {k[2]}".strip()
                groups.append(g)
                for j, t in enumerate(per_run):
                    if k in t:
                        values[(g, j)] = (t[k], None, None)
        name = f"guide_throughput_{p}"
        grouped_bars(charts_dir, name, f"{p}: throughput per machine (median of the recorded rows; higher is better)",
                     subtitle, unit, groups, runs, values, False, "")
        lines += ["", f"![{p}: {unit} per machine](charts/{name}.svg)", ""]
    return lines


def write_guide(out_dir, dirs, claims_path):
    runs = [Run(d) for d in dirs]
    label_runs(runs)
    try:
        claims = cl.read_claims(claims_path) if claims_path and os.path.exists(claims_path) else []
    except cl.ClaimsError as e:
        raise GuideError(f"claims: {e}")
    charts_dir = os.path.join(out_dir, "charts")
    os.makedirs(charts_dir, exist_ok=True)
    subtitle = provenance(runs)
    practices = natural_sorted({r["practice"] for run in runs for r in run.by_variant}
                               | {c["practice"] for c in claims if any(c["practice"] in run.statuses for run in runs)})
    lines = ["# Tuning guide: " + ", ".join(r.label for r in runs), "",
             f"Made by `make guide` from {len(runs)} run(s). Every figure is measured and quoted with its 95% "
             "interval; verdicts: faster / slower (the interval excludes 1x), equivalent (within the "
             "equivalence margin), inconclusive (neither), n/a (too few repetitions). docs/guide.md, "
             "docs/statistics.md.", "", "## Machines", ""]
    lines += machines_table(runs)
    lines += ["", "## Practices", ""]
    for p in practices:
        lines += practice_section(p, runs, claims, charts_dir, subtitle)
    lines += throughput_section(runs, charts_dir, subtitle)
    with open(os.path.join(out_dir, "guide.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return len(practices)


def main(argv):
    if len(argv) < 3:
        print("usage: guide.py OUT_DIR RESULTS_DIR [RESULTS_DIR...]", file=sys.stderr)
        return 2
    out_dir, dirs = argv[1], argv[2:]
    os.environ["CHART_FORMATS"] = "svg png" if os.environ.get("GUIDE_PNG", "") not in ("", "0") else "svg"
    try:
        n = write_guide(out_dir, dirs, os.environ.get("CLAIMS_CSV", os.path.join(HERE, "..", "bench", "claims.csv")))
    except GuideError as e:
        print(f"guide: {e}", file=sys.stderr)
        return 1
    print(f"guide: {n} practices, {len(dirs)} machine(s) -> {out_dir}/guide.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
