"""twin/practices/sync.py: the sync practice in PyTorch (bench/sync, docs/practices/sync.md):
training steps reading the loss back with loss.item() every step (the baseline) against a
loss kept on the device (summed there) and read every 10 or 100 steps, or once per 200
steps (at_end: the core's SYNC_RUN_STEPS, one read per timed run), on the core's presets
tiny, small, resnet18 at batch 8 and the preset's default. The check, like the core's:
every loss a tuned variant reads equals the mean of the baseline's losses over the same
steps (relative tolerance 1e-4, SYNC_LOSS_TOLERANCE). A GPU practice: on a CPU every row is
a visible skip, as the core's are (a read-back waits for nothing there).
"""
import torch
import torch.nn.functional as F

from twin import models
from twin.api import CheckResult, Row, Variant, Work

RUN_STEPS = 200      # SYNC_RUN_STEPS: the at_end variant reads once per this many steps
TOLERANCE = 1e-4     # SYNC_LOSS_TOLERANCE
INTERVALS = {"every_step": 1, "every_10": 10, "every_100": 100, "at_end": RUN_STEPS}


class Step(Work):
    """One SGD step; the loss is read back (.item()) every `interval` steps, as the mean of
    the losses summed on the device since the last read."""

    def __init__(self, ctx, preset, batch, interval):
        torch.manual_seed(ctx.seed)
        d = models.PRESET_DEFAULTS[preset]
        self.model = models.build(preset).to(ctx.device).train()
        self.x, self.y = models.batch_of(preset, batch, seed=ctx.seed, device=ctx.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=d["lr"], momentum=d["momentum"],
                                   weight_decay=d["weight_decay"])
        self.interval, self.items = interval, self.x.shape[0]
        self.pending = torch.zeros((), device=ctx.device)
        self.count, self.steps, self.reads = 0, 0, []
        self.skip_update = False

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        if not self.skip_update:
            self.opt.step()
        self.steps += 1
        if self.interval == 1:
            self.reads.append(loss.item())
            self.reads = self.reads[-RUN_STEPS:]  # bounded: timed runs are long
            return
        self.pending += loss.detach()
        self.count += 1
        if self.count == self.interval:
            self.reads.append(self.pending.item() / self.count)
            self.reads = self.reads[-RUN_STEPS:]
            self.pending.zero_()
            self.count = 0

    def counters(self):
        return {"reads_per_step": 1.0 / self.interval}


def check(preset, batch, tuned_names):
    def run(ctx):
        base = Step(ctx, preset, batch, 1)
        for _ in range(RUN_STEPS):
            base.step()
        every = base.reads
        out = []
        for name in tuned_names:
            k = INTERVALS[name]
            w = Step(ctx, preset, batch, k)
            w.skip_update = ctx.selftest == "no_update"
            for _ in range(RUN_STEPS):
                w.step()
            worst = 0.0
            for i, got in enumerate(w.reads):
                want = sum(every[i * k:(i + 1) * k]) / k
                worst = max(worst, abs(got - want) / max(abs(want), 1e-30))
            ok = worst <= TOLERANCE and len(w.reads) == RUN_STEPS // k
            out.append(CheckResult(name, ok, worst, TOLERANCE, "" if ok else
                                   "%d losses read differ from the every-step baseline's means (largest relative "
                                   "difference %.3g, tolerance %g)" % (len(w.reads), worst, TOLERANCE)))
        return out
    return run


def row(preset, batch):
    def make(name):
        return lambda ctx: Step(ctx, preset, batch, INTERVALS[name])
    tuned = ["every_10", "every_100", "at_end"]
    return Row(practice="sync", params={"preset": preset, "batch": batch},
               variants=[Variant("every_step", "baseline", make("every_step"))] +
                        [Variant(n, "tuned", make(n)) for n in tuned],
               min_time=0.5, warmup=1, device="cuda", check=check(preset, batch, tuned),
               differs="the loss is summed on the device by a PyTorch op (the core's by its own kernel); "
                       "a read's wait is cudaStreamSynchronize in both")


ROWS = [row(p, b) for p in ("tiny", "small", "resnet18") for b in (8, 0)]
