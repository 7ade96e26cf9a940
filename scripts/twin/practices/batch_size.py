"""batch_size's twin (bench/batch_size): the throughput sweep, training steps of each preset
at batches 2 to 128 by 2 (a GPU: 8 to 4096), reference rows (variant sweep, no speedup),
min_time 0.2 s as the core's.

Check: the sweep's variant must train: its update after 3 steps from the row's start is
finite and not zero (under the self-test no_update it is zero and the row fails).

batch_size_convergence (time to a held-out accuracy within a 600-step budget, five variants
over several seeds) is a time-to-accuracy row, not a throughput row: too long for the
PyTorch side on a CPU, so its rows are skipped with the reason.
"""
import math

from twin.api import CheckResult, Row, Variant
from twin.practices import _training as training

CPU_BATCHES = (2, 4, 8, 16, 32, 64, 128)
GPU_BATCHES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
CONVERGENCE = ("small_batch", "large_same_lr", "large_linear_lr", "large_linear_lr_warmup",
               "large_linear_lr_warmup_cosine")


def trains(preset, batch):
    def check(ctx):
        update = training.update_of(training.Train(ctx, preset, batch, True),
                                    training.check_batches(preset, batch, ctx))
        norm = sum(float(u.norm()) ** 2 for u in update.values()) ** 0.5
        ok = math.isfinite(norm) and norm > 0
        finding = "" if ok else "the update after %d steps is %g: the step does not train" % (
            training.CHECK_STEPS, norm)
        return [CheckResult(variant="sweep", ok=ok, rel_diff=norm, tolerance=0.0, finding=finding)]
    return check


def sweep(preset, batch, device):
    variants = [Variant("sweep", "reference", lambda ctx: training.Train(ctx, preset, batch, True))]
    return Row(practice="batch_size", params=training.params_of(preset, batch), variants=variants,
               min_time=0.2, synthetic=True, warmup=3, device=device, check=trains(preset, batch),
               differs="" if device == "cpu" else "The core's GPU sweep doubles the batch until the "
                                                  "device runs out of memory; the twin stops at 4096.")


def convergence(preset):
    variants = [Variant(name, "baseline" if name == "small_batch" else "tuned",
                        lambda ctx: training.Train(ctx, preset, 0, False)) for name in CONVERGENCE]
    return Row(practice="batch_size_convergence", params=training.params_of(preset, 0), variants=variants,
               skip=lambda ctx: "time to accuracy (600-step budget, 5 variants, several seeds) is not "
                                "measured on the PyTorch side: minutes per row, not seconds")


ROWS = [sweep(p, b, "cpu") for p in ("tiny", "mlp", "small") for b in CPU_BATCHES] + \
       [sweep(p, b, "cuda") for p in ("tiny", "mlp", "small", "medium", "resnet18") for b in GPU_BATCHES] + \
       [convergence("tiny")]
