#!/usr/bin/env python3
"""twin/bench.py: the PyTorch side of `make bench` (docs/pytorch-side.md), run by
scripts/run-suite.sh as the program `pytorch`. Behaves like one of the core's benchmark
programs: the same flags (below), the same row groups, warm-up, interleaved repetitions and
stopping rule (twin/timing.py, ported from bench/driver/precision.c), the same tidy CSV,
reps CSV and Google-Benchmark-compatible JSON (twin/tidy.py). The rows come from the
practice modules twin/practices/*.py (twin/api.py). Exit status: 0, 1 when a row failed
(a check that found a PyTorch variant that does not do what its baseline does), 2 on a bad
flag, 130 when interrupted (what finished is written, with FILE.partial).
"""
import importlib
import importlib.util
import math
import os
import random
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from twin import timing, tidy  # noqa: E402

USAGE = """usage: bench.py [flags]   (the PyTorch side of make bench; docs/pytorch-side.md)

  --benchmark_list_tests[=true]  list the rows (pytorch_<practice>/<variant>/<axis>:<value>/...)
                           and exit
  --benchmark_filter=REGEX run only the rows whose name matches REGEX (a search)
  --benchmark_repetitions=N  the least repetitions of every row (default 1), in blocks
                           interleaved at random within a row group
  --benchmark_min_time=S   seconds each repetition runs steps for at least (default: each
                           row's own, the core row's min_time); a trailing 's' is accepted
  --benchmark_out=FILE     write Google-Benchmark-compatible JSON (context + one entry per
                           repetition); --benchmark_out_format=json is accepted
  --harness_csv=FILE       write the tidy CSV (the core's schema) and FILE.reps.csv
  --harness_precision=F|auto  add repetitions until the 95% interval of each speedup (of
                           the median, for a row without one) is within +-F; auto: 0.02 on
                           CUDA, else 0.05; 0 (default): exactly --benchmark_repetitions
  --harness_max_repetitions=N  at most N repetitions a row (default 60)
  --harness_budget=S       the program's seconds: each practice an equal share of what is
                           left, its row groups in order, each until its target within what
                           is left of the share; a group is not run (a skip saying so) when
                           less is left than the previous group took (a practice's first
                           group always runs). Default 0: a group at most 3x its first block's
                           time, every group runs
  --threads=N              torch.set_num_threads (the core's --threads; default: the cores)
  --device=cpu|cuda|auto   where the rows run (default auto: CUDA when torch has it);
                           the core's --backend=auto|cpu|cpu-ref|cuda is read as --device
  --preset=NAME[,NAME]     only the rows of these presets (the core's flag)
  --practice_selftest=NAME a deliberate bug every check must catch: no_update (the tuned
                           variant's optimiser step is skipped); none: off
  --twin_modules=M[,M]     practice modules to run: names in twin/practices or paths to .py
                           files (default: every module of twin/practices)
  --context_program=PATH   the suite's context printer (default build/context beside
                           scripts/; without it a minimal context from Python)
  --seed=N                 the seed of the rows and of the interleaving (default 1)
  --help                   this text
The core's --data, --data_dir, --loader-timeout, --max-image-pixels and --harness_axis are
accepted (BENCH_ARGS gives them to every program) and said on stderr to be unused.
"""

IGNORED_GB = ("--benchmark_out_format", "--benchmark_format", "--benchmark_color",
              "--benchmark_counters_tabular", "--benchmark_display_aggregates_only",
              "--benchmark_enable_random_interleaving", "--benchmark_report_aggregates_only")


# flags BENCH_ARGS may give every program that mean nothing here (said on stderr)
IGNORED_CORE = ("--data", "--data_dir", "--loader-timeout", "--max-image-pixels", "--harness_axis")


class BadFlag(Exception):
    pass


def _int(flag, v, least):
    if not re.fullmatch(r"[0-9]+", v) or int(v) < least:
        raise BadFlag("%s=%s: need a whole number >= %d" % (flag, v, least))
    return int(v)


def parse_args(argv):
    o = dict(list=False, filter="", repetitions=1, min_time=None, out=None, csv=None, precision=0.0,
             max_repetitions=60, budget=0.0, threads=os.cpu_count() or 1, device="auto", selftest=None,
             modules=None, context_program=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "context"),
             seed=1, help=False, presets=None)
    for a in argv:
        flag, eq, v = a.partition("=")
        if flag in ("--help", "-h"):
            o["help"] = True
        elif flag == "--benchmark_list_tests":
            if v not in ("", "true", "1", "false", "0"):
                raise BadFlag("%s: need true or false" % a)
            o["list"] = v in ("", "true", "1")
        elif not eq and flag != a:
            raise BadFlag("%s: needs a value" % a)
        elif flag == "--benchmark_filter":
            try:
                re.compile(v)
            except re.error as e:
                raise BadFlag("%s: not a regular expression (%s)" % (a, e))
            o["filter"] = v
        elif flag == "--benchmark_repetitions":
            o["repetitions"] = _int(flag, v, 1)
        elif flag == "--benchmark_min_time":
            t = v[:-1] if v.endswith("s") else v
            try:
                o["min_time"] = float(t)
            except ValueError:
                raise BadFlag("%s: need seconds, e.g. 0.5" % a)
            if not (o["min_time"] > 0) or not math.isfinite(o["min_time"]):
                raise BadFlag("%s: need seconds above 0" % a)
        elif flag == "--benchmark_out":
            o["out"] = v
        elif flag == "--harness_csv":
            o["csv"] = v
        elif flag == "--harness_precision":
            if v == "auto":
                o["precision"] = -1.0
            else:
                try:
                    o["precision"] = float(v)
                except ValueError:
                    o["precision"] = math.nan
                if not (0 <= o["precision"] < 1):
                    raise BadFlag("%s: need a fraction from 0 to below 1 (0.05: +-5%%), or auto" % a)
        elif flag == "--harness_max_repetitions":
            o["max_repetitions"] = _int(flag, v, 1)
        elif flag == "--harness_budget":
            try:
                o["budget"] = float(v)
            except ValueError:
                o["budget"] = math.nan
            if not (o["budget"] >= 0):
                raise BadFlag("%s: need seconds >= 0" % a)
        elif flag == "--threads":
            o["threads"] = _int(flag, v, 1)
        elif flag == "--device":
            if v not in ("cpu", "cuda", "auto"):
                raise BadFlag("%s: need cpu, cuda or auto" % a)
            o["device"] = v
        elif flag == "--practice_selftest":
            o["selftest"] = None if v in ("", "none") else v
        elif flag == "--twin_modules":
            o["modules"] = [m for m in v.split(",") if m]
        elif flag == "--context_program":
            o["context_program"] = v
        elif flag == "--seed":
            o["seed"] = _int(flag, v, 0)
        elif flag == "--preset":
            o["presets"] = [x for x in v.split(",") if x]
        elif flag == "--backend":
            if v not in ("auto", "cpu", "cpu-ref", "cuda"):
                raise BadFlag("%s: need auto, cpu, cpu-ref or cuda" % a)
            o["device"] = {"cpu-ref": "cpu"}.get(v, v)
        elif flag in IGNORED_GB:
            pass
        elif flag in IGNORED_CORE:
            print("bench.py: %s: a flag of the core's programs that the PyTorch side does not use" % a,
                  file=sys.stderr)
        else:
            raise BadFlag("%s: unknown flag (--help lists them)" % a)
    if o["max_repetitions"] < o["repetitions"]:
        o["max_repetitions"] = o["repetitions"]
    return o


def module_names(o):
    if o["modules"]:
        return o["modules"]
    d = os.path.join(HERE, "practices")
    return sorted(f[:-3] for f in os.listdir(d) if f.endswith(".py") and not f.startswith("_"))


def load_module(name):
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("twin_fixture_" + os.path.basename(name)[:-3], name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module("twin.practices." + name)


def suite_context(o):
    """The suite's context (build/context's key=value lines), else a minimal one."""
    ctx = {}
    try:
        out = subprocess.run([o["context_program"]], capture_output=True, text=True, timeout=60).stdout
        for line in out.splitlines():
            k, eq, v = line.partition("=")
            if eq:
                ctx[k] = v
    except (OSError, subprocess.SubprocessError):
        import platform
        ctx = {"host": platform.node(), "host_cores": str(os.cpu_count() or 1)}
    ctx["run_date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return ctx


def min_time_of(row, o):
    """A repetition's minimum time: the core row's; on the CPU, for a row the core times on
    its driver's synthetic batches (Row.synthetic), api.CPU_MIN_TIME, as the core's."""
    from twin.api import CPU_MIN_TIME
    if row.synthetic and o.get("run_device") == "cpu" and not (0 < row.min_time <= CPU_MIN_TIME):
        return CPU_MIN_TIME
    return row.min_time


def instance_name(row, variant, o):
    """The instance's name, as the core's: practice/variant/axis:value.../min_time:S/real_time.
    A CUDA row where this torch sees no CUDA device runs for no time (it is a skip), and its
    name says min_time 0, so that run-suite's time plan, which reads the names, does not
    count it."""
    parts = ["pytorch_" + row.practice, variant.name] + ["%s:%s" % kv for kv in row.params.items()]
    if o["min_time"] is None:
        runs_here = row.device != "cuda" or o.get("cuda", True)
        parts.append("min_time:%0.3f" % (min_time_of(row, o) if runs_here else 0.0))
    return "/".join(parts + ["real_time"])


def new_result(row, variant, o):
    return {"name": instance_name(row, variant, o), "practice": "pytorch_" + row.practice, "variant": variant.name,
            "role": variant.role, "params": {k: str(v) for k, v in row.params.items()},
            "params_text": row.params_text(), "status": "ok", "reason": "", "reps": [], "counters": {},
            "stop": "", "precision_reached": math.nan, "finished": False}


class Runner:
    def __init__(self, o, torch, context):
        self.o, self.torch, self.context = o, torch, context
        self.results = []
        self.sequence = 0
        self.any_error = False
        self.schema = tidy.read_schema()
        self.rng = random.Random(o["seed"])

    def write(self):
        tidy.write_all(self.o["csv"], self.o["out"], self.schema, self.results, self.context, self.o["precision"])

    def repetition(self, row, work, res):
        """Steps until at least min_time; the time per step (us) goes to the row."""
        torch, min_time = self.torch, self.o["min_time"] or min_time_of(row, self.o)
        steps, c0, t0 = 0, time.process_time(), time.perf_counter()
        while True:
            work.step()
            steps += 1
            if self.device == "cuda":
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - t0
            if elapsed >= min_time:
                break
        cpu = time.process_time() - c0
        self.sequence += 1
        per = elapsed / steps
        counters = {"step_ms": per * 1e3, "batch": work.items}
        if work.items:
            counters["images_per_second"] = work.items / per
        counters.update(work.counters() or {})
        res["reps"].append({"time": per * 1e6, "cpu_time": cpu / steps * 1e6, "iterations": steps,
                            "counters": counters, "sequence": self.sequence})

    def run_group(self, row, members, state):
        from twin.api import Context
        o = self.o
        ctx = Context(device=self.device, threads=o["threads"], seed=o["seed"], selftest=o["selftest"])
        why = None
        if row.device not in ("any", self.device):
            why = "a %s practice: this run's device is %s" % (row.device, self.device)
            if row.device == "cuda":
                why = "%s: a GPU practice" % self.no_cuda
        if why is None and row.skip:
            why = row.skip(ctx)
        if why:
            for _, res in members:
                res.update(status="skipped", reason=why, finished=True)
            return
        failed = {}
        if row.check:
            try:
                for r in row.check(ctx):
                    for _, res in members:
                        if res["variant"] == r.variant:
                            res["counters"].update(check_rel_diff=r.rel_diff, check_tolerance=r.tolerance)
                    if not r.ok:
                        failed[r.variant] = r.finding or ("update differs from the baseline's by %.3g (tolerance %.3g)"
                                                          % (r.rel_diff, r.tolerance))
            except Exception as e:  # a check that cannot run fails its tuned rows
                for v, _ in members:
                    if v.role == "tuned":
                        failed[v.name] = "the check failed to run: %s: %s" % (type(e).__name__, e)
        live = []
        for v, res in members:
            if v.name in failed:
                res.update(status="error", reason="check: " + failed[v.name], finished=True)
                self.any_error = True
                continue
            try:
                work = v.make(ctx)
                for _ in range(row.warmup):
                    work.step()
                if self.device == "cuda":
                    self.torch.cuda.synchronize()
            except Exception as e:
                res.update(status="error", reason="%s: %s" % (type(e).__name__, e), finished=True)
                self.any_error = True
                continue
            live.append((v, res, work))
        try:
            self.blocks(row, live, state)
        finally:
            for _, res, work in live:
                res["finished"] = True
                work.close()

    def blocks(self, row, live, state):
        o = self.o
        if not live:
            return
        t0 = time.perf_counter()
        done, block, cap, why = 0, o["repetitions"], 0.0, ""
        left = max(0.0, state["budget"] - (t0 - state["start"]))
        while True:
            # rounds: one repetition of each variant in random order, as the core's harness,
            # so that the k-th repetitions the precision pairs ran next to each other
            order = []
            for _ in range(block):
                one = list(live)
                self.rng.shuffle(one)
                order += one
            for v, res, work in order:
                if res["status"] != "ok":  # failed earlier in this block
                    continue
                try:
                    self.repetition(row, work, res)
                except Exception as e:
                    res.update(status="error", reason="%s: %s" % (type(e).__name__, e))
                    self.any_error = True
                    live = [x for x in live if x[1] is not res]
            done += block
            used = time.perf_counter() - t0
            if done == o["repetitions"]:
                cap = timing.group_cap(state["budget"], left, used)
            worst = self.read_group(live)
            if worst is None:
                break
            d, more = timing.precision_next(o["precision"], done, o["max_repetitions"], used, cap, worst)
            if d == timing.GO_ON:
                block = more
                continue
            if d == timing.CAP_REPETITIONS:
                why = "target not met: capped at %d repetitions" % done
            elif d == timing.CAP_TIME:
                why = "target not met: capped at %.0f s (%d repetitions)" % (cap, done)
            else:
                why = timing.DECISION_NAMES[d]
            break
        for _, res, _ in live:
            res["stop"] = why

    def read_group(self, live):
        """The worst relative half-width of the group (harness_schedule.cc read_group)."""
        ok = [(v, res) for v, res, _ in live if res["status"] == "ok" and res["reps"]]
        if not ok:
            return None
        base = next((res for v, res in ok if v.role == "baseline"), None)
        bt = [r["time"] for r in base["reps"]] if base else []
        worst, paired = 0.0, []
        for v, res in ok:
            t = [r["time"] for r in res["reps"]]
            if res is not base and v.role == "tuned" and bt:
                p, _ = timing.precision_of_paired_speedup(bt, t)
                paired.append((v, p))
            else:
                p = timing.precision_of_median(t)
            res["precision_reached"] = p
            if not (p <= worst):
                worst = p
        if paired and base:
            worst = 0.0
            for v, res in ok:
                if res is not base and v.role in ("tuned", "reference") and not (res["precision_reached"] <= worst):
                    worst = res["precision_reached"]
        return worst

    def timed(self, row):
        """Whether the row group takes time here (a row for another device skips at once)."""
        return row.device in ("any", self.device)

    def run(self, rows):
        """rows: [(row, [(variant, result)])] of the selected instances. Under a budget each
        practice gets an equal share of what is left of it (what one leaves goes to the next)
        and spends it precision first, as the core's harness does (harness_schedule.cc): its
        row groups in order, each until its target or its most repetitions within what is
        left of the share; a group is a visible skip, never measured loosely, when less of
        the share is left than the practice's previous group took. A practice's first group
        always runs, so every practice gets its figures, not only the first ones."""
        o = self.o
        for _, members in rows:
            self.results.extend(res for _, res in members)
        start = time.perf_counter()
        practices_left = len({row.practice for row, _ in rows if self.timed(row)})
        practice, t_practice, share, previous_s = None, 0.0, 0.0, 0.0  # previous_s: 0 before a first group
        for row, members in rows:
            t0 = time.perf_counter()
            if self.timed(row) and row.practice != practice:
                practice, t_practice, previous_s = row.practice, t0, 0.0
                share = 0.0
                if o["budget"] > 0:  # never 0, which would mean no budget at all
                    share = max(1e-3, o["budget"] - (t0 - start)) / max(1, practices_left)
                practices_left -= 1
            if self.timed(row) and share > 0 and share - (t0 - t_practice) < previous_s:
                why = ("not run: less of its practice's share of --harness_budget (%.0f s) was left than its "
                       "previous group took" % share)
                for _, res in members:
                    res.update(status="skipped", reason=why, finished=True)
            else:
                self.torch.manual_seed(o["seed"])
                self.run_group(row, members, {"start": t_practice, "budget": share})
                if self.timed(row):
                    previous_s = time.perf_counter() - t0
            self.write()
            for _, res in members:
                print(console_line(res), flush=True)


def console_line(res):
    """A row's line as Google Benchmark's console writes it (run-suite's progress counts the
    SKIPPED and ERROR OCCURRED lines)."""
    if res["status"] == "skipped":
        return "%-70s SKIPPED (%s)" % (res["name"], res["reason"])
    if res["status"] == "error":
        return "%-70s ERROR OCCURRED: '%s'" % (res["name"], res["reason"])
    times = [r["time"] for r in res["reps"]]
    return "%-70s %12.1f us per step, %d repetitions%s" % (
        res["name"], sum(times) / max(1, len(times)), len(times), "; " + res["stop"] if res["stop"] else "")


def no_torch_rows(o, why):
    """One skipped row per practice module, named without importing it."""
    out = []
    for m in module_names(o):
        name = os.path.basename(m)[:-3] if m.endswith(".py") else m
        res = {"name": "pytorch_%s/all/real_time" % name, "practice": "pytorch_" + name, "variant": "all",
               "role": "baseline", "params": {}, "params_text": "", "status": "skipped", "reason": why,
               "reps": [], "counters": {}, "stop": "", "finished": True}
        if not o["filter"] or re.search(o["filter"], res["name"]):
            out.append(res)
    return out


def main(argv):
    try:
        o = parse_args(argv)
    except BadFlag as e:
        print("bench.py: %s" % e, file=sys.stderr)
        return 2
    if o["help"]:
        print(USAGE)
        return 0
    try:
        import warnings
        warnings.filterwarnings("ignore", message=".*NumPy.*")
        import torch
    except Exception as e:  # no torch: every practice a visible skip
        why = "no torch in %s (%s: %s); scripts/setup.sh makes cache/venv with one" % (
            sys.executable, type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        rows = no_torch_rows(o, why)
        if o["list"]:
            print("\n".join(r["name"] for r in rows))
            return 0
        context = suite_context(o)
        context.update(torch_version="none", torch_threads="", torch_device="", tidy_schema=tidy.read_schema()["version"])
        for r in rows:
            print(console_line(r))
        tidy.write_all(o["csv"], o["out"], tidy.read_schema(), rows, context, 0.0)
        return 0
    o["cuda"] = o["device"] != "cpu" and torch.cuda.is_available()
    o["run_device"] = o["device"] if o["device"] != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for m in module_names(o):
        mod = load_module(m)
        for row in mod.ROWS:
            members = [(v, new_result(row, v, o)) for v in row.variants]
            members = [(v, r) for v, r in members if not o["filter"] or re.search(o["filter"], r["name"])]
            if o["presets"] and "preset" in row.params and str(row.params["preset"]) not in o["presets"]:
                members = []
            if members:
                rows.append((row, members))
    if o["list"]:
        for _, members in rows:
            for _, r in members:
                print(r["name"])
        return 0
    has_cuda = torch.cuda.is_available()
    device = o["device"] if o["device"] != "auto" else ("cuda" if has_cuda else "cpu")
    if o["precision"] < 0:
        o["precision"] = 0.02 if device == "cuda" else 0.05
    torch.set_num_threads(o["threads"])
    try:
        torch.set_num_interop_threads(o["threads"])
    except RuntimeError:
        pass
    context = suite_context(o)
    context.update(cpu_threads=str(o["threads"]), torch_version=torch.__version__,
                   torch_threads=str(torch.get_num_threads()), torch_device=device,
                   tidy_schema=tidy.read_schema()["version"])
    runner = Runner(o, torch, context)
    runner.device = device
    runner.no_cuda = ("no CUDA device (torch %s sees none)" % torch.__version__ if not has_cuda
                      else "no CUDA device in this run (--device=cpu)")
    if device == "cuda" and not has_cuda:
        runner.no_cuda = "this torch (%s) has no usable CUDA device" % torch.__version__
        runner.device = "cuda"
        for row, members in rows:
            for _, r in members:
                r.update(status="skipped", reason="--device=cuda: " + runner.no_cuda, finished=True)
            runner.results.extend(r for _, r in members)
        runner.write()
        return 0
    interrupted = []

    def on_signal(sig, _frame):
        interrupted.append(sig)
        raise KeyboardInterrupt
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        runner.run(rows)
    except KeyboardInterrupt:
        # as the core's harness: repetitions done against rows x the least repetitions
        # (run-suite's time plan scales a cut program's time by their ratio)
        planned = len(runner.results) * o["repetitions"]
        done = sum(len(r["reps"]) if r["status"] != "skipped" else o["repetitions"] for r in runner.results)
        # as the core's harness: a row still running is partial, one not started is not written
        runner.results = [r for r in runner.results if r["finished"] or r["reps"]]
        for r in runner.results:
            if not r["finished"] and r["status"] == "ok":
                r.update(status="partial", reason="%d repetitions (the run was cut)" % len(r["reps"]))
        runner.write()
        if o["csv"]:
            tidy.write_atomically(tidy.partial_path(o["csv"]), "%d %d\n" % (done, planned))
        return 130
    return 1 if runner.any_error else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
