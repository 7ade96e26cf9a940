"""twin/practices/workers.py: num_workers, num_workers_large_source, num_workers_train and
persistent_workers in PyTorch: torch.utils.data.DataLoader over the same ImageFolder JPEGs
the core's bench_workers reads (bench/num_workers/bench_workers.c), batch 64, workers 0, 1,
2, 4, .. the CPU count (the core's --workers_max default), prefetch_factor 2 and
persistent workers as the core's loader_default_config; a step is one batch (the loader
rows) or one training step of the MLP fed by the loader (num_workers_train). The check:
every tuned loader gives the baseline's first batches bit for bit (same images, same
order, same crops); the training rows also compare the update after a few steps.
"""
import os
import subprocess

import torch
import torch.nn.functional as F

from twin import models
from twin.api import CheckResult, Row, Variant, Work
from twin.practices import _data as data

BATCH = 64
CHECK_BATCHES = 3       # batches compared per tuned loader
TRAIN_TOLERANCE = 1e-5  # relative L2 of the update: same batches, same threads -> rounding only
WORKERS_MAX = max(1, min(os.cpu_count() or 1, 32))
TIMEOUT_S = 120         # a stuck worker is an error, not a hang
DIFFERS = ("decode is libturbojpeg's full decode through ctypes, then crop and bilinear resize "
           "(the core decodes only the crop's region, DCT-scaled when large); the crops come "
           "from the same rule but another generator; a step is one batch (drop_last), the "
           "core's repetition whole epochs")


def worker_counts():
    counts, w = [], 1
    while w < WORKERS_MAX:
        counts.append(w)
        w *= 2
    return counts + [WORKERS_MAX]


class LoaderWork(Work):
    """A DataLoader over a dataset preset; step() = the next batch (a new epoch when one ends)."""

    def __init__(self, preset, size, workers, persistent=True):
        self.dataset = data.JpegFolder(data.dataset_root(preset), size)
        self.sampler = data.EpochSampler(len(self.dataset))
        kw = dict(prefetch_factor=2, persistent_workers=persistent, timeout=TIMEOUT_S) if workers else {}
        self.loader = torch.utils.data.DataLoader(self.dataset, batch_size=BATCH, sampler=self.sampler,
                                                  num_workers=workers, drop_last=True, **kw)
        if len(self.loader) < 1:
            raise ValueError("%s has %d images, fewer than one batch of %d" % (self.dataset.root,
                                                                              len(self.dataset), BATCH))
        self.items, self.it = BATCH, iter(self.loader)

    def next_batch(self):
        try:
            return next(self.it)
        except StopIteration:
            self.sampler.epoch += 1
            self.it = iter(self.loader)
            return next(self.it)

    def step(self):
        self.next_batch()

    def close(self):
        shutdown = getattr(self.it, "_shutdown_workers", None)  # now, not when collected
        if shutdown:
            shutdown()
        self.it = self.loader = None


class TrainWork(LoaderWork):
    """The loader feeding SGD steps of the MLP at the loader's output side (train_size 32)."""

    def __init__(self, ctx, workers, train=True):
        super().__init__("bench", 32, workers)
        torch.manual_seed(ctx.seed)
        self.model = models.Mlp(dict(models.PRESETS["mlp"], image=32))
        d = models.PRESET_DEFAULTS["mlp"]
        self.opt = torch.optim.SGD(self.model.parameters(), lr=d["lr"], momentum=d["momentum"],
                                   weight_decay=d["weight_decay"])
        self.train = train

    def step(self):
        x, y = self.next_batch()
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        if self.train:
            self.opt.step()
        loss.item()  # read back every step, as the core's default


# The pixels' tolerance (normalised units; one 8-bit level is ~0.017): torch's bilinear
# resize takes another vector path with one thread, as DataLoader's workers run, than with
# the main process's threads, and rounds differently (measured: 7e-7 on the default set,
# 4e-5 on the large source). A wrong sample, crop or flip is off by a level or more.
PIXEL_TOLERANCE = 1e-4


def check_batches(preset, size, variants):
    """Each tuned loader's first batches against the baseline's: the same labels, and the
    same images within PIXEL_TOLERANCE (fp32 rounding of the resize)."""
    base = LoaderWork(preset, size, variants[0][1], variants[0][2])
    try:
        want = [base.next_batch() for _ in range(CHECK_BATCHES)]
    finally:
        base.close()
    out = []
    for name, workers, persistent in variants[1:]:
        w = LoaderWork(preset, size, workers, persistent)
        try:
            got = [w.next_batch() for _ in range(CHECK_BATCHES)]
        finally:
            w.close()
        labels = sum(int((a[1] != b[1]).sum()) for a, b in zip(want, got))
        diff = max(float((a[0] - b[0]).abs().max()) for a, b in zip(want, got))
        ok = labels == 0 and diff <= PIXEL_TOLERANCE
        out.append(CheckResult(name, ok, diff, PIXEL_TOLERANCE,
                               "" if ok else "its batches differ from the baseline's (%d labels; largest pixel "
                               "difference %g, tolerance %g)" % (labels, diff, PIXEL_TOLERANCE)))
    return out


def check_train(ctx, counts):
    def run(workers, train):
        w = TrainWork(ctx, workers, train)
        try:
            start = data.snapshot(w.model)
            for _ in range(CHECK_BATCHES):
                w.step()
            return start, data.snapshot(w.model)
        finally:
            w.close()
    b0, b1 = run(0, True)
    out = []
    for n in counts:
        t0, t1 = run(n, ctx.selftest != "no_update")
        rel = data.update_rel_diff(b0, b1, t0, t1)
        out.append(CheckResult("workers_%d" % n, rel <= TRAIN_TOLERANCE, rel, TRAIN_TOLERANCE,
                               "" if rel <= TRAIN_TOLERANCE else
                               "its update differs from num_workers=0's by %.3g (relative L2)" % rel))
    return out


def no_dataset(preset):
    def skip(ctx):
        try:
            data.dataset_root(preset)
            data.TurboJpeg()
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
            return str(e)
        return None
    return skip


def loader_row(practice, preset, size, variants, min_time):
    """variants: (name, workers, persistent), the baseline first."""
    vs = [Variant(name, "baseline" if i == 0 else "tuned",
                  lambda ctx, w=w, p=p: LoaderWork(preset, size, w, p))
          for i, (name, w, p) in enumerate(variants)]
    return Row(practice, {"batch": BATCH}, vs, min_time=min_time, warmup=1, device="any",
               check=lambda ctx: check_batches(preset, size, variants), skip=no_dataset(preset),
               differs=DIFFERS, extra={"dataset": preset, "size": size})


def rows():
    counts = worker_counts()
    large = [w for w in [0, 1, 2] if w <= WORKERS_MAX]
    train_vs = [Variant("workers_%d" % w, "baseline" if w == 0 else "tuned",
                        lambda ctx, w=w: TrainWork(ctx, w, w == 0 or ctx.selftest != "no_update"))
                for w in [0] + counts]
    return [
        # bench_workers: LOADER_MIN_TIME 1 s, large source 0.5 s
        loader_row("num_workers", "bench", 128, [("workers_%d" % w, w, True) for w in [0] + counts], 1.0),
        loader_row("num_workers_large_source", "imagenet", 224, [("workers_%d" % w, w, True) for w in large], 0.5),
        Row("num_workers_train", {"preset": "mlp", "batch": BATCH}, train_vs, min_time=1.0, warmup=3,
            check=lambda ctx: check_train(ctx, counts), skip=no_dataset("bench"),
            differs=DIFFERS + "; the whole dataset, not the core's seeded 80% training split"),
        loader_row("persistent_workers", "bench", 128,
                   [("respawn_workers_%d" % WORKERS_MAX, WORKERS_MAX, False),
                    ("persistent_workers_%d" % WORKERS_MAX, WORKERS_MAX, True)], 1.0),
    ]


ROWS = rows()
