#!/usr/bin/env python3
"""render.py: draws a results folder's charts with gnuplot, as SVG (and PNG, or PNG only,
with CHART_FORMATS="svg png" or "png"; Python standard library only; scripts/charts.sh is
the command to use).

  render.py RESULTS_DIR OUT_DIR DESCRIPTIONS_DIR CLAIMS_CSV
  render.py --points RESULTS_DIR DESCRIPTIONS_DIR   prints every described chart's points,
      one line each: chart, series, x, y, error-bar low, error-bar high, noisy (tab-separated;
      what would be drawn, for tests and for checking a new description)

Three kinds of chart:

* Every chart described in DESCRIPTIONS_DIR/<csvname>.charts, drawn from
  RESULTS_DIR/<csvname>.csv. A description file holds sections:

      # comment
      [amp_gemm_tflops]          # chart name -> OUT_DIR/amp_gemm_tflops.svg (and/or .png)
      practice = amp_gemm        # rows whose `practice` column is one of these (comma-separated)
      x = param_size             # a CSV column: axes are param_<axis>, counters by their name
      y = tflops                 # a CSV column; `time` = the time column, in ms
      series = variant           # column(s) whose values become the lines or bar groups
                                 # (default variant; comma-separated columns are joined)
      filter = param_preset=tiny # optional: only rows where column=value (comma-separated, all hold)
      kind = lines               # lines (numeric x) or bars (categorical x)
      logx = yes                 # optional (default no); logy likewise
      title = GEMM throughput by precision
      xlabel = matrix size (n = m = k)
      ylabel = TFLOP/s

  Optional keys this renderer adds:
      file = batch_size.curves   # read RESULTS_DIR/<file>.csv (or <file>.csv.gz: run-suite.sh
                                 # compresses the curves) instead of <csvname>.csv
                                 # (a CSV without a status column: every row is drawn)
      yscale = 1e-9              # multiply y (and its error bars) by this: a unit change
                                 # such as bytes/s -> GB/s, never a constant of the C code
      xformat = bytes            # x tick labels with binary prefixes (4KiB, 1MiB, ...)
      labels = yes               # print each bar's value above it (bars only)
      repeat = run               # a line per value of this column (a curve's repetitions),
                                 # in its series' colour, one legend entry per series
      target = target_accuracy   # a dashed horizontal line at this column's value (the
                                 # practice's measured rows of <csvname>.csv or of `file`),
                                 # where the run records one; none drawn where it does not

  Only measured rows are drawn: status ok, or partial (rows a program cut at its deadline
  kept), where the CSV has a status column. A chart whose rows are all missing (the
  practice was skipped) is not drawn, and says so; a CSV with no rows at all (0 bytes or a
  header only: a program cut before its first row) is a warning naming it, never a
  failure, so a cut run draws what exists; a CSV that is not a results CSV is an error. A description naming a column the CSV lacks draws no
  chart and says so (a results folder older than the description); with --points it is
  an error, so a test of a description catches a typo.

  A series of more than DENSE_POINTS points (a curve over training steps) is drawn as a
  line without point symbols, and a point equal to both its neighbours (a flat stretch of
  the loss scale or of a cumulative count) is left out: the line drawn is the same, and
  the SVG of a 3,000-step curve is tens of kilobytes rather than hundreds. Error bars of no
  height (repetitions that agree, as curves over the steps of deterministic runs do) are
  not drawn.

  Points and error bars, where there are repetitions (the point is always the
  repetitions' median, as the summary's speedups are ratios of medians; the bar a 95%
  interval, the legend says which), from the first of:
    1. a sibling RESULTS_DIR/<csvname>.reps.csv, one row per repetition (practice, variant,
       params and the y column): their median and its bootstrap interval (stats.py's
       resampling, seeded by the chart, series and x);
    2. several rows of the tidy CSV for the same practice, variant and params (repetition
       rows): the same;
    3. for y = time, the tidy CSV's time_median -+ 1.96 x 1.2533 x time_stddev / sqrt(n)
       (the median's interval for normal data), where repetitions > 1;
    4. a counter's <y>_stddev column, where repetitions > 1 (the tidy CSV has no median of a
       counter): the mean -+ 1.96 x stddev / sqrt(n).
  A noisy row gets a "!" beside its point or bar where the measure can be noisy (a time or
  a rate: NOISY_MEASURES; never a memory size or a count): its `noisy` column is set, or its
  time_cv (the repetitions' coefficient of variation) exceeds the threshold of
  scripts/stats.py (STATS_NOISE_CV, 2% by default). The note saying so sits under the plot.

  Every chart's title carries its provenance (machine, date, driver/CUDA/cuDNN/cuBLAS
  versions: RESULTS_DIR/context.txt). Series and bar categories come in natural order
  (scripts/natural_order.py; numeric categories by value), never the rows' order; a
  parameter series is labelled with its name ("batch 32"); a count x axis has whole ticks;
  no tick or label is in scientific notation.

* The headline chart, summary_speedup: per practice the variant its published claim names,
  else its best tuned variant (the largest geometric-mean speedup in
  summary_by_variant.csv), labelled "tuned vs baseline" (summary.csv's baseline), as a
  horizontal bar from 1x, sorted; practices that trade time for memory (a claim that says
  slower and rows recording a memory size) left out and named under it, and the PyTorch
  side's practices (pytorch_*: their figures are in the twin_<practice> charts) left out;
  with its confidence interval (ci_low/ci_high) where summarize.sh wrote one, labelled as
  a reader may quote it ("2.80x [2.60-3.00], ±7.1%": scripts/verdicts.py), and the range
  a published claim gives for that practice (CLAIMS_CSV) drawn beside it. Titled with the
  machine, date and library versions of the run (RESULTS_DIR/context.txt).

* With a PyTorch side (summary_pytorch.csv, scripts/stats.py), twin_<practice> per practice:
  per tuned variant and point, the core's speedup and PyTorch's as bars side by side from
  1x (log scale), their 95% intervals (the summary's bootstrap), a dashed 1x line and the
  agreement above each pair (agree, differ with PyTorch's speedup over the core's,
  inconclusive, core only, PyTorch only). Titled with the run's provenance and PyTorch's
  version, threads and device (pytorch.csv's ctx_torch_* columns, else context.txt).

Safety: no path, title or CSV value is ever pasted into gnuplot code unquoted. Data and
outputs go through files with fixed names in a private temporary folder (the charts are
moved into OUT_DIR afterwards), and every string in the generated script is a
single-quoted gnuplot string (no backquote or macro substitution happens there).

Exit status: 0 when every chart that has data was drawn, 1 when any CSV, description or
gnuplot run failed (the message says which), 2 for bad arguments.
"""
import csv
import gzip
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
MEASURED = ("ok", "partial")  # partial: kept by a program cut at its deadline
STATUSES = MEASURED + ("skipped", "error")
KNOWN_KEYS = {"practice", "x", "y", "series", "filter", "kind", "logx", "logy", "title",
              "xlabel", "ylabel", "file", "yscale", "xformat", "labels", "repeat", "target"}
COLORS = ["#4472c4", "#ed7d31", "#70ad47", "#7030a0", "#c00000", "#00a0b0", "#7f6000",
          "#a5a5a5", "#264478", "#9e480e"]
TERMINALS = {"png": "set terminal pngcairo size {w},{h} font ',13' linewidth 1.5 noenhanced",
             "svg": "set terminal svg size {w},{h} dynamic font ',13' linewidth 1.5 noenhanced"}
DENSE_POINTS = 200
TWIN_SIDES = (("core", "the core", "#4472c4"), ("pytorch", "PyTorch", "#ed7d31"))
TWIN_PREFIX = "pytorch_"  # the PyTorch side's practices: pytorch_<the core's practice>


def chart_formats():
    """The formats drawn: CHART_FORMATS, space- or comma-separated svg and png (default svg:
    vector, and the lighter of the two for most charts)."""
    names = os.environ.get("CHART_FORMATS", "svg").replace(",", " ").split()
    bad = [n for n in names if n not in TERMINALS]
    if bad or not names:
        raise ValueError(f"CHART_FORMATS={os.environ.get('CHART_FORMATS', '')!r}: "
                         "give svg, png or both (e.g. 'svg png')")
    return list(dict.fromkeys(names))


def without_flat_interior(pts):
    """A dense series without the points equal (y, bars, noisy flag) to both neighbours."""
    keep = [p for i, p in enumerate(pts)
            if i == 0 or i == len(pts) - 1 or not (pts[i - 1][1:] == p[1:] == pts[i + 1][1:])]
    return keep


class ChartError(Exception):
    pass


class EmptyCsv(ChartError):
    """A CSV without a row: a warning, not a failure (a cut run is partial, not broken)."""


class MissingColumn(ChartError):
    """A description names a column the CSV lacks: an older run, or a typo."""


def q(text):
    """A gnuplot single-quoted string: no substitution inside, '' for a quote."""
    return "'" + str(text).replace("\n", " ").replace("\r", " ").replace("'", "''") + "'"


def number(text):
    """float(text) or None for empty / non-numeric / non-finite."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def nan(v):
    """A data-file field: the number, or NaN (a point gnuplot leaves out)."""
    return "NaN" if v is None else repr(v)


sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verdicts import figure_text  # noqa: E402  (scripts/verdicts.py: "2.80x [2.60-3.00], ±7.1%")
from natural_order import natural_key  # noqa: E402  (the one natural sort)
import stats  # noqa: E402  (scripts/stats.py: the bootstrap the summary's intervals use)

# What an error bar is, for the legend, by where it came from.
INTERVAL_BOOTSTRAP = "95% interval of the median (bootstrap over the repetitions)"
INTERVAL_MEDIAN_SD = "95% interval of the median (normal approximation from the standard deviation)"
INTERVAL_MEAN = "95% interval of the mean (normal approximation from the standard deviation)"
# Measures that can be noisy (times and rates): a memory size or a count is not.
NOISY_MEASURES = re.compile(r"(^time$|_ms$|_ms_|seconds|per_second|_per_s$|tflops|gbps|gb_s|bandwidth|throughput"
                            r"|(^|_)rate($|_)|busbw|latency)")


def value_text(v):
    """A value as a label: fixed notation with about 3 significant digits, never "2.94e+03"."""
    a = abs(v)
    if a >= 100 or a == 0:
        return f"{v:.0f}"
    return f"{v:.{max(1, 2 - math.floor(math.log10(a)))}f}"


def tick_format(lo, hi, log=False):
    """A gnuplot tick format for an axis from lo to hi in fixed notation (no "1e+06"): as
    many decimals as the tick step (or, on a log axis, the smallest tick) needs."""
    if log:  # powers of ten: as short as each one is ("0.001", "100000"); %g is fixed there
        smallest = lo if lo > 0 else 1.0
        lowest_tick = 10.0 ** math.ceil(math.log10(smallest) - 1e-9)
        return "%.12g" if lowest_tick >= 1e-4 else f"%.{-math.floor(math.log10(lowest_tick))}f"
    step = (hi - lo) / 8 if hi > lo else abs(hi) or 1.0
    return f"%.{max(0, -math.floor(math.log10(step)))}f"


def median_interval(values, salt):
    """(low, high): the 95% bootstrap interval of the median of `values` (stats.py's
    resampling, seeded by `salt`), or None below 2 values."""
    if len(values) < 2:
        return None
    rng = stats.bootstrap_rng(salt)
    reps = [stats.median([values[rng.randrange(len(values))] for _ in values]) for _ in range(2000)]
    return stats.interval(reps)


def provenance(ctx):
    """What a pasted chart needs to say where it comes from: machine, date, library versions."""
    gpu = ctx.get("gpu_name", "none")
    machine = f"CPU run on {ctx.get('host', 'unknown host')} ({ctx.get('host_cpu', '?')}), no GPU" \
        if gpu in ("", "none") else gpu
    libs = [f"{name} {ctx[key]}" for name, key in (("driver", "driver_version"), ("CUDA", "cuda_runtime"),
                                                    ("cuDNN", "cudnn_version"), ("cuBLAS", "cublas_version"))
            if ctx.get(key, "none") not in ("", "none")]
    # two lines (a chart's title is narrow): the machine and date, then the libraries
    return f"{machine}; {ctx.get('run_date', '')[:10] or 'undated'}" + ("\n" + ", ".join(libs) if libs else "")


def noise_threshold():
    """The coefficient of variation above which a row is noisy: scripts/stats.py's."""
    try:
        import stats
        return stats.noise_cv()
    except Exception:  # stats.py absent or STATS_NOISE_CV unusable (it reports that itself)
        return 0.02


NOISE_CV = noise_threshold()


def row_is_noisy(row):
    cv = number(row.get("time_cv"))
    return truthy(row.get("noisy", "")) or (cv is not None and (number(row.get("repetitions")) or 1) > 1
                                            and cv > NOISE_CV)


def truthy(text):
    return str(text).strip().lower() in ("1", "yes", "true", "on")


# ---- reading ----------------------------------------------------------------------------

def read_csv(path, need=("practice",)):
    """(header, rows as dicts) of a results CSV; ChartError when it is not one."""
    name = os.path.basename(path)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", newline="", encoding="utf-8") as f:
            table = list(csv.reader(f))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise ChartError(f"{name}: cannot read it as CSV ({e})")
    if not table or not table[0]:
        raise EmptyCsv(f"{name}: empty file (a program cut before its first row?): nothing to draw from it")
    header = table[0]
    missing = [c for c in need if c not in header]
    if missing:
        raise ChartError(f"{name}: not a results CSV (no {'/'.join(missing)} column)")
    rows = []
    for i, fields in enumerate(table[1:], start=2):
        if not fields:
            continue
        if len(fields) != len(header):
            raise ChartError(f"{name}: line {i} has {len(fields)} fields, the header {len(header)}")
        rows.append(dict(zip(header, fields)))
    if "status" in header:
        for i, r in enumerate(rows, start=2):
            if r["status"] not in STATUSES:
                raise ChartError(f"{name}: line {i}: status '{r['status']}' is not {'/'.join(STATUSES)}")
            if r["status"] in MEASURED and "time" in header and (number(r["time"]) is None or float(r["time"]) <= 0):
                raise ChartError(f"{name}: line {i}: time '{r['time']}' of a measured row is not a positive number")
    return header, rows


def parse_descriptions(path):
    """[(chart name, {key: value})] of one .charts file; ChartError on a malformed line."""
    charts, current = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if not line:
                continue
            m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
            if m:
                current = {}
                charts.append((m.group(1), current))
                continue
            m = re.fullmatch(r"([A-Za-z_]+)\s*=\s*(.*)", line)
            if not m or current is None:
                raise ChartError(f"{os.path.basename(path)}:{n}: expected [chart] or key = value")
            key = m.group(1)
            if key not in KNOWN_KEYS:
                raise ChartError(f"{os.path.basename(path)}:{n}: unknown key '{key}'")
            current[key] = m.group(2).strip()
    for name, d in charts:
        for key in ("practice", "x", "y"):
            if key not in d:
                raise ChartError(f"{os.path.basename(path)}: [{name}] has no '{key}'")
        if d.get("kind", "lines") not in ("lines", "bars"):
            raise ChartError(f"{os.path.basename(path)}: [{name}] kind must be lines or bars")
    return charts


def read_context(results):
    ctx = {}
    try:
        with open(os.path.join(results, "context.txt"), encoding="utf-8") as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep and k not in ctx:
                    ctx[k] = v
    except OSError:
        pass
    return ctx


# ---- values and error bars ---------------------------------------------------------------

def y_value(row, y, header):
    """The y value of a row (time in ms), or None."""
    if y == "time":
        v = number(row.get("time"))
        unit = TIME_TO_MS.get(row.get("time_unit", "ms"))
        return None if v is None or unit is None else v * unit
    return number(row.get(y))


def point_from_row(row, y, header, value):
    """(point, low, high, interval kind) of a row with repetitions > 1 and no per-repetition
    values, from its standard deviation: for the time its median (time_median, else the
    mean) -+ 1.96 x 1.2533 sd / sqrt(n) (the median's standard error for normal data); for a
    counter its mean -+ 1.96 sd / sqrt(n). None when the row has no spread."""
    reps = number(row.get("repetitions")) or 1
    if reps <= 1 or value is None:
        return None
    if y == "time":
        unit = TIME_TO_MS.get(row.get("time_unit", "ms"))
        sd, med = number(row.get("time_stddev")), number(row.get("time_median"))
        if sd is None or unit is None or sd <= 0:
            return None
        point = value if med is None else med * unit
        half = 1.96 * 1.2533 * sd * unit / math.sqrt(reps)
        return point, point - half, point + half, INTERVAL_MEDIAN_SD
    sd = number(row.get(y + "_stddev"))
    if sd is None or sd <= 0:
        return None
    half = 1.96 * sd / math.sqrt(reps)
    return value, value - half, value + half, INTERVAL_MEAN


def key_of(row):
    return (row.get("practice"), row.get("variant"), row.get("params"))


def load_reps(path, y):
    """{(practice, variant, params): [values]} from a per-repetition CSV, or {}."""
    if not os.path.exists(path):
        return {}
    header, rows = read_csv(path)
    if y != "time" and y not in header:
        return {}
    out = {}
    for r in rows:
        if r.get("status", "ok") not in MEASURED:
            continue
        v = y_value(r, y, header)
        if v is not None:
            out.setdefault(key_of(r), []).append(v)
    return out


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# ---- the described charts ---------------------------------------------------------------

def chart_points(name, d, header, rows, reps):
    """{series: [(x, y, low, high, noisy)]} of one described chart (x as text)."""
    practices = {p.strip() for p in d["practice"].split(",") if p.strip()}
    series_cols = [c.strip() for c in d.get("series", "variant").split(",") if c.strip()]
    filters = []
    for f in filter(None, (s.strip() for s in d.get("filter", "").split(","))):
        col, sep, val = f.partition("=")
        if not sep:
            raise ChartError(f"[{name}] filter '{f}' is not column=value")
        filters.append((col.strip(), val.strip()))
    chosen = [r for r in rows if r.get("status", "ok") in MEASURED and r["practice"] in practices]
    if not chosen:
        return {}, set()  # nothing measured: a skipped run writes no counter columns to check
    for col in [d["x"]] + series_cols + [c for c, _ in filters] + [d["y"]]:
        if col not in header:
            raise MissingColumn(f"[{name}] the CSV has no column '{col}'")
    chosen = [r for r in chosen if all(r.get(c) == v for c, v in filters)]
    groups = {}
    for r in chosen:
        v = y_value(r, d["y"], header)
        if v is None or r[d["x"]] == "":
            continue
        # legends say what the numbers are: "batch 32", not "32"
        label = " ".join(r[c] if c in ("variant", "practice") else f"{c.replace('param_', '')} {r[c]}"
                         for c in series_cols)
        if d.get("repeat"):  # one line per repetition (a curve), coloured by its series
            label += "\t" + r.get(d["repeat"], "")
        groups.setdefault((label, r[d["x"]]), []).append((v, r))
    scale = number(d.get("yscale", "1"))
    if scale is None:
        raise ChartError(f"[{name}] yscale '{d.get('yscale')}' is not a number")
    out, kinds = {}, set()
    can_be_noisy = bool(NOISY_MEASURES.search(d["y"]))
    for (label, x), items in groups.items():
        values = [v for v, _ in items]
        row = items[0][1]
        noisy = can_be_noisy and any(row_is_noisy(r) for _, r in items)
        rep_values = reps.get(key_of(row)) if len(items) == 1 else None
        salt = f"{name}|{label}|{x}"
        if rep_values and len(rep_values) > 1:
            y, (low, high) = median(rep_values), median_interval(rep_values, salt)
            kinds.add(INTERVAL_BOOTSTRAP)
        elif len(values) > 1:
            y, (low, high) = median(values), median_interval(values, salt)
            kinds.add(INTERVAL_BOOTSTRAP)
        else:
            y, low, high, kind = point_from_row(row, d["y"], header, values[0]) or (values[0], None, None, None)
            if kind:
                kinds.add(kind)
        s = lambda v: None if v is None else v * scale
        out.setdefault(label, []).append((x, s(y), s(low), s(high), noisy))
    # series in natural order (the practice's parameter values, variant names), never in
    # the order the rows happened to come in
    return {k: out[k] for k in sorted(out, key=natural_key)}, kinds


def target_value(d, tables):
    """The value of the description's `target` column in the practice's measured rows (the
    first table that records one), or None: the run records no target."""
    col = d.get("target")
    practices = {p.strip() for p in d["practice"].split(",")}
    for header, rows in tables:
        if col and col in header:
            for r in rows:
                v = number(r.get(col))
                if v is not None and r.get("practice") in practices and r.get("status", "ok") in MEASURED:
                    return v
    return None


def y_range(points, logy, headroom):
    """[low, high] of the y axis holding every point and error bar, with headroom."""
    ys = []
    for pts in points.values():
        for _, y, low, high, _ in pts:
            ys += [v for v in (y, low, high) if v is not None]
    lo, hi = min(ys), max(ys)
    if logy:
        positive = [v for v in ys if v > 0]
        if not positive:
            raise ChartError("logy with no positive value")
        lo, hi = min(positive), max(positive)
        return lo / (1.6 if lo < hi else 2.0), hi * (headroom * 1.6 if lo < hi else 2.0)
    lo = min(lo, 0.0)
    hi = max(hi, 0.0)
    if hi == lo:
        hi = lo + 1.0
    return (lo * headroom if lo < 0 else 0.0), (hi * headroom if hi > 0 else 0.0)


def common_settings(d, subtitle):
    lines = ["set datafile separator tab",
             "set grid", "set key below noenhanced",
             "set title " + " . \"\\n\" . ".join(q(t) for t in [d.get("title", "")] + subtitle.split("\n")),
             "set xlabel " + q(d.get("xlabel", d["x"])),
             "set ylabel " + q(d.get("ylabel", d["y"]))]
    return lines


def script_lines(name, d, points, tmp, subtitle="", kinds=()):
    """gnuplot commands drawing one described chart into tmp/out.<format>."""
    kind = d.get("kind", "lines")
    logx, logy, labels = truthy(d.get("logx", "no")), truthy(d.get("logy", "no")), truthy(d.get("labels", "no"))
    has_err = any(p[2] is not None for pts in points.values() for p in pts)
    any_noisy = any(p[4] for pts in points.values() for p in pts)
    ylo, yhi = y_range(points, logy, 1.22 if labels or any_noisy else 1.12)
    if d.get("_target") is not None and not (logy and d["_target"] <= 0):  # the target line in view
        ylo, yhi = min(ylo, d["_target"]), max(yhi, d["_target"] * 1.05)
    cmds = common_settings(d, subtitle)
    if logy:
        cmds.append("set logscale y")
    cmds.append(f"set yrange [{ylo!r}:{yhi!r}]")
    cmds.append("set format y " + q(tick_format(ylo, yhi, logy)))
    err_title = "title " + q(" / ".join(sorted(kinds)) or INTERVAL_BOOTSTRAP)
    plots = []
    if kind == "bars":
        # categories in the practice's order (numbers by value, names naturally), the same
        # on every machine whatever order the rows came in
        cats = list(dict.fromkeys(p[0] for pts in points.values() for p in pts))
        cats.sort(key=float if all(number(c) is not None for c in cats) else natural_key)
        n = len(points)
        width = 0.8 / n
        base = ylo if logy else 0.0
        cmds.append("set xtics (" + ", ".join(f"{q(c)} {i}" for i, c in enumerate(cats)) + ")")
        if sum(len(c) + 2 for c in cats) > 70:  # long or many categories: slanted, still readable
            cmds.append("set xtics rotate by 30 right")
        cmds.append(f"set xrange [-0.6:{len(cats) - 0.4}]")
        cmds.append("set style fill solid 0.85 border -1")
        for j, (label, pts) in enumerate(points.items()):
            path = os.path.join(tmp, f"s{j}.dat")
            with open(path, "w", encoding="utf-8") as f:
                for x, y, low, high, noisy in pts:
                    pos = cats.index(x) + (j - (n - 1) / 2) * width
                    text = (value_text(y) if labels else "") + (" !" if noisy else "")
                    top = y if high is None else max(y, high)
                    f.write(f"{pos!r}\t{y!r}\t{pos - width * 0.45!r}\t{pos + width * 0.45!r}\t"
                            f"{min(base, y)!r}\t{max(base, y)!r}\t{nan(low)}\t{nan(high)}\t{top!r}\t{text or '-'}\n")
            color = COLORS[j % len(COLORS)]
            plots.append(f"{q(path)} using 1:2:3:4:5:6 with boxxyerror lc rgb {q(color)} title {q(label)}")
            if has_err:
                plots.append(f"{q(path)} using 1:2:7:8 with yerrorbars pt 0 lc rgb 'black' "
                             + (err_title if j == 0 else "notitle"))
            if labels or any_noisy:
                plots.append(f"{q(path)} using 1:9:(strcol(10) eq '-' ? '' : strcol(10)) with labels offset 0,0.8 notitle")
    else:
        xs = [number(p[0]) for pts in points.values() for p in pts]
        if any(v is None for v in xs):
            raise ChartError(f"[{name}] kind = lines needs a numeric x ({d['x']}); use kind = bars")
        lo, hi = min(xs), max(xs)
        if logx:
            if lo <= 0:
                raise ChartError(f"[{name}] logx with x <= 0")
            cmds.append("set logscale x 2")
            cmds.append(f"set xrange [{lo / 1.4!r}:{hi * 1.4!r}]")
        else:
            pad = (hi - lo) * 0.04 or 0.5
            cmds.append(f"set xrange [{lo - pad!r}:{hi + pad!r}]")
        distinct = sorted(set(xs))
        if d.get("xformat") == "bytes":
            cmds.append("set format x '%.0b%BB'")
        elif all(v == int(v) for v in xs):  # a count (workers, devices, batch): whole ticks
            if len(distinct) <= 12:
                cmds.append("set xtics (" + ", ".join(f"'{int(v)}' {v!r}" for v in distinct) + ")")
            else:
                cmds.append("set format x '%.0f'")
                if not logx:
                    cmds.append(f"set xtics {max(1, math.ceil((hi - lo) / 10))}")
        else:
            cmds.append("set format x " + q(tick_format(lo, hi, logx)))
        bases = list(dict.fromkeys(label.split("\t")[0] for label in points))
        titled = set()
        for j, (label, pts) in enumerate(points.items()):
            path = os.path.join(tmp, f"s{j}.dat")
            pts = sorted(pts, key=lambda p: float(p[0]))
            dense = len(pts) > DENSE_POINTS
            if dense:
                pts = without_flat_interior(pts)
            with open(path, "w", encoding="utf-8") as f:
                for x, y, low, high, noisy in pts:
                    f.write(f"{float(x)!r}\t{y!r}\t{nan(low)}\t{nan(high)}\t{'!' if noisy else '-'}\n")
            base = label.split("\t")[0]  # per-repetition lines share their series' colour and legend entry
            color = COLORS[bases.index(base) % len(COLORS)]
            style = "lines lw 2" if dense else "linespoints lw 2 pt 7 ps 1.1"
            key = "notitle" if base in titled else "title " + q(base + (" (a line per repetition)" if "\t" in label else ""))
            titled.add(base)
            plots.append(f"{q(path)} using 1:2 with {style} lc rgb {q(color)} {key}")
            # bars of no height (repetitions that agree: curves over the steps of deterministic
            # runs) are not drawn: invisible, and thousands of them were most of an SVG
            flat_bars = all(low is None or (low == y == high) for _, y, low, high, _ in pts)
            if has_err and not flat_bars:
                plots.append(f"{q(path)} using 1:2:3:4 with yerrorbars pt 0 lc rgb {q(color)} "
                             + (err_title if j == 0 else "notitle"))
            if any_noisy:
                plots.append(f"{q(path)} using 1:2:(strcol(5) eq '-' ? '' : '!') with labels offset 1,0.6 notitle")
    target = d.get("_target")
    if target is not None and not (logy and target <= 0):
        plots.append(f"{target!r} with lines dt 3 lw 2 lc rgb '#333333' title {q('target ' + value_text(target))}")
    if any_noisy:  # below the plot, clear of the value labels above the bars
        cmds.append("set label 1 '! noisy (coefficient of variation over the threshold)' "
                    "at screen 0.01, screen 0.02 left font ',11'")
    height = 560 + 18 * max(0, len(points) - 4)
    return cmds, plots, height


def render_script(cmds, plots, tmp, width, height):
    text = "\n".join(cmds) + "\n"
    for ext in chart_formats():
        text += TERMINALS[ext].format(w=width, h=height) + "\n"
        text += "set output " + q(os.path.join(tmp, "out." + ext)) + "\n"
        text += "plot " + ", \\\n     ".join(plots) + "\n"
        text += "set output\n"
    return text


def run_gnuplot(script, tmp, out_dir, name):
    path = os.path.join(tmp, "chart.gp")
    with open(path, "w", encoding="utf-8") as f:
        f.write(script)
    try:
        done = subprocess.run(["gnuplot", path], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ChartError(f"{name}: gnuplot did not run ({e})")
    formats = chart_formats()
    if done.returncode != 0 or not all(os.path.exists(os.path.join(tmp, "out." + ext)) for ext in formats):
        raise ChartError(f"{name}: gnuplot failed: {done.stderr.strip()[-2000:]}")
    for ext in formats:
        shutil.move(os.path.join(tmp, "out." + ext), os.path.join(out_dir, f"{name}.{ext}"))


# ---- the headline chart ------------------------------------------------------------------

def load_claims(path):
    """{practice: [claim dicts]}; a claims file that is not one is an error."""
    if not path or not os.path.exists(path):
        return {}
    header, rows = read_csv(path, need=("practice", "tuned", "effect_low", "effect_high", "source"))
    out = {}
    for r in rows:
        out.setdefault(r["practice"], []).append(r)
    return out


def claimed_variants(claims):
    """{practice: the variant its speedup claim names} (claims on one point, accuracy claims
    and reference figures are not the headline's)."""
    out = {}
    for practice, rows in claims.items():
        for c in rows:
            if c.get("kind", "claim") in ("", "claim") and c.get("measure", "speedup") in ("", "speedup") \
                    and not c.get("params") and c["tuned"] not in ("", "*"):
                out.setdefault(practice, c["tuned"])
    return out


def best_variants(results, claimed=None):
    """[(practice, tuned, speedup, ci_low, ci_high, noisy)] from summary_by_variant.csv:
    for a practice with a claim the variant the claim names (its range is drawn beside
    it), else the best tuned variant; None when the file is absent or empty."""
    claimed = claimed or {}
    path = os.path.join(results, "summary_by_variant.csv")
    if not os.path.exists(path):
        return None
    header, rows = read_csv(path, need=("practice", "tuned", "geomean_speedup"))
    best = {}
    for i, r in enumerate(rows, start=2):
        if r["geomean_speedup"] == "":
            continue  # no speedup: the variant did not reach its target (its verdict says so)
        s = number(r["geomean_speedup"])
        if s is None or s <= 0:
            raise ChartError(f"summary_by_variant.csv: line {i}: speedup '{r['geomean_speedup']}' is not a positive number")
        named = claimed.get(r["practice"])
        if named and r["tuned"] != named and any(r2["tuned"] == named and r2["practice"] == r["practice"]
                                                 and r2["geomean_speedup"] for r2 in rows):
            continue
        if r["practice"] not in best or s > best[r["practice"]][2] or r["tuned"] == named:
            low, high = number(r.get("ci_low")), number(r.get("ci_high"))
            if low is None or high is None or low <= 0 or high <= 0:
                low = high = None
            best[r["practice"]] = (r["practice"], r["tuned"], s, low, high,
                                   truthy(r.get("noisy", "")) or r.get("contended", "") not in ("", "0"))
    return sorted(best.values(), key=lambda b: b[2])


MEMORY_COLUMNS = ("peak_mib", "peak_bytes", "activation_bytes")


def memory_practices(claims, tables):
    """Practices that trade time for memory: their speedup claim says slower and their rows
    record a memory size (activation checkpointing). Not drawn in the speedup headline:
    their point is the memory, which their own charts show."""
    slower = {p for p, rows in claims.items() for c in rows
              if c.get("kind", "claim") in ("", "claim") and c.get("direction") == "slower"}
    out = set()
    for header, rows in tables.values():
        if any(c in header for c in MEMORY_COLUMNS):
            out |= {r["practice"] for r in rows if r["practice"] in slower
                    and any(number(r.get(c)) for c in MEMORY_COLUMNS)}
    return out


def baselines(results):
    """{practice: its baseline variant} from summary.csv (none when absent or unreadable)."""
    try:
        _, rows = read_csv(os.path.join(results, "summary.csv"), need=("practice", "baseline"))
    except (ChartError, OSError):
        return {}
    out = {}
    for r in rows:
        out.setdefault(r["practice"], r["baseline"])
    return out


def headline(results, claims, tmp, out_dir, tables=None):
    memory = memory_practices(claims, tables or {})
    # the core's practices: PyTorch's figures (pytorch_<practice>) are drawn beside the core's
    # in the twin_<practice> charts
    bars = [b for b in best_variants(results, claimed_variants(claims)) or []
            if b[0] not in memory and not b[0].startswith(TWIN_PREFIX)]
    if not bars:
        return False
    base_of = baselines(results)
    subtitle = provenance(read_context(results))
    values, widest = [], 0
    with open(os.path.join(tmp, "bars.dat"), "w", encoding="utf-8") as f, \
            open(os.path.join(tmp, "claims.dat"), "w", encoding="utf-8") as c:
        for i, (practice, tuned, s, low, high, flagged) in enumerate(bars):
            lo_err = "NaN" if low is None else repr(low)
            hi_err = "NaN" if high is None else repr(high)
            text = figure_text(s, low, high) + (" !" if flagged else "")
            widest = max(widest, len(text))
            f.write(f"{s!r}\t{i - 0.12!r}\t{min(1.0, s)!r}\t{max(1.0, s)!r}\t{i - 0.38!r}\t{i + 0.14!r}\t"
                    f"{lo_err}\t{hi_err}\t{max(1.0, s, high or s)!r}\t{text}\n")
            values += [v for v in (s, low, high) if v is not None]
            for claim in claims.get(practice, []):
                if claim["tuned"] not in ("", "*", tuned) or claim.get("params") \
                        or claim.get("kind", "claim") not in ("", "claim"):
                    continue  # a claim about another variant, one point, or a reference figure
                cl, ch = number(claim["effect_low"]), number(claim["effect_high"])
                if cl is None and ch is not None:
                    cl = min(1.0, ch)  # "up to 3x": from no effect up
                if cl is None or ch is None or cl <= 0 or ch <= 0:
                    continue
                if ch / cl < 1.04:  # a point claim ("~7x"): a visible sliver around it
                    cl, ch = cl / 1.02, ch * 1.02
                c.write(f"{(cl + ch) / 2!r}\t{i + 0.27!r}\t{cl!r}\t{ch!r}\t{i + 0.2!r}\t{i + 0.36!r}\n")
                values += [cl, ch]
                break
    has_claims = os.path.getsize(os.path.join(tmp, "claims.dat")) > 0
    lo, hi = min(values + [1.0]), max(values + [1.0])
    xlo, xhi = lo / 1.5, hi * 1.5
    powers, every = [k for k in range(-8, 9) if xlo <= 2.0 ** k <= xhi], 1
    while len([k for k in powers if k % every == 0]) > 4:  # no crowded labels on a narrow axis
        every *= 2
    ticks = [2.0 ** k for k in powers if k % every == 0]
    n = len(bars)
    cmds = ["set datafile separator tab",
            "set label 2 " + q("Per practice: the variant its published claim names (else the fastest "
                               "tuned one) against its baseline")
            + " at screen 0.5, screen 0.985 center font ',14'",
            "set label 3 " + " . \"\\n\" . ".join(q(t) for t in subtitle.split("\n"))
            + " at screen 0.5, screen 0.985 center offset 0,-1.4",
            "set tmargin 6", "set bmargin 7", f"set rmargin {widest + 3}",
            "set xlabel 'speedup: baseline median time / tuned median time (log scale; > 1: faster)'",
            "set xtics (" + ", ".join(f"'{t:g}x' {t!r}" for t in ticks) + ")",
            "set logscale x", f"set xrange [{xlo!r}:{xhi!r}]", f"set yrange [-0.7:{n - 0.3}]",
            # two-line tick labels, practice over variant ("\n" outside the quoted data)
            "set ytics (" + ", ".join(f"{q(b[0])} . \"\\n\" . {q(b[1] + ' vs ' + base_of.get(b[0], 'baseline'))} {i}"
                                     for i, b in enumerate(bars)) + ")",
            "set grid xtics", "set key at screen 0.5, screen 0.01 center bottom horizontal noenhanced",
            "set style fill solid 0.85 border -1",
            "set arrow 1 from first 1, graph 0 to first 1, graph 1 nohead dt 2 lc rgb '#555555'"]
    bars_path, claims_path = q(os.path.join(tmp, "bars.dat")), q(os.path.join(tmp, "claims.dat"))
    plots = [f"{bars_path} using 1:2:3:4:5:6 with boxxyerror lc rgb '#4472c4' title 'measured here'",
             f"{bars_path} using 1:2:7:8 with xerrorbars pt 0 lc rgb 'black' title '95% interval (the summary''s bootstrap)'",
             # the values in a column right of the frame (in the right margin)
             f"{bars_path} using ({xhi!r}):2:10 with labels left offset 1,0 notitle"]
    if has_claims:
        plots.append(f"{claims_path} using 1:2:3:4:5:6 with boxxyerror fs solid 0.35 border lc rgb '#ed7d31' "
                     "lc rgb '#ed7d31' title 'published claim (range)'")
    if not any(b[3] is not None for b in bars):
        del plots[1]  # no interval anywhere (a single repetition): no error bars
    if any(b[5] for b in bars):
        cmds.append("set label 1 '! noisy or contended' at screen 0.99, screen 0.03 right")
    if memory:
        cmds.append("set label 4 " + q("not drawn (they trade time for memory; see their own charts): "
                                       + ", ".join(sorted(memory, key=natural_key)))
                    + " at screen 0.01, screen 0.055 left")
    height = 260 + 50 * n
    run_gnuplot(render_script(cmds, plots, tmp, 1000, height), tmp, out_dir, "summary_speedup")
    return True


# ---- the core against PyTorch --------------------------------------------------------------



def twin_points(results):
    """{practice: [(category, agreement label, [(speedup, low, high) or None per side])]}
    from summary_pytorch.csv (stats.py), in its order (natural order of the points), or {}
    without one. A side's interval is None where the summary has none."""
    path = os.path.join(results, "summary_pytorch.csv")
    if not os.path.exists(path):
        return {}
    _, rows = read_csv(path, need=("practice", "params", "tuned", "agreement", "core_speedup", "pytorch_speedup"))
    out = {}
    for i, r in enumerate(rows, start=2):
        sides = []
        for key, _, _ in TWIN_SIDES:
            v = number(r[key + "_speedup"])
            if r[key + "_speedup"] != "" and (v is None or v <= 0):
                raise ChartError(f"summary_pytorch.csv: line {i}: {key}_speedup '{r[key + '_speedup']}' "
                                 "is not a positive number")
            lo, hi = number(r.get(key + "_ci_low")), number(r.get(key + "_ci_high"))
            ok = lo is not None and hi is not None and 0 < lo <= hi
            sides.append(None if v is None else (v, lo if ok else None, hi if ok else None))
        if all(x is None for x in sides):
            continue
        ratio = number(r.get("effect_ratio"))
        word = r["agreement"] + (f" ({ratio:.2f}x)" if r["agreement"] == "differ" and ratio else "")
        out.setdefault(r["practice"], []).append(((r["tuned"], r["params"]), word, sides))
    return out


def speedup_ticks(lo, hi):
    """Tick values of a speedup axis from lo to hi: round figures (1x always), at most 8."""
    nice = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 8.0,
            10.0, 20.0, 50.0, 100.0]
    ticks = [t for t in nice if lo <= t <= hi]
    while len(ticks) > 8:
        ticks = [t for i, t in enumerate(ticks) if i % 2 == 0 or t == 1.0]
    return ticks or [1.0]


def twin_chart(practice, points, ctx, subtitle, tmp, out_dir):
    """twin_<practice>: per tuned variant and point, the core's speedup and PyTorch's side by
    side as bars from 1x (log scale), 95% intervals, a dashed 1x line, the agreement above."""
    cats = points
    width = 0.38
    values = [1.0]
    paths = []
    for j, (key, label, color) in enumerate(TWIN_SIDES):
        path = os.path.join(tmp, f"twin{j}.dat")
        with open(path, "w", encoding="utf-8") as f:
            for i, (_, _, sides) in enumerate(cats):
                if sides[j] is None:
                    continue
                v, lo, hi = sides[j]
                pos = i + (j - 0.5) * width
                f.write(f"{pos!r}\t{v!r}\t{pos - width * 0.45!r}\t{pos + width * 0.45!r}\t{min(1.0, v)!r}\t"
                        f"{max(1.0, v)!r}\t{nan(lo)}\t{nan(hi)}\n")
                values += [x for x in (v, lo, hi) if x is not None]
        paths.append((path, label, color))
    lo, hi = min(values), max(values)
    ylo, yhi = lo / 1.25, hi * 1.45
    with open(os.path.join(tmp, "twin_words.dat"), "w", encoding="utf-8") as f:
        for i, (_, word, sides) in enumerate(cats):
            top = max([x for s in sides if s for x in (s[0], s[2]) if x is not None] + [1.0])
            f.write(f"{i!r}\t{top * 1.08!r}\t{word}\n")
    torch = "; ".join(f"{name} {ctx[key]}" for key, name in (("torch_version", "PyTorch"),
                                                             ("torch_threads", "threads"),
                                                             ("torch_device", "device")) if ctx.get(key))
    title = f"{practice}: speedup (baseline / tuned median time) in the core and in PyTorch, side by side"
    labels = [f"{q(tuned)} . \"\\n\" . {q(params)} {i}" for i, ((tuned, params), _, _) in enumerate(cats)]
    cmds = ["set datafile separator tab", "set grid ytics", "set key at screen 0.5, screen 0.01 center bottom horizontal maxrows 2 noenhanced",
            "set bmargin 12",
            "set title " + " . \"\\n\" . ".join(q(t) for t in [title] + subtitle.split("\n") + ([torch] if torch else [])),
            "set xlabel 'tuned variant and point (the baseline is the practice''s)' offset 0,-1",
            "set ylabel 'speedup (log scale; > 1: faster)'",
            "set logscale y", f"set yrange [{ylo!r}:{yhi!r}]",
            "set ytics (" + ", ".join(f"'{t:g}x' {t!r}" for t in speedup_ticks(ylo, yhi)) + ")",
            "set xtics (" + ", ".join(labels) + ")", f"set xrange [-0.6:{len(cats) - 0.4}]",
            "set style fill solid 0.85 border -1",
            "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#555555'"]
    if len(cats) > 6:
        cmds.append("set xtics rotate by 30 right")
    plots = []
    has_err = False
    for j, (path, label, color) in enumerate(paths):
        if os.path.getsize(path) == 0:
            continue
        plots.append(f"{q(path)} using 1:2:3:4:5:6 with boxxyerror lc rgb {q(color)} title {q(label)}")
        plots.append(f"{q(path)} using 1:2:7:8 with yerrorbars pt 0 lc rgb 'black' "
                     + ("notitle" if has_err else "title '95% interval (the summary''s bootstrap)'"))
        has_err = True
    plots.append(f"{q(os.path.join(tmp, 'twin_words.dat'))} using 1:2:3 with labels font ',11' notitle")
    plots.append("1 with lines dt 2 lc rgb '#555555' title '1x: no effect'")
    wide = max(len(params) for (_, params), _, _ in cats)
    run_gnuplot(render_script(cmds, plots, tmp, max(900, (10 * wide + 40) * len(cats)), 620), tmp, out_dir,
                "twin_" + practice)


def twin_charts(results, out_dir, subtitle):
    """Draws twin_<practice> for every practice of summary_pytorch.csv with a speedup on
    either side; returns how many were drawn."""
    ctx = read_context(results)
    tidy = os.path.join(results, "pytorch.csv")
    if os.path.exists(tidy):  # the PyTorch side's context columns, where its rows carry them
        try:
            _, rows = read_csv(tidy)
            for key in ("torch_version", "torch_threads", "torch_device"):
                ctx[key] = next((r["ctx_" + key] for r in rows if r.get("ctx_" + key)), ctx.get(key, ""))
        except ChartError:
            pass  # reported with the other CSVs
    drawn = 0
    for practice, points in sorted(twin_points(results).items(), key=lambda kv: natural_key(kv[0])):
        with tempfile.TemporaryDirectory(prefix="charts-") as tmp:
            twin_chart(practice, points, ctx, subtitle, tmp, out_dir)
            drawn += 1
    return drawn


# ---- main --------------------------------------------------------------------------------

def main(argv):
    points_only = len(argv) == 4 and argv[1] == "--points"
    if len(argv) != 5 and not points_only:
        print("usage: render.py RESULTS_DIR OUT_DIR DESCRIPTIONS_DIR CLAIMS_CSV\n"
              "       render.py --points RESULTS_DIR DESCRIPTIONS_DIR", file=sys.stderr)
        return 2
    try:
        chart_formats()
    except ValueError as e:
        print(f"charts: {e}", file=sys.stderr)
        return 2
    if points_only:
        results, out_dir, desc_dir, claims_path = argv[2], None, argv[3], None
    else:
        results, out_dir, desc_dir, claims_path = argv[1:]
    failed, drawn = False, 0
    subtitle = provenance(read_context(results))

    def fail(message):
        nonlocal failed
        failed = True
        print(f"charts: {message}", file=sys.stderr)

    # Every results CSV is read (a garbage one is an error even without a chart).
    tables = {}
    for fname in sorted(os.listdir(results)):
        path = os.path.join(results, fname)
        if not fname.endswith((".csv", ".curves.csv.gz")) or not os.path.isfile(path) or fname.startswith("summary"):
            continue
        stem = fname[:-len(".csv.gz")] if fname.endswith(".gz") else fname[:-4]
        need = ("practice",) if stem.endswith(".curves") or stem.endswith(".reps") else ("practice", "status", "time")
        try:
            tables[stem] = read_csv(path, need)
            if not tables[stem][1] and not stem.endswith((".curves", ".reps")):
                print(f"charts: warning: {fname} has a header but no rows (a program cut before its "
                      "first row?): nothing to draw from it", file=sys.stderr)
        except EmptyCsv as e:
            print(f"charts: warning: {e}", file=sys.stderr)
        except ChartError as e:
            fail(str(e))
    descriptions = []
    for fname in sorted(os.listdir(desc_dir)):
        if fname.endswith(".charts"):
            try:
                descriptions += [(fname[:-7], n, d) for n, d in parse_descriptions(os.path.join(desc_dir, fname))]
            except (ChartError, OSError, UnicodeDecodeError) as e:
                fail(str(e))
    for stem, name, d in descriptions:
        source = d.get("file", stem)
        if source not in tables:
            continue  # not run here, or already reported as garbage
        header, rows = tables[source]
        with tempfile.TemporaryDirectory(prefix="charts-") as tmp:
            try:
                reps = load_reps(os.path.join(results, source + ".reps.csv"), d["y"])
                points, kinds = chart_points(name, d, header, rows, reps)
                if not points:
                    measured = any(r.get("status", "ok") in MEASURED and r["practice"] in d["practice"].replace(" ", "").split(",")
                                   for r in rows)
                    why = f"its rows have no {d['y']} value" if measured else f"{source}.csv has no ok rows for it"
                    print(f"charts: {name}: nothing measured ({why}), no chart")
                    continue
                if points_only:
                    for label, pts in points.items():
                        for p in pts:
                            print("\t".join([name, label.replace("\t", " #"), p[0]] + [nan(v) for v in p[1:4]] + [str(int(p[4]))]))
                    continue
                d["_target"] = target_value(d, [tables[t] for t in dict.fromkeys((source, stem)) if t in tables])
                cmds, plots, height = script_lines(name, d, points, tmp, subtitle, kinds)
                run_gnuplot(render_script(cmds, plots, tmp, 900, height), tmp, out_dir, name)
                drawn += 1
            except MissingColumn as e:
                if points_only:  # checking descriptions: strict
                    fail(f"{stem}.charts: {e}")
                else:  # an older run made before the column existed: its other charts still draw
                    print(f"charts: {stem}.charts: {e} (a run older than the description, or a typo): "
                          "no chart", file=sys.stderr)
            except ChartError as e:
                fail(f"{stem}.charts: {e}")
    if points_only:
        return 1 if failed else 0
    try:
        claims = load_claims(claims_path)
    except ChartError as e:
        fail(f"claims: {e}")
        claims = {}
    with tempfile.TemporaryDirectory(prefix="charts-") as tmp:
        try:
            if headline(results, claims, tmp, out_dir, tables):
                drawn += 1
        except ChartError as e:
            fail(str(e))
    try:
        drawn += twin_charts(results, out_dir, subtitle)
    except ChartError as e:
        fail(str(e))
    print(f"charts: {drawn} charts drawn")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
