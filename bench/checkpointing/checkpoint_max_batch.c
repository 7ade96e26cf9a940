// checkpoint_max_batch.c: the largest training batch each checkpointing mode fits within the
// memory budget, and its throughput there (checkpoint_max_batch.h).
#include "bench/checkpointing/checkpoint_max_batch.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/driver/max_batch.h"
#include "bench/driver/practice.h"
#include "kernels/clock.h"
#include "kernels/error.h"

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
    CoreBatch b = {.images = d.images, .labels = d.labels, .n = n, .memory = CORE_MEMORY_DEVICE};
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

typedef struct ProbeCtx { const CoreConfig *cfg; const PracticeBatch *seed; } ProbeCtx;

// One training step at batch n on the GPU (MaxBatchRunFn).
static int step_on_gpu(void *ctx, int n)
{
    const ProbeCtx *p = ctx;
    return run_at(p->cfg, p->seed, n, 1, 0, NULL, NULL);
}

// The core's peak bytes after one training step at batch n on the CPU (MaxBatchPeakFn).
static int step_peak_on_cpu(void *ctx, int n, size_t *peak)
{
    const ProbeCtx *p = ctx;
    CoreConfig c = *p->cfg;
    c.batch_size = n;
    PracticeBatch pb;
    TRY(practice_batch_make(&pb, &c, c.model.image_size));
    CoreBatch b = practice_batch_view(&pb, n);
    Core *core = NULL;
    CoreStats s;
    int rc = core_create(&c, &core);
    if (rc == 0) rc = core_step(core, &b, NULL);
    if (rc == 0) rc = core_stats(core, &s);
    if (rc == 0) *peak = s.peak_bytes;
    core_free(core);
    practice_batch_free(&pb);
    return rc;
}

// CPU: the estimate, timed as the row's iteration; its counters and label.
static void estimate_on_cpu(HarnessState *st, const PracticeVariant *v, const CoreConfig *cfg,
                            const MaxBatchSearch *s)
{
    const CoreModelConfig *m = &cfg->model;
    size_t input = (size_t)m->in_channels * m->image_size * m->image_size * sizeof(float) + sizeof(int32_t);
    ProbeCtx ctx = {cfg, NULL};
    MaxBatchResult r;
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: both measurements
        double t0 = clock_seconds();
        rc = max_batch_estimate(s, step_peak_on_cpu, &ctx, input, max_batch_memory(s), &r);
        harness_set_iteration_time(st, clock_seconds() - t0);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "measuring the core's bytes");
        return;
    }
    if (max_batch_skip_if_none(st, s, &r)) return;
    max_batch_counters(st, s, &r);
    char how[1200], label[1400];
    max_batch_describe(s, &r, how, sizeof how);
    snprintf(label, sizeof label, "%s: the largest training batch; %s; no steps timed at it (time: "
             "the estimate's; the rows are references)", v->name, how);
    harness_set_label(st, label);
}

void checkpoint_bench_max_batch(HarnessState *st, void *user)
{
    const PracticeVariant *v = user;
    CoreConfig cfg;
    if (!practice_run_config(st, false, v->change, &cfg)) return;
    MaxBatchSearch s;
    if (max_batch_search_init(&cfg, cfg.batch_size, "checkpoint_max_batch_cap", &s) != 0) {
        practice_fail_or_skip(st, "the model's tensors");
        return;
    }
    if (cfg.backend != CORE_BACKEND_CUDA) {
        estimate_on_cpu(st, v, &cfg, &s);
        return;
    }
    int steps = (int)harness_option_int_value("checkpoint_max_steps");
    PracticeBatch seed;
    if (practice_batch_make(&seed, &cfg, cfg.model.image_size) != 0) {
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    ProbeCtx ctx = {&cfg, &seed};
    MaxBatchResult r;
    if (max_batch_probe(&s, step_on_gpu, &ctx, &r) != 0) {
        practice_batch_free(&seed);
        practice_fail_or_skip(st, "probing the largest batch");
        return;
    }
    if (max_batch_skip_if_none(st, &s, &r)) {
        practice_batch_free(&seed);
        return;
    }
    int rc = 0;
    double ms = 0.0;
    CoreStats cs = {0};
    while (rc == 0 && harness_keep_running(st)) {  // the ballast is gone: the batch runs as it fits
        rc = run_at(&cfg, &seed, r.largest, 2, steps, &ms, &cs);
        harness_set_iteration_time(st, ms * 1e-3 / r.largest);
    }
    practice_batch_free(&seed);
    if (rc != 0) {
        practice_fail_or_skip(st, "timing steps at the largest batch");
        return;
    }
    max_batch_counters(st, &s, &r);
    harness_counter(st, "step_ms", ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "images_per_second", ms > 0 ? 1e3 * r.largest / ms : 0.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "activation_bytes", (double)cs.activation_bytes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "peak_bytes", (double)cs.peak_bytes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "device_used_bytes", (double)cs.device_used_bytes, HARNESS_COUNTER_PLAIN);
    char how[1200], label[1400];
    max_batch_describe(&s, &r, how, sizeof how);
    snprintf(label, sizeof label, "%s: the largest training batch; %s; then %d steps at it; time: "
             "seconds per image", v->name, how, steps);
    harness_set_label(st, label);
}
