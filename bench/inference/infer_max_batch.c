// infer_max_batch.c: inference_grad_max_batch, the largest batch that fits in each grad
// mode within --max_batch_memory_mib (bench/driver/max_batch.h): probed on a GPU (the batch
// doubles from 1 until the forward runs out of memory, the rest of the device held as
// ballast), estimated on a CPU from the core's peak bytes at two batches against the budget.
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "bench/driver/max_batch.h"
#include "bench/inference/infer_family.h"
#include "kernels/check.h"
#include "kernels/clock.h"

typedef struct ProbeCtx { const CoreConfig *cfg; CoreGradMode grad; } ProbeCtx;

// One forward of n zero images in device memory on a fresh core (MaxBatchRunFn).
static int forward_on_gpu(void *ctx, int n)
{
    const ProbeCtx *p = ctx;
    CoreConfig c = *p->cfg;
    c.batch_size = n;
    const CoreModelConfig *m = &c.model;
    size_t bytes = (size_t)n * m->in_channels * m->image_size * m->image_size * sizeof(float);
    float *images = NULL;
    cudaError_t e = cudaMalloc((void **)&images, bytes);
    if (e == cudaSuccess) e = cudaMemset(images, 0, bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
        cudaFree(images);
        return check_cuda_failed(e, __FILE__, __LINE__, "probe batch");
    }
    Core *core = NULL;
    CoreBatch b = {.images = images, .labels = NULL, .n = n, .memory = CORE_MEMORY_DEVICE};
    int rc = core_create(&c, &core);
    if (rc == 0) rc = core_infer(core, &b, p->grad, NULL, NULL);
    if (rc == 0) rc = core_sync(core);
    core_free(core);
    cudaFree(images);
    return rc;
}

// The core's peak bytes (model, workspace, the plan's arena) after one forward of n on the
// CPU (MaxBatchPeakFn).
static int forward_peak_on_cpu(void *ctx, int n, size_t *peak)
{
    const ProbeCtx *p = ctx;
    CoreConfig c = *p->cfg;
    c.batch_size = n;
    PracticeBatch pb;
    TRY(infer_batch_make(&pb, &c, true));
    CoreBatch b = infer_request_batch(&pb);
    Core *core = NULL;
    CoreStats s;
    int rc = core_create(&c, &core);
    if (rc == 0) rc = core_infer(core, &b, p->grad, NULL, NULL);
    if (rc == 0) rc = core_stats(core, &s);
    if (rc == 0) *peak = s.peak_bytes;
    core_free(core);
    practice_batch_free(&pb);
    return rc;
}

void infer_bench_max_batch(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!infer_run_config(st, v, &cfg)) return;
    MaxBatchSearch s;
    if (max_batch_search_init(&cfg, 1, "max_batch_cap", &s) != 0) {
        practice_fail_or_skip(st, "the model's tensors");
        return;
    }
    const CoreModelConfig *m = &cfg.model;
    size_t image_bytes = (size_t)m->in_channels * m->image_size * m->image_size * sizeof(float);
    ProbeCtx ctx = {&cfg, v->grad};
    bool gpu = cfg.backend == CORE_BACKEND_CUDA;
    MaxBatchResult r;
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: the whole probe
        double t0 = clock_seconds();
        rc = gpu ? max_batch_probe(&s, forward_on_gpu, &ctx, &r)
                 : max_batch_estimate(&s, forward_peak_on_cpu, &ctx, image_bytes, max_batch_memory(&s), &r);
        harness_set_iteration_time(st, clock_seconds() - t0);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, gpu ? "probing the largest batch" : "measuring the core's bytes");
        return;
    }
    if (max_batch_skip_if_none(st, &s, &r)) return;
    max_batch_counters(st, &s, &r);
    char how[1200], label[1300];
    max_batch_describe(&s, &r, how, sizeof how);
    snprintf(label, sizeof label, "%s: the largest forward batch; %s", v->name, how);
    harness_set_label(st, label);
}
