"""checkpoint's twin (bench/checkpointing): a training step keeping every activation
(keep_all) against torch.utils.checkpoint around every unit but the head (checkpoint: the
stem and each residual block, `x = checkpoint(block, x)`) and Chen's sqrt(n) segments
(checkpoint_sqrt: checkpoint_sequential(units, round(sqrt(units)))), the core's units and
segment counts (CoreConfig.checkpoint_segments), non-reentrant checkpointing.

Check, as the core's: the update after 3 steps from the same start against keep_all's: bit
for bit on the CPU (the recompute runs the same kernels on the same inputs), within
CHECKPOINT_GPU_TOL on CUDA.
"""
import math

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from twin.api import Row, Variant
from twin.practices import _training as training

CHECKPOINT_GPU_TOL = 1e-3   # bench_checkpoint.c CHECKPOINT_GPU_TOL


def units(model):
    """The core's checkpoint units of a ResNet: the stem (conv, BN, ReLU), then each block."""
    return [lambda x: F.relu(model.stem_bn(model.stem(x)))] + list(model.blocks)


def head(model, x):
    return model.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def segments(mode, model):
    """The core's checkpointed_segments: keep_all none, checkpoint one per unit,
    checkpoint_sqrt round(sqrt(units)) (bench_checkpoint.c sqrt_segments)."""
    n = len(units(model))
    return {"keep_all": 0, "checkpoint": n, "checkpoint_sqrt": int(round(math.sqrt(n)))}[mode]


def forward_of(mode):
    """model -> its forward under the mode (None: the model itself, every activation kept)."""
    def each_unit(model):
        def forward(x):
            for u in units(model):
                x = checkpoint(u, x, use_reentrant=False)
            return head(model, x)
        return forward

    def sqrt_segments(model):
        us, n = units(model), segments("checkpoint_sqrt", model)
        return lambda x: head(model, checkpoint_sequential(us, n, x, use_reentrant=False))
    return {"keep_all": None, "checkpoint": each_unit, "checkpoint_sqrt": sqrt_segments}[mode]


class Checkpointed(training.Train):
    """A variant's training step, with the core's counter checkpointed_segments."""

    def __init__(self, ctx, preset, batch, mode):
        super().__init__(ctx, preset, batch, mode != "keep_all", forward=forward_of(mode))
        self.segments = segments(mode, self.model)

    def counters(self):
        return {"checkpointed_segments": self.segments}


def row(preset, batch, device="any"):
    def v(mode, role):
        return Variant(mode, role, lambda ctx: Checkpointed(ctx, preset, batch, mode))
    variants = [v("keep_all", "baseline"), v("checkpoint", "tuned"), v("checkpoint_sqrt", "tuned")]
    r = Row(practice="checkpoint", params=training.params_of(preset, batch), variants=variants,
            min_time=0.5, synthetic=True, warmup=3, device=device,
            differs="PyTorch's recompute runs BatchNorm's training-mode forward again, which updates "
                    "its running statistics a second time (the core's recompute does not); the "
                    "parameters' update, which the check compares, is unaffected.")
    cpu_check = training.update_check(variants, preset, batch, 0.0)
    gpu_check = training.update_check(variants, preset, batch, CHECKPOINT_GPU_TOL)
    r.check = lambda ctx: (gpu_check if ctx.device == "cuda" else cpu_check)(ctx)
    return r


ROWS = [row(p, b, "cpu") for p in ("tiny", "small") for b in (8, 32)] + \
       [row(p, b, "cuda") for p in ("small", "medium", "resnet18") for b in (64, 128, 256)]
