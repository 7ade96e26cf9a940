// practice_sources.c: the practice driver's batches (practice_internal.h): the synthetic
// plane-wave task generated once (device-resident on the GPU, so the steps time the
// training and nothing else), JPEGs through the loader with each variant's workers and
// pinning (reporting the wait per step, the pinning time and the cores used), the check's
// batches taken from a run's source, and practice_batch_* (practice.h) for a program's own
// step loops over changing sizes.
#include "bench/driver/practice_internal.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/pinned.h"

// ---- synthetic ------------------------------------------------------------------------------

static void synthetic_close(void *ctx)
{
    Synthetic *s = ctx;
    for (int i = 0; i < SYNTH_BATCHES; i++) {
        if (s->device) {
            cudaFree(s->images[i]);
            cudaFree(s->labels[i]);
        } else {
            free(s->images[i]);
            free(s->labels[i]);
        }
        free(s->tokens[i]);
        s->images[i] = NULL;
        s->labels[i] = NULL;
        s->tokens[i] = NULL;
    }
}

// A GPT preset's batches: SYNTH_BATCHES batches of n sequences of the token task.
static int synthetic_tokens_open(Synthetic *s, const CoreConfig *cfg)
{
    const CoreModelConfig *m = &cfg->model;
    SynthTokens task = synth_tokens_task(m->num_classes, m->seq_len, cfg->seed);
    size_t count = (size_t)s->n * m->seq_len;
    for (int i = 0; i < SYNTH_BATCHES; i++) {
        s->tokens[i] = malloc(count * sizeof(int32_t));
        s->labels[i] = malloc(count * sizeof(int32_t));
        if (!s->tokens[i] || !s->labels[i]) {
            synthetic_close(s);
            return error_set(ERROR_OUT_OF_MEMORY, "synthetic token batches of %d x %d: out of memory "
                             "(host)", s->n, m->seq_len);
        }
        synth_tokens_batch(&task, (uint64_t)i, s->n, s->tokens[i], s->labels[i]);
    }
    return 0;
}

// Fills batch i (n samples) by repeating a pool of `pool` generated samples: the host
// never holds more than the pool, however large the batch (a sweep to out of memory).
static int synthetic_fill(Synthetic *s, int i, const float *pool_images, const int32_t *pool_labels,
                          int pool, size_t sample)
{
    for (int done = 0; done < s->n; done += pool) {
        int take = s->n - done < pool ? s->n - done : pool;
        float *dst = s->images[i] + (size_t)done * sample;
        int32_t *lab = s->labels[i] + done;
        if (!s->device) {
            memcpy(dst, pool_images, (size_t)take * sample * sizeof(float));
            memcpy(lab, pool_labels, (size_t)take * sizeof(int32_t));
            continue;
        }
        cudaError_t e = cudaMemcpy(dst, pool_images, (size_t)take * sample * sizeof(float),
                                   cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(lab, pool_labels, (size_t)take * sizeof(int32_t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return check_cuda_failed(e, __FILE__, __LINE__, "device-resident batches");
    }
    return 0;
}

static int synthetic_open(void *ctx, CoreConfig *cfg, const void *arg)
{
    (void)arg;
    Synthetic *s = ctx;
    const CoreModelConfig *m = &cfg->model;
    s->task = (SynthTask){m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    s->n = cfg->batch_size;
    s->device = cfg->backend == CORE_BACKEND_CUDA;
    s->taken = 0;
    s->served = 0;
    if (m->kind == CORE_MODEL_GPT) return synthetic_tokens_open(s, cfg);
    size_t sample = (size_t)m->in_channels * m->image_size * m->image_size;
    int pool = s->n < SYNTH_POOL ? s->n : SYNTH_POOL;
    float *images = malloc((size_t)pool * sample * sizeof(float));
    int32_t *labels = malloc((size_t)pool * sizeof(int32_t));
    int rc = images && labels ? 0 : error_set(ERROR_OUT_OF_MEMORY, "synthetic batches: out of memory (host)");
    for (int i = 0; i < SYNTH_BATCHES && rc == 0; i++) {
        synth_batch(&s->task, (uint64_t)i, pool, images, labels);
        size_t bytes = (size_t)s->n * sample * sizeof(float), lbytes = (size_t)s->n * sizeof(int32_t);
        if (s->device) {
            cudaError_t e = cudaMalloc((void **)&s->images[i], bytes);
            if (e == cudaSuccess) e = cudaMalloc((void **)&s->labels[i], lbytes);
            if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "device-resident batches");
        } else {
            s->images[i] = malloc(bytes);
            s->labels[i] = malloc(lbytes);
            if (!s->images[i] || !s->labels[i])
                rc = error_set(ERROR_OUT_OF_MEMORY, "synthetic batches of %d: out of memory (host)", s->n);
        }
        if (rc == 0) rc = synthetic_fill(s, i, images, labels, pool, sample);
    }
    // the copies were synchronous, but the core's non-blocking stream must see them done
    if (rc == 0 && s->device && cudaDeviceSynchronize() != cudaSuccess)
        rc = check_cuda_failed(cudaGetLastError(), __FILE__, __LINE__, "device-resident batches");
    free(images);
    free(labels);
    if (rc != 0) synthetic_close(s);
    return rc;
}

bool practice_uses_synthetic(const Practice *p)
{
    const char *data = harness_common()->data;
    return !p->source && !p->images && !(data && strcmp(data, "images") == 0);
}

static void synthetic_start(void *ctx) { ((Synthetic *)ctx)->taken = 0; }

static int synthetic_next(void *ctx, CoreBatch *b)
{
    Synthetic *s = ctx;
    if (s->steps > 0 && s->taken == s->steps) {  // one timed iteration is `steps` steps
        s->taken = 0;
        return 0;
    }
    s->taken++;
    int i = (int)(s->served++ % SYNTH_BATCHES);  // an epoch of one step still alternates
    *b = (CoreBatch){.images = s->images[i], .labels = s->labels[i], .n = s->n,
                     .memory = s->device ? CORE_MEMORY_DEVICE : CORE_MEMORY_HOST, .tokens = s->tokens[i]};
    return 1;
}

// ---- JPEGs through the loader -------------------------------------------------------------------

static int images_open(void *ctx, CoreConfig *cfg, const void *arg)
{
    Images *im = ctx;
    const PracticeLoader *how = arg;
    ImageDataConfig ic = image_data_default_config(cfg->model.image_size, cfg->batch_size);
    ic.data_dir = harness_common()->data_dir;
    ic.dataset_preset = im->dataset_preset;
    ic.seed = cfg->seed;
    LoaderConfig options = {0};
    practice_loader_options(&options);
    ic.timeout_ms = options.timeout_ms;
    ic.max_image_pixels = options.max_image_pixels;
    if (how) {
        ic.num_workers = how->num_workers;
        ic.pin = how->pin;
        ic.worker_cpus = how->worker_cpus;
    }
    im->workers = ic.num_workers;
    im->taken = 0;
    if (ic.pin != LOADER_PIN_NONE) TRY(pinned_check_available());
    if (image_data_open(&ic, &im->data) != 0) return -1;
    cfg->model.num_classes = im->data.all.num_classes;
    cfg->model.in_channels = 3;
    return core_config_validate(cfg);
}

static int images_next(void *ctx, CoreBatch *b)
{
    Images *im = ctx;
    if (im->taken == im->steps) {
        im->taken = 0;
        return 0;
    }
    im->taken++;
    return image_data_next(&im->data, b) == 0 ? 1 : -1;
}

static void images_start(void *ctx)
{
    Images *im = ctx;
    im->taken = 0;
    loader_get_stats(im->data.train_loader, &im->s0);
    im->cpu0 = clock_process_cpu_seconds();
}

static void images_report(void *ctx, HarnessState *st, double seconds, int64_t steps)
{
    Images *im = ctx;
    LoaderStats s1;
    loader_get_stats(im->data.train_loader, &s1);
    double cpu = clock_process_cpu_seconds() - im->cpu0 + s1.worker_cpu_seconds - im->s0.worker_cpu_seconds;
    harness_counter(st, "num_workers", im->workers, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wait_ms_per_step", steps ? 1e3 * (s1.wait_seconds - im->s0.wait_seconds) / steps : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "pin_ms_per_step", steps ? 1e3 * (s1.pin_seconds - im->s0.pin_seconds) / steps : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "cpu_cores_used", seconds > 0 ? cpu / seconds : 0, HARNESS_COUNTER_PLAIN);
}

static void images_close(void *ctx) { image_data_close(&((Images *)ctx)->data); }

// ---- the sources (practice_internal.h) ------------------------------------------------------------

PracticeSource practice_synthetic_source(Synthetic *s)
{
    // its batches are made once and kept until close
    return (PracticeSource){synthetic_open, synthetic_next, synthetic_start, NULL, synthetic_close, s, true};
}

PracticeSource practice_images_source(Images *im)
{
    // a loader slot is reused once the next batch is taken
    return (PracticeSource){images_open, images_next, images_start, images_report, images_close, im, false};
}

// ---- the check's batches (practice_internal.h) ------------------------------------------------------

static void free_batch(const CoreBatch *b)
{
    if (b->memory == CORE_MEMORY_DEVICE) {
        cudaFree((void *)b->images);
        cudaFree((void *)b->labels);
    } else {
        free((void *)b->images);
        free((void *)b->labels);
        free((void *)b->tokens);
    }
}

// A copy of a GPT batch (`sample` tokens per sequence) in host memory.
static int copy_token_batch(const CoreBatch *b, size_t sample, CoreMemory to, CoreBatch *out)
{
    if (to != CORE_MEMORY_HOST || b->memory != CORE_MEMORY_HOST)
        return error_set(ERROR_BAD_USAGE, "the check's batches: token batches live in host memory");
    size_t bytes = (size_t)b->n * sample * sizeof(int32_t);
    int32_t *tokens = malloc(bytes), *labels = malloc(bytes);
    if (!tokens || !labels) {
        free(tokens);
        free(labels);
        return error_set(ERROR_OUT_OF_MEMORY, "the check's batches: out of memory (host)");
    }
    memcpy(tokens, b->tokens, bytes);
    memcpy(labels, b->labels, bytes);
    *out = (CoreBatch){.labels = labels, .n = b->n, .memory = to, .tokens = tokens};
    return 0;
}

void practice_check_batches_free(CheckBatches *cb)
{
    for (int i = 0; i < cb->k; i++) {
        if (cb->owned[i]) free_batch(&cb->b[i]);
        if (cb->host_owned[i]) free_batch(&cb->host[i]);
    }
    *cb = (CheckBatches){0};
}

// A copy of b (`sample` floats per image, or tokens per sequence) in memory of kind `to`.
static int copy_batch(const CoreBatch *b, size_t sample, CoreMemory to, CoreBatch *out)
{
    if (b->tokens) return copy_token_batch(b, sample, to, out);
    size_t bytes = (size_t)b->n * sample * sizeof(float), lbytes = (size_t)b->n * sizeof(int32_t);
    float *images = NULL;
    int32_t *labels = NULL;
    *out = (CoreBatch){.images = NULL, .labels = NULL, .n = b->n, .memory = to};
    if (to == CORE_MEMORY_DEVICE) {  // from the device (a source's batch) to the device
        cudaError_t e = cudaMalloc((void **)&images, bytes);
        if (e == cudaSuccess) e = cudaMalloc((void **)&labels, lbytes);
        if (e == cudaSuccess) e = cudaMemcpy(images, b->images, bytes, cudaMemcpyDeviceToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(labels, b->labels, lbytes, cudaMemcpyDeviceToDevice);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();  // the core's stream does not order against these
        if (e != cudaSuccess) {
            cudaFree(images);
            cudaFree(labels);
            return check_cuda_failed(e, __FILE__, __LINE__, "the check's batches");
        }
    } else {
        images = malloc(bytes);
        labels = malloc(lbytes);
        cudaError_t e = cudaSuccess;
        if (!images || !labels) {
            free(images);
            free(labels);
            return error_set(ERROR_OUT_OF_MEMORY, "the check's batches: out of memory (host)");
        }
        if (b->memory == CORE_MEMORY_DEVICE) {
            e = cudaMemcpy(images, b->images, bytes, cudaMemcpyDeviceToHost);
            if (e == cudaSuccess) e = cudaMemcpy(labels, b->labels, lbytes, cudaMemcpyDeviceToHost);
        } else {
            memcpy(images, b->images, bytes);
            memcpy(labels, b->labels, lbytes);
        }
        if (e != cudaSuccess) {
            free(images);
            free(labels);
            return check_cuda_failed(e, __FILE__, __LINE__, "the check's batches");
        }
    }
    out->images = images;
    out->labels = labels;
    return 0;
}

int practice_check_batches_take(const PracticeSource *src, const CoreConfig *cfg, int k, CheckBatches *out)
{
    *out = (CheckBatches){0};
    if (k < 1 || k > CHECK_MAX_STEPS)
        return error_set(ERROR_BAD_USAGE, "check: %d steps (1..%d)", k, CHECK_MAX_STEPS);
    size_t sample = cfg->model.kind == CORE_MODEL_GPT
                        ? (size_t)cfg->model.seq_len
                        : (size_t)cfg->model.in_channels * cfg->model.image_size * cfg->model.image_size;
    int rc = 0;
    for (int i = 0; i < k && rc == 0; i++) {
        CoreBatch b;
        rc = src->next(src->ctx, &b);
        if (rc == 0) rc = src->next(src->ctx, &b);  // an epoch ended: the next one
        if (rc == 0) rc = error_set(ERROR_BAD_DATA, "check: the source gave no batch");
        if (rc < 0) break;
        rc = 0;
        out->k = i + 1;
        if (src->stable) out->b[i] = b;
        else if ((rc = copy_batch(&b, sample, b.memory, &out->b[i])) == 0) out->owned[i] = true;
        if (rc == 0 && b.memory == CORE_MEMORY_HOST) out->host[i] = out->b[i];
        else if (rc == 0 && (rc = copy_batch(&b, sample, CORE_MEMORY_HOST, &out->host[i])) == 0)
            out->host_owned[i] = true;
    }
    if (rc != 0) practice_check_batches_free(out);
    return rc == 0 ? 0 : -1;
}

// ---- batches for a program's own step loops (practice.h) ----

void practice_batch_free(PracticeBatch *b)
{
    if (b->device) {
        cudaFree(b->images);
        cudaFree(b->labels);
    } else {
        free(b->images);
        free(b->labels);
    }
    *b = (PracticeBatch){0};
}

int practice_batch_make(PracticeBatch *b, const CoreConfig *cfg, int max_size)
{
    const CoreModelConfig *m = &cfg->model;
    size_t count = (size_t)cfg->batch_size * m->in_channels * max_size * max_size;
    SynthTask task = {m->in_channels, max_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    float *images = malloc(count * sizeof(float));
    int32_t *labels = malloc((size_t)cfg->batch_size * sizeof(int32_t));
    *b = (PracticeBatch){images, labels, cfg->batch_size, false};
    if (!images || !labels) {
        practice_batch_free(b);
        return error_set(ERROR_OUT_OF_MEMORY, "batches: out of memory (host)");
    }
    synth_batch(&task, 0, cfg->batch_size, images, labels);
    if (cfg->backend != CORE_BACKEND_CUDA) return 0;
    *b = (PracticeBatch){NULL, NULL, cfg->batch_size, true};
    cudaError_t e = cudaMalloc((void **)&b->images, count * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&b->labels, (size_t)cfg->batch_size * sizeof(int32_t));
    if (e == cudaSuccess) e = cudaMemcpy(b->images, images, count * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(b->labels, labels, (size_t)cfg->batch_size * sizeof(int32_t), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();  // the core's stream does not order against these
    free(images);
    free(labels);
    if (e != cudaSuccess) {
        practice_batch_free(b);
        return check_cuda_failed(e, __FILE__, __LINE__, "device-resident batches");
    }
    return 0;
}

CoreBatch practice_batch_view(const PracticeBatch *b, int n)
{
    return (CoreBatch){.images = b->images, .labels = b->labels, .n = n, .memory = b->device ? CORE_MEMORY_DEVICE : CORE_MEMORY_HOST};
}

int practice_time_forwards(HarnessState *st, Core *core, const CoreBatch *b, CoreGradMode grad,
                           int warmup, int64_t *forwards, double *seconds)
{
    *forwards = 0;
    *seconds = 0.0;
    for (int i = 0; i < warmup; i++) TRY(core_infer(core, b, grad, NULL, NULL));
    TRY(core_sync(core));
    while (harness_keep_running(st)) {
        double t0 = clock_seconds();
        TRY(core_infer(core, b, grad, NULL, NULL));
        TRY(core_sync(core));
        double dt = clock_seconds() - t0;
        harness_set_iteration_time(st, dt);
        *seconds += dt;
        (*forwards)++;
    }
    return 0;
}

double practice_break_even(HarnessState *st, double cost_ms, double saving_ms)
{
    harness_counter(st, "saving_ms_per_step", saving_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "pays_off", saving_ms > 0, HARNESS_COUNTER_PLAIN);
    if (!(saving_ms > 0)) return -1.0;
    double steps = cost_ms > 0 ? cost_ms / saving_ms : 0.0;
    harness_counter(st, "break_even_steps", steps, HARNESS_COUNTER_PLAIN);
    return steps;
}

int practice_host_batch(PracticeHostBatch *b, const CoreConfig *cfg, int n, uint64_t index)
{
    const CoreModelConfig *m = &cfg->model;
    size_t count = (size_t)n * m->in_channels * m->image_size * m->image_size;
    *b = (PracticeHostBatch){malloc(count * sizeof(float)), malloc((size_t)n * sizeof(int32_t)), {0}};
    if (!b->images || !b->labels) {
        practice_host_batch_free(b);
        return error_set(ERROR_OUT_OF_MEMORY, "a batch of %d images: out of memory (host)", n);
    }
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    synth_batch(&task, index, n, b->images, b->labels);
    b->b = (CoreBatch){.images = b->images, .labels = b->labels, .n = n, .memory = CORE_MEMORY_HOST};
    return 0;
}

void practice_host_batch_free(PracticeHostBatch *b)
{
    free(b->images);
    free(b->labels);
    *b = (PracticeHostBatch){0};
}
