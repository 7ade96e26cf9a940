"""twin/practices/zero_grad.py: the zero_grad practice in PyTorch (bench/zero_grad,
docs/practices/zero_grad.md): optimizer.zero_grad(set_to_none=False) (the memset of every
gradient, then backward accumulates into the zeros) against set_to_none=True (backward
writes the gradients). One training step of the preset at its default batch, SGD with the
preset's LR, momentum and weight decay, as the core's row. The core's micro rows
(zero_grad_memset per_tensor -> flat_buffer, zero_grad_wgrad accumulate -> overwrite) have
no PyTorch form of their own: PyTorch chooses both inside set_to_none, so they are left out
(docs/pytorch-side.md, zero_grad).
"""
import torch
import torch.nn.functional as F

from twin import models
from twin.api import CheckResult, Row, Variant, Work

CHECK_STEPS = 3      # the core's check_steps
TOLERANCE = 0.0      # the core's: bit-identical (0 + g is g in fp32)


class Step(Work):
    """One SGD step of the preset; set_to_none chooses the zero_grad."""

    def __init__(self, ctx, preset, batch, set_to_none):
        torch.manual_seed(ctx.seed)
        d = models.PRESET_DEFAULTS[preset]
        self.model = models.build(preset).to(ctx.device).train()
        self.x, self.y = models.batch_of(preset, batch, seed=ctx.seed, device=ctx.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=d["lr"], momentum=d["momentum"],
                                   weight_decay=d["weight_decay"])
        self.set_to_none = set_to_none
        self.skip_update = False
        self.items = self.x.shape[0]

    def step(self):
        self.opt.zero_grad(set_to_none=self.set_to_none)
        loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        if not self.skip_update:
            self.opt.step()
        loss.item()  # the loss read back every step, as the core's default (CORE_READBACK_EVERY_STEP)


def update_after(work, steps):
    """The parameters' change over `steps` steps, flattened."""
    start = torch.cat([p.detach().flatten().clone() for p in work.model.parameters()])
    for _ in range(steps):
        work.step()
    return torch.cat([p.detach().flatten() for p in work.model.parameters()]) - start


def check_update(make_base, tuned, ctx, tolerance, steps=CHECK_STEPS):
    """Each tuned variant's update against the baseline's from the same start: relative L2.
    ctx.selftest "no_update" skips the tuned variant's optimiser step (the check must fail)."""
    ref = update_after(make_base(ctx), steps)
    out = []
    for name, make in tuned:
        w = make(ctx)
        w.skip_update = ctx.selftest == "no_update"
        upd = update_after(w, steps)
        norm = float(ref.norm())
        rel = float((upd - ref).norm()) / norm if norm > 0 else float("inf")
        ok = rel <= tolerance
        out.append(CheckResult(name, ok, rel, tolerance, "" if ok else
                               "the update after %d steps differs from the baseline's by %.3g relative L2 "
                               "(tolerance %g)" % (steps, rel, tolerance)))
    return out


def row(preset):
    def make(set_to_none):
        return lambda ctx: Step(ctx, preset, 0, set_to_none)
    return Row(practice="zero_grad", params={"preset": preset, "batch": 0},
               variants=[Variant("memset", "baseline", make(False)), Variant("set_to_none", "tuned", make(True))],
               min_time=0.5, synthetic=True, warmup=1, device="any",
               check=lambda ctx: check_update(make(False), [("set_to_none", make(True))], ctx, TOLERANCE),
               differs="PyTorch's SGD and autograd (oneDNN/ATen kernels) against the core's; the same model, "
                       "batch, optimiser settings and threads")


ROWS = [row(p) for p in ("tiny", "mlp", "small")]
