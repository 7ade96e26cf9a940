"""twin/gpt_check.py: what torch_twin.py check needs for a GPT dump (steptime --preset gpt-*).

A GPT dump (the header of bench/tools/steptime_main.c) holds token batches (tokens.bin,
labels.bin, eval_tokens.bin, eval_labels.bin: int32 [N][T]) instead of images, and meta.txt
adds kind=gpt, vocab, seq_len, width, layers, heads and attention. The model is
twin.models.GPT, built from those keys; the loss is the mean cross-entropy over all N x T
positions. Here: the shape read from meta.txt, what meta.txt must say for steptime's command
line, and the one check a GPT adds (the twin's written-out attention against PyTorch's
F.scaled_dot_product_attention).
"""
import copy

import torch

from twin.models import GPT, GPT_PRESETS, PRESET_DEFAULTS, loss_of

# |loss_sdpa - loss| / loss and per-tensor relative L2 of the gradients at the initial
# parameters: the same maths in fp32, summed in another order (measured on gpt-tiny: ~1e-7
# and ~1e-6); a mask, scale or head-layout error is O(1e-2) or more.
SDPA_TOL = 1e-5


def is_gpt(meta):
    return meta.get("kind") == "gpt"


def shape_of(meta):
    """The model's shape from meta.txt (steptime wrote it from the core's config)."""
    return dict(kind="gpt", **{k: int(meta[k]) for k in ("vocab", "seq_len", "width", "layers",
                                                         "heads")})


def read_batch(read_array, path_of, n, seq_len, prefix=""):
    """tokens and labels of the dump (int64, n x seq_len each)."""
    tokens = read_array(path_of(f"{prefix}tokens.bin"), torch.int32).long()
    labels = read_array(path_of(f"{prefix}labels.bin"), torch.int32).long()
    if tokens.numel() != n * seq_len or labels.numel() != n * seq_len:
        raise SystemExit(f"twin: {prefix}tokens.bin / {prefix}labels.bin do not hold {n} x "
                         f"{seq_len} int32 each")
    return tokens.view(n, seq_len), labels.view(n, seq_len)


def expected_meta(preset, attention):
    """What meta.txt must say about the model for `steptime --preset PRESET [--attention A]`
    (the preset's shape, written here independently of the core)."""
    p = GPT_PRESETS[preset]
    return {"kind": "gpt", "vocab": p["vocab"], "seq_len": p["seq_len"], "width": p["width"],
            "layers": p["layers"], "heads": p["heads"], "channels": 0, "image_size": 0,
            "classes": p["vocab"],
            "attention": attention or PRESET_DEFAULTS[preset]["attention"]}


def sdpa_agreement(twin, rel):
    """The twin's written-out attention against F.scaled_dot_product_attention(is_causal=True)
    (the same parameters, batch and loss): (worst of the loss's and the gradients' relative
    differences, detail). Independent of the core: it checks the twin itself."""
    explicit = twin.model
    sdpa = copy.deepcopy(explicit)
    for b in sdpa.blocks:
        b.attn.sdpa = True
    out = []
    for m in (explicit, sdpa):
        m.zero_grad(set_to_none=True)
        loss = loss_of(m, twin.images, twin.labels)
        loss.backward()
        out.append((loss.item(), [p.grad.double() for p in m.parameters()]))
        m.zero_grad(set_to_none=True)
    (l0, g0), (l1, g1) = out
    loss_err = abs(l1 - l0) / abs(l0)
    grad_err = max(rel(b, a) for a, b in zip(g0, g1))
    return max(loss_err, grad_err), f"loss {loss_err:.3g}, worst gradient {grad_err:.3g}"


def build(meta):
    return GPT(shape_of(meta))
