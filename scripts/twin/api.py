"""twin/api.py: what a practice's PyTorch twin provides to the PyTorch side of `make bench`.

The PyTorch side measures, in PyTorch itself, the same toggles the core's programs measure,
on the same model, batch and device, timed the way the core's rows are timed, so that the
report can set PyTorch's effect beside the core's (issue 33). Its program, twin/bench.py,
behaves like one of the core's benchmark programs (the same --benchmark_* and --harness_*
flags, the same tidy CSV, reps CSV and JSON); run-suite.sh runs it as the program `pytorch`.

A practice module (twin/practices/<family>.py) exports ROWS, a list of Row: one per row
group of the core's (a practice at one point of its axes: its baseline and its tuned
variants). The names are the core's, so the summary can join them:

    practice  the core's practice name (zero_grad, grad_accum, num_workers...); the PyTorch
              rows are written as practice "pytorch_<practice>"; a practice the core does
              not have (only measurable in PyTorch) sets core=False and is labelled so
    params    the core row's params, in the core's order and spelling, e.g.
              {"preset": "tiny", "batch": 0}: batch 0 is the preset's default batch
              (twin.models.PRESET_DEFAULTS), as in the core
    variants  the baseline first (role "baseline"), then the tuned ones (role "tuned"),
              with the core's variant names; a variant the core does not have sets
              core=False (e.g. inference_mode beside no_grad)

Each Variant has make(ctx) -> Work: builds the model, data and optimiser for one variant
(untimed), from ctx.seed, so that every variant of a row starts from the same weights and
data. Work.step() does one unit of the timed work (one training step; one batch of a data
loader; one forward for an inference row) and returns nothing; it must leave no work
queued (the runner synchronises a CUDA device after the repetition, as the core's wall
timing does). Work.items is the images (or items) one step processes, for
images_per_second. Work.counters() may return extra counters (named as the core's, e.g.
peak_mib) for the tidy row. Work.close() frees what make() took (worker processes...).

Row.check(ctx) -> Check runs before the row is timed, untimed, like the core's check: it
trains (or runs) the baseline and each tuned variant from the same start for a few steps
and compares what the practice must not change (the update, the loss, the logits) within
the practice's tolerance, returning one CheckResult per tuned variant. A tuned variant
whose check fails is not timed: its row is an error naming the finding (the baseline's
rows are still timed). ctx.selftest names a deliberate bug the check must catch
("no_update": the tuned variant's optimiser step is skipped), for the self-tests.

Row.min_time is the core row's minimum time per repetition (seconds; its program's
declared min_time, else Google Benchmark's 0.5 s; on the CPU a Row.synthetic row's is
CPU_MIN_TIME, as the core driver's PRACTICE_CPU_MIN_TIME); Row.warmup the untimed steps before the
first repetition of each variant (the core's warm-up rule for that practice). Row.device
is "cpu", "cuda" or "any"; Row.skip(ctx) returns a reason to skip (no CUDA in this torch,
too little memory, no compiler for torch.compile...) or None.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional


# bench/driver/practice.h's PRACTICE_CPU_MIN_TIME: a training repetition on the CPU (the
# model made, checked and warmed up once per row group), paired within rounds
CPU_MIN_TIME = 0.1

@dataclass
class Context:
    """What the runner gives a practice: the device ("cpu" or "cuda"), the compute threads
    (torch.set_num_threads, the core's --threads), the seed of the row, and a self-test."""
    device: str = "cpu"
    threads: int = 1
    seed: int = 0
    selftest: Optional[str] = None


class Work:
    """One variant, built and ready to time."""
    items: int = 0

    def step(self):
        raise NotImplementedError

    def counters(self) -> Dict[str, float]:
        return {}

    def close(self):
        pass


@dataclass
class CheckResult:
    variant: str
    ok: bool
    rel_diff: float          # what was compared, relative (e.g. relative L2 of the update)
    tolerance: float
    finding: str = ""        # why it failed (empty when ok), as a row's error reason


@dataclass
class Variant:
    name: str
    role: str                                   # "baseline", "tuned" or "reference"
    make: Callable[[Context], Work]
    core: bool = True                           # the core has this variant too


@dataclass
class Row:
    practice: str
    params: Dict[str, object]
    variants: List[Variant]
    min_time: float = 0.5
    warmup: int = 1
    device: str = "any"
    core: bool = True                           # the core has this practice too
    check: Optional[Callable[[Context], List[CheckResult]]] = None
    skip: Optional[Callable[[Context], Optional[str]]] = None
    differs: str = ""                           # what differs from the core's row, if anything
    synthetic: bool = False                     # the core times it on synthetic batches with
                                                # its core kept between repetitions (the
                                                # practice driver's training rows,
                                                # inference_grad): on the CPU its repetitions
                                                # are CPU_MIN_TIME long, as the core's
    extra: Dict[str, object] = field(default_factory=dict)

    def params_text(self):
        """The core's params field: "preset:tiny;batch:0"."""
        return ";".join("%s:%s" % (k, v) for k, v in self.params.items())
