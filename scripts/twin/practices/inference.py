"""inference_grad's twin (bench/inference, inference_grad/*): the eval-mode forward of a
batch with autograd on (grad_on: the parameters require grad, every activation a backward
would read kept), under torch.no_grad() (no_grad), and under torch.inference_mode()
(inference_mode: PyTorch only, core=False: no view tracking or version counters, which the
core, having no autograd, cannot represent), at batches 1 to 256 by 4 (a GPU: to 1024).

Check, as the core's: each tuned variant's logits of a held-out batch within GRAD_CHECK_TOL
of grad_on's (relative L2), every top-1 the same. The model is trained a few steps first, so
that under the self-test no_update (the tuned variant's training skipped its optimiser
steps) its logits differ.
"""
import torch

from twin.api import Row, Variant
from twin.practices import _training as training

GRAD_CHECK_TOL = 1e-6   # bench_inference.c GRAD_CHECK_TOL


def row(preset, batch, device, warmup):
    def v(name, role, mode, core=True):
        return Variant(name, role, lambda ctx: training.Infer(ctx, preset, batch, role == "tuned", mode), core=core)
    variants = [v("grad_on", "baseline", torch.enable_grad), v("no_grad", "tuned", torch.no_grad),
                v("inference_mode", "tuned", torch.inference_mode, core=False)]
    return Row(practice="inference_grad", params=training.params_of(preset, batch), variants=variants,
               min_time=0.5, synthetic=True, warmup=warmup, device=device,
               check=training.logits_check(variants, preset, batch, GRAD_CHECK_TOL),
               differs="grad_on keeps what autograd saves for a backward (PyTorch's graph); the core "
                       "keeps its training plan's arena. inference_mode is PyTorch's alone.")


# bench_inference.c: infer_warmup is 1 forward on a CPU, 3 on a GPU.
ROWS = [row(p, b, "cpu", 1) for p in ("tiny", "small") for b in (1, 4, 16, 64, 256)] + \
       [row(p, b, "cuda", 3) for p in ("tiny", "small", "resnet18") for b in (1, 4, 16, 64, 256, 1024)]
