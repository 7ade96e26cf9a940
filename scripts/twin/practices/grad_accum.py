"""grad_accum's twin (bench/grad_accum): one step on the batch B (one_batch) against K
micro-batches of B/K, each (loss / K).backward() adding into .grad, and one optimizer.step()
(accumulate_K), at the preset's batch and at 256, mlp and tiny (the core's CPU rows; on a
GPU it also has small, medium, resnet18 at 0 and 512).

Check, as the core's: each accumulate_K's update after 3 steps against the exact reference
of accumulation from the same start on the same batches: the K micro-batches' gradients,
each taken alone (BatchNorm normalising each micro-batch by itself, as accumulation does),
summed in float64, one optimiser step. They differ by the order of the sums alone
(ACCUM_TOL); against one step on the whole batch BatchNorm alone moves tiny's update by up
to 0.2, which would say nothing.
"""
import torch

from twin.api import CheckResult, Row, Variant
from twin.practices import training

ACCUM_TOL = 1e-4       # bench_grad_accum.c ACCUM_TOL (CPU)
ACCUM_GPU_TOL = 1e-2   # bench_grad_accum.c ACCUM_GPU_TOL
ARBITER = 2.0          # above the tolerance float64 decides, as torch_twin.py's ARBITER: fp32
                       # rounding when accumulate_K is at most 2x as far from the float64
                       # accumulation as the fp32 reference is (measured: tiny at 256, K 8,
                       # 3rd step 1.3e-4 against the reference, a rounding a near-constant
                       # channel of a 32-image micro-batch's BatchNorm amplifies)
KS = (2, 4, 8)


class Reference(training.Train):
    """The exact reference of K-way accumulation: each micro-batch's gradient of loss / K
    taken alone, the K summed in float64, one optimiser step (never a self-test's target)."""

    def train(self, x, y):
        total, sums = 0.0, None
        params = list(self.model.parameters())
        for xm, ym in zip(x.chunk(self.micro), y.chunk(self.micro)):
            self.opt.zero_grad(set_to_none=True)
            loss = self.loss_of(xm, ym) / self.micro
            loss.backward()
            total += loss.item()
            parts = [p.grad.double() for p in params]
            sums = parts if sums is None else [s + g for s, g in zip(sums, parts)]
        for p, s in zip(params, sums):
            p.grad = s.to(p.dtype)
        self.opt.step()
        return total


def variant(preset, batch, k):
    if k == 1:
        return Variant("one_batch", "baseline", lambda ctx: training.Train(ctx, preset, batch, False))
    return Variant("accumulate_%d" % k, "tuned", lambda ctx: training.Train(ctx, preset, batch, True, micro=k))


def flat_rel(mine, ref):
    return training.rel_l2(torch.cat([mine[n].flatten() for n in ref]),
                           torch.cat([ref[n].flatten() for n in ref]))


def float64_update(ctx, preset, batch, k, batches):
    """K-way accumulation's update in float64 from the same start: the arbiter of rounding."""
    work = training.Train(ctx, preset, batch, False, micro=k)
    work.model.double()  # in place: the optimiser keeps the same parameters
    return training.update_of(work, [(x.double(), y) for x, y in batches])


def check_of(preset, batch):
    def check(ctx):
        tol = ACCUM_GPU_TOL if ctx.device == "cuda" else ACCUM_TOL
        batches = training.check_batches(preset, batch, ctx)
        out = []
        for k in KS:
            ref = training.update_of(Reference(ctx, preset, batch, False, micro=k), batches)
            mine = training.update_of(training.Train(ctx, preset, batch, True, micro=k), batches)
            what = "the update after %d steps (against the exact reference of %d-way accumulation)" % (
                training.CHECK_STEPS, k)
            r = training.verdict("accumulate_%d" % k, flat_rel(mine, ref), tol, what)
            if not r.ok:
                exact = float64_update(ctx, preset, batch, k, batches)
                mine_off, ref_off = flat_rel(mine, exact), flat_rel(ref, exact)
                if mine_off <= max(tol, ARBITER * ref_off):
                    r.ok, r.finding = True, ""
                else:
                    r.finding += "; against float64 accumulate_%d is %.3g off, the reference %.3g: not rounding" % (
                        k, mine_off, ref_off)
            out.append(r)
        return out
    return check


def row(preset, batch, device="any"):
    return Row(practice="grad_accum", params=training.params_of(preset, batch),
               variants=[variant(preset, batch, k) for k in (1,) + KS],
               min_time=0.5, warmup=3, device=device, check=check_of(preset, batch))


ROWS = [row(p, b) for p in ("mlp", "tiny") for b in (0, 256)] + \
       [row(p, b, "cuda") for p in ("small", "medium", "resnet18") for b in (0, 512)]
