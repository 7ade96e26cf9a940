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
// The larger batch it enables (checkpoint_max_batch/*, GPU only): for each mode the largest
//   batch that fits, doubling from the batch axis (0: the preset's) until a step runs out
//   of device memory or --checkpoint_max_batch_cap is reached, then the throughput of
//   --checkpoint_max_steps steps at that batch. Time: seconds per image at that batch, so
//   the speedup is the throughput ratio of each mode at its own largest batch. Without a
//   GPU these rows skip: a CPU core pages rather than failing, so there is no "largest
//   batch that fits" to find; the throughput rows' activation_bytes_per_image say what a
//   fixed activation budget holds in each mode instead.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/error.h"
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

// ---- the largest batch that fits (GPU) -----------------------------------------------------

// A device batch of n images: the preset's synthetic batch of cfg->batch_size images, tiled.
typedef struct DeviceBatch { float *images; int32_t *labels; int n; } DeviceBatch;

static void device_batch_free(DeviceBatch *d)
{
    cudaFree(d->images);
    cudaFree(d->labels);
    *d = (DeviceBatch){0};
}

static int device_batch_make(DeviceBatch *d, const PracticeBatch *seed, const CoreConfig *cfg, int n)
{
    const CoreModelConfig *m = &cfg->model;
    size_t img = (size_t)m->in_channels * m->image_size * m->image_size;
    *d = (DeviceBatch){NULL, NULL, n};
    cudaError_t e = cudaMalloc((void **)&d->images, (size_t)n * img * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&d->labels, (size_t)n * sizeof(int32_t));
    for (int done = 0; e == cudaSuccess && done < n; done += seed->n) {
        int k = n - done < seed->n ? n - done : seed->n;
        e = cudaMemcpy(d->images + (size_t)done * img, seed->images, (size_t)k * img * sizeof(float),
                       cudaMemcpyDeviceToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(d->labels + done, seed->labels, (size_t)k * sizeof(int32_t), cudaMemcpyDeviceToDevice);
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        device_batch_free(d);
        cudaGetLastError();  // an allocation failure is not sticky: clear it
        if (e == cudaErrorMemoryAllocation)
            return error_set(ERROR_OUT_OF_MEMORY, "a device batch of %d images: out of device memory", n);
        return error_set(ERROR_LIBRARY, "a device batch of %d images: %s", n, cudaGetErrorString(e));
    }
    return 0;
}

// Steps at batch n on a fresh core: `warmup` untimed, then `steps` timed (ms per step in
// *ms when steps > 0). Out of device memory anywhere: -1 with ERROR_OUT_OF_MEMORY.
static int run_at(const CoreConfig *base, const PracticeBatch *seed, int n, int warmup, int steps,
                  double *ms, CoreStats *stats)
{
    CoreConfig cfg = *base;
    cfg.batch_size = n;
    DeviceBatch d;
    TRY(device_batch_make(&d, seed, &cfg, n));
    Core *core = NULL;
    int rc = core_create(&cfg, &core);
    CoreBatch b = {d.images, d.labels, n, CORE_MEMORY_DEVICE};
    for (int i = 0; i < warmup && rc == 0; i++) rc = core_step(core, &b, NULL);
    if (rc == 0) rc = core_sync(core);
    double t0 = clock_seconds();
    for (int i = 0; i < steps && rc == 0; i++) rc = core_step(core, &b, NULL);
    if (rc == 0) rc = core_sync(core);
    if (rc == 0 && steps > 0) *ms = 1e3 * (clock_seconds() - t0) / steps;
    if (rc == 0 && stats) rc = core_stats(core, stats);
    core_free(core);
    device_batch_free(&d);
    return rc;
}

static void bench_max_batch(HarnessState *st, void *user)
{
    const PracticeVariant *v = user;
    CoreConfig cfg;
    if (!practice_run_config(st, true, v->change, &cfg)) return;  // skips without a GPU (see the top)
    int cap = (int)harness_option_int_value("checkpoint_max_batch_cap");
    int steps = (int)harness_option_int_value("checkpoint_max_steps");
    PracticeBatch seed;
    if (practice_batch_make(&seed, &cfg, cfg.model.image_size) != 0) {
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    int fits = 0, probes = 0, rc = 0;
    bool capped = false;
    for (int n = cfg.batch_size; rc == 0; n *= 2) {
        if (n > cap) { capped = true; break; }
        probes++;
        rc = run_at(&cfg, &seed, n, 1, 0, NULL, NULL);
        if (rc == 0) fits = n;
        else if (error_kind() == ERROR_OUT_OF_MEMORY) { rc = 0; break; }
    }
    double ms = 0.0;
    CoreStats cs = {0};
    if (rc == 0 && fits == 0) {
        practice_batch_free(&seed);
        char why[200];
        snprintf(why, sizeof why, "out of device memory: the starting batch %d does not fit", cfg.batch_size);
        harness_skip(st, why);
        return;
    }
    while (rc == 0 && harness_keep_running(st)) {
        rc = run_at(&cfg, &seed, fits, 2, steps, &ms, &cs);
        harness_set_iteration_time(st, ms * 1e-3 / fits);
    }
    practice_batch_free(&seed);
    if (rc != 0) {
        practice_fail_or_skip(st, "finding the largest batch");
        return;
    }
    harness_counter(st, "max_batch", fits, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "capped", capped, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "probes", probes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "step_ms", ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "images_per_second", ms > 0 ? 1e3 * fits / ms : 0.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "activation_bytes", (double)cs.activation_bytes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "peak_bytes", (double)cs.peak_bytes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "device_used_bytes", (double)cs.device_used_bytes, HARNESS_COUNTER_PLAIN);
    char label[300];
    snprintf(label, sizeof label, "%s: largest batch %d%s (doubling from %d until out of device "
             "memory), then %d steps at it; time: seconds per image", v->name, fits,
             capped ? " (the cap)" : "", cfg.batch_size, steps);
    harness_set_label(st, label);
}

int main(int argc, char **argv)
{
    harness_option_int("checkpoint_max_batch_cap", 65536, 1, 1 << 20, NULL,
                       "checkpoint_max_batch: the largest batch probed (doubling stops there)");
    harness_option_int("checkpoint_max_steps", 5, 1, 100000, NULL,
                       "checkpoint_max_batch: timed steps at the largest batch");
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
    if (!gpu) practice.steps = 4;  // a CPU step of small at 32 takes a second or more
    practice_register(&practice);
    // The larger batch it enables: GPU rows (skipped with the reason without one).
    static const HarnessAxis axes[] = {{"preset", "medium,resnet18", true}, {"batch", "0", false}, {NULL, NULL, false}};
    for (int i = 0; i < VARIANT_COUNT; i++) {
        HarnessSpec spec = {.practice = "checkpoint_max_batch", .variant = variants[i].name,
                            .role = variants[i].role, .timing = HARNESS_TIMING_MANUAL,
                            .fn = bench_max_batch, .user = (void *)&variants[i], .unit = HARNESS_US,
                            .iterations = 1};
        harness_register_axes(&spec, axes);
    }
    return harness_run();
}
