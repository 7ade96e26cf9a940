"""amp's twin (bench/amp, the macro family amp/*): training steps of every preset at its
batch in fp32 (baseline: PyTorch's default, TF32 convolutions and strict fp32 GEMMs)
against tf32 (matmul.allow_tf32 too), fp16 (torch.autocast float16 with GradScaler at its
defaults, unscale_ before any clipping) and bf16 (torch.autocast bfloat16, no scaler): GPU
only, as the core's rows (a CPU skips them visibly; the core's CPU amp rows are skips too).

Check, as the core's: each tuned variant's update after 3 steps from the same start within
MACRO_TOLERANCE of fp32's (relative L2).
"""
from twin.api import Row, Variant
from twin.practices import _training as training

MACRO_TOLERANCE = 0.1   # bench_amp.c MACRO_TOLERANCE
PRESETS = ("tiny", "mlp", "small", "medium", "resnet18")


def variant(preset, precision, role):
    return Variant(precision, role, lambda ctx: training.Train(ctx, preset, 0, role == "tuned", precision=precision))


def row(practice, preset, baseline, tuned):
    variants = [variant(preset, baseline, "baseline")] + [variant(preset, p, "tuned") for p in tuned]
    return Row(practice=practice, params=training.params_of(preset, 0), variants=variants,
               min_time=0.5, warmup=3, device="cuda", skip=training.needs_cuda,
               check=training.update_check(variants, preset, 0, MACRO_TOLERANCE),
               differs="Warm-up: 3 untimed steps; the core's fp16 warm-up goes on until 3 steps in "
                       "a row have not been skipped by GradScaler's start-up.")


ROWS = [row("amp", p, "fp32", ("tf32", "fp16", "bf16")) for p in PRESETS] + \
       [row("amp_strict", p, "fp32_strict", ("fp16", "bf16")) for p in PRESETS]
