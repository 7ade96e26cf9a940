"""twin/practices/ddp.py: ddp_scaling and ddp_overlap in PyTorch (bench/ddp, docs/practices/ddp.md).

On the CPU, as the core's CPU backend: ranks are processes (torch.multiprocessing spawn,
one compute thread each, gloo over a free localhost port, a fresh port per group). The
parent drives them: one step() = one training step in every rank, acknowledged by each
(a rank that does not answer within TIMEOUT_S is an error naming it; close() stops and
reaps them, killing any that hang).

ddp_scaling (tiny, 16 images per device, devices 1 and 2 at most the cores; weak scaling):
  data_parallel  nn.DataParallel is GPU-only in PyTorch, so on the CPU its algorithm runs in
                 one process: the devices' chunks forward + backward one after another on one
                 replica (the runner's threads), gradients averaged, one update
  ddp            DistributedDataParallel, one rank per device (one thread each), PyTorch's
                 default buckets
  one_process    reference: one process, one device's batch
  Check: the DDP ranks' update after CHECK_STEPS steps equals data_parallel's on the same
  batch (chunk r is rank r's) within the core's 1e-4 relative L2.
ddp_overlap (small, 4 per rank, all ranks, bucket_mib 1, 5, 25 and 0 = one bucket):
  overlapped     DDP with bucket_cap_mb = bucket_mib (PyTorch's DDP always overlaps)
  not_overlapped no PyTorch form: the documented approximation is no DDP, backward, then one
                 all-reduce of every gradient (flattened) and the update, which is what the
                 core's not_overlapped does
"""
import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from twin import models
from twin.api import CheckResult, Row, Variant, Work
from twin.practices import _data as data

TOLERANCE = 1e-4    # bench/ddp/ddp_scaling.c DDP_CHECK_TOLERANCE: summation order only
CHECK_STEPS = 3
TIMEOUT_S = 120
CORES = max(1, os.cpu_count() or 1)
ONE_BUCKET_MIB = 1024  # bucket_mib 0: every gradient in one bucket (the models are smaller)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(preset, seed):
    torch.manual_seed(seed)
    model = models.build(preset)
    d = models.PRESET_DEFAULTS[preset]
    opt = torch.optim.SGD(model.parameters(), lr=d["lr"], momentum=d["momentum"], weight_decay=d["weight_decay"])
    return model, opt


def rank_main(rank, world, port, cfg, conn):
    """One rank: builds the model, then obeys the parent: 's' one step, 'p' its parameters,
    'q' quit. Every answer is ("ok", payload) or ("error", text)."""
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=TIMEOUT_S))
        model, opt = make_model(cfg["preset"], cfg["seed"])
        x, y = models.batch_of(cfg["preset"], cfg["batch"] * world, cfg["seed"])
        x, y = x.chunk(world)[rank], y.chunk(world)[rank]
        if cfg["mode"] == "ddp":
            net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cfg["bucket_mib"])
        else:
            net = model
        conn.send(("ok", None))
        while True:
            cmd = conn.recv()
            if cmd == "q":
                break
            if cmd == "p":
                conn.send(("ok", data.snapshot(model)))
                continue
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            loss.item()  # read back every step, as the core's default
            if cfg["mode"] == "allreduce_after":  # one all-reduce of every gradient after backward
                grads = [p.grad for p in model.parameters()]
                flat = torch.cat([g.reshape(-1) for g in grads])
                dist.all_reduce(flat)
                flat /= world
                off = 0
                for g in grads:
                    g.copy_(flat[off:off + g.numel()].view_as(g))
                    off += g.numel()
            if cfg["train"]:
                opt.step()
            conn.send(("ok", None))
    except Exception as e:  # reported to the parent, which names the rank
        try:
            conn.send(("error", "%s: %s" % (type(e).__name__, e)))
        except OSError:
            pass
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


class RanksWork(Work):
    """`world` rank processes; step() = one step in every rank."""

    def __init__(self, world, cfg):
        spawn = mp.get_context("spawn")
        port = free_port()
        self.procs, self.conns = [], []
        self.items = cfg["batch"] * world
        try:
            for r in range(world):
                parent, child = spawn.Pipe()
                p = spawn.Process(target=rank_main, args=(r, world, port, cfg, child), daemon=True)
                p.start()
                child.close()
                self.procs.append(p)
                self.conns.append(parent)
            self.answers()
        except BaseException:
            self.close()
            raise

    def answers(self):
        out = []
        for r, (p, c) in enumerate(zip(self.procs, self.conns)):
            if not c.poll(TIMEOUT_S):
                raise RuntimeError("rank %d (pid %d) did not answer within %d s" % (r, p.pid, TIMEOUT_S))
            try:
                kind, payload = c.recv()
            except EOFError:
                raise RuntimeError("rank %d (pid %d) died (exit code %s)" % (r, p.pid, p.exitcode))
            if kind != "ok":
                raise RuntimeError("rank %d (pid %d): %s" % (r, p.pid, payload))
            out.append(payload)
        return out

    def step(self):
        for c in self.conns:
            c.send("s")
        self.answers()

    def params(self):
        for c in self.conns:
            c.send("p")
        return self.answers()[0]

    def close(self):
        for c in self.conns:
            try:
                c.send("q")
            except OSError:
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
        for c in self.conns:
            c.close()
        self.procs, self.conns = [], []


class DataParallelWork(Work):
    """DataParallel's algorithm in one process: `devices` chunks one after another, their
    gradients averaged, one update, with the runner's threads (the core's --threads:
    switching the thread pool's size every step costs more than the step)."""

    def __init__(self, ctx, preset, batch, devices):
        self.model, self.opt = make_model(preset, ctx.seed)
        x, y = models.batch_of(preset, batch * devices, ctx.seed)
        self.chunks = list(zip(x.chunk(devices), y.chunk(devices)))
        self.items = batch * devices

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        total = 0.0
        for x, y in self.chunks:
            loss = F.cross_entropy(self.model(x), y) / len(self.chunks)
            loss.backward()
            total += loss.item()  # read back every step, as the core's default
        self.opt.step()


def compare(name, run_base, run_tuned):
    """Each side: a Work with params() after CHECK_STEPS steps -> (start, end)."""
    def run(make):
        w = make()
        try:
            start = w.params() if hasattr(w, "params") else data.snapshot(w.model)
            for _ in range(CHECK_STEPS):
                w.step()
            return start, w.params() if hasattr(w, "params") else data.snapshot(w.model)
        finally:
            w.close()
    b0, b1 = run(run_base)
    t0, t1 = run(run_tuned)
    rel = data.update_rel_diff(b0, b1, t0, t1)
    ok = rel <= TOLERANCE
    return [CheckResult(name, ok, rel, TOLERANCE, "" if ok else
                        "its update after %d steps differs from the baseline's by %.3g (relative L2)"
                        % (CHECK_STEPS, rel))]


def cfg(preset, batch, mode, seed, bucket_mib=25, train=True):
    return dict(preset=preset, batch=batch, mode=mode, seed=seed, bucket_mib=bucket_mib, train=train)


def scaling_row(devices):
    p, b = "tiny", 16

    def ddp(ctx, train=True):
        return RanksWork(devices, cfg(p, b, "ddp", ctx.seed, train=train and ctx.selftest != "no_update"))
    return Row("ddp_scaling", {"preset": p, "batch": b, "devices": devices}, [
        Variant("data_parallel", "baseline", lambda ctx: DataParallelWork(ctx, p, b, devices)),
        Variant("ddp", "tuned", ddp),
        Variant("one_process", "reference", lambda ctx: DataParallelWork(ctx, p, b, 1)),
    ], min_time=0.5, warmup=1, device="cpu",
        check=lambda ctx: compare("ddp", lambda: DataParallelWork(ctx, p, b, devices), lambda: ddp(ctx)),
        differs="nn.DataParallel is GPU-only in PyTorch: the CPU baseline is its algorithm in one process "
                "(the devices' chunks one after another on one replica with the run's threads, gradients "
                "averaged); the core runs a host thread per replica")


def overlap_row(bucket_mib):
    p, b, world = "small", 4, min(CORES, 8)
    cap = bucket_mib or ONE_BUCKET_MIB

    def make(mode, ctx, tuned):
        train = not (tuned and ctx.selftest == "no_update")
        return RanksWork(world, cfg(p, b, mode, ctx.seed, cap, train))
    return Row("ddp_overlap", {"preset": p, "batch": b, "bucket_mib": bucket_mib}, [
        Variant("not_overlapped", "baseline", lambda ctx: make("allreduce_after", ctx, False)),
        Variant("overlapped", "tuned", lambda ctx: make("ddp", ctx, True)),
    ], min_time=0.5, warmup=1, device="cpu",
        check=lambda ctx: compare("overlapped", lambda: make("allreduce_after", ctx, False),
                                  lambda: make("ddp", ctx, True)),
        skip=lambda ctx: None if CORES >= 2 else "needs 2 cores for 2 ranks (this machine has %d)" % CORES,
        differs="not_overlapped has no PyTorch form: it is no DDP, backward, then one all-reduce of every "
                "gradient flattened (the core's not_overlapped); overlapped is DDP with bucket_cap_mb = "
                "bucket_mib (0: one bucket of every gradient), whose first bucket is PyTorch's 1 MiB")


ROWS = [scaling_row(d) for d in (1, 2) if d <= CORES] + [overlap_row(m) for m in (1, 5, 25, 0)]
