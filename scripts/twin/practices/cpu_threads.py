"""cpu_threads's twin (bench/cpu_threads): training steps of a preset with PyTorch's intra-op
threads at 1 (threads_1, the baseline) against every CPU this process may use (threads_N,
torch.set_num_threads(N): the tuning guide's "Utilize OpenMP" / OMP_NUM_THREADS), as the
core's rows toggle the fast CPU backend's threads. A CPU practice: the rows are CPU rows.

Each step sets its variant's thread count and puts the run's back after (the variants of a
row interleave, and no later row may inherit another count). Check: the update after 3
steps from the same start. Both split some reductions by thread (the core its convolutions'
weight gradients over batch chunks; PyTorch's oneDNN and ATen reductions too), so another
thread count sums in another order: THREADS_TOL of fp32 rounding, with the float64 arbiter
above it (the core's rows allow 1e-2, as its other changes of summation order).
"""
import os

import torch

from twin.api import Row, Variant
from twin.practices import _training as training

THREADS_TOL = 1e-5


def cpus():
    return len(os.sched_getaffinity(0))


class Threaded(training.Train):
    """training.Train with torch's intra-op threads set to `threads` for each step."""

    def __init__(self, ctx, preset, tuned, threads):
        super().__init__(ctx, preset, 0, tuned)
        self.threads = threads

    def train(self, x, y):
        torch.set_num_threads(self.threads)
        try:
            return super().train(x, y)
        finally:
            torch.set_num_threads(self.ctx.threads)


def skip_one_cpu(ctx):
    if ctx.device != "cpu":
        return "a CPU practice: PyTorch's intra-op threads (the core runs it on its fast CPU backend)"
    if cpus() < 2:
        return "one CPU here: no second thread count to compare"
    return None


def row(preset):
    n = max(cpus(), 2)
    variants = [Variant("threads_1", "baseline", lambda ctx: Threaded(ctx, preset, False, 1))]
    variants += [Variant("threads_%d" % k, "tuned", (lambda k: lambda ctx: Threaded(ctx, preset, True, k))(k))
                 for k in range(2, n + 1)]
    return Row(practice="cpu_threads", params=training.params_of(preset, 0), variants=variants,
               min_time=0.5, synthetic=True, warmup=3, device="cpu", skip=skip_one_cpu,
               check=training.update_check(variants, preset, 0, THREADS_TOL),
               differs="PyTorch's intra-op pool (OpenMP, oneDNN) against the core's task pool")


ROWS = [row(p) for p in ("tiny", "mlp")]
