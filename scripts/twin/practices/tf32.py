"""tf32's twin (bench/amp, the family amp_tf32/*): training steps of every preset at its
batch in strict fp32 (fp32_strict: torch.backends.cuda.matmul.allow_tf32 and
torch.backends.cudnn.allow_tf32 both False) against TF32 (tf32: both True), GPU only (a
CPU has no TF32: the rows skip visibly, as the core's).

Check, as the core's macro amp rows: tf32's update after 3 steps from the same start within
MACRO_TOLERANCE of fp32_strict's (relative L2).
"""
from twin.api import Row, Variant
from twin.practices import _training as training
from twin.practices.amp import MACRO_TOLERANCE, PRESETS


def row(preset):
    def v(precision, role):
        return Variant(precision, role, lambda ctx: training.Train(ctx, preset, 0, role == "tuned", precision=precision))
    variants = [v("fp32_strict", "baseline"), v("tf32", "tuned")]
    return Row(practice="amp_tf32", params=training.params_of(preset, 0), variants=variants,
               min_time=0.5, warmup=3, device="cuda", skip=training.needs_cuda,
               check=training.update_check(variants, preset, 0, MACRO_TOLERANCE))


ROWS = [row(p) for p in PRESETS]
