// bench_checkpoint.c: the activation-checkpointing practice (torch.utils.checkpoint:
// keep only segment boundaries in forward, recompute each segment's forward just before its
// backward; Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost").
// Macro (checkpoint/*): whole training steps of each core preset over a batch axis, the
//   same model, data and steps: every activation backward needs kept (keep_all, baseline)
//   vs a checkpoint around every unit but the head (checkpoint: the stem and each residual
//   block, what `x = checkpoint(block, x)` in a model's forward does) vs Chen's sqrt(n)
//   segments (checkpoint_sqrt: checkpoint_sequential(units, round(sqrt(units)))), through
//   CoreConfig.checkpoint_segments; CUDA with a GPU, the fast CPU backend without. Wall
//   clock over the timed steps ending in core_sync: the time the recompute adds is the
//   tuned rows' step_ms over the baseline's (their speedup < 1).
// Check (the driver's): the update after 3 steps from the same start against keep_all's.
//   The recompute runs the same kernels on the same inputs, and BN recomputes the same batch
//   statistics without updating the running statistics again, so on the CPU it is bit for
//   bit (tolerance 0); on CUDA within CHECKPOINT_GPU_TOL (the benchmarks let cuDNN pick
//   non-deterministic backward algorithms, as PyTorch does by default).
// Counters beside the driver's: activation_bytes (the memory plan's arena: activations and
//   their gradients), activation_bytes_per_image, peak_bytes (everything the core
//   allocated), device_used_bytes (CUDA: growth of the device's used memory) and
//   checkpointed_segments (the tuned rows fail at 0: they would time keep_all).
// The larger batch it enables (checkpoint_max_batch/*, checkpoint_max_batch.c): for each
//   mode the largest batch that fits within --max_batch_memory_mib (bench/driver/max_batch.h).
//   On a GPU the batch halves or doubles from the batch axis (0: the preset's) until a step
//   runs out of memory, the rest of the device held as ballast (or the cap, or the
//   2^31-value guard), then --checkpoint_max_steps timed steps at it. Time: seconds per image
//   at that batch, so the speedup is the throughput ratio of each mode at its own largest
//   batch. On a CPU, which pages rather than failing an allocation, the batch is estimated
//   from the core's peak after a step at two batches against the budget, nothing is timed at
//   it, and the rows are references (no speedup).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/checkpointing/checkpoint_max_batch.h"
#include "bench/driver/harness.h"
#include "bench/driver/max_batch.h"
#include "bench/driver/practice.h"
#include "kernels/model.h"
#include "kernels/model_plan.h"

// CUDA checkpointed vs keep_all: relative L2 of the update after 3 steps (of keep_all's
// update). The recompute itself is exact; what differs is the run-to-run order of
// non-deterministic cuDNN backward reductions (atomics), about 1e-6 to 1e-4 of the update in
// fp32 over 3 steps. A missing or wrong recompute changes gradients by O(1); a frozen update is 1.
#define CHECKPOINT_GPU_TOL 1e-3

static void keep_all(CoreConfig *c) { c->checkpoint_segments = 0; }
static void each_unit(CoreConfig *c) { c->checkpoint_segments = CORE_CHECKPOINT_EACH_UNIT; }

// checkpoint_sequential(units, round(sqrt(units))): Chen et al.'s O(sqrt(n)) memory.
static void sqrt_segments(CoreConfig *c)
{
    ModelGraph *g = malloc(sizeof *g);
    int units = g && model_build(&c->model, g) == 0 ? model_plan_units(g, NULL, 0) : 0;
    free(g);
    c->checkpoint_segments = units > 0 ? (int)lround(sqrt((double)units)) : 0;
}

static const PracticeVariant variants[] = {
    {"keep_all", HARNESS_BASELINE, keep_all, NULL},
    {"checkpoint", HARNESS_TUNED, each_unit, NULL},
    {"checkpoint_sqrt", HARNESS_TUNED, sqrt_segments, NULL},
};
#define VARIANT_COUNT ((int)(sizeof variants / sizeof variants[0]))

// The memory counters of a core; the tuned rows fail when nothing was checkpointed.
static void finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                   const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)core;
    const CoreStats *cs = &o->stats;
    harness_counter(st, "activation_bytes", (double)cs->activation_bytes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "activation_bytes_per_image", (double)cs->activation_bytes / cfg->batch_size,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "peak_bytes", (double)cs->peak_bytes, HARNESS_COUNTER_PLAIN);
    if (cs->backend == CORE_BACKEND_CUDA)
        harness_counter(st, "device_used_bytes", (double)cs->device_used_bytes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "checkpointed_segments", cs->checkpointed_segments, HARNESS_COUNTER_PLAIN);
    if (v->role == HARNESS_TUNED && cs->checkpointed_segments <= 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "the %s variant checkpointed no segment (preset %s): it ran keep_all",
                 v->name, harness_axis_str(st, "preset"));
        harness_fail(st, msg);
    }
}

static const PracticeHooks hooks = {.finish = finish};

int main(int argc, char **argv)
{
    harness_option_int("checkpoint_max_batch_cap", 65536, 1, 1 << 20, NULL,
                       "checkpoint_max_batch: the largest batch probed or estimated (the search stops there)");
    harness_option_int("checkpoint_max_steps", 5, 1, 100000, NULL,
                       "checkpoint_max_batch: timed steps at the largest batch (GPU)");
    max_batch_option();
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    // ResNet presets (the MLP's layers keep almost nothing a recompute could drop): all of
    // them on a GPU; those a CPU steps through in seconds.
    static Practice practice = {
        .name = "checkpoint", .variants = variants, .variant_count = VARIANT_COUNT,
        .mode = PRACTICE_THROUGHPUT, .steps = 10, .min_time = 0.5,
        .check = PRACTICE_CHECK_PARAMS, .check_steps = 3, .hooks = &hooks,
        .label = "every activation kept vs segments recomputed in backward (activation checkpointing)"};
    practice.presets = gpu ? "small,medium,resnet18" : "tiny,small";
    practice.batches = gpu ? "64,128,256" : "8,32";
    practice.tolerance = gpu ? CHECKPOINT_GPU_TOL : 0.0;
    practice_register(&practice);
    // The larger batch it enables: probed and timed on a GPU; estimated on a CPU, where the
    // rows time the estimate, not the practice, so they are references (no speedup).
    static const HarnessAxis axes[] = {{"preset", "medium,resnet18", true}, {"batch", "0", false}, {NULL, NULL, false}};
    for (int i = 0; i < VARIANT_COUNT; i++) {
        HarnessSpec spec = {.practice = "checkpoint_max_batch", .variant = variants[i].name,
                            .role = gpu ? variants[i].role : HARNESS_REFERENCE,
                            .timing = HARNESS_TIMING_MANUAL, .fn = checkpoint_bench_max_batch,
                            .user = (void *)&variants[i], .unit = HARNESS_US, .iterations = 1};
        harness_register_axes(&spec, axes);
    }
    return harness_run();
}
