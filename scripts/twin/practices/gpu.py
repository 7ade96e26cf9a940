"""twin/practices/gpu.py: the CUDA-only practices' PyTorch twins: pin_memory, on_device,
cudnn_benchmark (fixed and dynamic shapes) and cuda_graphs. Without a CUDA device (this
torch, or a CPU run) every row is a visible skip naming why.

  pin_memory      host-to-device copies of `bytes` (bench/pin_memory: pageable -> pinned,
                  pinned_async): tensor.to("cuda") from pageable memory, from pin_memory()
                  memory, and non_blocking from pinned memory; check: the device copy holds
                  the host bytes
  on_device       a training step whose batch is made by torch.rand(..., device="cuda")
                  against torch.rand on the host then .to("cuda") (bench/on_device:
                  host_built -> device_built); check: the tuned update's norm within 50% of
                  the baseline's (the data differ by design, so only "it trains" is checked)
  cudnn_benchmark torch.backends.cudnn.benchmark False -> True, fixed shapes (tolerance 5e-2,
                  the core's) and dynamic ones (the side cycles over 3 sizes)
  cuda_graphs     eager -> the whole training step captured once (torch.cuda.graph) and
                  replayed (warm-up 3 steps as the core's, tolerance 1e-2, the core's)
"""
import torch
import torch.nn.functional as F

from twin import models
from twin.api import CheckResult, Row, Variant, Work
from twin.practices import _data as data

CHECK_STEPS = 3


class TrainWork(Work):
    """SGD steps of a preset on CUDA: on one fixed batch, or (on_device set) on a batch made
    every step on the device or on the host, or (sizes) at a side cycling over sizes."""

    def __init__(self, ctx, preset, batch=0, train=True, benchmark=None, sizes=None, on_device=None):
        torch.backends.cudnn.benchmark = bool(benchmark)
        torch.manual_seed(ctx.seed)
        self.model = models.build(preset).cuda()
        d = models.PRESET_DEFAULTS[preset]
        self.opt = torch.optim.SGD(self.model.parameters(), lr=d["lr"], momentum=d["momentum"],
                                   weight_decay=d["weight_decay"])
        self.preset, self.train, self.on_device, self.n = preset, train, on_device, 0
        p = models.PRESETS[preset]
        self.sizes = sizes or [p["image"]]
        self.fixed = models.batch_of(preset, batch, ctx.seed, "cuda")
        self.items = self.fixed[0].shape[0]
        self.shape = (self.items, p["in_ch"])
        self.classes = p["classes"]

    def batch(self):
        if self.on_device is None:
            x, y = self.fixed
        else:
            dev = "cuda" if self.on_device else "cpu"
            s = self.sizes[0]
            x = torch.rand(*self.shape, s, s, device=dev)
            y = torch.randint(0, self.classes, (self.items,), device=dev)
            x, y = x.to("cuda"), y.to("cuda")
        s = self.sizes[self.n % len(self.sizes)]
        if x.shape[-1] != s:
            x = F.interpolate(x, size=(s, s), mode="bilinear", align_corners=False)
        return x, y

    def step(self):
        x, y = self.batch()
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        if self.train:
            self.opt.step()
        loss.item()  # read back every step, as the core's default
        self.n += 1

    def close(self):
        torch.backends.cudnn.benchmark = False


class GraphWork(TrainWork):
    """The whole step (forward, backward, update) captured once and replayed."""

    def __init__(self, ctx, preset, train=True):
        super().__init__(ctx, preset, train=train)
        self.x, self.y = self.fixed
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # the core's warm-up before capture
                TrainWork.step(self)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            F.cross_entropy(self.model(self.x), self.y).backward()
            if self.train:
                self.opt.step()

    def step(self):
        self.graph.replay()


def update_check(name, tolerance, make_base, make_tuned, steps=CHECK_STEPS, norm_only=False):
    def run(make):
        w = make()
        try:
            start = data.snapshot(w.model)
            for _ in range(steps):
                w.step()
            torch.cuda.synchronize()
            return [t.cpu() for t in start], [t.cpu() for t in data.snapshot(w.model)]
        finally:
            w.close()
    b0, b1 = run(make_base)
    t0, t1 = run(make_tuned)
    if norm_only:
        nb = sum(float((b - a).double().pow(2).sum()) for a, b in zip(b0, b1)) ** 0.5
        nt = sum(float((b - a).double().pow(2).sum()) for a, b in zip(t0, t1)) ** 0.5
        rel = abs(nt / nb - 1) if nb > 0 else float("inf")
    else:
        rel = data.update_rel_diff(b0, b1, t0, t1)
    ok = rel <= tolerance
    return [CheckResult(name, ok, rel, tolerance, "" if ok else
                        "its update differs from the baseline's by %.3g (relative%s)"
                        % (rel, " norm" if norm_only else " L2"))]


def trains(ctx):
    return ctx.selftest != "no_update"


class CopyWork(Work):
    def __init__(self, nbytes, pinned, non_blocking):
        self.host = torch.randint(0, 255, (nbytes,), dtype=torch.uint8)
        if pinned:
            self.host = self.host.pin_memory()
        self.dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        self.non_blocking, self.items = non_blocking, 1

    def step(self):
        self.dev.copy_(self.host, non_blocking=self.non_blocking)
        torch.cuda.synchronize()


def copy_check(nbytes, variants):
    out = []
    for name, pinned, nb in variants[1:]:
        w = CopyWork(nbytes, pinned, nb)
        w.step()
        bad = int((w.dev.cpu() != w.host).sum())
        out.append(CheckResult(name, bad == 0, float(bad), 0.0, "" if bad == 0 else
                               "%d bytes differ after the copy" % bad))
    return out


def pin_row(nbytes):
    vs = [("pageable", False, False), ("pinned", True, False), ("pinned_async", True, True)]
    return Row("pin_memory", {"h2d": 1, "bytes": nbytes},
               [Variant(n, "baseline" if i == 0 else "tuned", lambda ctx, p=p, nb=nb: CopyWork(nbytes, p, nb))
                for i, (n, p, nb) in enumerate(vs)],
               min_time=0.5, warmup=1, device="cuda", check=lambda ctx: copy_check(nbytes, vs), skip=data.cuda_skip,
               differs="device-to-host (h2d:0) and registered_async (cudaHostRegister) have no row here")


def on_device_row(preset):
    def make(ctx, dev, tuned):
        return TrainWork(ctx, preset, train=not tuned or trains(ctx), on_device=dev)
    return Row("on_device", {"preset": preset, "batch": 0}, [
        Variant("host_built", "baseline", lambda ctx: make(ctx, False, False)),
        Variant("device_built", "tuned", lambda ctx: make(ctx, True, True))],
        min_time=0.5, warmup=1, device="cuda", skip=data.cuda_skip,
        check=lambda ctx: update_check("device_built", 0.5, lambda: make(ctx, False, False),
                                       lambda: make(ctx, True, True), norm_only=True),
        differs="the core checks nothing here; the twin checks the tuned variant trains (update norm)")


def cudnn_row(preset, dynamic):
    p = models.PRESETS[preset]["image"]
    sizes = [p, p * 3 // 4, p // 2] if dynamic else None

    def make(ctx, bench, tuned):
        return TrainWork(ctx, preset, train=not tuned or trains(ctx), benchmark=bench, sizes=sizes)
    return Row("cudnn_benchmark_dynamic" if dynamic else "cudnn_benchmark", {"preset": preset, "batch": 0}, [
        Variant("heuristic", "baseline", lambda ctx: make(ctx, False, False)),
        Variant("autotune", "tuned", lambda ctx: make(ctx, True, True))],
        min_time=0.5, warmup=1, device="cuda", skip=data.cuda_skip,
        check=lambda ctx: update_check("autotune", 5e-2, lambda: make(ctx, False, False),
                                       lambda: make(ctx, True, True)),
        differs="dynamic shapes cycle the side over 3 sizes (the core draws from its own schedule)"
        if dynamic else "")


def graph_row(preset):
    def eager(ctx):
        return TrainWork(ctx, preset)
    return Row("cuda_graphs", {"preset": preset, "batch": 0}, [
        Variant("eager", "baseline", eager),
        Variant("graph", "tuned", lambda ctx: GraphWork(ctx, preset, trains(ctx)))],
        min_time=0.5, warmup=3, device="cuda", skip=data.cuda_skip,
        # the graph's 3 warm-up steps are eager steps: the eager side takes them too
        check=lambda ctx: graph_check(ctx, preset))


def graph_check(ctx, preset):
    base = TrainWork(ctx, preset)
    try:
        b0 = [t.cpu() for t in data.snapshot(base.model)]
        for _ in range(3 + CHECK_STEPS):
            base.step()
        b1 = [t.cpu() for t in data.snapshot(base.model)]
    finally:
        base.close()
    torch.manual_seed(ctx.seed)
    g = GraphWork(ctx, preset, trains(ctx))
    try:
        for _ in range(CHECK_STEPS):
            g.step()
        torch.cuda.synchronize()
        t1 = [t.cpu() for t in data.snapshot(g.model)]
    finally:
        g.close()
    rel = data.update_rel_diff(b0, b1, b0, t1)  # the same start: both built from ctx.seed
    ok = rel <= 1e-2
    return [CheckResult("graph", ok, rel, 1e-2, "" if ok else
                        "its update after %d steps differs from eager's by %.3g (relative L2)" % (3 + CHECK_STEPS, rel))]


ROWS = ([pin_row(4096 * 4 ** k) for k in range(0, 9, 2)]
        + [on_device_row(p) for p in ("tiny", "small", "resnet18")]
        + [cudnn_row(p, False) for p in ("tiny", "small", "medium", "resnet18")]
        + [cudnn_row(p, True) for p in ("small", "resnet18")]
        + [graph_row(p) for p in ("tiny", "mlp", "small", "resnet18")])
