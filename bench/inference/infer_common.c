// infer_common.c: timed requests, percentiles, the held-out batch, trained model states and
// the logits comparison of the inference practices (infer_common.h).
#include "bench/inference/infer_common.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/practice.h"
#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/synth.h"

#define SYNTH_NOISE 0.5f            // the driver's synthetic task (practice_batch_make)

int infer_requests(Core *core, const CoreBatch *b, CoreGradMode grad, int requests,
                   const int *sizes, int size_count, float *logits, double *ms)
{
    if (b->labels)
        return error_set(ERROR_BAD_USAGE, "infer_requests: a serving request carries no labels "
                         "(infer_request_batch)");
    for (int i = 0; i < requests; i++) {
        if (sizes) TRY(core_set_image_size(core, sizes[i % size_count]));
        double t0 = clock_seconds();
        TRY(core_infer(core, b, grad, logits, NULL));
        if (!logits) TRY(core_sync(core));
        ms[i] = 1e3 * (clock_seconds() - t0);
    }
    return 0;
}

int infer_warm_up(Core *core, const CoreBatch *b, CoreGradMode grad, float *logits,
                  double min_seconds, int min_requests, int *requests, double *seconds)
{
    double t0 = clock_seconds(), ms = 0.0;
    int n = 0;
    while (n < min_requests || clock_seconds() - t0 < min_seconds) {
        TRY(infer_requests(core, b, grad, 1, NULL, 0, logits, &ms));
        n++;
    }
    *requests = n;
    *seconds = clock_seconds() - t0;
    return 0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double infer_percentile(double *v, int n, double p)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, by_value);
    int rank = (int)ceil(p * n / 100.0);  // nearest rank: the smallest value with p% at or below
                                          // (p * n first: 99 * 1000 / 100 is 990 exactly)
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}

bool infer_percentile_reported(int n, double p)
{
    return n > 0 && n - (int)ceil(p * n / 100.0) >= INFER_PERCENTILE_TAIL;
}

int infer_percentile_min_requests(double p)
{
    if (p >= 100.0) return 0;  // no request count has a tail beyond the maximum
    int n = 1;
    while (!infer_percentile_reported(n, p)) n++;
    return n;
}

// The BN running statistics between host memory and a core (CUDA: device memory, used on
// the core's stream, so the copy waits for the core and the core for the copy).
static int stats_copy(Core *core, float *host, size_t count, bool to_core)
{
    float *buf = NULL;
    void *stream = NULL;
    if (count == 0) return 0;
    TRY(core_sync(core));
    TRY(core_buffers(core, &buf, &stream));
    if (!stream) {
        if (to_core) memcpy(buf, host, count * sizeof(float));
        else memcpy(host, buf, count * sizeof(float));
        return 0;
    }
    cudaError_t e = to_core ? cudaMemcpy(buf, host, count * sizeof(float), cudaMemcpyHostToDevice)
                            : cudaMemcpy(host, buf, count * sizeof(float), cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return check_cuda_failed(e, __FILE__, __LINE__, "BN running statistics");
    return 0;
}

int infer_state_train(const CoreConfig *cfg, int steps, InferState *s)
{
    *s = (InferState){0};
    PracticeBatch b;
    TRY(practice_batch_make(&b, cfg, cfg->model.image_size));
    Core *core = NULL;
    int rc = core_create(cfg, &core);
    CoreBatch batch = practice_batch_view(&b, b.n);
    for (int i = 0; i < steps && rc == 0; i++) rc = core_step(core, &batch, NULL);
    if (rc == 0) {
        s->n_params = core_param_count(core);
        s->n_stats = core_buffer_count(core);
        s->params = malloc(s->n_params * sizeof(float));
        s->stats = malloc((s->n_stats ? s->n_stats : 1) * sizeof(float));
        if (!s->params || !s->stats) rc = error_set(ERROR_OUT_OF_MEMORY, "model state: out of memory");
    }
    if (rc == 0) rc = core_params_get(core, s->params, s->n_params);
    if (rc == 0) rc = stats_copy(core, s->stats, s->n_stats, false);
    core_free(core);
    practice_batch_free(&b);
    if (rc != 0) infer_state_free(s);
    return rc;
}

int infer_state_load(Core *core, const InferState *s)
{
    if (core_param_count(core) != s->n_params || core_buffer_count(core) != s->n_stats)
        return error_set(ERROR_BAD_USAGE, "model state of another model (%zu parameters, %zu "
                         "statistics)", s->n_params, s->n_stats);
    TRY(core_params_set(core, s->params, s->n_params));
    return stats_copy(core, s->stats, s->n_stats, true);
}

void infer_state_free(InferState *s)
{
    free(s->params);
    free(s->stats);
    *s = (InferState){0};
}

int infer_selftest_break(float *logits, size_t count, bool *broken)
{
    TRY(practice_selftest_broken(broken));
    if (*broken) memset(logits, 0, count * sizeof(float));
    return 0;
}
