#!/usr/bin/env python3
"""twin/probe.py: one practice module's rows, checked and stepped once, no statistics.

    python3 scripts/twin/probe.py MODULE [--steps N] [--device cpu|cuda] [--threads T]
                                  [--selftest NAME] [--only KEY:VALUE[;KEY:VALUE]]

MODULE is a module of twin/practices (e.g. zero_grad). For each Row: its skip reason, or
its check (each tuned variant: ok or the finding) and, when the check passes, every
variant built, warmed up and stepped N times (default 3), one line each:
    probe: pytorch_<practice> <params> <variant> <role> ms_per_step M items I
    probe: pytorch_<practice> <params> check <variant> ok|FAILED rel_diff R tolerance T [finding]
    probe: pytorch_<practice> <params> skipped: REASON
--only keeps the rows whose params have every KEY:VALUE given (e.g. "preset:tiny", for a
quick pass). Exit status 1 when a check failed, 0 otherwise. For developing and testing a practice's
twin; `make bench` times them with twin/bench.py.
"""
import argparse
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from twin.api import Context  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--selftest", default=None)
    ap.add_argument("--only", default="", help="KEY:VALUE[;KEY:VALUE]: only rows with these params")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    mod = importlib.import_module("twin.practices." + a.module)
    failed = False
    only = set(filter(None, a.only.split(";")))
    for row in mod.ROWS:
        if not only <= set(row.params_text().split(";")):
            continue
        ctx = Context(device=a.device, threads=a.threads, seed=0, selftest=a.selftest)
        head = "probe: pytorch_%s %s" % (row.practice, row.params_text())
        why = row.skip(ctx) if row.skip else None
        if why is None and row.device not in ("any", a.device):
            why = "a %s practice" % row.device
        if why:
            print("%s skipped: %s" % (head, why))
            continue
        bad = set()
        for r in (row.check(ctx) if row.check else []):
            print("%s check %s %s rel_diff %.3g tolerance %.3g %s" % (head, r.variant, "ok" if r.ok else "FAILED",
                                                                    r.rel_diff, r.tolerance, r.finding))
            if not r.ok:
                bad.add(r.variant)
                failed = True
        for v in row.variants:
            if v.name in bad:
                continue
            w = v.make(ctx)
            try:
                for _ in range(row.warmup):
                    w.step()
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    w.step()
                if a.device == "cuda":
                    torch.cuda.synchronize()
                ms = (time.perf_counter() - t0) * 1e3 / a.steps
            finally:
                w.close()
            print("%s %s %s ms_per_step %.3f items %d" % (head, v.name, v.role, ms, w.items))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
