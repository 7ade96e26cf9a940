"""grad_accum's twin (bench/grad_accum): one step on the batch B (one_batch) against K
micro-batches of B/K, each (loss / K).backward() adding into .grad, and one optimizer.step()
(accumulate_K), at the preset's batch and at 256, mlp and tiny (the core's CPU rows; on a
GPU it also has small, medium, resnet18 at 0 and 512).

Check, as the core's: each accumulate_K's update after 3 steps against the exact reference
of accumulation from the same start on the same batches: the K micro-batches' gradients,
each taken alone (BatchNorm normalising each micro-batch by itself, as accumulation does),
summed in float64, one optimiser step. They differ by the order of the sums alone
(ACCUM_TOL; above it the float64 accumulation arbitrates, training.arbitrate); against one
step on the whole batch BatchNorm alone moves tiny's update by up to 0.2, which would say
nothing.
"""
from twin.api import Row, Variant
from twin.practices import _training as training

ACCUM_TOL = 1e-4       # bench_grad_accum.c ACCUM_TOL (CPU)
ACCUM_GPU_TOL = 1e-2   # bench_grad_accum.c ACCUM_GPU_TOL
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


class Accumulate(training.Train):
    """A variant's training step, with the core's counters accumulation_steps and micro_batch."""

    def counters(self):
        return {"accumulation_steps": self.micro, "micro_batch": self.items // self.micro}


def variant(preset, batch, k):
    name, role = ("one_batch", "baseline") if k == 1 else ("accumulate_%d" % k, "tuned")
    return Variant(name, role, lambda ctx: Accumulate(ctx, preset, batch, role == "tuned", micro=k))


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
            r = training.verdict("accumulate_%d" % k, training.flat_rel(mine, ref), tol, what)
            if not r.ok:  # measured: tiny at 256, K 8, 1.3e-4 after 3 steps, rounding
                exact = training.float64_update(training.Train(ctx, preset, batch, False, micro=k), batches)
                r = training.arbitrate(r, mine, ref, exact)
            out.append(r)
        return out
    return check


def row(preset, batch, device="any"):
    return Row(practice="grad_accum", params=training.params_of(preset, batch),
               variants=[variant(preset, batch, k) for k in (1,) + KS],
               min_time=0.5, synthetic=True, warmup=3, device=device, check=check_of(preset, batch))


ROWS = [row(p, b) for p in ("mlp", "tiny") for b in (0, 256)] + \
       [row(p, b, "cuda") for p in ("small", "medium", "resnet18") for b in (0, 512)]
