// prealloc_run.c: the prealloc practice's schedule of image sizes and one run over it
// (prealloc_run.h).
#include "bench/prealloc/prealloc_run.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/error.h"

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

void prealloc_schedule_free(PreallocSchedule *s)
{
    free(s->size);
    s->size = NULL;
}

int prealloc_schedule_make(PreallocSchedule *s, int image_size, int distinct, int steps, uint64_t seed)
{
    if (image_size < 2 || distinct < 1 || steps < 1)
        return error_set(ERROR_BAD_USAGE, "schedule: image size %d, %d sizes, %d steps", image_size,
                         distinct, steps);
    *s = (PreallocSchedule){steps, malloc((size_t)steps * sizeof(int)), image_size / 2, image_size, 0, 0};
    if (!s->size) return error_set(ERROR_OUT_OF_MEMORY, "schedule: out of memory");
    if (distinct > s->hi - s->lo + 1) distinct = s->hi - s->lo + 1;
    if (distinct > steps) distinct = steps;
    s->distinct = distinct;
    // every size in turn (the largest among them), then shuffled (Fisher-Yates)
    for (int i = 0; i < steps; i++) {
        int j = i % distinct;
        s->size[i] = distinct == 1 ? s->hi : s->lo + (int)lround((double)j * (s->hi - s->lo) / (distinct - 1));
    }
    uint64_t rng = seed;
    for (int i = steps - 1; i > 0; i--) {
        int r = (int)(lcg(&rng) % (uint64_t)(i + 1)), t = s->size[i];
        s->size[i] = s->size[r];
        s->size[r] = t;
    }
    for (int i = 0; i < steps; i++) s->changes += i == 0 || s->size[i] != s->size[i - 1];
    return 0;
}

int prealloc_counts(const CoreConfig *cfg, size_t *params, size_t *buffers)
{
    Core *core = NULL;
    TRY(core_create(cfg, &core));
    *params = core_param_count(core);
    *buffers = core_buffer_count(core);
    core_free(core);
    return 0;
}

// The preallocation: a training forward and backward of a whole batch at the largest size,
// through core_loss_grad, which plans and allocates what a step of that shape needs but
// leaves no trace: no update, no momentum, no BN running statistics (it normalises with the
// batch's statistics without updating them), no step count, no loss in the read-back window
// (core_forward_backward would update the running statistics and count its loss). The
// broken variant takes a step there.
static int preallocate(Core *core, const PracticeBatch *b, int size, PreallocMode mode, double *ms)
{
    size_t count = core_param_count(core);
    float *grad = malloc(count * sizeof(float)), loss = 0.0f;
    if (!grad) return error_set(ERROR_OUT_OF_MEMORY, "preallocation: out of memory (host)");
    double t0 = clock_seconds();
    CoreBatch batch = practice_batch_view(b, b->n);
    int rc = core_set_image_size(core, size);
    if (rc == 0) rc = mode == PREALLOC_BROKEN ? core_step(core, &batch, NULL) : core_loss_grad(core, &batch, &loss, grad);
    if (rc == 0) rc = core_sync(core);
    *ms = 1e3 * (clock_seconds() - t0);
    free(grad);
    return rc;
}

// The BN running statistics into dst (host memory; on CUDA they live on the device).
static int buffers_get(Core *core, float *dst, size_t count)
{
    float *src = NULL;
    void *stream = NULL;
    if (count == 0) return 0;
    TRY(core_buffers(core, &src, &stream));
    TRY(core_sync(core));
    if (stream == NULL) {
        memcpy(dst, src, count * sizeof(float));
        return 0;
    }
    CUDA_TRY(cudaMemcpy(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

// The schedule's steps; with probe, the arena's growths beyond `largest` bytes (the plan
// the core already holds).
static int run_steps(Core *core, const PracticeBatch *b, const PreallocSchedule *s, bool probe,
                     size_t largest, PreallocResult *r)
{
    CoreBatch batch = practice_batch_view(b, b->n);
    double t0 = clock_seconds();
    for (int i = 0; i < s->steps; i++) {
        TRY(core_set_image_size(core, s->size[i]));
        TRY(core_step(core, &batch, NULL));
        if (!probe) continue;
        CoreStats st;
        TRY(core_stats(core, &st));
        if (st.activation_bytes > largest) {
            r->arena_growths++;
            largest = st.activation_bytes;
        }
    }
    TRY(core_sync(core));
    r->schedule_ms = 1e3 * (clock_seconds() - t0);
    return 0;
}

int prealloc_run(const CoreConfig *cfg, const PracticeBatch *b, const PreallocSchedule *s,
                 PreallocMode mode, bool probe, PreallocResult *r)
{
    r->prealloc_ms = r->schedule_ms = 0.0;
    r->arena_growths = 0;
    Core *core = NULL;
    TRY(core_create(cfg, &core));
    int rc = 0;
    size_t reserved = 0;  // the arena the schedule starts with: the largest plan's, or none
    if (mode != PREALLOC_GROW) {
        rc = preallocate(core, b, s->hi, mode, &r->prealloc_ms);
        CoreStats st;
        if (rc == 0 && probe && (rc = core_stats(core, &st)) == 0) reserved = st.activation_bytes;
    }
    if (rc == 0) rc = run_steps(core, b, s, probe, reserved, r);
    if (rc == 0) rc = core_stats(core, &r->stats);
    if (rc == 0 && r->params) rc = core_params_get(core, r->params, core_param_count(core));
    if (rc == 0 && r->buffers) rc = buffers_get(core, r->buffers, core_buffer_count(core));
    core_free(core);
    return rc;
}
