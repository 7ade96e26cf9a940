// train_ddp.c: DDP for a training program (see train_ddp.h).
#include "dist/train_ddp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "dist/comm.h"
#include "dist/ddp.h"
#include "dist/env.h"
#include "dist/sampler.h"
#include "dist/spawn.h"
#include "kernels/check.h"
#include "kernels/error.h"

struct DistTrain {
    DistEnv env;
    DistComm *comm;
    Ddp *ddp;
    int global_batch, local_batch;
    size_t image_floats;
    bool cuda;
    float *scalars_dev;     // NCCL: the device buffer of dist_train_global_mean
    cudaStream_t scalars_stream;
};

enum { MEAN_MAX = 8 };

int dist_train_launch(int nproc, bool cpu, int argc, char **argv, int *exit_code)
{
    // --nproc-per-node starts its own world whatever launcher variables this process
    // inherited (they describe it, not its ranks; the spawner gives the ranks none of them)
    if (nproc <= 0) return 0;
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return error_set(ERROR_OUT_OF_MEMORY, "launch: out of memory");
    int n = 0;
    for (int i = 0; i < argc; i++) {  // each rank gets --ddp in place of --nproc-per-node
        if (strncmp(argv[i], "--nproc-per-node=", 17) == 0) { args[n++] = "--ddp"; continue; }
        if (strcmp(argv[i], "--nproc-per-node") == 0) { args[n++] = "--ddp"; i++; continue; }
        args[n++] = argv[i];
    }
    DistSpawnConfig sc = {.nproc = nproc, .use_mpirun = cpu, .grace_ms = 3000};
    int rc = dist_spawn_local(&sc, args);
    free(args);
    if (rc < 0) return -1;
    *exit_code = rc;
    return 1;
}

int dist_train_create(Core *core, const CoreConfig *cfg, int global_batch, DistTrain **out)
{
    *out = NULL;
    DistTrain *t = calloc(1, sizeof *t);
    if (!t) return error_set(ERROR_OUT_OF_MEMORY, "calloc(DistTrain): out of memory");
    CoreStats st;
    bool cuda = core_stats(core, &st) == 0 && st.backend == CORE_BACKEND_CUDA;
    t->cuda = cuda;
    t->global_batch = global_batch;
    t->image_floats = (size_t)cfg->model.in_channels * cfg->model.image_size * cfg->model.image_size;
    DdpConfig dc = ddp_config_default();
    int rc = dist_env_detect(&t->env);
    if (rc == 0) rc = dist_local_batch(global_batch, t->env.world, t->env.rank, &t->local_batch);
    if (rc == 0 && cuda && cfg->device != t->env.local_rank)
        rc = error_set(ERROR_BAD_USAGE, "rank %d: its GPU is LOCAL_RANK=%d, not --device %d", t->env.rank,
                       t->env.local_rank, cfg->device);
    if (rc == 0 && !cuda) core_cpu_set_threads(dist_cpus_per_rank(&t->env));  // the ranks split the cores
    if (rc == 0) rc = dist_comm_create(&t->env, cuda ? DIST_COMM_NCCL : DIST_COMM_MPI, cfg->device, 300000, &t->comm);
    if (rc == 0) rc = ddp_create(core, t->comm, &dc, &t->ddp);
    if (rc != 0) {
        dist_train_free(t);
        return -1;
    }
    if (t->env.rank != 0) (void)!freopen("/dev/null", "w", stdout);
    *out = t;
    return 0;
}

int dist_train_rank(const DistTrain *t) { return t->env.rank; }
int dist_train_world(const DistTrain *t) { return t->env.world; }

int dist_train_local_batch(const DistTrain *t, const CoreBatch *g, CoreBatch *local)
{
    if (g->n != t->global_batch)
        return error_set(ERROR_BAD_USAGE, "rank %d: a batch of %d, expected the global batch %d", t->env.rank, g->n,
                         t->global_batch);
    size_t first = (size_t)t->env.rank * t->local_batch;
    *local = (CoreBatch){.images = g->images + first * t->image_floats, .labels = g->labels + first, .n = t->local_batch, .memory = g->memory};
    return 0;
}

int dist_train_step(DistTrain *t, const CoreBatch *local, CoreStepResult *result)
{
    if (ddp_step(t->ddp, local, t->global_batch, result) == 0) return 0;
    // a failed rank must not leave the others waiting in a collective
    fprintf(stderr, "rank %d: %s\n", t->env.rank, error_message());
    dist_comm_abort(t->comm, 1);
    return -1;
}

int dist_train_global_mean(DistTrain *t, float *values, int n)
{
    if (n < 1 || n > MEAN_MAX) return error_set(ERROR_BAD_USAGE, "global mean of %d values (1..%d)", n, MEAN_MAX);
    float scale = 1.0f / (float)t->env.world;
    if (!t->cuda) return dist_comm_allreduce(t->comm, values, values, (size_t)n, scale, NULL);
    if (!t->scalars_dev) {
        CUDA_TRY(cudaStreamCreateWithFlags(&t->scalars_stream, cudaStreamNonBlocking));
        CUDA_TRY(cudaMalloc((void **)&t->scalars_dev, MEAN_MAX * sizeof(float)));
    }
    size_t bytes = (size_t)n * sizeof(float);
    // copies on the all-reduce's own stream: ordered with it, unlike a pageable cudaMemcpy
    CUDA_TRY(cudaMemcpyAsync(t->scalars_dev, values, bytes, cudaMemcpyHostToDevice, t->scalars_stream));
    TRY(dist_comm_allreduce(t->comm, t->scalars_dev, t->scalars_dev, (size_t)n, scale, t->scalars_stream));
    TRY(dist_comm_wait(t->comm, t->scalars_stream));
    CUDA_TRY(cudaMemcpyAsync(values, t->scalars_dev, bytes, cudaMemcpyDeviceToHost, t->scalars_stream));
    CUDA_TRY(cudaStreamSynchronize(t->scalars_stream));
    return 0;
}

void dist_train_free(DistTrain *t)
{
    if (!t) return;
    if (t->scalars_dev) cudaFree(t->scalars_dev);
    if (t->scalars_stream) cudaStreamDestroy(t->scalars_stream);
    ddp_free(t->ddp);
    dist_comm_free(t->comm);
    free(t);
}
