// ddp_check.c: the rank side of the update check of ddp_no_sync, ddp_bucket_order and
// ddp_balance. A worker run with --check-steps=N first trains the baseline variant
// (--check-*: a core of its own with the same initial parameters, its own shares of the
// same samples, its DDP settings) for N steps, then the timed run's own core and DDP (the
// configuration that is timed next, from the same start) for N steps; rank 0 prints how far
// the timed run's update is from the baseline's: "ddp_check rel_diff=R baseline_moved=M"
// (R: relative L2 of the baseline's update, practice_update_rel_diff; M: the baseline's
// update relative to its parameters). Every rank holds the same parameters after a DDP step,
// so rank 0's are the run's. --break=frozen|half_lr|drop_step (the program's
// --practice_selftest) breaks the timed run (half_lr: its core, made by the worker).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/practice.h"
#include "dist/ddp.h"
#include "kernels/core.h"
#include "kernels/error.h"

// The baseline variant's parameters after a->check_steps steps from rank 0's initial ones
// (written to after; its own core, freed here). `start` must equal its initial parameters.
static int train_baseline(const WorkerArgs *a, const DistEnv *env, DistComm *comm, const CoreConfig *cfg,
                          const float *start, float *after, size_t np)
{
    float *images = NULL;
    int32_t *labels = NULL;
    CoreBatch micro[MAX_MICRO_BATCHES];
    Core *core = NULL;
    Ddp *ddp = NULL;
    int n = 0, first = 0;
    int global = ddp_bench_micro_batches(cfg, a, &a->check_against, env, &images, &labels, micro);
    int rc = global > 0 ? ddp_bench_share(a->local_batch, env->world, env->rank, a->check_against.imbalanced, &n, &first) : -1;
    DdpConfig dc = ddp_bench_ddp_config(a, &a->check_against, n);
    if (rc == 0) rc = core_create(cfg, &core);
    if (rc == 0) rc = ddp_create(core, comm, &dc, &ddp);
    if (rc == 0 && core_param_count(core) != np)
        rc = error_set(ERROR_LIBRARY, "check: the baseline has %zu parameters, the timed run %zu", core_param_count(core), np);
    if (rc == 0) rc = core_params_get(core, after, np);
    if (rc == 0 && memcmp(after, start, np * sizeof *after) != 0)
        rc = error_set(ERROR_LIBRARY, "check: the baseline and the timed run start from different parameters");
    for (int s = 0; s < a->check_steps && rc == 0; s++) rc = ddp_step(ddp, micro, global, NULL);
    if (rc == 0) rc = core_sync(core);
    if (rc == 0) rc = core_params_get(core, after, np);
    ddp_free(ddp);
    core_free(core);
    free(images);
    free(labels);
    return rc;
}

static double l2(const float *a, const float *b, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b ? b[i] : 0.0f);
        sum += d * d;
    }
    return sqrt(sum);
}

int ddp_bench_check_update(const WorkerArgs *a, const DistEnv *env, DistComm *comm, const CoreConfig *ref_cfg,
                           Core *core, Ddp *ddp, const CoreBatch *micro, int global_batch)
{
    size_t np = core_param_count(core);
    float *start = malloc(np * sizeof *start), *base = malloc(np * sizeof *base), *tuned = malloc(np * sizeof *tuned);
    int rc = start && base && tuned ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory");
    if (rc == 0) rc = core_params_get(core, start, np);
    if (rc == 0) rc = train_baseline(a, env, comm, ref_cfg, start, base, np);
    bool drop_step = a->breaks && strcmp(a->breaks, "drop_step") == 0;
    for (int s = 0; s < a->check_steps && rc == 0; s++)
        if (!(drop_step && s == a->check_steps / 2)) rc = ddp_step(ddp, micro, global_batch, NULL);
    if (rc == 0) rc = core_sync(core);
    if (rc == 0) rc = core_params_get(core, tuned, np);
    if (rc == 0 && a->breaks && strcmp(a->breaks, "frozen") == 0) memcpy(tuned, start, np * sizeof *tuned);
    if (rc == 0 && env->rank == 0) {
        double moved = l2(base, start, np) / fmax(l2(start, NULL, np), 1e-30);
        printf("ddp_check rel_diff=%.9g baseline_moved=%.9g\n", practice_update_rel_diff(start, base, tuned, np), moved);
    }
    if (rc != 0) rc = error_wrap("rank %d: the update check", env->rank);
    free(start);
    free(base);
    free(tuned);
    return rc;
}
