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
# torch_twin.py's GRAD_TOL and UPDATE_TOL, 10x tighter for a GPT: their 1e-4 and 1e-3 leave
# room for batch norm's amplification of rounding, which a GPT does not have. Measured on
# gpt-tiny (cpu and cpu-ref, unfused and fused, batch 4 and 16, AdamW lr 3e-3 .. 3e-2, SGD
# with fp16 loss scaling): gradients 5.5e-7 .. 8.4e-7, updates after 3 .. 8 steps 2e-6 ..
# 2.1e-5 (the key biases apart, below). A GELU with the tanh approximation, invisible at
# the defaults (its gradient 5.2e-5, its update 1.6e-3), fails both; above them the float64
# replay still tells rounding from a difference.
GRAD_TOL = 1e-5
UPDATE_TOL = 1e-4


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


# The key bias. Adding b_k to every key adds q . b_k to all of a query's scores, which its
# softmax ignores: the gradient of the k third of each c_attn.bias is 0 in exact arithmetic,
# and what the core and PyTorch compute for it is rounding noise (~1e-11 on gpt-tiny, the
# q and v thirds ~1e-4 and ~3e-2). AdamW divides the gradient by its own RMS (plus eps), so
# it moves those biases by an amount of the order of lr * noise / eps that is itself noise:
# measured relative to it alone, the two sides' updates differ by O(1). Compared with the
# other tensors' updates it would set the "worst tensor" at 2e-4 .. 3e-3 (lr 3e-3 .. 3e-2)
# and hide real differences near UPDATE_TOL (a GELU with the tanh approximation moves the
# update by 1.5e-3). So the update check compares each c_attn.bias by its q and v thirds
# ("...c_attn.bias[q|v]"), and the k thirds on their own line, relative to the whole bias's
# update: noise there measured 2e-4 .. 2.5e-3 (lr 3e-3 .. 3e-2); a core that gave the key
# bias a real gradient would move it about as much as the q third, O(0.1 .. 1).
KEY_BIAS_TOL = 1e-2

def _is_qkv_bias(name):
    return name.endswith("attn.c_attn.bias")


def without_key_bias(named, tensors):
    """(named, tensors) with each c_attn.bias replaced by its q and v thirds."""
    out_named, out = [], []
    for (n, p), x in zip(named, tensors):
        if _is_qkv_bias(n):
            c = x.numel() // 3
            n, x = n + "[q|v]", torch.cat([x[:c], x[2 * c:]])
        out_named.append((n, p))
        out.append(x)
    return out_named, out


def _key_bias_off(named, a, b, core):
    """max over blocks of ||k third of a - of b|| / ||core's whole c_attn.bias update||, and
    the block."""
    worst = (0.0, "")
    for (n, _), x, y, z in zip(named, a, b, core):
        if _is_qkv_bias(n):
            c = x.numel() // 3
            den = torch.linalg.vector_norm(z.double()).item()
            num = torch.linalg.vector_norm((x[c:2 * c] - y[c:2 * c]).double()).item()
            worst = max(worst, (num / den if den > 0 else float(num > 0), n))
    return worst


def key_bias_check(named, mine, core, exact_of, tol, arbiter):
    """The key biases' updates (see above): (error, ok, detail). Above tol, float64 decides
    as for the other tensors (exact_of() gives the float64 replay's updates): fp32 noise when
    the core is at most `arbiter` times as far from it as PyTorch's fp32."""
    err, name = _key_bias_off(named, mine, core, core)
    detail = f"{name} (relative to its whole c_attn.bias update; a 0 gradient up to rounding)"
    if err <= tol:
        return err, True, detail
    exact = exact_of()
    core_off, twin_off = _key_bias_off(named, core, exact, core)[0], _key_bias_off(named, mine, exact, core)[0]
    ok = core_off <= max(tol, arbiter * twin_off)
    return err, ok, (f"{detail}; against float64 the core is {core_off:.3g} off, PyTorch's "
                     f"fp32 {twin_off:.3g}: {'fp32 rounding' if ok else 'not rounding'}")
