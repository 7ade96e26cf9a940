"""layout's twin (bench/layout): training steps of each ResNet preset at its batch, model
and batch in NCHW (nchw, baseline) against torch.channels_last (channels_last), in each of
the core's precisions (layout_fp32: PyTorch's default; layout_fp32_strict; layout_fp16 with
autocast and GradScaler; layout_bf16), GPU only, as the core's rows (a CPU skips them
visibly: the core runs layout on CUDA alone).

Check, as the core's: channels_last's update after 3 steps from the same start within
LAYOUT_TOLERANCE of nchw's (relative L2).
"""
from twin.api import Row, Variant
from twin.practices import _training as training

LAYOUT_TOLERANCE = 5e-2   # bench_layout.c LAYOUT_TOLERANCE
PRESETS = ("tiny", "small", "medium", "resnet18")   # mlp has no convolution


def row(precision, preset):
    def v(name, role, channels_last):
        return Variant(name, role, lambda ctx: training.Train(ctx, preset, 0, role == "tuned", precision=precision,
                                                              channels_last=channels_last))
    variants = [v("nchw", "baseline", False), v("channels_last", "tuned", True)]
    return Row(practice="layout_" + precision, params=training.params_of(preset, 0), variants=variants,
               min_time=0.5, warmup=3, device="cuda", skip=training.needs_cuda,
               check=training.update_check(variants, preset, 0, LAYOUT_TOLERANCE))


ROWS = [row(prec, p) for prec in ("fp32", "fp32_strict", "fp16", "bf16") for p in PRESETS]
