#!/usr/bin/env python3
"""torch_twin.py: the training core's model in PyTorch: same layers, weights, batch, numbers.

Builds the network of kernels/model/model.c for a preset (stem conv + BN + ReLU, basic blocks
with 1x1 projection shortcuts, global average pooling, linear; or the MLP) and loads the
core's initial parameters and batch from the folder written by `steptime --dump DIR`
(layout: the header of bench/tools/steptime_main.c). Five commands:

  check DIR...   replays what the core did, in PyTorch on the CPU, and compares (exit 1 on
                 any disagreement, naming the quantity and the worst tensor):
                 - meta.txt against steptime's command line (argv.txt, parsed here, with
                   the presets' defaults for what it does not set): a flag steptime
                   misparsed would otherwise be echoed by meta.txt and replayed here;
                 - the loss and every gradient tensor at the initial parameters (grads.bin);
                 - per step: the LR (computed here from the config with LambdaLR, as a
                   PyTorch user would), the loss, the GradScaler's scale and the skip flag;
                 - the update after the K steps (after.bin minus params.bin) and the change
                   of every BN layer's running mean and variance (bn_stats_after.bin minus
                   bn_stats.bin); above their tolerance a float64 replay tells fp32
                   rounding from a real difference;
                 - the eval-mode loss (BN with the running statistics) of a held-out batch
                   after the K steps: what held-out accuracy is computed with.
                 A GPT dump (steptime --preset gpt-tiny ...: kind=gpt in meta.txt, token
                 batches) is checked the same way on twin.models.GPT (twin/gpt_check.py:
                 loss over every position, gradients, LR and loss per step, update, eval
                 loss; no BN statistics), and the twin's written-out causal attention
                 against F.scaled_dot_product_attention(is_causal=True) once.
                 The steps are torch.optim.SGD (momentum, weight decay), or
                 torch.optim.AdamW (lr, betas, eps, weight decay) when meta.txt says
                 optimizer=adamw (steptime --optimizer adamw), LambdaLR linear
                 warm-up, torch.amp.GradScaler("cpu", ...) with the core's constants when the
                 precision is fp16 (an inf written into the same flat gradient element at
                 the same steps), unscale_ before clip_grad_norm_ (PyTorch's documented order).
  time --dump DIR  times PyTorch training steps of the same model and batch (eager, or
                 --compile for torch.compile) on the CPU or --device cuda with the same
                 precision and layout as the core (autocast + GradScaler for fp16, autocast
                 for bf16, channels_last for nhwc, the core's TF32 meanings, cudnn.benchmark
                 = False as the core's default heuristic algorithm choice) and the same input
                 path as steptime --input: device (the batch moved to the device once,
                 before the steps) or host (a pageable CPU batch copied every step). The loss
                 is read back every step (.item(), as the core's default) unless --readback
                 deferred.
  infer --dump DIR  the eval-mode forward of the same model and batch with autograd on
                 (the parameters require grad, so every op saves what its backward needs),
                 under torch.no_grad() and under torch.inference_mode(): median ms per batch,
                 the bytes autograd saved for backward (counted with
                 torch.autograd.graph.saved_tensors_hooks, each storage once, parameters
                 apart) and, on CUDA, torch.cuda.max_memory_allocated; the logits of the three
                 must agree within INFER_TOL (exit 1 otherwise).
  fold --dump DIR  BatchNorm folded into each preceding convolution
                 (torch.nn.utils.fusion.fuse_conv_bn_eval per conv+BN pair, eval mode, BN
                 statistics set far from identity with --seed): max abs and relative
                 difference of the logits against the unfolded model (within FOLD_TOL, else
                 exit 1) and the forward time of each, under inference_mode. No BN (mlp): skip.
  accum --dump DIR --k K  K micro-batches with (loss / K).backward() accumulating into
                 .grad and one SGD step, against one step on the whole batch (K times larger):
                 the relative L2 difference of the update after --check-steps steps (without
                 BN within ACCUM_TOL, else exit 1; with BN reported only: each micro-batch is
                 normalised by itself), the same without the / K (to show the tolerance
                 separates), the median time per optimizer step of each, the bytes one
                 forward saves for backward (the whole batch's against one micro-batch's)
                 and, on CUDA, the peak of the allocator over the timed steps.

Only the Python standard library and torch (pip install torch). Examples:
    build/steptime --preset tiny --dump /tmp/twin-tiny --steps 1
    python3 scripts/torch_twin.py check /tmp/twin-tiny
    python3 scripts/torch_twin.py time --dump /tmp/twin-tiny --threads 1 --steps 10
    python3 scripts/torch_twin.py accum --dump /tmp/twin-tiny --k 4
`time` prints one line: "twin: preset P device D side eager|compile ... median_ms M ...";
`infer`, `fold` and `accum` one line each, "twin-infer: ...", "twin-fold: ...",
"twin-accum: ...", of "key value" pairs. Where a command cannot run (no CUDA device,
torch.compile failing, nothing to fold, a GPT dump outside `check`) it prints
"twin-skip: REASON" and exits 2.
"""
import argparse
import math
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore", message=".*NumPy.*")  # torch works without numpy
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from twin.models import (BN_EPS, BN_MOMENTUM, GPT_PRESETS, PRESET_DEFAULTS, PRESETS, Block,  # noqa: E402,F401
                         Mlp, ResNet, bn, conv, loss_of, ordered_bn, ordered_params)
from twin import gpt_check  # noqa: E402
STEPTIME_DEFAULTS = dict(precision="fp32", clip_norm=0.0, lr_warmup=0, init_scale=65536.0,
                         growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                         check_steps=3, inject_steps="", optimizer="sgd", beta1=0.9,
                         beta2=0.999, eps=1e-8)

# Tolerances of `check`. Both sides compute in fp32 (the core's CPU backends in fp32 for
# every precision); they differ only in the order of summation (OpenBLAS / plain loops
# against PyTorch's oneDNN / ATen kernels, per-thread partial sums), about 1e-7 relative
# per operation, growing with the depth of the model and amplified by batch norm's
# division by the batch standard deviation. Measured errors on tiny and mlp are 10-100x
# below these; a real difference of semantics (another weight decay, momentum, LR,
# clipping order, a skipped step) is orders of magnitude above them.
LOSS_TOL = 1e-5     # |loss_twin - loss_core| / |loss_core|, per step
GRAD_TOL = 1e-4     # per-tensor ||g_twin - g_core|| / ||g_core|| at the initial parameters
UPDATE_TOL = 1e-3   # per-tensor ||d_twin - d_core|| / ||d_core||, d = params after K steps
                    # minus initial: the update itself, so that a weight-decay or LR error
                    # (a small part of the parameters, a large part of the update) shows;
                    # looser than GRAD_TOL as K steps compound the differences and the
                    # subtraction cancels digits
ARBITER = 2.0       # above GRAD_TOL / UPDATE_TOL, float64 decides: fp32 rounding when the
                    # core's worst tensor is at most 2x as far from the float64 result as
                    # PyTorch's own worst fp32 tensor (the fp32 limit, not a difference)
BN_TOL = 1e-4       # per-tensor relative L2 of the change of each BN running mean / variance
                    # over the K steps (after minus initial, so that the part still at its
                    # initial 0 / 1 does not hide a wrong update): batch means and unbiased
                    # variances summed in another order, one rounding per step (measured:
                    # 3.5e-7 on tiny). A biased variance (n instead of n - 1) moves the
                    # change by the order of 1/(N*H*W): 1.2e-4 at tiny's stem, 4.9e-4 at
                    # its last stage; a missed update by 1.0
EVAL_TOL = 1e-5     # |eval_loss_twin - eval_loss_core| / eval_loss_core, as LOSS_TOL: one
                    # forward, after K steps of parameters and running statistics that agree
                    # to their own tolerances
LR_TOL = 1e-6       # relative: the core rounds its double LR to float, Python keeps double
# The loss scale and the skip flags must be equal: powers of two and booleans.


def read_array(path, dtype=torch.float32):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    # an empty file (no BatchNorm: no running statistics) is an empty array
    return torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)


def read_meta(dump):
    meta = {}
    with open(os.path.join(dump, "meta.txt")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    if meta.get("format") != "3":
        sys.exit(f"twin: {dump}/meta.txt is not a format-3 dump of steptime --dump (rerun it)")
    if meta.get("preset") not in PRESETS and meta.get("preset") not in GPT_PRESETS:
        sys.exit(f"twin: unknown preset '{meta.get('preset')}' in {dump}/meta.txt")
    return meta


def bn_stats_split(bns, flat):
    """The flat running statistics (per BN: mean[C], then var[C]) as (name, tensor) pairs."""
    want = sum(2 * m.num_features for _, m in bns)
    if want != flat.numel():
        sys.exit(f"twin: {flat.numel()} BN running statistics in the dump, the model has {want}")
    out, off = [], 0
    for n, m in bns:
        c = m.num_features
        out += [(f"{n}.running_mean", flat[off:off + c]), (f"{n}.running_var", flat[off + c:off + 2 * c])]
        off += 2 * c
    return out


def bn_stats_of(bns):
    """The model's running statistics (float64 copies), in the dump's order."""
    out = []
    for _, m in bns:
        out += [m.running_mean.detach().double().clone(), m.running_var.detach().double().clone()]
    return out


def split_flat(named, flat):
    """The flat float32 vector as one tensor per parameter, shaped like it."""
    total = sum(p.numel() for _, p in named)
    if total != flat.numel():
        sys.exit(f"twin: {flat.numel()} parameters in the dump, the model has {total}")
    out, off = [], 0
    for _, p in named:
        out.append(flat[off:off + p.numel()].view_as(p))
        off += p.numel()
    return out


class Twin:
    """The model with the dump's initial parameters, and the dump's batch (CPU)."""

    def __init__(self, dump):
        self.dump, self.meta = dump, read_meta(dump)
        self.gpt = gpt_check.is_gpt(self.meta)  # images: its tokens (n, T); labels (n, T)
        if self.gpt:
            self.p = gpt_check.shape_of(self.meta)
            self.model = gpt_check.build(self.meta)
        else:
            self.p = PRESETS[self.meta["preset"]]
            self.model = ResNet(self.p) if self.p["kind"] == "resnet" else Mlp(self.p)
        self.named = ordered_params(self.model)
        self.init = split_flat(self.named, read_array(os.path.join(dump, "params.bin")))
        self.bns = ordered_bn(self.model)
        self.bn_init = bn_stats_split(self.bns, read_array(os.path.join(dump, "bn_stats.bin")))
        self.reset()
        self.images, self.labels = self.batch("")
        self.model.train()

    def batch(self, prefix):
        """images and labels (CPU) of the dump's batch ("") or held-out batch ("eval_"); a
        GPT's tokens and labels."""
        n = int(self.meta["batch"])
        if self.gpt:
            return gpt_check.read_batch(read_array, lambda f: os.path.join(self.dump, f), n,
                                        self.p["seq_len"], prefix)
        c, s = self.p["in_ch"], self.p["image"]
        return (read_array(os.path.join(self.dump, f"{prefix}images.bin")).view(n, c, s, s),
                read_array(os.path.join(self.dump, f"{prefix}labels.bin"), torch.int32).long())

    def held_out(self):
        """The held-out batch: images, labels (CPU)."""
        return self.batch("eval_")

    def inputs(self, x, dtype):
        """The model's input x in dtype: images converted, a GPT's tokens as they are."""
        return x if self.gpt else x.to(dtype)

    def reset(self):
        """The dump's initial parameters and BN running statistics (a training-mode forward
        moves the statistics, as the core's steps do; core_loss_grad's does not)."""
        with torch.no_grad():
            for (_, p), v in zip(self.named, self.init):
                p.copy_(v)
                p.grad = None
            for (_, m), i in zip(self.bns, range(0, len(self.bn_init), 2)):
                m.running_mean.copy_(self.bn_init[i][1])
                m.running_var.copy_(self.bn_init[i + 1][1])
                m.num_batches_tracked.zero_()

    def params(self):
        return [p for _, p in self.named]

    def optimizer(self):
        m = self.meta
        if m.get("optimizer", "sgd") == "adamw":  # dumps before the key: SGD
            return torch.optim.AdamW(self.params(), lr=float(m["lr"]), eps=float(m["eps"]),
                                     betas=(float(m["beta1"]), float(m["beta2"])),
                                     weight_decay=float(m["weight_decay"]), foreach=False)
        return torch.optim.SGD(self.params(), lr=float(m["lr"]), momentum=float(m["momentum"]),
                               weight_decay=float(m["weight_decay"]))


def warmup_factor(warmup):
    """The core's linear warm-up (kernels/core/core.c core_lr_at), constant after: step s < W
    runs at base * (s + 1) / W. Written from the config, not read from the core."""
    return lambda s: (s + 1) / warmup if s < warmup else 1.0


def rel(a, b):
    """Relative L2 difference of a against the reference b."""
    den = torch.linalg.vector_norm(b.double()).item()
    num = torch.linalg.vector_norm((a - b).double()).item()
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def worst(named, mine, core):
    """(worst relative error, its tensor's name) over the parameter tensors."""
    errs = [(rel(a, b), n) for (n, _), a, b in zip(named, mine, core)]
    return max(errs)


def steptime_parser():
    """steptime's flags (bench/tools/steptime_main.c usage), parsed here independently of it."""
    ap = argparse.ArgumentParser(prog="steptime", add_help=False, allow_abbrev=False)
    for flag in ("--preset", "--backend", "--precision", "--layout", "--zero-grad", "--conv-algo",
                 "--readback", "--dump", "--input", "--inject-inf", "--optimizer", "--attention"):
        ap.add_argument(flag)
    for flag in ("--threads", "--batch-size", "--steps", "--warmup", "--check-steps",
                 "--lr-warmup", "--growth-interval", "--readback-interval"):
        ap.add_argument(flag, type=int)
    for flag in ("--lr", "--momentum", "--weight-decay", "--clip-norm", "--init-scale", "--beta1",
                 "--beta2", "--eps"):
        ap.add_argument(flag, type=float)
    return ap


def check_command_line(dump, meta, model_params):
    """meta.txt against steptime's command line (argv.txt) and the presets' defaults:
    (number of mismatches, detail)."""
    try:
        with open(os.path.join(dump, "argv.txt")) as f:
            argv = f.read().splitlines()
    except OSError as e:
        return 1, f"no argv.txt ({e.strerror})"
    args, unknown = steptime_parser().parse_known_args(argv)
    if unknown:
        return 1, f"argv.txt has what the twin does not know: {' '.join(unknown)}"
    preset = args.preset or "tiny"
    if preset not in PRESETS and preset not in GPT_PRESETS:
        return 1, f"unknown preset '{preset}' on the command line"
    d = {**STEPTIME_DEFAULTS, **PRESET_DEFAULTS[preset]}  # a GPT preset's optimizer, betas, clip

    def given(value, key):
        return d[key] if value is None else value

    want = {
        "preset": preset, "batch": given(args.batch_size, "batch"),
        "precision": given(args.precision, "precision"), "lr": given(args.lr, "lr"),
        "momentum": given(args.momentum, "momentum"),
        "weight_decay": given(args.weight_decay, "weight_decay"),
        "optimizer": given(args.optimizer, "optimizer"), "beta1": given(args.beta1, "beta1"),
        "beta2": given(args.beta2, "beta2"), "eps": given(args.eps, "eps"),
        "clip_norm": given(args.clip_norm, "clip_norm"),
        "lr_warmup": given(args.lr_warmup, "lr_warmup"),
        "init_scale": given(args.init_scale, "init_scale"),
        "growth_interval": given(args.growth_interval, "growth_interval"),
        "growth_factor": d["growth_factor"], "backoff_factor": d["backoff_factor"],
        "check_steps": given(args.check_steps, "check_steps"),
        "inject_steps": given(args.inject_inf, "inject_steps"),
        "n_params": model_params, "inject_index": model_params // 2,
        "bn_eps": BN_EPS, "bn_momentum": BN_MOMENTUM,
    }
    if preset in GPT_PRESETS:
        want.update(gpt_check.expected_meta(preset, args.attention))
    else:
        p = PRESETS[preset]
        want.update({"channels": p["in_ch"], "image_size": p["image"], "classes": p["classes"]})
        if args.attention is not None:
            return 1, "--attention on the command line of a preset that is not a gpt"
    if args.backend not in (None, "auto"):
        want["backend"] = args.backend
    bad = []
    for key, w in want.items():
        got = meta.get(key)
        if isinstance(w, str):
            same = got == w
        else:  # the core keeps float32: equal to float32 precision
            try:
                g = float(got)
            except (TypeError, ValueError):
                same = False
            else:
                same = abs(g - w) <= 1e-7 * max(abs(g), abs(w))
        if not same:
            bad.append(f"{key}: meta.txt {fmt_value(got)}, command line {fmt_value(w)}")
    return len(bad), "; ".join(bad) or f"{len(want)} keys"


def fmt_value(v):
    try:
        return f"{float(v):g}"
    except (TypeError, ValueError):
        return "(missing)" if v is None else str(v)


def check(dump):
    """Replays the dump's steps; returns a list of (quantity, error, tolerance, ok, detail),
    ok None for a quantity that does not apply (n/a)."""
    t = Twin(dump)
    m = t.meta
    results = []

    # 0. what the dump says it ran against what it was told to run
    n_bad, detail = check_command_line(dump, m, sum(p.numel() for p in t.params()))
    results.append(("meta.txt against the command line", n_bad, 0, n_bad == 0, detail))

    # 1. loss and every gradient at the initial parameters (core_loss_grad)
    loss, mine_grads = loss_and_grads(t)
    want = float(m["grad_loss"])
    err = abs(loss - want) / abs(want)
    results.append(("loss at the initial parameters", err, LOSS_TOL, err <= LOSS_TOL, ""))
    core_grads = [g.double() for g in split_flat(t.named, read_array(os.path.join(dump, "grads.bin")))]
    err, name = worst(t.named, mine_grads, core_grads)
    grad_tol = gpt_check.GRAD_TOL if t.gpt else GRAD_TOL  # tighter: no BN (twin/gpt_check.py)
    ok, detail = err <= grad_tol, name
    if not ok:  # as for the update below: a float64 gradient tells rounding from semantics
        ok, detail = arbitrate(t.named, core_grads, mine_grads,
                               loss_and_grads(Twin(dump), torch.float64)[1], grad_tol, name)
    results.append(("gradient (worst tensor)", err, grad_tol, ok, detail))
    if t.gpt:  # the twin's own attention against PyTorch's (not the core's)
        err, detail = gpt_check.sdpa_agreement(Twin(dump), rel)
        results.append(("twin attention against F.scaled_dot_product_attention", err,
                        gpt_check.SDPA_TOL, err <= gpt_check.SDPA_TOL, detail))

    # 2. K steps: SGD, LambdaLR warm-up, GradScaler, injected infs, clipping
    k = int(m["check_steps"])
    steps = read_array(os.path.join(dump, "steps.bin")).view(k, 4)
    fp16 = m["precision"] == "fp16"
    warmup = int(m["lr_warmup"])
    mine = replay(t)
    records, clipped = mine["records"], mine["clipped"]
    lr_err = loss_err = 0.0
    scale_bad, skip_bad = [], []
    for s, ((lr, loss, scale, skipped), core) in enumerate(zip(records, steps.tolist())):
        core_lr, core_loss, core_scale, core_skip = core
        lr_err = max(lr_err, abs(lr - core_lr) / core_lr)
        loss_err = max(loss_err, abs(loss - core_loss) / abs(core_loss))
        if scale != core_scale:
            scale_bad.append(f"step {s}: twin {scale:g} core {core_scale:g}")
        if skipped != (core_skip == 1.0):
            skip_bad.append(f"step {s}: twin {'skipped' if skipped else 'stepped'}, core "
                            f"{'skipped' if core_skip == 1.0 else 'stepped'}")
    results.append((f"LR per step (warm-up {warmup})", lr_err, LR_TOL, lr_err <= LR_TOL, ""))
    results.append(("loss per step", loss_err, LOSS_TOL, loss_err <= LOSS_TOL, ""))
    if fp16:
        n_skip = int(steps[:, 3].sum().item())
        results.append(("loss scale per step", len(scale_bad), 0, not scale_bad,
                        "; ".join(scale_bad) or f"final {records[-1][2]:g}"))
        results.append(("skipped steps", len(skip_bad), 0, not skip_bad,
                        "; ".join(skip_bad) or f"{n_skip} of {k} skipped"))
    exact = {}  # the float64 replay, made once when a tolerance needs it

    def float64():
        if not exact:
            exact.update(replay(Twin(dump), torch.float64))
        return exact

    after = split_flat(t.named, read_array(os.path.join(dump, "after.bin")))
    core = [(a - i).double() for a, i in zip(after, t.init)]
    # a GPT's key biases apart: their gradient is 0 up to rounding (twin/gpt_check.py)
    view = (lambda u: gpt_check.without_key_bias(t.named, u)[1]) if t.gpt else (lambda u: u)
    named = gpt_check.without_key_bias(t.named, core)[0] if t.gpt else t.named
    err, name = worst(named, view(mine["updates"]), view(core))
    update_tol = gpt_check.UPDATE_TOL if t.gpt else UPDATE_TOL
    ok, detail = err <= update_tol, name
    if not ok:  # fp32 rounding or semantics? A float64 replay tells them apart.
        ok, detail = arbitrate(named, view(core), view(mine["updates"]),
                               view(float64()["updates"]), update_tol, name)
    results.append((f"update after {k} steps (worst tensor)", err, update_tol, ok, detail))
    if t.gpt:
        tol = gpt_check.KEY_BIAS_TOL
        err, ok, detail = gpt_check.key_bias_check(t.named, mine["updates"], core,
                                                   lambda: float64()["updates"], tol, ARBITER)
        results.append((f"key bias update after {k} steps (worst block)", err, tol, ok, detail))

    # 3. BN running statistics and the eval-mode loss they give (held-out accuracy)
    if t.bns:
        stats_after = bn_stats_split(t.bns, read_array(os.path.join(dump, "bn_stats_after.bin")))
        core = [(a - i).double() for (_, a), (_, i) in zip(stats_after, t.bn_init)]
        named = [(n, None) for n, _ in t.bn_init]
        err, name = worst(named, mine["stats"], core)
        ok, detail = err <= BN_TOL, name
        if not ok:
            ok, detail = arbitrate(named, core, mine["stats"], float64()["stats"], BN_TOL, name)
        results.append((f"BN running statistics' change after {k} steps (worst tensor)", err,
                        BN_TOL, ok, detail))
    else:
        results.append(("BN running statistics", 0, 0, None, "none in this model"))
    core_eval = float(m["eval_loss"])
    err = abs(mine["eval_loss"] - core_eval) / abs(core_eval)
    ok = err <= EVAL_TOL
    detail = f"core {core_eval:.6g}, twin {mine['eval_loss']:.6g}"
    if t.bns:  # how far a core that evaluated with batch statistics would be
        detail += (f"; with batch statistics instead of the running ones "
                   f"{mine['eval_loss_batch_stats']:.6g}")
    if not ok:
        exact_eval = float64()["eval_loss"]
        core_off, twin_off = abs(core_eval - exact_eval), abs(mine["eval_loss"] - exact_eval)
        ok = core_off <= max(EVAL_TOL * abs(exact_eval), ARBITER * twin_off)
        detail += (f"; against float64 the core is {core_off / abs(exact_eval):.3g} off, "
                   f"PyTorch's fp32 {twin_off / abs(exact_eval):.3g}: "
                   f"{'fp32 rounding' if ok else 'not rounding'}")
    results.append((f"eval-mode loss of the held-out batch after {k} steps", err, EVAL_TOL, ok,
                    detail))
    if float(m["clip_norm"]) > 0:  # the config must exercise clipping, else nothing is proved
        results.append(("steps whose gradient norm was clipped", clipped, 1, clipped >= 1,
                        f"{clipped} of {k} (clip_norm {float(m['clip_norm']):g}); at least 1 needed"))
    return t.meta, results


def loss_and_grads(t, dtype=torch.float32):
    """The loss and every parameter's gradient (float64 copies) at the initial parameters,
    computed in dtype."""
    t.model.to(dtype)
    loss = loss_of(t.model, t.inputs(t.images, dtype), t.labels)
    loss.backward()
    return loss.item(), [p.grad.double() for p in t.params()]


def arbitrate(named, core, mine, exact, tol, name):
    """Above the tolerance: fp32 rounding (ok) when the core's worst tensor is at most
    ARBITER times as far from the float64 result as PyTorch's own worst fp32 tensor is (the
    worst, not tensor by tensor: the two sum in different orders, so which small tensor
    rounds worst differs; a difference of semantics is orders of magnitude larger)."""
    core_err, twin_err = worst(named, core, exact), worst(named, mine, exact)
    ok = core_err[0] <= max(tol, ARBITER * twin_err[0])
    return ok, (f"{name}; against float64 the core is {core_err[0]:.3g} off ({core_err[1]}), "
                f"PyTorch's fp32 {twin_err[0]:.3g} ({twin_err[1]}): "
                f"{'fp32 rounding (within 2x of the PyTorch fp32 error)' if ok else 'not rounding'}")


def replay(t, dtype=torch.float32):
    """The dump's K steps in PyTorch, in dtype, from the dump's initial state. Returns a dict:
    records (per step: lr, loss, loss scale, skipped), clipped (steps whose gradient was
    clipped), updates (per parameter tensor, float64), stats (the change of each BN running
    statistic, float64), eval_loss (eval mode, held-out batch) and eval_loss_batch_stats
    (the same batch in training-mode BN: what a core evaluating with batch statistics gives)."""
    m = t.meta
    t.reset()
    t.model.to(dtype)
    t.model.train()
    images = t.inputs(t.images, dtype)
    fp16 = m["precision"] == "fp16"
    inject = {int(s) for s in m["inject_steps"].split(",") if s}
    inject_index, clip = int(m["inject_index"]), float(m["clip_norm"])
    warmup = int(m["lr_warmup"])
    opt = t.optimizer()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_factor(warmup)) if warmup > 0 else None
    scaler = torch.amp.GradScaler("cpu", init_scale=float(m["init_scale"]),
                                  growth_factor=float(m["growth_factor"]),
                                  backoff_factor=float(m["backoff_factor"]),
                                  growth_interval=int(m["growth_interval"]), enabled=fp16)
    records, clipped = [], 0
    for s in range(int(m["check_steps"])):
        lr = opt.param_groups[0]["lr"]
        opt.zero_grad(set_to_none=True)
        loss = loss_of(t.model, images, t.labels)
        scaler.scale(loss).backward()
        if s in inject:
            flat_grad_set(t.params(), inject_index, math.inf)
        before = scaler.get_scale() if fp16 else 1.0
        scaler.unscale_(opt)
        if clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(t.params(), clip).item()
            clipped += math.isfinite(norm) and norm > clip  # inf on a skipped step: not counted
        scaler.step(opt)
        scaler.update()
        if sched:
            sched.step()
        scale = scaler.get_scale() if fp16 else 1.0
        # GradScaler backs off exactly when it skipped the step
        records.append((lr, loss.item(), scale, fp16 and scale < before))
    with torch.no_grad():
        updates = [p.detach().double() - i.double() for p, i in zip(t.params(), t.init)]
        stats = [a - i.double() for a, (_, i) in zip(bn_stats_of(t.bns), t.bn_init)]
        eval_images, eval_labels = t.held_out()
        t.model.eval()
        eval_loss = loss_of(t.model, t.inputs(eval_images, dtype), eval_labels).item()
        t.model.train()  # moves the running statistics: after they were read above
        batch_stats = loss_of(t.model, t.inputs(eval_images, dtype), eval_labels).item()
    return dict(records=records, clipped=clipped, updates=updates, stats=stats,
                eval_loss=eval_loss, eval_loss_batch_stats=batch_stats)


def flat_grad_set(params, index, value):
    """Writes value into the flat gradient element `index` (the core's fault injection)."""
    off = 0
    for p in params:
        if index < off + p.numel():
            p.grad.view(-1)[index - off] = value
            return
        off += p.numel()
    sys.exit(f"twin: inject index {index} is past the {off} parameters")


def cmd_check(a):
    failed = 0
    for dump in a.dumps:
        meta, results = check(dump)
        what = (f"preset {meta['preset']} backend {meta['backend']} precision {meta['precision']} "
                f"batch {meta['batch']} optimizer {meta.get('optimizer', 'sgd')} momentum {float(meta['momentum']):g} weight_decay "
                f"{float(meta['weight_decay']):g} clip_norm {float(meta['clip_norm']):g} "
                f"lr_warmup {meta['lr_warmup']} inject_steps [{meta['inject_steps']}]")
        if gpt_check.is_gpt(meta):
            what += f" attention {meta['attention']} seq_len {meta['seq_len']}"
        print(f"twin-check: {what}")
        for q, err, tol, ok, detail in results:
            if ok is None:  # does not apply to this model: said, not hidden
                print(f"  n/a  {q}: {detail}")
                continue
            failed += not ok
            print(f"  {'ok  ' if ok else 'FAIL'} {q}: {err:.3g} (tolerance {tol:g})"
                  f"{': ' + detail if detail else ''}")
    print(f"twin-check: {'all agree' if not failed else f'{failed} disagreement(s)'} "
          f"(torch {torch.__version__})")
    return 1 if failed else 0


# ---- timing ---------------------------------------------------------------------------

def skip(reason):
    print(f"twin-skip: {reason}")
    sys.exit(2)


def twin_of(dump, command):
    """The Twin of a dump for a command other than check: skips (exit 2) a GPT dump."""
    t = Twin(dump)
    if t.gpt:
        skip(f"`{command}` takes the image presets' dumps; preset {t.meta['preset']} is a gpt "
             f"(only `check` handles it)")
    return t


def set_precision_flags(precision):
    """The core's precision meanings (kernels/core.h CorePrecision) as PyTorch flags."""
    strict = precision == "fp32_strict"
    torch.backends.cudnn.allow_tf32 = not strict             # fp32: cuDNN may use TF32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # GEMMs strict unless tf32


def cmd_time(a):
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    if a.device == "cpu" and amp_dtype is not None:
        skip(f"{a.precision} timing is a GPU comparison (the core computes in fp32 on the CPU)")
    t = twin_of(a.dump, "time")
    dev = torch.device(a.device)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            skip("torch.cuda.is_available() is False (no CUDA device or a CPU-only torch)")
        torch.backends.cudnn.benchmark = a.conv_algo == "autotune"
        set_precision_flags(a.precision)
        torch.cuda.reset_peak_memory_stats()
    fmt = torch.channels_last if a.layout == "nhwc" and t.p["kind"] == "resnet" else torch.contiguous_format
    model = t.model.to(dev, memory_format=fmt)
    if a.input == "device":  # moved once, as steptime --input device (counted in the peak)
        images = t.images.to(dev).contiguous(memory_format=fmt)
        labels = t.labels.to(dev)
    else:  # pageable host memory copied every step, as the core's upload of a malloc'd batch
        host_images, host_labels = t.images.contiguous(memory_format=fmt), t.labels
    opt = t.optimizer()
    scaler = torch.amp.GradScaler(a.device, enabled=a.precision == "fp16")
    forward = model
    if a.compile:
        try:
            forward = torch.compile(model)
        except Exception as e:  # noqa: BLE001 - any failure is a reason to report
            skip(f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    set_to_none = a.zero_grad == "set_to_none"

    def step():
        nonlocal images, labels
        if a.input == "host":
            images, labels = host_images.to(dev), host_labels.to(dev)
        opt.zero_grad(set_to_none=set_to_none)
        with torch.autocast(a.device, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(forward(images), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    times, pending = [], []
    last = None
    try:
        for s in range(a.warmup + a.steps):
            sync()
            t0 = time.perf_counter()
            loss = step()
            if a.readback == "every_step":
                last = loss.item()  # the core's default: copy the loss back, sync, each step
            else:
                pending.append(loss)
                if len(pending) == a.readback_interval:
                    last = torch.stack(pending).mean().item()
                    pending = []
            sync()
            if s >= a.warmup:
                times.append(1e3 * (time.perf_counter() - t0))
    except Exception as e:  # noqa: BLE001
        if a.compile:
            skip(f"torch.compile step failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        raise
    if pending:
        last = torch.stack(pending).mean().item()
    if last is None or not math.isfinite(last):
        sys.exit(f"twin: the loss is not finite ({last})")
    med = statistics.median(times)
    n = int(t.meta["batch"])
    peak = f"{torch.cuda.max_memory_allocated() / 1048576:.1f}" if a.device == "cuda" else "-"
    print(f"twin: preset {t.meta['preset']} device {a.device} side "
          f"{'compile' if a.compile else 'eager'} threads {torch.get_num_threads()} batch {n} "
          f"precision {a.precision} layout {a.layout} zero_grad {a.zero_grad} readback "
          f"{a.readback} input {a.input} steps {a.steps} median_ms {med:.3f} min_ms {min(times):.3f} "
          f"mean_ms {statistics.fmean(times):.3f} images_per_s {1e3 * n / med:.1f} "
          f"peak_mib {peak} torch {torch.__version__}")
    return 0


# ---- inference and training practices: infer, fold, accum ------------------------------

# `infer`: the logits of the three autograd modes run the same kernels on the same
# parameters; bookkeeping changes no number. Measured 0 on the CPU (tiny, mlp); the bound
# leaves room for a backend that picks another kernel when an input requires grad.
INFER_TOL = 1e-5    # max |logits_mode - logits_grad| / max |logits_grad|
# `fold`: w' = w * gamma / sqrt(var + eps), b' = (b - mean) * gamma / sqrt(var + eps) + beta
# rounds once per weight, then the convolutions sum the same products in the same order:
# fp32 rounding through the depth of the model. Measured on the CPU with the BN statistics
# made far from identity (below): 1e-7 to 1e-6 of the largest logit; a fold that forgets
# the mean, eps or beta moves the logits by O(0.1) of it.
FOLD_TOL = 1e-4     # max |logits_folded - logits| / max |logits|
# `accum` without BatchNorm (mlp): K micro-batches of loss / K add up to the whole batch's
# mean gradient; only the order of the sums differs (K partial GEMMs over the batch against
# one). Measured on the CPU after 3 steps: about 1e-7 to 1e-6; a missing 1/K is K - 1 or more.
ACCUM_TOL = 1e-4    # ||update_accum - update_one|| / ||update_one||, parameters as one vector


def setup_device(a):
    """Threads and the device of a timing command; skips (exit 2) without CUDA."""
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            skip("torch.cuda.is_available() is False (no CUDA device or a CPU-only torch)")
        torch.backends.cudnn.benchmark = False  # the core's default heuristic choice
        set_precision_flags("fp32")
    return torch.device(a.device)


def sync_of(dev):
    return torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)


def time_ms(fn, warmup, steps, sync):
    """Median and minimum milliseconds of fn() over `steps` calls after `warmup` untimed ones,
    each ended by sync()."""
    times = []
    for s in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        if s >= warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times), min(times)


def peak_mib(dev):
    return f"{torch.cuda.max_memory_allocated() / 1048576:.1f}" if dev.type == "cuda" else "-"


def reset_peak(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def max_rel_diff(a, b):
    """max |a - b| / max |b|, and max |a - b| (float64)."""
    d = (a.double() - b.double()).abs().max().item()
    scale = b.double().abs().max().item()
    return (d / scale if scale > 0 else (0.0 if d == 0 else math.inf)), d


class SavedBytes:
    """torch.autograd.graph.saved_tensors_hooks that count what autograd saves for backward:
    the bytes each saved tensor spans, each (address, size) once (a ReLU output saved by the
    ReLU and the next convolution is one tensor in memory; a micro-batch, a view of the
    whole batch, counts as its own part), the parameters apart (they exist anyway; the rest
    are activations)."""

    def __init__(self, params):
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self.storages = {}
        self.count = 0

    def pack(self, t):
        self.count += 1
        if t.untyped_storage().data_ptr() not in self.param_ptrs:
            self.storages[(t.data_ptr(), t.numel())] = t.numel() * t.element_size()
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)

    def mib(self):
        return sum(self.storages.values()) / 1048576


def cmd_infer(a):
    """Forward of the eval-mode model with autograd's bookkeeping (the parameters require
    grad), under torch.no_grad() and under torch.inference_mode()."""
    dev = setup_device(a)
    t = twin_of(a.dump, "infer")
    model = t.model.to(dev).eval()
    images = t.images.to(dev)
    params = t.params()  # they require grad, as a model's parameters do after training
    sync = sync_of(dev)
    modes = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}
    logits, figures = {}, {}
    for name, ctx in modes.items():
        def forward():
            with ctx():
                return model(images)
        med, low = time_ms(forward, a.warmup, a.steps, sync)
        counter = SavedBytes(params)
        reset_peak(dev)
        with counter.hooks():
            out = forward()  # kept alive, with its graph, while the peak is read
        sync()
        figures[name] = (med, low, counter.mib(), counter.count, peak_mib(dev))
        logits[name] = out.detach().cpu().clone()
        del out
    worst = max(max_rel_diff(logits[m], logits["grad"])[0] for m in ("no_grad", "inference_mode"))
    grad_requires = "yes" if all(p.requires_grad for p in params) else "no"
    ok = worst <= INFER_TOL
    parts = [f"twin-infer: preset {t.meta['preset']} device {a.device} threads "
             f"{torch.get_num_threads()} batch {t.images.shape[0]} steps {a.steps} params_require_grad "
             f"{grad_requires}"]
    for name, (med, low, mib, count, peak) in figures.items():
        parts.append(f"{name}_median_ms {med:.3f} {name}_min_ms {low:.3f} {name}_saved_mib {mib:.3f} "
                     f"{name}_saved_tensors {count} {name}_peak_mib {peak}")
    parts.append(f"logits_max_rel_diff {worst:.3g} tolerance {INFER_TOL:g} agree {'yes' if ok else 'no'} "
                 f"torch {torch.__version__}")
    print(" ".join(parts))
    return 0 if ok else 1


def conv_bn_pairs(model):
    """(parent, conv attribute, BN attribute) of every convolution directly followed by a
    BatchNorm in the ResNet twin; a projection shortcut is a Sequential (conv, BN)."""
    pairs = [(model, "stem", "stem_bn")]
    for b in model.blocks:
        if b.proj is not None:
            pairs.append((b.proj, "0", "1"))
        pairs += [(b, "conv1", "bn1"), (b, "conv2", "bn2")]
    return pairs


def far_from_identity(model, seed):
    """BN statistics and affine parameters far from a fresh layer's (mean 0, var 1, gamma 1,
    beta 0, where folding changes almost nothing): seeded, so that a wrong fold shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(0.5 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + 1.5 * torch.rand(c, generator=g))
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.2 * torch.randn(c, generator=g))


def cmd_fold(a):
    """BN folded into the preceding convolution (torch.nn.utils.fusion.fuse_conv_bn_eval per
    pair, eval mode): the logits against the unfolded model, and the forward time of each."""
    import copy
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    dev = setup_device(a)
    t = twin_of(a.dump, "fold")
    if t.p["kind"] != "resnet":
        skip(f"preset {t.meta['preset']} has no BatchNorm to fold")
    far_from_identity(t.model, a.seed)
    model = t.model.eval()
    folded = copy.deepcopy(model)
    pairs = conv_bn_pairs(folded)
    for parent, c, b in pairs:
        setattr(parent, c, fuse_conv_bn_eval(getattr(parent, c), getattr(parent, b)))
        setattr(parent, b, nn.Identity())
    if any(isinstance(m, nn.BatchNorm2d) for m in folded.modules()):
        sys.exit("twin: a BatchNorm was left unfolded")
    model, folded = model.to(dev), folded.to(dev)
    images = t.images.to(dev)
    sync = sync_of(dev)
    figures = {}
    with torch.inference_mode():
        ref, out = model(images).cpu(), folded(images).cpu()
        for name, m in (("unfolded", model), ("folded", folded)):
            figures[name] = time_ms(lambda: m(images), a.warmup, a.steps, sync)
    rel_diff, abs_diff = max_rel_diff(out, ref)
    ok = rel_diff <= FOLD_TOL
    print(f"twin-fold: preset {t.meta['preset']} device {a.device} threads {torch.get_num_threads()} "
          f"batch {t.images.shape[0]} steps {a.steps} folded_pairs {len(pairs)} "
          f"unfolded_median_ms {figures['unfolded'][0]:.3f} folded_median_ms {figures['folded'][0]:.3f} "
          f"speedup {figures['unfolded'][0] / figures['folded'][0]:.3f} max_abs_diff {abs_diff:.3g} "
          f"max_rel_diff {rel_diff:.3g} tolerance {FOLD_TOL:g} agree {'yes' if ok else 'no'} "
          f"torch {torch.__version__}")
    return 0 if ok else 1


def cmd_accum(a):
    """K micro-batches with (loss / K).backward() accumulating into .grad and one
    optimizer.step(), against one step on the whole (K-times-larger) batch: the update after
    --check-steps steps from the dump's initial state, and the time per optimizer step."""
    dev = setup_device(a)
    t = twin_of(a.dump, "accum")
    n, k = t.images.shape[0], a.k
    if k < 1 or n % k != 0:
        sys.exit(f"twin: the dump's batch of {n} does not split into {k} equal micro-batches")
    model = t.model.to(dev)
    images, labels = t.images.to(dev), t.labels.to(dev)
    micro = list(zip(images.chunk(k), labels.chunk(k)))
    sync = sync_of(dev)

    def one_batch(opt):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels).backward()
        opt.step()

    def accumulate(opt, divide=True):
        opt.zero_grad(set_to_none=True)
        for x, y in micro:
            loss = F.cross_entropy(model(x), y)
            (loss / k if divide else loss).backward()
        opt.step()

    def update(step):
        """The update (flat, float64) after check_steps optimizer steps from the dump's
        initial parameters and BN statistics."""
        t.reset()
        model.to(dev).train()
        opt = t.optimizer()
        for _ in range(a.check_steps):
            step(opt)
        return torch.cat([(p.detach().cpu().double() - i.double()).flatten()
                          for p, i in zip(t.params(), t.init)])

    base = update(one_batch)
    diff = rel(update(accumulate), base)
    unscaled = rel(update(lambda opt: accumulate(opt, divide=False)), base)
    figures = {}
    for name, step, x in (("one_batch", one_batch, images), ("accumulate", accumulate, micro[0][0])):
        t.reset()
        model.to(dev).train()
        opt = t.optimizer()
        reset_peak(dev)
        med, low = time_ms(lambda: step(opt), a.warmup, a.steps, sync)
        peak = peak_mib(dev)
        counter = SavedBytes(t.params())  # what one forward keeps for its backward
        with counter.hooks():
            model(x)
        figures[name] = (med, low, peak, counter.mib())
    has_bn = bool(t.bns)
    ok = has_bn or diff <= ACCUM_TOL
    verdict = "n/a(batchnorm)" if has_bn else ("yes" if ok else "no")
    parts = [f"twin-accum: preset {t.meta['preset']} device {a.device} threads {torch.get_num_threads()} "
             f"batch {n} k {k} micro_batch {n // k} steps {a.steps} check_steps {a.check_steps}"]
    for name, (med, low, peak, saved) in figures.items():
        parts.append(f"{name}_median_ms {med:.3f} {name}_min_ms {low:.3f} {name}_peak_mib {peak} "
                     f"{name}_saved_mib {saved:.3f}")
    parts.append(f"update_rel_diff {diff:.3g} unscaled_rel_diff {unscaled:.3g} tolerance {ACCUM_TOL:g} "
                 f"agree {verdict} torch {torch.__version__}")
    print(" ".join(parts))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[2:]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="replay the core's dumped steps on the CPU and compare")
    c.add_argument("dumps", nargs="+", metavar="DIR", help="folders written by steptime --dump")
    t = sub.add_parser("time", help="time PyTorch training steps of the dumped model and batch")
    t.add_argument("--dump", required=True, help="folder written by steptime --dump")
    t.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    t.add_argument("--precision", choices=["fp32", "fp32_strict", "tf32", "fp16", "bf16"],
                   default="fp32", help="as steptime --precision (fp16/bf16: autocast; GPU)")
    t.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw",
                   help="nhwc: channels_last model and batch")
    t.add_argument("--compile", action="store_true", help="time torch.compile(model)")
    t.add_argument("--conv-algo", choices=["heuristic", "autotune"], default="heuristic",
                   help="autotune: torch.backends.cudnn.benchmark = True (default False, as "
                        "the core's default)")
    t.add_argument("--zero-grad", choices=["memset", "set_to_none"], default="memset",
                   help="memset: zero_grad(set_to_none=False), as the core's default")
    t.add_argument("--readback", choices=["every_step", "deferred"], default="every_step",
                   help="every_step: loss.item() each step (the core's default); deferred: "
                        "keep the losses on the device, read their mean every "
                        "--readback-interval steps")
    t.add_argument("--readback-interval", type=int, default=10)
    t.add_argument("--input", choices=["device", "host"], default="device",
                   help="device: the batch moved to the device once, before the steps (as "
                        "steptime's default); host: a pageable CPU batch copied every step "
                        "(as steptime --input host)")
    t.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    t.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    t.add_argument("--warmup", type=int, default=2,
                   help="untimed steps first (default 2; torch.compile compiles in the first)")
    helps = {
        "infer": "forward of the eval-mode model with autograd on, under no_grad and under "
                 "inference_mode: time, saved bytes, logits",
        "fold": "BN folded into the convolutions (fuse_conv_bn_eval): logits and time against "
                "the unfolded model",
        "accum": "K accumulated micro-batches (loss / K) against one K-times-larger batch: "
                 "update and time per optimizer step",
    }
    for name, text in helps.items():
        p = sub.add_parser(name, help=text)
        p.add_argument("--dump", required=True, help="folder written by steptime --dump (the "
                       "model, its initial parameters and the batch)")
        p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
        p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
        p.add_argument("--steps", type=int, default=10, help="timed calls (default 10)")
        p.add_argument("--warmup", type=int, default=2, help="untimed calls first (default 2)")
        if name == "fold":
            p.add_argument("--seed", type=int, default=1, help="of the BN statistics set far from "
                           "identity (default 1)")
        if name == "accum":
            p.add_argument("--k", type=int, default=4, help="micro-batches per optimizer step "
                           "(default 4; must divide the dump's batch)")
            p.add_argument("--check-steps", type=int, default=3, help="optimizer steps before "
                           "the updates are compared (default 3)")
    a = ap.parse_args()
    if a.cmd == "time" and (a.steps < 1 or a.warmup < 0 or a.readback_interval < 1):
        ap.error("--steps and --readback-interval must be >= 1, --warmup >= 0")
    if a.cmd in helps and (a.steps < 1 or a.warmup < 0):
        ap.error("--steps must be >= 1, --warmup >= 0")
    if a.cmd == "accum" and (a.k < 1 or a.check_steps < 1):
        ap.error("--k and --check-steps must be >= 1")
    commands = {"check": cmd_check, "time": cmd_time, "infer": cmd_infer, "fold": cmd_fold,
                "accum": cmd_accum}
    sys.exit(commands[a.cmd](a))


if __name__ == "__main__":
    main()
