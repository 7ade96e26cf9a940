"""debug_apis's twin (bench/debug_apis): training steps with a debugging API on (the
baseline: what leaving it on costs) against off (tuned), the tuning guide's "Disable
debugging APIs":
- debug_anomaly: torch.autograd.detect_anomaly() around forward and backward (autograd
  checks every backward function's output for NaN and keeps each forward op's traceback);
- debug_profiler: torch.autograd.profiler.profile() around the step (an event per op).
Neither changes a number: the check asks for the same update bit for bit, as the core's.
"""
import contextlib
import os
import warnings

import torch

from twin.api import Row, Variant
from twin.practices import _training as training

PRESETS = ("tiny", "mlp", "small")


def anomaly():
    warnings.filterwarnings("ignore", message=".*Anomaly Detection has been enabled.*")
    return torch.autograd.detect_anomaly(check_nan=True)


def profiler():
    # Kineto logs two lines per profiled step to stderr (profiler_start/stop) unless its log
    # level is above them; it reads the level when the profiler first starts.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    return torch.autograd.profiler.profile(record_shapes=False)


class Debugged(training.Train):
    """training.Train with each step inside `context()` (None: plain)."""

    def __init__(self, ctx, preset, tuned, context):
        super().__init__(ctx, preset, 0, tuned)
        self.context = context

    def train(self, x, y):
        with (self.context() if self.context else contextlib.nullcontext()):
            return super().train(x, y)


DEBUG = {"debug_anomaly": anomaly, "debug_profiler": profiler}


def row(practice, preset):
    context = DEBUG[practice]
    variants = [Variant("on", "baseline", lambda ctx: Debugged(ctx, preset, False, context)),
                Variant("off", "tuned", lambda ctx: Debugged(ctx, preset, True, None))]
    return Row(practice=practice, params=training.params_of(preset, 0), variants=variants,
               min_time=0.5, synthetic=True, warmup=3, device="any",
               check=training.update_check(variants, preset, 0, 0.0),
               differs="PyTorch's own debugging machinery (autograd's anomaly mode, its profiler) against "
                       "the core's analogues: a NaN/Inf scan of each op's gradients with a sync, a timestamp "
                       "per op")


ROWS = [row(practice, p) for practice in DEBUG for p in PRESETS]
