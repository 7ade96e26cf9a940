"""twin/practices/_data.py: what the data practices' PyTorch twins share.

The core's generated ImageFolder datasets (loaders/dataset_gen.c: the same folder names
under $BENCH_CACHE_DIR, default cache/datasets, generated with build/datasets when absent),
a JPEG decode with what this machine has (libturbojpeg through ctypes: the library the
core's loader links; neither PIL nor torchvision is required), the core's augmentation
rule (torchvision's random-resized-crop sampling, bilinear, flip, normalise) drawn from
(seed, epoch, index) so that any num_workers gives the same bytes, a sampler whose order
comes from (seed, epoch), and the update-based check every training twin uses.
"""
import ctypes
import ctypes.util
import math
import os
import shutil
import subprocess

import torch
import torch.nn.functional as F

# loaders/dataset_gen.c presets: classes, images per class, width, height, quality, seed.
DATASET_PRESETS = {
    "tiny": (4, 6, 48, 40, 90, 1234),
    "small": (10, 30, 64, 64, 90, 1234),
    "bench": (10, 200, 160, 160, 90, 1234),
    "large": (100, 300, 256, 256, 90, 1234),
    "imagenet": (10, 100, 500, 375, 90, 1234),
}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # loaders/augment.c


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def dataset_root(preset, cache_dir=None):
    """The folder the core's loader reads for a generated preset (dataset_gen_ensure's
    name); generated with the core's build/datasets (BENCH_BUILD_DIR, default build) when
    it is not there yet, so both sides read the same files."""
    if preset not in DATASET_PRESETS:
        raise ValueError("unknown dataset preset '%s' (one of %s)" % (preset, ", ".join(DATASET_PRESETS)))
    c, n, w, h, q, s = DATASET_PRESETS[preset]
    cache_dir = cache_dir or os.environ.get("BENCH_CACHE_DIR") or os.path.join(repo_root(), "cache", "datasets")
    root = os.path.join(cache_dir, "synth-c%d-n%d-%dx%d-q%d-s%d" % (c, n, w, h, q, s))
    if not os.path.isdir(root):
        tool = os.path.join(os.environ.get("BENCH_BUILD_DIR") or os.path.join(repo_root(), "build"), "datasets")
        if not os.access(tool, os.X_OK):
            raise FileNotFoundError("dataset %s is not generated yet and %s is missing (make all builds it)"
                                    % (root, tool))
        os.makedirs(cache_dir, exist_ok=True)
        tmp = "%s.tmp-%d" % (root, os.getpid())  # whole or nothing: a cut run leaves no half folder
        try:
            r = subprocess.run([tool, "generate", preset, tmp], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError("%s generate %s %s failed: %s" % (tool, preset, tmp, r.stderr.strip()))
            try:
                os.rename(tmp, root)
            except OSError:
                if not os.path.isdir(root):  # else another run generated it meanwhile
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return root


def scan(root):
    """ImageFolder as loaders/dataset.c reads it: classes are the sub-folders in byte order,
    files every .jpg/.jpeg (any case) in byte order; (paths, labels)."""
    paths, labels = [], []
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    for label, c in enumerate(classes):
        folder = os.path.join(root, c)
        for f in sorted(os.listdir(folder)):
            if f.lower().endswith((".jpg", ".jpeg")):
                paths.append(os.path.join(folder, f))
                labels.append(label)
    if not paths:
        raise ValueError("no .jpg files under %s/<class>/" % root)
    return paths, labels


class TurboJpeg:
    """Full decode to RGB with libturbojpeg's TurboJPEG API (one handle per process)."""
    _lib = None

    def __init__(self):
        if TurboJpeg._lib is None:
            name = ctypes.util.find_library("turbojpeg") or "libturbojpeg.so.0"
            try:
                TurboJpeg._lib = ctypes.CDLL(name)
            except OSError as e:
                raise RuntimeError("no JPEG decoder: neither PIL nor torchvision is required, but "
                                   "libturbojpeg (the core's decoder) could not be loaded: %s" % e)
            TurboJpeg._lib.tjInitDecompress.restype = ctypes.c_void_p
            TurboJpeg._lib.tjGetErrorStr.restype = ctypes.c_char_p
        self.lib = TurboJpeg._lib
        self.handle = ctypes.c_void_p(self.lib.tjInitDecompress())
        self.pid = os.getpid()

    def decode(self, path):
        """(H, W, 3) uint8 tensor of the file; an error naming the file otherwise."""
        with open(path, "rb") as f:
            data = f.read()
        w, h, sub, cs = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if self.lib.tjDecompressHeader3(self.handle, data, ctypes.c_ulong(len(data)), ctypes.byref(w),
                                        ctypes.byref(h), ctypes.byref(sub), ctypes.byref(cs)) != 0:
            raise ValueError("%s: not a JPEG (%s)" % (path, self.lib.tjGetErrorStr().decode()))
        out = bytearray(w.value * h.value * 3)
        buf = (ctypes.c_ubyte * len(out)).from_buffer(out)
        if self.lib.tjDecompress2(self.handle, data, ctypes.c_ulong(len(data)), buf, w.value, 0, h.value,
                                  0, 0) != 0:  # TJPF_RGB, no flags
            raise ValueError("%s: corrupt JPEG (%s)" % (path, self.lib.tjGetErrorStr().decode()))
        return torch.frombuffer(out, dtype=torch.uint8).view(h.value, w.value, 3)


_decoder = None


def decode(path):
    global _decoder
    if _decoder is None or _decoder.pid != os.getpid():  # a forked worker makes its own
        _decoder = TurboJpeg()
    return _decoder.decode(path)


def sample_seed(seed, epoch, index):
    return (seed * 1000003 + epoch) * 1000003 + index


def crop_box(g, height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop sampling (as loaders/augment.c): (top, left, h, w)."""
    area = height * width
    logr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * torch.rand(1, generator=g).item())
        r = math.exp(logr[0] + (logr[1] - logr[0]) * torch.rand(1, generator=g).item())
        w, h = int(round(math.sqrt(target * r))), int(round(math.sqrt(target / r)))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=g))
            left = int(torch.randint(0, width - w + 1, (1,), generator=g))
            return top, left, h, w
    r = width / height  # fallback: the centre crop within the ratio range
    w, h = (width, int(round(width / ratio[0]))) if r < ratio[0] else \
        (int(round(height * ratio[1])), height) if r > ratio[1] else (width, height)
    w, h = min(w, width), min(h, height)
    return (height - h) // 2, (width - w) // 2, h, w


class JpegFolder(torch.utils.data.Dataset):
    """The ImageFolder files, decoded and augmented as the core's loader does; an item is
    indexed by (epoch, index) so that the crop and flip come from (seed, epoch, index)."""

    def __init__(self, root, size, seed=1):
        self.root, self.size, self.seed = root, size, seed
        self.paths, self.labels = scan(root)
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, key):
        epoch, i = key
        img = decode(self.paths[i])
        g = torch.Generator().manual_seed(sample_seed(self.seed, epoch, i))
        top, left, h, w = crop_box(g, img.shape[0], img.shape[1])
        x = img[top:top + h, left:left + w].permute(2, 0, 1).unsqueeze(0).float().div_(255)
        x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)[0]
        if torch.rand(1, generator=g).item() < 0.5:
            x = x.flip(2)
        return (x - self.mean) / self.std, self.labels[i]


class EpochSampler(torch.utils.data.Sampler):
    """A shuffled order from (seed, epoch), yielding (epoch, index) keys."""

    def __init__(self, n, seed=1):
        self.n, self.seed, self.epoch = n, seed, 0

    def __len__(self):
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000003 + self.epoch)
        return iter([(self.epoch, int(i)) for i in torch.randperm(self.n, generator=g)])


def update_rel_diff(base_start, base_end, tuned_start, tuned_end):
    """Relative L2 of the difference of two updates (end - start over all parameters): 1 when
    the tuned one did not move at all."""
    num = den = 0.0
    for b0, b1, t0, t1 in zip(base_start, base_end, tuned_start, tuned_end):
        ub, ut = (b1 - b0).double(), (t1 - t0).double()
        num += float((ub - ut).pow(2).sum())
        den += float(ub.pow(2).sum())
    return math.sqrt(num) / math.sqrt(den) if den > 0 else float("inf")


def snapshot(model):
    return [p.detach().clone() for p in model.parameters()]


def cuda_skip(ctx):
    """The reason a CUDA-only practice does not run here, or None."""
    if ctx.device != "cuda":
        return "CUDA-only practice; this run's device is %s" % ctx.device
    if not torch.cuda.is_available():
        return "CUDA-only practice; this torch (%s) sees no CUDA device" % torch.__version__
    return None
