#!/usr/bin/env python3
"""twin_compare.py: the core's step time and peak memory against PyTorch's, side by side.

For each config PRESET:BATCH:PRECISION:LAYOUT (BATCH 0: the preset's), on the CPU or on a
CUDA device: `steptime --dump` writes the core's initial weights and batch once per
(preset, batch); on the CPU, `torch_twin.py check` first replays the core's steps in
PyTorch (the numbers must agree, see tests/test_twin.c; a config whose check fails is
not timed: its rows say status=failed and why). Then ROUNDS rounds run,
interleaved so that anything else on the machine falls on both sides alike: per config,
the core (steptime), then PyTorch eager (torch_twin.py time). With --compile,
torch.compile runs after all rounds, only while time is left, and only where the C
compiler it needs at run time exists (Triton's launchers on CUDA: $CC, gcc or clang;
Inductor's C++ on the CPU: $CXX, g++, clang++ or c++); elsewhere its rows say why, and no
time is spent on it. Each run reports the median of its timed steps; the tables give the
median of those over the rounds and the smallest step seen. The loss is read back every
step on both sides (the core's default, .item()), and both take the batch the same way
(--input: device, moved there once before the steps, by default; host, a pageable host
batch copied every step); the peak memory of both counts the batch on the device.

--practices NAME,... also measures practices that have a one-line PyTorch form, as a
toggle on both sides (same config, same rounds; the baseline is the default run):
zero_grad (set_to_none=False -> True), readback (.item() every step -> deferred, every 10),
cudnn_benchmark (False -> True; GPU), amp (fp32 -> fp16 autocast + GradScaler; GPU; only
on fp32 configs: on any other precision its rows say why, as an fp16 config would time
fp16 against itself).

Writes to --out (the GPU check: RESULTS_DIR/twin): twin.csv (tidy: one row per config and side), twin.md (the
table: core/eager ratios of time and peak memory), twin_practices.csv, twin.log (every
run's line). A run that cannot happen (no torch, no CUDA in torch, torch.compile failing,
the deadline) is a row with status skipped or failed and its reason, never a number.
Python standard library only; the PyTorch side runs under --python.
"""
import argparse
import csv
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Timed steps per run: about a second of work or more (CPU), a few dozen (GPU).
CPU_STEPS = {"tiny": 40, "mlp": 200, "small": 5}
GPU_STEPS = {"resnet18": 20, "medium": 30}
# name: the tuned variant's flags of steptime and of torch_twin.py time (the same words);
# the baseline is both sides' default run (zero_grad(set_to_none=False), .item() per step)
PRACTICES = {
    "zero_grad": "--zero-grad set_to_none",
    "readback": "--readback deferred --readback-interval 10",
    "cudnn_benchmark": "--conv-algo autotune",  # GPU; on the CPU both sides ignore it
    "amp": "--precision fp16",  # on an fp32 config; GPU (the twin skips fp16 on the CPU)
}
# What each side's --input means (steptime and torch_twin.py time take the same words).
INPUTS = ("device", "host")
CSV_COLS = ["device", "preset", "batch", "precision", "layout", "side", "status", "reason",
            "rounds", "median_ms", "min_ms", "peak_mib", "ratio_core_eager",
            "peak_ratio_core_eager", "torch_version", "threads", "host", "input"]
PRACTICE_COLS = ["device", "preset", "batch", "precision", "layout", "practice", "side",
                 "status", "reason", "rounds", "baseline_ms", "tuned_ms", "speedup",
                 "torch_version"]


class Runner:
    """Runs commands until the deadline, logging each output line."""

    def __init__(self, log, deadline):
        self.log, self.deadline = log, deadline

    def left(self):
        return self.deadline - time.time()

    def run(self, cmd):
        """(exit status, output lines); status None when the deadline stopped it."""
        left = self.left()
        if left < 1:
            return None, ["not started: the deadline had passed"]
        self.log.write(f"$ {cmd}\n")
        # its own process group, so that the deadline stops the whole command
        p = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=None if left == float("inf") else left)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.log.write("# stopped at the deadline\n")
            return None, ["stopped at the deadline"]
        lines = [ln for ln in out.splitlines()
                 if ln.strip() and "NumPy" not in ln and "_conversion_method_template" not in ln]
        for ln in lines:
            self.log.write(ln + "\n")
        self.log.flush()
        return p.returncode, lines


def pick(lines, want):
    """The line starting with want, else the reason: a twin-skip line, else the last line."""
    for prefix in (want, "twin-skip: "):
        for ln in lines:
            if ln.startswith(prefix):
                return ln
    return lines[-1] if lines else ""


def fields(line):
    """'steptime: k v k v ...' or 'twin: k v ...' as a dict."""
    words = line.split()[1:]
    return dict(zip(words[0::2], words[1::2]))


def parse_config(text):
    parts = text.split(":")
    if len(parts) != 4 or not parts[1].isdigit():
        raise argparse.ArgumentTypeError(f"'{text}': want PRESET:BATCH:PRECISION:LAYOUT")
    return parts[0], int(parts[1]), parts[2], parts[3]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[2:]))
    ap.add_argument("configs", nargs="*", type=parse_config, metavar="PRESET:BATCH:PRECISION:LAYOUT",
                    help="default: tiny:0:fp32:nchw mlp:0:fp32:nchw (CPU), resnet18 at batch "
                         "128 and 256, fp16 and fp32, nchw and nhwc (CUDA)")
    ap.add_argument("--build", default="build", help="the build folder with steptime")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--out", default=os.environ.get("RESULTS_DIR", ""),
                    help="results folder (default $RESULTS_DIR; required)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="timed steps per run (0: per preset)")
    ap.add_argument("--warmup", type=int, default=0, help="untimed steps first (0: 2 CPU, 5 GPU)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads, both sides (0: all)")
    ap.add_argument("--compile", action="store_true",
                    help="also time torch.compile, after the rounds (where a C compiler exists)")
    ap.add_argument("--input", choices=INPUTS, default="device",
                    help="how both sides get the batch: device (moved there once, before the "
                         "steps; default) or host (a pageable host batch copied every step)")
    ap.add_argument("--practices", default="", help="comma-separated: " + ",".join(PRACTICES))
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds for everything; no run starts after it (0: no limit)")
    ap.add_argument("--core-prefix", default="",
                    help="a command that runs steptime (e.g. bash scripts/with-gpu-libs.sh)")
    ap.add_argument("--python", default=default_python(),
                    help="a Python with torch (default $PYTHON, else scripts/setup.sh's "
                         "cache/venv, else python3)")
    ap.add_argument("--render", metavar="DIR",
                    help="only print the markdown of DIR's twin.csv (report.sh uses it)")
    a = ap.parse_args()
    if a.render:
        print(render(a.render), end="")
        return
    if not a.out:
        ap.error("--out (or RESULTS_DIR) is required")
    if a.rounds < 1 or a.steps < 0 or a.warmup < 0 or a.budget < 0:
        ap.error("--rounds must be >= 1; --steps, --warmup, --budget >= 0")
    practices = [p for p in a.practices.split(",") if p]
    for p in practices:
        if p not in PRACTICES:
            ap.error(f"unknown practice '{p}' (known: {', '.join(PRACTICES)})")
    steptime = os.path.join(a.build, "steptime")
    if not os.access(steptime, os.X_OK):
        sys.exit(f"twin_compare: no {steptime} (make first, or --build)")
    steptime = f"{a.core_prefix} {shlex.quote(steptime)}".strip()
    configs = a.configs or (
        [("tiny", 0, "fp32", "nchw"), ("mlp", 0, "fp32", "nchw")] if a.device == "cpu" else
        [("resnet18", b, p, l) for b in (128, 256) for p in ("fp16", "fp32") for l in ("nchw", "nhwc")])
    os.makedirs(a.out, exist_ok=True)
    deadline = time.time() + a.budget if a.budget > 0 else float("inf")
    host = os.uname().nodename
    with open(os.path.join(a.out, "twin.log"), "a") as log, tempfile.TemporaryDirectory() as work:
        r = Runner(log, deadline)
        log.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {host}, device "
                  f"{a.device}, {os.cpu_count()} cpus, {a.rounds} rounds, budget {a.budget or '-'}s\n")
        rc, lines = r.run(f"{a.python} -c 'import torch; print(torch.__version__)'")
        torch_version = lines[-1] if lines else ""
        torch_reason = "" if rc == 0 else f"{a.python} cannot import torch (pip install torch)"
        if torch_reason:
            torch_version = ""
            print(f"twin_compare: {torch_reason}: only the core is timed")
        backend = "cuda" if a.device == "cuda" else "cpu"
        threads = f" --threads {a.threads}" if a.threads > 0 else ""
        same_input = f" --input {a.input}"  # both sides, the same input path
        twin = f"{a.python} {shlex.quote(os.path.join(HERE, 'torch_twin.py'))}"

        def batch_flag(b):
            return f" --batch-size {b}" if b > 0 else ""

        def steps_of(preset):
            table = CPU_STEPS if a.device == "cpu" else GPU_STEPS
            steps = a.steps or table.get(preset, 3 if a.device == "cpu" else 50)
            return f" --steps {steps} --warmup {a.warmup or (2 if a.device == 'cpu' else 5)}"

        # the weights and batch, once per (preset, batch); on the CPU, the agreement first
        dumps, dump_failed, check_failed = {}, {}, {}
        for preset, batch, _, _ in configs:
            key = (preset, batch)
            if key in dumps:
                continue
            d = os.path.join(work, f"{preset}-{batch}")
            rc, lines = r.run(f"{steptime} --preset {preset}{batch_flag(batch)} --backend {backend} "
                              f"--dump {d} --check-steps 3 --steps 1 --warmup 0")
            line = pick(lines, "steptime:")
            dumps[key] = d if rc == 0 else None
            if rc != 0:
                dump_failed[key] = f"steptime --dump failed: {line}"
                print(f"twin_compare: {preset} batch {batch}: {dump_failed[key]}")
            elif a.device == "cpu" and not torch_reason:
                rc, lines = r.run(f"{twin} check {d}")
                verdict = pick(lines, "twin-check: a" if rc == 0 else "twin-check: ")
                print(f"twin_compare: agreement {preset} batch {batch}: {verdict}")
                if rc != 0:  # numbers that disagree: their speed is not worth publishing
                    fails = [ln.strip() for ln in lines if ln.lstrip().startswith("FAIL")]
                    check_failed[key] = (f"torch_twin.py check failed ({verdict or f'exit status {rc}'}"
                                         f"{': ' + '; '.join(fails)[:300] if fails else ''}): not timed")

        # (config, side, variant) -> list of result dicts, or a reason string
        runs, reasons = {}, {}

        def record(key, rc, lines, want):
            line = pick(lines, want)
            if rc == 0 and line.startswith(want):
                runs.setdefault(key, []).append(fields(line))
            else:
                reasons.setdefault(key, line.replace("twin-skip: ", "") or f"exit status {rc}")

        def core_run(cfg, extra=""):
            preset, batch, prec, lay = cfg
            return r.run(f"{steptime} --preset {preset}{batch_flag(batch)} --backend {backend} "
                         f"--precision {prec} --layout {lay}{threads}{same_input}{steps_of(preset)}{extra}")

        def twin_run(cfg, extra=""):
            preset, batch, prec, lay = cfg
            d = dumps[(preset, batch)]
            return r.run(f"{twin} time --dump {d} --device {a.device} --precision {prec} "
                         f"--layout {lay}{threads}{same_input}{steps_of(preset)}{extra}")

        variants = [("", "")] + [(p, PRACTICES[p]) for p in practices
                                 if a.device == "cuda" or p not in GPU_ONLY]
        for p in practices:
            if a.device == "cpu" and p in GPU_ONLY:
                for cfg in configs:
                    for side in ("core", "eager"):
                        reasons[(cfg, side, p)] = "a GPU practice: nothing to measure on the CPU"
        failed = {}  # config -> why it is not timed at all (a failed dump or check)
        for cfg in configs:  # nothing runs without the dump or with numbers that disagree
            why = dump_failed.get(cfg[:2]) if dumps[cfg[:2]] is None else check_failed.get(cfg[:2])
            if why:
                failed[cfg] = why
                for side in ("core", "eager", "compile"):
                    for variant, _ in variants:
                        reasons[(cfg, side, variant)] = why
        for p in practices:  # a toggle that is no toggle on this config: said, not timed
            for cfg in configs:
                why = not_applicable(p, cfg)
                if why and cfg not in failed:
                    for side in ("core", "eager"):
                        reasons.setdefault((cfg, side, p), why)
        for rnd in range(1, a.rounds + 1):
            for cfg in configs:
                if cfg in failed:
                    continue
                for variant, flags in variants:
                    if variant and not_applicable(variant, cfg):
                        continue
                    rc, lines = core_run(cfg, " " + flags if flags else "")
                    record((cfg, "core", variant), rc, lines, "steptime:")
                    if torch_reason:
                        reasons.setdefault((cfg, "eager", variant), torch_reason)
                    else:
                        rc, lines = twin_run(cfg, " " + flags if flags else "")
                        record((cfg, "eager", variant), rc, lines, "twin:")
            log.write(f"# round {rnd} done\n")
            print(f"twin_compare: round {rnd} done ({r.left():.0f}s left)" if r.left() < 1e9
                  else f"twin_compare: round {rnd} done")
            if r.left() < 1:
                break
        if a.compile:
            no_compiler = compiler_missing(a.device)
            if no_compiler:
                print(f"twin_compare: --compile skipped: {no_compiler}")
                log.write(f"# --compile skipped: {no_compiler}\n")
            for cfg in configs:
                if cfg in failed or torch_reason or no_compiler:
                    reasons.setdefault((cfg, "compile", ""), torch_reason or no_compiler or "no dump")
                    continue
                rc, lines = twin_run(cfg, " --compile")
                record((cfg, "compile", ""), rc, lines, "twin:")

        write_results(a, configs, practices, runs, reasons, torch_version, host, failed)


def default_python():
    """$PYTHON, else the virtual environment scripts/setup.sh makes, else python3."""
    if os.environ.get("PYTHON"):
        return os.environ["PYTHON"]
    venv = os.path.join(os.path.dirname(HERE), "cache", "venv", "bin", "python")
    return venv if os.access(venv, os.X_OK) else "python3"


def not_applicable(practice, cfg):
    """Why a practice's toggle means nothing on this config, or None."""
    if practice == "amp" and cfg[2] != "fp32":
        return (f"amp toggles fp32 to fp16 autocast + GradScaler; this config is already "
                f"{cfg[2]} (its baseline would be timed against itself)")
    return None


def compiler_missing(device):
    """Why torch.compile cannot run here (no C compiler at run time), or None. On CUDA,
    Triton compiles its launchers with $CC, else gcc, else clang; on the CPU, Inductor
    compiles C++ with $CXX or g++ / clang++ / c++."""
    names = ("gcc", "clang", "cc") if device == "cuda" else ("g++", "clang++", "c++")
    env = os.environ.get("CC" if device == "cuda" else "CXX")
    if env and shutil.which(env.split()[0]):
        return None
    if not env and any(shutil.which(n) for n in names):
        return None
    return (f"no C compiler ({'$CC ' + repr(env) + ' not found' if env else ' or '.join(names) + ' not on PATH'}): "
            f"torch.compile needs one at run time ({'Triton' if device == 'cuda' else 'Inductor C++'}); not run")


def summary(runs):
    med = statistics.median(float(x["median_ms"]) for x in runs)
    low = min(float(x["min_ms"]) for x in runs)
    peaks = [x.get("peak_mib", "-") for x in runs]
    peak = max((float(p) for p in peaks if p not in ("-", "")), default=None)
    if peak is not None and peak == 0.0:
        peak = None  # the CPU core reports its own buffers; device peaks are GPU-only
    return med, low, peak, runs[-1].get("threads", "")


def write_results(a, configs, practices, runs, reasons, torch_version, host, failed):
    rows = []
    sides = ["core", "eager"] + (["compile"] if a.compile else [])
    for cfg in configs:
        preset, batch, prec, lay = cfg
        got = {s: summary(runs[(cfg, s, "")]) for s in sides if (cfg, s, "") in runs}
        ratio = peak_ratio = ""
        if "core" in got and "eager" in got:
            ratio = f"{got['core'][0] / got['eager'][0]:.3f}"
            if got["core"][2] and got["eager"][2]:
                peak_ratio = f"{got['core'][2] / got['eager'][2]:.3f}"
        for s in sides:
            key = (cfg, s, "")
            row = dict(device=a.device, preset=preset, batch=batch, precision=prec, layout=lay,
                       side=s, torch_version=torch_version if s != "core" else "",
                       host=host, ratio_core_eager=ratio, peak_ratio_core_eager=peak_ratio,
                       input=a.input)
            if s in got:
                med, low, peak, thr = got[s]
                row.update(status="ok", reason="", rounds=len(runs[key]), median_ms=f"{med:.3f}",
                           min_ms=f"{low:.3f}", peak_mib="" if peak is None else f"{peak:.1f}",
                           threads=thr)
            else:
                row.update(status="failed" if s == "core" or cfg in failed else "skipped",
                           reason=reasons.get(key, "not run"), rounds=0)
            rows.append(row)
    with open(os.path.join(a.out, "twin.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)

    prows = []
    for cfg in configs:
        for p in practices:
            for s in ("core", "eager"):
                b, t = runs.get((cfg, s, "")), runs.get((cfg, s, p))
                row = dict(device=a.device, preset=cfg[0], batch=cfg[1], precision=cfg[2],
                           layout=cfg[3], practice=p, side=s,
                           torch_version=torch_version if s != "core" else "")
                if b and t:
                    bm, tm = summary(b)[0], summary(t)[0]
                    row.update(status="ok", reason="", rounds=min(len(b), len(t)),
                               baseline_ms=f"{bm:.3f}", tuned_ms=f"{tm:.3f}",
                               speedup=f"{bm / tm:.3f}")
                else:
                    row.update(status="failed" if cfg in failed else "skipped", rounds=0,
                               reason=reasons.get((cfg, s, p)) or
                               reasons.get((cfg, s, ""), "not run"))
                prows.append(row)
    if practices:
        with open(os.path.join(a.out, "twin_practices.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=PRACTICE_COLS, extrasaction="ignore")
            w.writeheader()
            w.writerows(prows)

    with open(os.path.join(a.out, "twin.md"), "w") as f:
        f.write(render(a.out))
    print(render(a.out), end="")
    print(f"twin_compare: wrote {a.out}/twin.csv, twin.md"
          f"{', twin_practices.csv' if practices else ''}, twin.log")


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# Practices that only mean something on a GPU (the CPU backends compute in fp32 and have no
# cuDNN): on the CPU their rows say so instead of timing noise.
GPU_ONLY = {"amp", "cudnn_benchmark"}

# The practice of the C suite (results summary.csv: practice, tuned variant) that each
# twin toggle matches; params there are "preset:P;batch:B".
SUITE_PRACTICE = {"zero_grad": ("zero_grad", "set_to_none"), "readback": ("sync", "every_10"),
                  "cudnn_benchmark": ("cudnn_benchmark", "autotune"), "amp": ("amp", "fp16")}


def summary_csv(folder):
    """The suite's summary.csv for a twin folder: its own, or its results folder's (the GPU
    check writes the twin's files into RESULTS/twin/, out of the way of the tidy CSVs)."""
    own = os.path.join(folder, "summary.csv")
    return own if os.path.isfile(own) else os.path.join(os.path.dirname(os.path.abspath(folder)), "summary.csv")


def render(folder):
    """The markdown of twin.md and of report.sh's credibility section, from twin.csv,
    twin_practices.csv and (for the C effect of each practice) summary.csv."""
    rows = read_csv(os.path.join(folder, "twin.csv"))
    if not rows:
        return "No twin.csv here: the core was not compared with PyTorch in this run.\n"
    by = {}
    for r in rows:
        by.setdefault((r["preset"], r["batch"], r["precision"], r["layout"]), {})[r["side"]] = r
    torch_version = next((r["torch_version"] for r in rows if r["torch_version"]), "")
    device = rows[0]["device"]
    where = rows[0].get("input") or "device"
    out = [f"The training core against PyTorch {torch_version or '(not importable there)'} "
           f"eager on the same {'GPU' if device == 'cuda' else 'CPU'} ({rows[0]['host']}), "
           "same model, weights, batch, precision and layout, runs interleaved: median step "
           "time over the rounds (each run's median step; the loss read back every step on "
           "both sides). Input on both sides: "
           + ("the batch moved to the device once, before the steps. " if where == "device" else
              "a pageable host batch copied to the device every step. ") +
           "Memory: the core's own peak allocations (core_stats peak_bytes) plus the batch it "
           "was given on the device, against torch.cuda.max_memory_allocated, which counts "
           "the batch too (GPU only). A config whose agreement check failed is not timed. "
           "The issue's targets: "
           "core/eager time <= 1.0x (goal 0.8x), memory <= 1.1x.", "",
           "| preset | batch | precision | layout | rounds | core ms | eager ms | compile ms | "
           "core/eager | core MiB | eager MiB | core/eager memory |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    missing = []
    for (preset, batch, prec, lay), sides in by.items():
        def ms(side):
            r = sides.get(side)
            return r["median_ms"] if r and r["status"] == "ok" else "-"

        def mib(side):
            r = sides.get(side)
            return r["peak_mib"] if r and r["status"] == "ok" and r["peak_mib"] else "-"

        core = sides.get("core", {})
        ratio, mratio = core.get("ratio_core_eager", ""), core.get("peak_ratio_core_eager", "")
        out.append(f"| {preset} | {batch if batch != '0' else 'preset'} | {prec} | {lay} | "
                   f"{core.get('rounds', '0')} | {ms('core')} | {ms('eager')} | {ms('compile')} | "
                   f"{ratio + 'x' if ratio else '-'} | {mib('core')} | {mib('eager')} | "
                   f"{mratio + 'x' if mratio else '-'} |")
        missing += [f"- {preset} {batch} {prec} {lay} {s}: {r['status']}: {r['reason']}"
                    for s, r in sides.items() if r["status"] != "ok"]
    if missing:
        out += ["", "Not measured:", ""] + missing
    prows = read_csv(os.path.join(folder, "twin_practices.csv"))
    if prows:
        suite = {}
        for r in read_csv(summary_csv(folder)):
            suite[(r["practice"], r["tuned"], r["params"])] = r["speedup"]
        out += ["", "Practices with a one-line PyTorch form, the same toggle in the core and in "
                "PyTorch (speedup = baseline / tuned step time, same rounds), next to the C "
                "suite's own measurement of the practice (summary.csv, when this run has it):", "",
                "| preset | batch | precision | practice | core speedup | PyTorch speedup | "
                "suite's C speedup |", "|---|---|---|---|---|---|---|"]
        pairs = {}
        for r in prows:
            pairs.setdefault((r["preset"], r["batch"], r["precision"], r["practice"]), {})[r["side"]] = r
        for (preset, batch, prec, practice), sides in pairs.items():
            def sp(side):
                r = sides.get(side)
                return r["speedup"] + "x" if r and r["status"] == "ok" else "-"
            name, tuned = SUITE_PRACTICE.get(practice, (practice, ""))
            c = suite.get((name, tuned, f"preset:{preset};batch:{batch}"))
            out.append(f"| {preset} | {batch if batch != '0' else 'preset'} | {prec} | {practice} | "
                       f"{sp('core')} | {sp('eager')} | "
                       f"{c + 'x (' + name + ' ' + tuned + ')' if c else '-'} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
