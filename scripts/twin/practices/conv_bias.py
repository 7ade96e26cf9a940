"""conv_bias's twin (bench/conv_bias): training steps with a bias on every convolution
(bias: nn.Conv2d's default, models.build(preset, bias=True)) against none (no_bias, the
guide's advice: bias=False before a BatchNorm), each ResNet preset at its batch.

Check, as the core's: from the same shared weights (the biases start at zero, the rest is
the same seed's) on the same batches, the update of every parameter both have after 3 steps
within CONV_BIAS_TOL of the baseline's (relative L2); the biases' own updates are left out.
"""
from twin.api import Row, Variant
from twin.practices import _training as training

CONV_BIAS_TOL = 1e-2   # bench_conv_bias.c CONV_BIAS_TOL (CPU and CUDA)


def row(preset, device="any"):
    variants = [Variant("bias", "baseline", lambda ctx: training.Train(ctx, preset, 0, False, bias=True)),
                Variant("no_bias", "tuned", lambda ctx: training.Train(ctx, preset, 0, True))]
    return Row(practice="conv_bias", params=training.params_of(preset, 0), variants=variants,
               min_time=0.5, synthetic=True, warmup=3, device=device,
               check=training.update_check(variants, preset, 0, CONV_BIAS_TOL),
               differs="The core's biases start at zero as here; PyTorch's Conv2d would draw them "
                       "at random, which the twin overrides so both variants start alike.")


ROWS = [row(p) for p in ("tiny", "small")] + [row(p, "cuda") for p in ("medium", "resnet18")]
