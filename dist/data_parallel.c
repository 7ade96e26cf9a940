// data_parallel.c: single-process DataParallel (see data_parallel.h).
#include "dist/data_parallel.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/error.h"

typedef struct Replica {
    struct DataParallel *dp;
    int index;
    Core *core;
    float *grad;       // host gradient of this replica's chunk (replicas >= 1)
    CoreBatch chunk;
    int rc;
    ErrorKind kind;
    char message[512];
} Replica;

struct DataParallel {
    int devices;
    bool cuda;
    size_t np;
    size_t image_floats; // C x H x W of one image
    Replica *replicas;
    float *host_params;  // the broadcast's staging
    float *host_grad0;   // CUDA: replica 0's gradient on the host for the reduction
    int used;            // replicas with a non-empty chunk this step
    int n;               // this step's batch
};

// Step 3 on one replica: replica 0 keeps its gradient in its core for the update; the
// others hand theirs over on the host.
static void *replica_run(void *arg)
{
    Replica *r = arg;
    if (r->index == 0)
        r->rc = core_forward_backward(r->core, &r->chunk, false);
    else
        r->rc = core_loss_grad(r->core, &r->chunk, NULL, r->grad);
    if (r->rc != 0) {
        r->kind = error_kind();
        snprintf(r->message, sizeof r->message, "replica %d: %s", r->index, error_message());
    }
    return NULL;
}

// Step 4, in replica 0's update: grads = sum_i (n_i / n) grad_i.
static int reduce_onto_replica0(void *user, float *grads, size_t count, void *stream)
{
    DataParallel *dp = user;
    float *g0 = grads;
    if (dp->cuda) {
        CUDA_TRY(cudaMemcpyAsync(dp->host_grad0, grads, count * sizeof(float), cudaMemcpyDeviceToHost,
                                 (cudaStream_t)stream));
        CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
        g0 = dp->host_grad0;
    }
    float w0 = (float)dp->replicas[0].chunk.n / (float)dp->n;
    for (size_t j = 0; j < count; j++) g0[j] *= w0;
    for (int i = 1; i < dp->used; i++) {
        const Replica *r = &dp->replicas[i];
        float w = (float)r->chunk.n / (float)dp->n;
        for (size_t j = 0; j < count; j++) g0[j] += w * r->grad[j];
    }
    if (dp->cuda)
        CUDA_TRY(cudaMemcpyAsync(grads, dp->host_grad0, count * sizeof(float), cudaMemcpyHostToDevice,
                                 (cudaStream_t)stream));
    return 0;
}

static int unused_ready(void *user, const CoreGradReady *r) { (void)user; (void)r; return 0; }

int dp_create(const CoreConfig *cfg, int devices, DataParallel **out)
{
    *out = NULL;
    if (devices < 1) return error_set(ERROR_BAD_USAGE, "DataParallel: devices must be >= 1 (got %d)", devices);
    bool cuda = cfg->backend == CORE_BACKEND_CUDA;
    if (cfg->backend == CORE_BACKEND_AUTO)
        return error_set(ERROR_BAD_USAGE, "DataParallel: choose the backend (cpu, cpu-ref or cuda), not auto");
    if (cuda) {
        int have = 0;
        if (cudaGetDeviceCount(&have) != cudaSuccess) { (void)cudaGetLastError(); have = 0; }
        if (have < devices)
            return error_set(ERROR_NO_DEVICE, "DataParallel: %d CUDA devices wanted, %d visible", devices, have);
    } else {
        core_cpu_set_threads(1);  // one core per replica thread
    }
    DataParallel *dp = calloc(1, sizeof *dp);
    if (!dp) return error_set(ERROR_OUT_OF_MEMORY, "calloc(DataParallel): out of memory");
    dp->devices = devices;
    dp->cuda = cuda;
    dp->image_floats = (size_t)cfg->model.in_channels * cfg->model.image_size * cfg->model.image_size;
    dp->replicas = calloc((size_t)devices, sizeof *dp->replicas);
    if (!dp->replicas) { dp_free(dp); return error_set(ERROR_OUT_OF_MEMORY, "DataParallel: out of memory"); }
    for (int i = 0; i < devices; i++) {
        CoreConfig c = *cfg;
        c.device = cuda ? i : cfg->device;
        Replica *r = &dp->replicas[i];
        r->dp = dp;
        r->index = i;
        if (core_create(&c, &r->core) != 0) { error_wrap("DataParallel replica %d", i); dp_free(dp); return -1; }
    }
    dp->np = core_param_count(dp->replicas[0].core);
    dp->host_params = malloc(dp->np * sizeof(float));
    dp->host_grad0 = cuda ? malloc(dp->np * sizeof(float)) : NULL;
    bool ok = dp->host_params && (!cuda || dp->host_grad0);
    for (int i = 1; i < devices && ok; i++) ok = (dp->replicas[i].grad = malloc(dp->np * sizeof(float))) != NULL;
    if (!ok) { dp_free(dp); return error_set(ERROR_OUT_OF_MEMORY, "DataParallel: out of memory"); }
    CoreGradHooks hooks = {.ready = unused_ready, .before_update = reduce_onto_replica0, .user = dp};
    if (core_set_grad_hooks(dp->replicas[0].core, &hooks) != 0) { dp_free(dp); return -1; }
    *out = dp;
    return 0;
}

int dp_step(DataParallel *dp, const CoreBatch *b, CoreStepResult *result)
{
    if (!b || b->n <= 0 || !b->images || !b->labels || b->memory != CORE_MEMORY_HOST)
        return error_set(ERROR_BAD_USAGE, "DataParallel: needs a non-empty host batch");
    Core *core0 = dp->replicas[0].core;
    // 2. scatter: torch.chunk sizes, ceil(n / devices) each (the last ones may be empty)
    int chunk = (b->n + dp->devices - 1) / dp->devices;
    dp->n = b->n;
    dp->used = 0;
    for (int i = 0; i < dp->devices; i++) {
        int lo = i * chunk, hi = lo + chunk < b->n ? lo + chunk : b->n;
        if (lo >= hi) break;
        Replica *r = &dp->replicas[i];
        r->chunk = (CoreBatch){.images = b->images + (size_t)lo * dp->image_floats,
                               .labels = b->labels + lo, .n = hi - lo, .memory = CORE_MEMORY_HOST};
        r->rc = 0;
        dp->used++;
    }
    // 1. broadcast replica 0's parameters to the replicas in use
    if (dp->used > 1) {
        TRY(core_params_get(core0, dp->host_params, dp->np));
        for (int i = 1; i < dp->used; i++) TRY(core_params_set(dp->replicas[i].core, dp->host_params, dp->np));
    }
    // 3. forward and backward, one host thread per replica (replica 0 on this thread)
    pthread_t threads[dp->used > 1 ? dp->used : 1];
    int started = 1;
    for (int i = 1; i < dp->used; i++, started++)
        if (pthread_create(&threads[i], NULL, replica_run, &dp->replicas[i]) != 0) break;
    replica_run(&dp->replicas[0]);
    for (int i = 1; i < started; i++) pthread_join(threads[i], NULL);
    if (started < dp->used) return error_set(ERROR_LIBRARY, "DataParallel: cannot start replica thread %d", started);
    for (int i = 0; i < dp->used; i++)
        if (dp->replicas[i].rc != 0) return error_restore(dp->replicas[i].kind, dp->replicas[i].message);
    // 4. + 5. the reduction runs in replica 0's update (its before_update hook), then SGD
    return core_apply_update(core0, b->n, result);
}

Core *dp_core(DataParallel *dp) { return dp->replicas[0].core; }
int dp_devices(const DataParallel *dp) { return dp->devices; }

int dp_replica_memory(DataParallel *dp, int replica, size_t *peak_bytes, size_t *device_used_bytes)
{
    if (replica < 0 || replica >= dp->devices)
        return error_set(ERROR_BAD_USAGE, "DataParallel: no replica %d", replica);
    CoreStats st;
    TRY(core_stats(dp->replicas[replica].core, &st));
    if (peak_bytes) *peak_bytes = st.peak_bytes;
    if (device_used_bytes) *device_used_bytes = st.device_used_bytes;
    return 0;
}

void dp_free(DataParallel *dp)
{
    if (!dp) return;
    for (int i = 0; dp->replicas && i < dp->devices; i++) {
        core_free(dp->replicas[i].core);
        free(dp->replicas[i].grad);
    }
    free(dp->replicas);
    free(dp->host_params);
    free(dp->host_grad0);
    free(dp);
}
