#!/usr/bin/env python3
"""torch_cpu_twin.py: the core's model in PyTorch on the CPU, for side-by-side timing.

Builds the same network as kernels/model.c for a preset (stem conv + BN + ReLU, basic
blocks with 1x1 projection shortcuts, global average pooling, linear; or the MLP), loads
the core's initial parameters and batch written by `build/steptime --dump DIR`, checks
that PyTorch computes the same steps (loss of each step and parameters after
check_steps SGD steps, against DIR/meta.txt and DIR/after.bin), then times training
steps: zero_grad, forward, cross-entropy, backward, SGD (momentum, weight decay).

Only the Python standard library and torch (pip install torch); nothing in the project
needs it. Example (scripts/cpu_twin_compare.sh runs this interleaved with the core):
    build/steptime --preset small --dump /tmp/twin-small
    python3 scripts/torch_cpu_twin.py --dump /tmp/twin-small --threads 1 --steps 10
Prints one line: "twin: preset P threads T batch N zero_grad Z steps S median_ms ..."
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
import torch.nn.functional as F  # noqa: E402

# kernels/core.c core_config_preset: the architecture of each preset.
PRESETS = {
    "tiny": dict(kind="resnet", in_ch=3, image=16, classes=10, width=8, stages=2, blocks=1,
                 stem_k=3, stem_s=1),
    "mlp": dict(kind="mlp", in_ch=3, image=16, classes=10, hidden=128, layers=2),
    "small": dict(kind="resnet", in_ch=3, image=32, classes=10, width=32, stages=3, blocks=2,
                  stem_k=3, stem_s=1),
    "medium": dict(kind="resnet", in_ch=3, image=64, classes=100, width=64, stages=4,
                   blocks=2, stem_k=3, stem_s=1),
    "resnet18": dict(kind="resnet", in_ch=3, image=224, classes=1000, width=64, stages=4,
                     blocks=2, stem_k=7, stem_s=4),
}
BN_EPS, BN_MOMENTUM = 1e-5, 0.1  # kernels/model.h


def conv(cin, cout, k, stride):
    return nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)


def bn(c):
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)


class Block(nn.Module):
    """conv-BN-ReLU-conv-BN + shortcut (1x1 conv + BN when the shape changes), ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(conv(cin, cout, 1, stride), bn(cout))
        self.conv1, self.bn1 = conv(cin, cout, 3, stride), bn(cout)
        self.conv2, self.bn2 = conv(cout, cout, 3, 1), bn(cout)

    def forward(self, x):
        shortcut = self.proj(x) if self.proj is not None else x
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + shortcut)

    def ordered_params(self):
        # kernels/model.c build_resnet: the projection first, then conv1, bn1, conv2, bn2
        mods = list(self.proj) if self.proj is not None else []
        return mods + [self.conv1, self.bn1, self.conv2, self.bn2]


class ResNet(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.stem = conv(p["in_ch"], p["width"], p["stem_k"], p["stem_s"])
        self.stem_bn = bn(p["width"])
        blocks, cin = [], p["width"]
        for s in range(p["stages"]):
            ch = p["width"] << s
            for b in range(p["blocks"]):
                blocks.append(Block(cin, ch, 2 if s > 0 and b == 0 else 1))
                cin = ch
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, p["classes"])

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def ordered_params(self):
        mods = [self.stem, self.stem_bn]
        for b in self.blocks:
            mods += b.ordered_params()
        return params_of(mods + [self.fc])


class Mlp(nn.Module):
    def __init__(self, p):
        super().__init__()
        dims = [p["in_ch"] * p["image"] ** 2] + [p["hidden"]] * p["layers"] + [p["classes"]]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        x = torch.flatten(x, 1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x

    def ordered_params(self):
        return params_of(list(self.layers))


def params_of(mods):
    """The flat order of kernels/model.h: conv weight (KCRS); BN gamma, beta; linear
    weight [out][in], bias."""
    out = []
    for m in mods:
        if isinstance(m, nn.Conv2d):
            out.append(m.weight)
        elif isinstance(m, (nn.BatchNorm2d, nn.Linear)):
            out += [m.weight, m.bias]
    return out


def read_floats(path, dtype=torch.float32):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=dtype)


def load_flat(params, flat):
    total = sum(p.numel() for p in params)
    if total != flat.numel():
        sys.exit(f"twin: {flat.numel()} parameters in the dump, the model has {total}")
    off = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[off:off + p.numel()].view_as(p))
            off += p.numel()


def flat_of(params):
    return torch.cat([p.detach().reshape(-1) for p in params])


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.strip().split("=", 1)
                meta[k] = v
    return meta


def make(meta, dump):
    p = PRESETS[meta["preset"]]
    model = ResNet(p) if p["kind"] == "resnet" else Mlp(p)
    params = model.ordered_params()
    load_flat(params, read_floats(os.path.join(dump, "params.bin")))
    n = int(meta["batch"])
    images = read_floats(os.path.join(dump, "images.bin")).view(n, p["in_ch"], p["image"], p["image"])
    labels = read_floats(os.path.join(dump, "labels.bin"), torch.int32).long()
    opt = torch.optim.SGD(model.parameters(), lr=float(meta["lr"]),
                          momentum=float(meta["momentum"]),
                          weight_decay=float(meta["weight_decay"]))
    model.train()
    return model, params, opt, images, labels


def step(model, opt, images, labels, set_to_none):
    opt.zero_grad(set_to_none=set_to_none)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    return loss


def check(meta, dump):
    """The core's first check_steps steps, replayed: returns (max loss error, param error)."""
    model, params, opt, images, labels = make(meta, dump)
    want = [float(v) for v in meta["losses"].split(",") if v]
    got = [step(model, opt, images, labels, True).item() for _ in want]
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    after = read_floats(os.path.join(dump, "after.bin"))
    mine = flat_of(params)
    param_err = (torch.linalg.vector_norm(mine - after) / torch.linalg.vector_norm(after)).item()
    return loss_err, param_err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, help="folder written by build/steptime --dump")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--zero-grad", choices=["memset", "set_to_none"], default="memset",
                    help="memset: zero_grad(set_to_none=False), as the core's default")
    ap.add_argument("--check", action="store_true",
                    help="first replay the core's steps and print the differences")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    meta = read_meta(os.path.join(a.dump, "meta.txt"))
    if a.check:
        loss_err, param_err = check(meta, a.dump)
        print(f"twin-check: preset {meta['preset']} loss relative error {loss_err:.2g} "
              f"parameters after {meta['check_steps']} steps relative L2 error {param_err:.2g}")
    model, _, opt, images, labels = make(meta, a.dump)
    set_to_none = a.zero_grad == "set_to_none"
    times = []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = step(model, opt, images, labels, set_to_none)
        loss.item()  # the core reads the loss back every step too
        if s >= a.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    med = statistics.median(times)
    n = int(meta["batch"])
    print(f"twin: preset {meta['preset']} threads {torch.get_num_threads()} batch {n} "
          f"zero_grad {a.zero_grad} steps {a.steps} median_ms {med:.3f} min_ms {min(times):.3f} "
          f"mean_ms {statistics.fmean(times):.3f} images_per_s {1e3 * n / med:.1f} "
          f"torch {torch.__version__}")
    if not math.isfinite(loss.item()):
        sys.exit("twin: the loss is not finite")


if __name__ == "__main__":
    main()
