// noisy_batches.c: noise-augmented batches built on the host or the device (noisy_batches.h).
#include "bench/on_device/noisy_batches.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/on_device/on_device.h"
#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/synth.h"

#define NOISY_SEED 0x6e6f697365ull
#define NOISY_SYNTH_NOISE 0.5f // the synthetic task's own noise, as the driver's batches

typedef struct NoisyBatches {
    TensorBuild build;
    int n, steps, taken;
    size_t floats;            // per batch
    float *base, *noise, *noisy; // device
    int32_t *labels;          // device
    float *host_noise;        // pageable: the host-built variant's noise
    cudaStream_t stream;
    uint64_t draws;
    double build_seconds;
} NoisyBatches;

enum { NOISY_STEPS_PER_ITERATION = 20 };

static NoisyBatches noisy_run;  // the run in progress (the driver runs one at a time)

static void noisy_close(void *ctx)
{
    NoisyBatches *nb = ctx;
    if (nb->stream) cudaStreamSynchronize(nb->stream);
    cudaFree(nb->base);
    cudaFree(nb->noise);
    cudaFree(nb->noisy);
    cudaFree(nb->labels);
    if (nb->stream) cudaStreamDestroy(nb->stream);
    free(nb->host_noise);
    memset(nb, 0, sizeof *nb);
}

static int noisy_alloc(NoisyBatches *nb, const CoreConfig *cfg)
{
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, NOISY_SYNTH_NOISE, cfg->seed};
    size_t bytes = nb->floats * sizeof(float), lbytes = (size_t)nb->n * sizeof(int32_t);
    CUDA_TRY(cudaStreamCreateWithFlags(&nb->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaMalloc((void **)&nb->base, bytes));
    CUDA_TRY(cudaMalloc((void **)&nb->noise, bytes));
    CUDA_TRY(cudaMalloc((void **)&nb->noisy, bytes));
    CUDA_TRY(cudaMalloc((void **)&nb->labels, lbytes));
    if (nb->build != BUILT_DEVICE) {
        nb->host_noise = malloc(bytes);
        if (!nb->host_noise) return error_set(ERROR_OUT_OF_MEMORY, "noise of %zu bytes: out of memory (host)", bytes);
        memset(nb->host_noise, 0, bytes);  // fault the pages in before anything is timed
    }
    float *images = malloc(bytes);
    int32_t *labels = malloc(lbytes);
    int rc = images && labels ? 0 : error_set(ERROR_OUT_OF_MEMORY, "noisy batches: out of memory (host)");
    if (rc == 0) {
        synth_batch(&task, 0, nb->n, images, labels);
        cudaError_t e = cudaMemcpy(nb->base, images, bytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(nb->labels, labels, lbytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "noisy batches: the base batch");
    }
    free(images);
    free(labels);
    return rc;
}

static int noisy_open(void *ctx, CoreConfig *cfg, const void *arg)
{
    NoisyBatches *nb = ctx;
    memset(nb, 0, sizeof *nb);
    nb->build = arg ? *(const TensorBuild *)arg : BUILT_DEVICE;
    nb->n = cfg->batch_size;
    nb->steps = NOISY_STEPS_PER_ITERATION;
    const CoreModelConfig *m = &cfg->model;
    nb->floats = (size_t)nb->n * m->in_channels * m->image_size * m->image_size;
    if (cfg->backend != CORE_BACKEND_CUDA)
        return error_set(ERROR_NO_DEVICE, "no CUDA device (noise built on the device needs one)");
    // One noisy buffer serves every step because the core reads the loss back every step
    // (core_step returns once the step's work is done); deferred reads would need a ring.
    if (cfg->readback != CORE_READBACK_EVERY_STEP)
        return error_set(ERROR_BAD_USAGE, "noisy batches need the core's every-step loss read-back");
    if (noisy_alloc(nb, cfg) != 0) {
        noisy_close(nb);
        return -1;
    }
    return 0;
}

static int noisy_build(NoisyBatches *nb)
{
    if (nb->build == BUILT_DEVICE) {
        TRY(device_fill_normal(nb->noise, nb->floats, NOISY_SEED, nb->draws, nb->stream));
    } else {
        fill_host_normal(nb->host_noise, nb->floats, NOISY_SEED, nb->draws);
        CUDA_TRY(cudaMemcpyAsync(nb->noise, nb->host_noise, nb->floats * sizeof(float),
                                 cudaMemcpyHostToDevice, nb->stream));
    }
    TRY(device_add_scaled(nb->noisy, nb->base, nb->noise, NOISY_BATCHES_STD, nb->floats, nb->stream));
    // the core reads device batches on its own stream: the batch must be ready first
    CUDA_TRY(cudaStreamSynchronize(nb->stream));
    nb->draws++;
    return 0;
}

static int noisy_next(void *ctx, CoreBatch *b)
{
    NoisyBatches *nb = ctx;
    if (nb->taken == nb->steps) {  // one timed iteration is `steps` steps
        nb->taken = 0;
        return 0;
    }
    nb->taken++;
    double t0 = clock_seconds();
    if (noisy_build(nb) != 0) return -1;
    nb->build_seconds += clock_seconds() - t0;
    *b = (CoreBatch){.images = nb->noisy, .labels = nb->labels, .n = nb->n, .memory = CORE_MEMORY_DEVICE};
    return 1;
}

static void noisy_start(void *ctx)
{
    NoisyBatches *nb = ctx;
    nb->taken = 0;
    nb->build_seconds = 0.0;
}

static void noisy_report(void *ctx, HarnessState *st, double seconds, int64_t steps)
{
    (void)seconds;
    NoisyBatches *nb = ctx;
    harness_counter(st, "build_ms_per_step", steps ? 1e3 * nb->build_seconds / steps : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "noise_std_target", NOISY_BATCHES_STD, HARNESS_COUNTER_PLAIN);
    // the last noise tensor, wherever it was built, must be standard normal
    float *back = malloc(nb->floats * sizeof(float));
    cudaError_t e = back ? cudaMemcpy(back, nb->noise, nb->floats * sizeof(float), cudaMemcpyDeviceToHost)
                         : cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        check_cuda_failed(e, __FILE__, __LINE__, "copying the noise back");
        practice_fail_or_skip(st, "checking the noise");
        free(back);
        return;
    }
    NormalCheck c = check_normal(back, nb->floats);
    free(back);
    harness_counter(st, "noise_mean", c.mean, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "noise_std", c.std, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "noise_wrong", !c.ok, HARNESS_COUNTER_PLAIN);
    if (!c.ok) {
        char msg[200];
        snprintf(msg, sizeof msg, "the noise is not standard normal: mean %.4g (tolerance %.3g), std %.4g "
                 "(tolerance 1 +- %.3g) over %zu values", c.mean, c.mean_tol, c.std, c.std_tol, c.n);
        harness_fail(st, msg);
    }
}

// each step's noise is made into the same buffers: not stable
static const PracticeSource noisy_source = {noisy_open, noisy_next, noisy_start, noisy_report, noisy_close,
                                            &noisy_run, false};

const PracticeSource *noisy_batches_source(void) { return &noisy_source; }
