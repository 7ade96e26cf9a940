"""twin/models.py: the training core's networks in PyTorch (kernels/model/model.c), by preset.

The architecture of each preset (stem conv + BN + ReLU, basic blocks with 1x1 projection
shortcuts, global average pooling, linear; or the MLP; or the GPT presets' decoder-only
transformer, GPT), the presets' training defaults, and the order of the core's flat
parameters and BN statistics. Shared by torch_twin.py (the
numerical twin: check, time, infer, fold, accum) and the PyTorch side of `make bench`
(twin/bench.py).
"""
import math
import warnings

warnings.filterwarnings("ignore", message=".*NumPy.*")  # torch works without numpy
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# kernels/core/core.c core_config_preset: the architecture of each preset.
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
# The presets' training defaults (kernels/core/core.c core_config_preset, kernels/core/amp.c), written
# here independently of the core: what meta.txt must say for a flag steptime was not given.
PRESET_DEFAULTS = {
    "tiny": dict(batch=32, lr=0.05, momentum=0.9, weight_decay=5e-4),
    "mlp": dict(batch=32, lr=0.02, momentum=0.9, weight_decay=5e-4),
    "small": dict(batch=128, lr=0.1, momentum=0.9, weight_decay=5e-4),
    "medium": dict(batch=128, lr=0.1, momentum=0.9, weight_decay=5e-4),
    "resnet18": dict(batch=256, lr=0.1, momentum=0.9, weight_decay=1e-4),
    # the GPT presets (kernels/core/core.c gpt_preset): AdamW, betas (0.9, 0.95), decoupled
    # weight decay 0.1, clipping at 1 (momentum: the base config's, unused by AdamW)
    "gpt-tiny": dict(batch=16, lr=3e-3, momentum=0.9, weight_decay=0.1, optimizer="adamw",
                     beta2=0.95, clip_norm=1.0, attention="unfused"),
    "gpt-mini": dict(batch=16, lr=1e-3, momentum=0.9, weight_decay=0.1, optimizer="adamw",
                     beta2=0.95, clip_norm=1.0, attention="unfused"),
    "gpt2-small": dict(batch=8, lr=6e-4, momentum=0.9, weight_decay=0.1, optimizer="adamw",
                       beta2=0.95, clip_norm=1.0, attention="unfused"),
}
# The GPT presets' shapes (kernels/core/core.c gpt_preset), apart from PRESETS (whose
# entries are image models: build() and batch_of() take those only).
GPT_PRESETS = {
    "gpt-tiny": dict(kind="gpt", vocab=64, seq_len=64, width=64, layers=2, heads=4),
    "gpt-mini": dict(kind="gpt", vocab=256, seq_len=256, width=256, layers=4, heads=4),
    "gpt2-small": dict(kind="gpt", vocab=50257, seq_len=1024, width=768, layers=12, heads=12),
}
GPT_LN_EPS = 1e-5  # kernels/layers_gpt.h: nn.LayerNorm's default

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

    def ordered_modules(self):
        # kernels/model/model.c build_resnet: the projection first, then conv1, bn1, conv2, bn2
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

    def ordered_modules(self):
        mods = [self.stem, self.stem_bn]
        for b in self.blocks:
            mods += b.ordered_modules()
        return mods + [self.fc]


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

    def ordered_modules(self):
        return list(self.layers)


class CausalSelfAttention(nn.Module):
    """GPT-2's attention: c_attn (q|k|v, each a third of its 3C outputs; head h owns columns
    h*d .. h*d+d-1 of each third), causal softmax(q k^T / sqrt(d)) v per head, c_proj.

    Written out (scores, a lower-triangular mask of -inf, softmax, @ v) rather than
    F.scaled_dot_product_attention(is_causal=True): the formula is the one the check is
    about, stated once, and it is the same computation in float32 and float64 (SDPA picks a
    backend per dtype and device - a fused CPU flash kernel for float32, the math one for
    float64 -, so the float64 arbiter would replay another algorithm). sdpa=True runs SDPA
    instead: the check compares the two once (a twin whose own attention were wrong would
    disagree with PyTorch's)."""

    def __init__(self, c, heads, sdpa=False):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)

    def forward(self, x):
        n, t, c = x.shape
        h, d = self.heads, c // self.heads
        q, k, v = (z.view(n, t, h, d).transpose(1, 2) for z in self.c_attn(x).split(c, dim=2))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(n, t, c))


class GptBlock(nn.Module):
    """Pre-LayerNorm: x + attn(ln_1(x)), then x + fc2(gelu(fc(ln_2(x)))), exact GELU."""

    def __init__(self, c, heads, sdpa=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, eps=GPT_LN_EPS)
        self.attn = CausalSelfAttention(c, heads, sdpa)
        self.ln_2 = nn.LayerNorm(c, eps=GPT_LN_EPS)
        self.fc, self.gelu, self.fc2 = nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.fc2(self.gelu(self.fc(self.ln_2(x))))

    def ordered_modules(self):
        # kernels/model/model.c build_gpt: LayerNorm, q|k|v, (attention), projection, (add),
        # LayerNorm, fc, (GELU), fc2, (add)
        return [self.ln_1, self.attn.c_attn, self.attn.c_proj, self.ln_2, self.fc, self.fc2]


class GPT(nn.Module):
    """The core's decoder-only transformer (docs/transformer.md): token + position
    embeddings, pre-LayerNorm blocks, final LayerNorm, an untied LM head with a bias. Takes
    tokens (n, T) int64; returns logits (n, T, vocab). No BatchNorm: no buffers."""

    def __init__(self, p, sdpa=False):
        super().__init__()
        c = p["width"]
        self.wte = nn.Embedding(p["vocab"], c)
        self.wpe = nn.Embedding(p["seq_len"], c)
        self.blocks = nn.ModuleList(GptBlock(c, p["heads"], sdpa) for _ in range(p["layers"]))
        self.ln_f = nn.LayerNorm(c, eps=GPT_LN_EPS)
        self.head = nn.Linear(c, p["vocab"])

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))

    def ordered_modules(self):
        # OP_EMBED: the token table [vocab][C], then the position table [T][C]
        mods = [self.wte, self.wpe]
        for b in self.blocks:
            mods += b.ordered_modules()
        return mods + [self.ln_f, self.head]


def loss_of(model, x, labels):
    """Mean cross-entropy of the model's logits: per image (n, classes) against labels (n),
    or per position of every sequence (n, T, vocab) against labels (n, T)."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def ordered_params(model):
    """(name, tensor) in the flat order of kernels/model.h: conv weight (KCRS); BN gamma,
    beta; linear weight [out][in], bias; an embedding's table (a GPT's token table, then its
    position table); LayerNorm gamma, beta."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = []
    for m in model.ordered_modules():
        ps = [m.weight] if isinstance(m, (nn.Conv2d, nn.Embedding)) else [m.weight, m.bias]
        out += [(names[id(p)], p) for p in ps]
    return out


def ordered_bn(model):
    """(name, BN module) in the order of kernels/model.h's running statistics."""
    names = {id(m): n for n, m in model.named_modules()}
    return [(names[id(m)], m) for m in model.ordered_modules() if isinstance(m, nn.BatchNorm2d)]



def build(preset, bias=False):
    """A fresh model of the preset (PyTorch's default initialisation: the seed decides);
    bias=True gives every convolution a bias (the conv_bias practice's baseline)."""
    p = PRESETS[preset]
    if p["kind"] != "resnet":
        return Mlp(p)
    model = ResNet(p)
    if bias:
        for m in model.modules():
            if isinstance(m, nn.Conv2d) and m.bias is None:
                m.bias = nn.Parameter(torch.zeros(m.out_channels))
    return model


def batch_of(preset, batch, seed=0, device="cpu"):
    """A synthetic batch of the preset's shape: images N x C x H x W in [0, 1), labels
    (a fixed generator: the same seed, the same batch on every side)."""
    p = PRESETS[preset]
    n = batch or PRESET_DEFAULTS[preset]["batch"]
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(n, p["in_ch"], p["image"], p["image"], generator=g)
    labels = torch.randint(0, p["classes"], (n,), generator=g)
    return images.to(device), labels.to(device)
