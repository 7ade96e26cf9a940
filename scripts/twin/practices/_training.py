"""twin/practices/_training.py: what the model practices' twins share (twin/api.py).

Train: one variant of a training row, built from ctx.seed (the same weights and the same
batch for every variant of a row): the preset's network, SGD with the preset's LR, momentum
and weight decay (models.PRESET_DEFAULTS), cross-entropy, the loss read back every step as
the core's default (CORE_READBACK_EVERY_STEP) does. A tuned variant built under
ctx.selftest == "no_update" skips its optimiser step, the bug every check must catch.

update_check: the driver's PRACTICE_CHECK_PARAMS in PyTorch: every variant from the same
start on the same CHECK_STEPS batches, each tuned variant's update (parameters after minus
before, over the parameters it shares with the baseline) against the baseline's, relative
L2; tolerance 0 means bit for bit, as the core's CPU rows ask.

Infer: one variant of an inference row: the model trained INFER_TRAIN_STEPS steps (so that
weights and BN statistics are not a fresh layer's), eval mode, one forward per step under a
grad mode, the logits back on the host as core_infer returns them; logits_check compares
the variants' logits of a held-out batch.
"""
import math

import torch
import torch.nn.functional as F

from twin import models
from twin.api import CheckResult, Work

CHECK_STEPS = 3          # the driver's .check_steps of every training practice here
INFER_TRAIN_STEPS = 2    # steps before an inference row's forward (batch INFER_TRAIN_BATCH)
INFER_TRAIN_BATCH = 8
ARBITER = 2.0            # torch_twin.py's ARBITER: fp32 rounding within 2x of the reference's


# The core's precisions (kernels/core.h, bench/amp): fp32 is PyTorch's default (TF32
# convolutions, strict fp32 GEMMs), tf32 both in TF32, fp32_strict neither; fp16 and bf16
# autocast over fp32's flags. Set before every step: the variants of a row interleave.
TF32_FLAGS = {"fp32": (False, True), "tf32": (True, True), "fp32_strict": (False, False),
              "fp16": (False, True), "bf16": (False, True)}


def set_precision(precision):
    """torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 for the core's precision."""
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = TF32_FLAGS[precision]


def autocast_of(precision, device):
    """torch.autocast's arguments for fp16/bf16, None for the fp32 precisions."""
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    return dict(device_type=device, dtype=dtypes[precision]) if precision in dtypes else None


def seeded_model(preset, ctx, bias=False):
    """The preset's network with the row's initial weights (bias=True: conv biases, zero)."""
    torch.manual_seed(ctx.seed)
    return models.build(preset, bias=bias).to(ctx.device)


def optimizer(preset, params):
    d = models.PRESET_DEFAULTS[preset]
    return torch.optim.SGD(params, lr=d["lr"], momentum=d["momentum"], weight_decay=d["weight_decay"])


def skips_update(ctx, tuned):
    return tuned and ctx.selftest == "no_update"


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


class Train(Work):
    """One training step per step(): zero_grad(set_to_none), forward and backward of `micro`
    micro-batches ((loss / micro).backward() each), the optimiser step, the loss read back.
    forward(model) -> callable wraps the model (checkpointing, torch.compile); precision is
    one of TF32_FLAGS' (fp16: autocast and GradScaler, unscaled before any clipping), set
    before every step and put back to fp32's (PyTorch's defaults) by close(), so that no
    row inherits another's; channels_last lays out the model and its batch NHWC."""

    def __init__(self, ctx, preset, batch, tuned, bias=False, micro=1, forward=None, precision="fp32",
                 clip=0.0, channels_last=False, model=None):
        self.preset, self.micro, self.ctx, self.precision = preset, micro, ctx, precision
        self.model = model if model is not None else seeded_model(preset, ctx, bias)
        self.model.train()
        memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model.to(memory_format=memory_format)
        self.forward = forward(self.model) if forward else self.model
        self.opt = optimizer(preset, self.model.parameters())
        self.skip = skips_update(ctx, tuned)
        self.autocast = autocast_of(precision, ctx.device)
        fp16 = precision == "fp16"  # GradScaler's defaults, as the core's (kernels/core/amp.c)
        self.scaler = torch.amp.GradScaler(ctx.device) if fp16 else None
        self.clip = clip
        self.x, self.y = models.batch_of(preset, batch, ctx.seed, ctx.device)
        self.x = self.x.contiguous(memory_format=memory_format)
        if self.x.shape[0] % micro:
            raise ValueError("batch %d does not split into %d equal micro-batches" % (self.x.shape[0], micro))
        self.items = self.x.shape[0]

    def loss_of(self, x, y):
        if self.autocast is None:
            return F.cross_entropy(self.forward(x), y)
        with torch.autocast(**self.autocast):
            return F.cross_entropy(self.forward(x), y)

    def train(self, x, y):
        """One optimiser step on (x, y); the mean loss, read back."""
        set_precision(self.precision)
        self.opt.zero_grad(set_to_none=True)
        total = 0.0
        for xm, ym in zip(x.chunk(self.micro), y.chunk(self.micro)):
            loss = self.loss_of(xm, ym) / self.micro
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            total = total + loss.detach()
        if self.scaler:
            self.scaler.unscale_(self.opt)  # before clipping: the clip sees true gradients
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        if not self.skip:
            if self.scaler:
                self.scaler.step(self.opt)
            else:
                self.opt.step()
        if self.scaler:
            self.scaler.update()
        return float(total.item())

    def step(self):
        self.train(self.x, self.y)

    def close(self):
        set_precision("fp32")


def rel_l2(a, b):
    """||a - b|| / ||b|| (float64); inf when b is 0 and a is not."""
    d, n = (a - b).norm().item(), b.norm().item()
    return d / n if n > 0 else (0.0 if d == 0 else math.inf)


def update_of(work, batches):
    """The update of every parameter after training on `batches` (name -> float64 tensor);
    the work closed after."""
    before = {n: p.detach().double().cpu().clone() for n, p in work.model.named_parameters()}
    try:
        for x, y in batches:
            work.train(x, y)
        sync(work.ctx.device)
    finally:
        work.close()
    return {n: p.detach().double().cpu() - before[n] for n, p in work.model.named_parameters()}


def check_batches(preset, batch, ctx, steps=CHECK_STEPS):
    return [models.batch_of(preset, batch, ctx.seed + 1 + s, ctx.device) for s in range(steps)]


def verdict(name, rel, tol, what):
    ok = rel == 0 if tol == 0 else rel <= tol
    finding = "" if ok else "%s, against the baseline's: relative L2 %.3g (tolerance %g%s)" % (
        what, rel, tol, ", 0: bit for bit" if tol == 0 else "")
    return CheckResult(variant=name, ok=ok, rel_diff=rel, tolerance=tol, finding=finding)


def flat_rel(mine, ref):
    """Relative L2 of two updates over ref's parameters, all flattened into one vector."""
    return rel_l2(torch.cat([mine[n].flatten() for n in ref]), torch.cat([ref[n].flatten() for n in ref]))


def float64_update(work, batches):
    """work's update on `batches` computed in float64 (the model converted in place, so the
    optimiser keeps its parameters): the arbiter of fp32 rounding."""
    work.model.double()
    return update_of(work, [(x.double(), y) for x, y in batches])


def arbitrate(result, mine, ref, exact):
    """Above the tolerance float64 decides, as torch_twin.py's ARBITER does: fp32 rounding
    when the tuned update is at most ARBITER times as far from the float64 update as the
    fp32 reference is (a few steps of SGD at the presets' LRs amplify rounding: measured,
    small's eager fp32 update after 3 steps is 3.2e-2 from float64's); a missed step or
    a wrong gradient stays O(1) away."""
    mine_off, ref_off = flat_rel(mine, exact), flat_rel(ref, exact)
    if mine_off <= max(result.tolerance, ARBITER * ref_off):
        result.ok, result.finding = True, ""
    else:
        result.finding += "; against float64 it is %.3g off, the fp32 reference %.3g: not rounding" % (
            mine_off, ref_off)
    return result


def update_check(row_variants, preset, batch, tol, steps=CHECK_STEPS):
    """A Row.check: each tuned variant's update after `steps` steps against the baseline's,
    over the parameters both have (the conv biases of conv_bias's baseline left out); past a
    tolerance above 0, the float64 baseline arbitrates."""
    def check(ctx):
        batches = check_batches(preset, batch, ctx, steps)
        base = update_of(row_variants[0].make(ctx), batches)
        exact = {}
        out = []
        for v in row_variants[1:]:
            mine = update_of(v.make(ctx), batches)
            shared = {n: base[n] for n in base if n in mine}
            r = verdict(v.name, flat_rel(mine, shared), tol, "the update after %d steps" % steps)
            if not r.ok and tol > 0:
                exact = exact or float64_update(row_variants[0].make(ctx), batches)
                r = arbitrate(r, mine, shared, {n: exact[n] for n in shared})
            out.append(r)
        return out
    return check


class Infer(Work):
    """One eval-mode forward per step under `mode` (torch.enable_grad, torch.no_grad,
    torch.inference_mode), the parameters requiring grad as after training, the logits
    copied to the host. prepare(model) -> model transforms it after training (bn_fold)."""

    def __init__(self, ctx, preset, batch, tuned, mode, prepare=None):
        self.ctx, self.mode = ctx, mode
        model = seeded_model(preset, ctx)
        trainer = Train(ctx, preset, INFER_TRAIN_BATCH, tuned, model=model)
        for s in range(INFER_TRAIN_STEPS):
            trainer.train(*models.batch_of(preset, INFER_TRAIN_BATCH, ctx.seed + 100 + s, ctx.device))
        model.eval()
        self.model = prepare(model) if prepare else model
        self.x, _ = models.batch_of(preset, batch, ctx.seed, ctx.device)
        self.items = self.x.shape[0]

    def logits(self, x):
        with self.mode():
            return self.model(x).to("cpu")

    def step(self):
        self.logits(self.x)


def logits_check(row_variants, preset, batch, tol, max_flips=0):
    """A Row.check: each tuned variant's logits of a held-out batch (of the row's size)
    against the baseline's, relative L2, and the same top-1 for all but max_flips images."""
    def check(ctx):
        x, _ = models.batch_of(preset, batch, ctx.seed + 7, ctx.device)
        works = [v.make(ctx) for v in row_variants]
        try:
            outs = [w.logits(x).double() for w in works]
        finally:
            for w in works:
                w.close()
        res = []
        for v, out in zip(row_variants[1:], outs[1:]):
            r = verdict(v.name, rel_l2(out, outs[0]), tol, "the logits")
            flips = int((out.argmax(1) != outs[0].argmax(1)).sum())
            if r.ok and flips > max_flips:
                r.ok, r.finding = False, "%d of %d top-1 classes differ from the baseline's (at most %d)" % (
                    flips, len(out), max_flips)
            res.append(r)
        return res
    return check


def params_of(preset, batch, **more):
    """The core's params field, in its order: preset, batch, then the rest."""
    return dict(preset=preset, batch=batch, **more)


def needs_cuda(ctx):
    """A Row.skip for the GPU-only practices."""
    if ctx.device != "cuda" or not torch.cuda.is_available():
        return "a GPU practice: the core runs it on CUDA only (torch.cuda.is_available() %s, device %s)" % (
            torch.cuda.is_available(), ctx.device)
    return None
