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
from twin.practices import training

CHECKPOINT_GPU_TOL = 1e-3   # bench_checkpoint.c CHECKPOINT_GPU_TOL


def units(model):
    """The core's checkpoint units of a ResNet: the stem (conv, BN, ReLU), then each block."""
    return [lambda x: F.relu(model.stem_bn(model.stem(x)))] + list(model.blocks)


def head(model, x):
    return model.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def each_unit(model):
    def forward(x):
        for u in units(model):
            x = checkpoint(u, x, use_reentrant=False)
        return head(model, x)
    return forward


def sqrt_segments(model):
    us = units(model)
    segments = int(round(math.sqrt(len(us))))

    def forward(x):
        return head(model, checkpoint_sequential(us, segments, x, use_reentrant=False))
    return forward


def row(preset, batch, device="any"):
    def v(name, role, forward):
        return Variant(name, role, lambda ctx: training.Train(ctx, preset, batch, role == "tuned", forward=forward))
    variants = [v("keep_all", "baseline", None), v("checkpoint", "tuned", each_unit),
                v("checkpoint_sqrt", "tuned", sqrt_segments)]
    r = Row(practice="checkpoint", params=training.params_of(preset, batch), variants=variants,
            min_time=0.5, warmup=3, device=device,
            differs="PyTorch's recompute runs BatchNorm's training-mode forward again, which updates "
                    "its running statistics a second time (the core's recompute does not); the "
                    "parameters' update, which the check compares, is unaffected.")
    cpu_check = training.update_check(variants, preset, batch, 0.0)
    gpu_check = training.update_check(variants, preset, batch, CHECKPOINT_GPU_TOL)
    r.check = lambda ctx: (gpu_check if ctx.device == "cuda" else cpu_check)(ctx)
    return r


ROWS = [row(p, b, "cpu") for p in ("tiny", "small") for b in (8, 32)] + \
       [row(p, b, "cuda") for p in ("small", "medium", "resnet18") for b in (64, 128, 256)]
