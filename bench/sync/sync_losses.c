// sync_losses.c: the sync practice's check of the losses read (sync_losses.h).
#include "bench/sync/sync_losses.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/error.h"
#include "kernels/synth.h"

#define CHECK_SYNTH_NOISE 0.5f  // as the practice driver's synthetic batches

// The check's batches: CHECK_BATCHES synthetic batches generated once (a resnet18 batch
// takes long to generate), on the device when the core is there, used in turn.
enum { CHECK_BATCHES = 2 };

typedef struct CheckBatches {
    CoreBatch batch[CHECK_BATCHES];
    void *owned[2 * CHECK_BATCHES];
    bool device;
} CheckBatches;

static void check_batches_free(CheckBatches *cb)
{
    for (int i = 0; i < 2 * CHECK_BATCHES; i++) {
        if (cb->device) cudaFree(cb->owned[i]);
        else free(cb->owned[i]);
        cb->owned[i] = NULL;
    }
}

static int check_batches_make(const CoreConfig *cfg, CheckBatches *cb)
{
    *cb = (CheckBatches){.device = cfg->backend == CORE_BACKEND_CUDA};
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, CHECK_SYNTH_NOISE, cfg->seed};
    size_t ibytes = (size_t)cfg->batch_size * m->in_channels * m->image_size * m->image_size * sizeof(float);
    size_t lbytes = (size_t)cfg->batch_size * sizeof(int32_t);
    float *images = malloc(ibytes);
    int32_t *labels = malloc(lbytes);
    int rc = images && labels ? 0 : error_set(ERROR_OUT_OF_MEMORY, "loss check: out of memory (host)");
    for (int i = 0; i < CHECK_BATCHES && rc == 0; i++) {
        synth_batch(&task, (uint64_t)i, cfg->batch_size, images, labels);
        void **im = &cb->owned[2 * i], **lab = &cb->owned[2 * i + 1];
        if (cb->device) {
            cudaError_t e = cudaMalloc(im, ibytes);
            if (e == cudaSuccess) e = cudaMalloc(lab, lbytes);
            if (e == cudaSuccess) e = cudaMemcpy(*im, images, ibytes, cudaMemcpyHostToDevice);
            if (e == cudaSuccess) e = cudaMemcpy(*lab, labels, lbytes, cudaMemcpyHostToDevice);
            // the core reads device batches on its own non-blocking stream
            if (e == cudaSuccess) e = cudaDeviceSynchronize();
            if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "loss check batches");
        } else {
            *im = malloc(ibytes);
            *lab = malloc(lbytes);
            if (!*im || !*lab) rc = error_set(ERROR_OUT_OF_MEMORY, "loss check: out of memory (host)");
            else {
                memcpy(*im, images, ibytes);
                memcpy(*lab, labels, lbytes);
            }
        }
        cb->batch[i] = (CoreBatch){.images = *im, .labels = *lab, .n = cfg->batch_size, .memory = cb->device ? CORE_MEMORY_DEVICE : CORE_MEMORY_HOST};
    }
    free(images);
    free(labels);
    if (rc != 0) check_batches_free(cb);
    return rc;
}

static int record_on(const CoreConfig *cfg, const CheckBatches *cb, int steps, LossRead *reads, int max,
                     int *count)
{
    *count = 0;
    Core *core = NULL;
    TRY(core_create(cfg, &core));
    int rc = 0;
    for (int s = 0; s < steps && rc == 0; s++) {
        CoreStepResult r;
        rc = core_step(core, &cb->batch[s % CHECK_BATCHES], &r);
        if (rc == 0 && r.loss_ready && *count < max)
            reads[(*count)++] = (LossRead){s, r.loss_steps, r.loss};
    }
    if (rc == 0) rc = core_sync(core);  // a device batch must outlive the work that reads it
    core_free(core);
    return rc;
}

int sync_losses_record(const CoreConfig *cfg, int steps, LossRead *reads, int max, int *count)
{
    CheckBatches cb;
    *count = 0;
    TRY(check_batches_make(cfg, &cb));
    int rc = record_on(cfg, &cb, steps, reads, max, count);
    check_batches_free(&cb);
    return rc;
}

LossComparison sync_losses_compare(const LossRead *every, int n_every, const LossRead *tuned,
                                   int n_tuned, double tolerance)
{
    LossComparison c = {.compared = n_tuned};
    for (int i = 0; i < n_tuned; i++) {
        int first = tuned[i].last_step - tuned[i].steps + 1;
        double sum = 0.0;
        int found = 0;
        for (int j = 0; j < n_every; j++) {
            if (every[j].steps != 1 || every[j].last_step < first || every[j].last_step > tuned[i].last_step)
                continue;
            sum += every[j].loss;
            found++;
        }
        if (tuned[i].steps < 1 || found != tuned[i].steps) {
            c.mismatched++;  // the baseline did not read every step of this window
            continue;
        }
        double want = sum / found;
        double rel = fabs((double)tuned[i].loss - want) / fmax(fabs(want), 1e-30);
        if (!(rel <= tolerance)) c.mismatched++;  // NaN counts as a mismatch
        if (!(rel <= c.max_rel)) c.max_rel = rel;
    }
    return c;
}

int sync_losses_check(const CoreConfig *baseline, const CoreConfig *tuned, LossComparison *cmp)
{
    *cmp = (LossComparison){0};
    if (baseline->readback != CORE_READBACK_EVERY_STEP)
        return error_set(ERROR_BAD_USAGE, "loss check: the baseline must read the loss every step");
    int interval = tuned->readback == CORE_READBACK_DEFERRED ? tuned->readback_interval : 1;
    if (interval < 1 || interval > 100000)
        return error_set(ERROR_BAD_USAGE, "loss check: read-back interval %d out of range", interval);
    int steps = interval <= 50 ? 2 * interval : interval;  // at least one read, two when cheap
    CoreConfig b = *baseline, t = *tuned;
    b.deterministic = t.deterministic = true;
    LossRead *every = malloc((size_t)steps * sizeof *every), *reads = malloc((size_t)steps * sizeof *reads);
    int n_every = 0, n_tuned = 0;
    int rc = every && reads ? 0 : error_set(ERROR_OUT_OF_MEMORY, "loss check: out of memory (host)");
    CheckBatches cb = {0};
    if (rc == 0) rc = check_batches_make(&b, &cb);
    if (rc == 0) rc = record_on(&b, &cb, steps, every, steps, &n_every);
    if (rc == 0) rc = record_on(&t, &cb, steps, reads, steps, &n_tuned);
    check_batches_free(&cb);
    if (rc == 0) {
        *cmp = sync_losses_compare(every, n_every, reads, n_tuned, SYNC_LOSS_TOLERANCE);
        if (n_tuned == 0) cmp->mismatched = 1;  // nothing read: nothing to trust
    }
    free(every);
    free(reads);
    return rc;
}
