"""fused_optimizer's twin (bench/fused_optimizer): the optimizer step alone over a preset's
parameter tensors, torch.optim's for-loop implementation (per_tensor: foreach=False, one
kernel per tensor and op) against its multi-tensor one (multi_tensor: foreach=True, the
tuning guide's and torch.optim's "foreach and fused implementations"), for SGD with the
preset's LR, momentum and weight decay and for AdamW with torch's defaults (lr 1e-3,
weight decay 1e-2, betas 0.9/0.999, eps 1e-8), as the core's rows. fused=True (one kernel
for the whole update) is a PyTorch-only variant.

The gradients are fixed (drawn from the row's seed), the same for every variant; a step is
opt.step() alone. Check: the parameters and the optimizer state after CHECK_STEPS steps
from the same start against per_tensor's: SGD bit for bit (the same operations per
element); AdamW within ADAMW_TOL (fused AdamW rounds differently: 2e-8 measured).
"""
import torch

from twin import models
from twin.api import CheckResult, Row, Variant, Work
from twin.practices import _training as training

CHECK_STEPS = 3
ADAMW_TOL = 1e-6
TOLERANCE = {"sgd": 0.0, "adamw": ADAMW_TOL}


def make_optimizer(kind, preset, params, impl):
    d = models.PRESET_DEFAULTS[preset]
    flags = {"foreach": impl == "multi_tensor"} if impl != "fused" else {"fused": True}
    if kind == "sgd":
        return torch.optim.SGD(params, lr=d["lr"], momentum=d["momentum"], weight_decay=d["weight_decay"], **flags)
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2, **flags)  # torch's defaults, as the core's


class Update(Work):
    """opt.step() of one implementation over the preset's parameters with fixed gradients."""

    def __init__(self, ctx, preset, kind, impl, tuned):
        model = training.seeded_model(preset, ctx)
        self.params = [p for p in model.parameters()]
        gen = torch.Generator().manual_seed(ctx.seed + 1)
        for p in self.params:
            p.grad = (torch.randn(p.shape, generator=gen) * 1e-2).to(ctx.device)
        self.opt = make_optimizer(kind, preset, self.params, impl)
        self.skip = training.skips_update(ctx, tuned)
        self.ctx = ctx
        self.items = sum(p.numel() for p in self.params)

    def step(self):
        if not self.skip:
            self.opt.step()
        training.sync(self.ctx.device)

    def counters(self):
        return {"tensors": len(self.params), "parameter_mib": self.items * 4.0 / 1048576.0}

    def state(self):
        out = [p.detach().double().flatten().cpu() for p in self.params]
        for p in self.params:
            out += [v.detach().double().flatten().cpu() for v in self.opt.state[p].values()
                    if torch.is_tensor(v) and v.dim() > 0]
        return torch.cat(out)


def check(variants, tol):
    def run(ctx):
        works = [v.make(ctx) for v in variants]
        for w in works:
            for _ in range(CHECK_STEPS):
                w.step()
        base = works[0].state()
        res = []
        for v, w in zip(variants[1:], works[1:]):
            mine = w.state()
            if mine.numel() != base.numel():
                res.append(CheckResult(v.name, False, float("inf"), tol, "a different optimizer state"))
                continue
            res.append(training.verdict(v.name, training.rel_l2(mine, base), tol,
                                        "the parameters and optimizer state after %d steps" % CHECK_STEPS))
        return res
    return run


def row(preset, kind):
    def make(impl, tuned):
        return lambda ctx: Update(ctx, preset, kind, impl, tuned)
    variants = [Variant("per_tensor", "baseline", make("per_tensor", False)),
                Variant("multi_tensor", "tuned", make("multi_tensor", True)),
                Variant("fused", "tuned", make("fused", True), core=False)]
    return Row(practice="fused_optimizer", params=training.params_of(preset, 0, optimizer=kind), variants=variants,
               min_time=0.2, warmup=3, device="any", check=check(variants, TOLERANCE[kind]),
               differs="torch.optim's for-loop and foreach implementations against the core's per-tensor "
                       "calls and one pass over every tensor")


ROWS = [row(p, k) for p in ("tiny", "mlp", "small") for k in ("sgd", "adamw")]
