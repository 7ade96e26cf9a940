"""fusion's twin (bench/fusion): training steps of each ResNet preset at its batch in eager
PyTorch (separate: BN, add and ReLU each a kernel) against torch.compile's fused pointwise
kernels (fused: Inductor fuses BN+ReLU and add+ReLU, forward and backward). The compile is
done in make(), untimed, and one forward and backward (no optimiser step) warm it up; a
machine without a C++ compiler, or where torch.compile fails, skips the rows visibly with
the reason.

Check: fused's update after 3 steps from the same start within FUSION_TOL of separate's
(relative L2): the core's CUDA tolerance on both devices, as Inductor's kernels reduce in
their own order (the core's CPU fused loops are bit for bit).
"""
import os
import shutil

import torch

from twin.api import Row, Variant
from twin.practices import _training as training

FUSION_TOL = 1e-2   # bench_fusion.c FUSION_GPU_TOL
_compiles = {}      # device -> None (torch.compile works) or why not, tried once per process


def why_not(ctx):
    """A Row.skip: no C++ compiler for Inductor's CPU kernels, or a trial compile failed."""
    if ctx.device not in _compiles:
        cxx = os.environ.get("CXX", "c++")
        if ctx.device == "cpu" and not shutil.which(cxx):
            _compiles[ctx.device] = "torch.compile needs a C++ compiler for CPU kernels; %s not found" % cxx
        else:
            try:
                f = torch.compile(lambda x: torch.relu(x * 2.0 + 1.0))
                f(torch.ones(8, device=ctx.device))
                _compiles[ctx.device] = None
            except Exception as e:  # noqa: BLE001: any failure of the compiler stack is the reason
                _compiles[ctx.device] = "torch.compile failed here: %s: %s" % (
                    type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
    return _compiles[ctx.device]


class Compiled(training.Train):
    def __init__(self, ctx, preset):
        super().__init__(ctx, preset, 0, True, forward=torch.compile)
        self.loss_of(self.x, self.y).backward()  # compiles forward and backward, untimed
        self.opt.zero_grad(set_to_none=True)
        training.sync(ctx.device)


def row(preset, device="any"):
    variants = [Variant("separate", "baseline", lambda ctx: training.Train(ctx, preset, 0, False)),
                Variant("fused", "tuned", lambda ctx: Compiled(ctx, preset))]
    return Row(practice="fusion", params=training.params_of(preset, 0), variants=variants,
               min_time=0.5, synthetic=True, warmup=3, device=device, skip=why_not,
               check=training.update_check(variants, preset, 0, FUSION_TOL),
               differs="torch.compile fuses what Inductor chooses (more than BN+ReLU and add+ReLU, "
                       "the core's pairs) and sums in its own order: checked within the core's "
                       "CUDA tolerance on the CPU too. The compile warm-up's forward updates BN's "
                       "running statistics once more than separate's (the update is unaffected).")


ROWS = [row(p) for p in ("tiny", "small")] + [row(p, "cuda") for p in ("medium", "resnet18")]
