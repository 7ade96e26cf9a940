"""bn_fold's twin (bench/bn_fold): the eval-mode forward of a batch under torch.no_grad()
(the core's core_infer, CORE_GRAD_OFF) with every BatchNorm (bn) against each BatchNorm
folded into the convolution before it with torch.nn.utils.fusion.fuse_conv_bn_eval
(folded), each ResNet preset at batches 1, 8, 32 (a GPU: also medium, resnet18 and 128).

Both start from the same model trained a few steps, then given BatchNorms far from a fresh
layer's (torch_twin.far_from_identity: gamma, beta and running statistics seeded away from
1, 0, 0, 1, as the core's core_bn_randomize), so that a wrong fold shows. Check, as the
core's: the folded logits of a held-out batch of the row's size within BN_FOLD_CPU_TOL
(CUDA: BN_FOLD_GPU_TOL, BN_FOLD_GPU_FLIPS top-1 flips) of the BN model's, relative L2, and
every top-1 the same. Under the self-test no_update the folded model's training skipped its
optimiser steps (the core: the folded core left with its own initial weights).
"""
import copy

import torch
import torch.nn as nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

import torch_twin
from twin.api import Row, Variant
from twin.practices import _training as training

BN_FOLD_CPU_TOL = 1e-4   # bench_bn_fold.c
BN_FOLD_GPU_TOL = 1e-2
BN_FOLD_GPU_FLIPS = 1
BN_SEED = 7              # bench_bn_fold.c BN_SEED: the BN draw, the same for both variants
WARMUP_FORWARDS = 2      # bench_bn_fold.c WARMUP_FORWARDS


def randomized(model):
    torch_twin.far_from_identity(model, BN_SEED)
    return model


def folded(model):
    model = copy.deepcopy(randomized(model))
    for parent, c, b in torch_twin.conv_bn_pairs(model):
        setattr(parent, c, fuse_conv_bn_eval(getattr(parent, c), getattr(parent, b)))
        setattr(parent, b, nn.Identity())
    if any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        raise RuntimeError("bn_fold: a BatchNorm was left unfolded")
    return model


def row(preset, batch, device="any"):
    variants = [Variant("bn", "baseline", lambda ctx: training.Infer(ctx, preset, batch, False, torch.no_grad,
                                                                      prepare=randomized)),
                Variant("folded", "tuned", lambda ctx: training.Infer(ctx, preset, batch, True, torch.no_grad,
                                                                       prepare=folded))]
    cpu_check = training.logits_check(variants, preset, batch, BN_FOLD_CPU_TOL)
    gpu_check = training.logits_check(variants, preset, batch, BN_FOLD_GPU_TOL, BN_FOLD_GPU_FLIPS)
    return Row(practice="bn_fold", params=training.params_of(preset, batch), variants=variants,
               min_time=0.2, warmup=WARMUP_FORWARDS, device=device,
               check=lambda ctx: (gpu_check if ctx.device == "cuda" else cpu_check)(ctx),
               differs="The model before folding is trained %d steps of %d images here (the core: "
                       "4 steps); the BN draw is torch_twin.far_from_identity's, not the core's "
                       "core_bn_randomize." % (training.INFER_TRAIN_STEPS, training.INFER_TRAIN_BATCH))


ROWS = [row(p, b) for p in ("tiny", "small") for b in (1, 8, 32)] + \
       [row(p, b, "cuda") for p in ("medium", "resnet18") for b in (1, 8, 32, 128)] + \
       [row(p, 128, "cuda") for p in ("tiny", "small")]
