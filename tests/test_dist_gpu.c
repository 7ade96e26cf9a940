// test_dist_gpu.c: the GPU side of dist/ on one GPU, skipped (visibly) without one.
// NCCL refuses two ranks on one GPU, so the world is 1: that still runs the NCCL
// communicator, the bucket all-reduces on the communication stream after backward's
// events, and the update ordered after them. DDP on `tiny` (overlapped, many buckets;
// not overlapped), no_sync over 2 micro-batches on the BN-free `mlp`, and DataParallel over the one GPU must give
// the parameters of plain core steps on the same batches (fp32_strict, deterministic
// cuDNN): |a - b| <= 1e-5 + 1e-4 |b| (the all-reduce of a world of 1 multiplies by 1.0;
// no_sync adds two half-batch gradients where the reference has one batch).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist/comm.h"
#include "dist/data_parallel.h"
#include "dist/ddp.h"
#include "dist/env.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/synth.h"
#include "tests/support.h"

enum { STEPS = 3, BATCH = 16 };

static void config(CoreConfig *cfg, const char *preset)
{
    core_config_preset(cfg, preset);
    cfg->backend = CORE_BACKEND_CUDA;
    cfg->precision = CORE_PRECISION_FP32_STRICT;
    cfg->deterministic = true;
    cfg->batch_size = BATCH;
    cfg->optim.warmup_steps = 0;
    cfg->optim.decay = CORE_LR_CONSTANT;
}

static void compare(Core *got, Core *want, const char *what)
{
    size_t np = core_param_count(want);
    float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q);
    assert_int_equal(core_params_get(got, p, np), 0);
    assert_int_equal(core_params_get(want, q, np), 0);
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < np; i++) {
        double d = fabs((double)p[i] - q[i]);
        worst = fmax(worst, d);
        if (d > 1e-5 + 1e-4 * fabs(q[i])) bad++;
    }
    printf("%s: max |diff| = %.3g, %zu of %zu outside tolerance\n", what, worst, bad, np);
    assert_int_equal(bad, 0);
    free(p);
    free(q);
}

static void ddp_world_of_one(bool overlap, int accumulation, const char *what)
{
    CoreConfig cfg;
    config(&cfg, accumulation > 1 ? "mlp" : "tiny");  // BatchNorm sees micro-batches
    DistEnv env = {.launch = DIST_LAUNCH_SINGLE, .world = 1, .local_world = 1};
    DistComm *comm = NULL;
    Core *core = NULL, *ref = NULL;
    Ddp *ddp = NULL;
    DdpConfig dc = {.bucket_cap_bytes = 8 << 10, .first_bucket_bytes = 2 << 10, .overlap = overlap,
                    .accumulation_steps = accumulation};
    if (dist_comm_create(&env, DIST_COMM_NCCL, 0, 30000, &comm) != 0 || core_create(&cfg, &core) != 0 ||
        core_create(&cfg, &ref) != 0 || ddp_create(core, comm, &dc, &ddp) != 0)
        fail_msg("%s", error_message());
    SynthTask task = {cfg.model.in_channels, cfg.model.image_size, cfg.model.num_classes, 0.5f, 2};
    size_t per = (size_t)task.channels * task.image_size * task.image_size;
    float *images = malloc(BATCH * per * sizeof *images);
    int32_t labels[BATCH];
    for (int s = 0; s < STEPS; s++) {
        synth_batch(&task, (uint64_t)s, BATCH, images, labels);
        int part = BATCH / accumulation;
        CoreBatch micro[2];
        for (int a = 0; a < accumulation; a++)
            micro[a] = (CoreBatch){.images = images + (size_t)a * part * per, .labels = labels + a * part, .n = part, .memory = CORE_MEMORY_HOST};
        CoreBatch whole = {.images = images, .labels = labels, .n = BATCH, .memory = CORE_MEMORY_HOST};
        if (ddp_step(ddp, micro, BATCH, NULL) != 0 || core_step(ref, &whole, NULL) != 0) fail_msg("%s", error_message());
    }
    DdpStats st;
    ddp_stats(ddp, &st);
    assert_true(st.buckets > 1);
    compare(core, ref, what);
    ddp_free(ddp);
    core_free(core);
    core_free(ref);
    dist_comm_free(comm);
    free(images);
}

static void test_ddp_nccl_overlapped(void **state) { (void)state; REQUIRE_GPU(); ddp_world_of_one(true, 1, "DDP overlapped, NCCL world 1"); }
static void test_ddp_nccl_not_overlapped(void **state) { (void)state; REQUIRE_GPU(); ddp_world_of_one(false, 1, "DDP not overlapped, NCCL world 1"); }
static void test_ddp_nccl_no_sync(void **state) { (void)state; REQUIRE_GPU(); ddp_world_of_one(true, 2, "DDP no_sync x2, NCCL world 1"); }

static void test_data_parallel_one_gpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg;
    config(&cfg, "tiny");
    DataParallel *dp = NULL;
    Core *ref = NULL;
    if (dp_create(&cfg, 1, &dp) != 0 || core_create(&cfg, &ref) != 0) fail_msg("%s", error_message());
    SynthTask task = {cfg.model.in_channels, cfg.model.image_size, cfg.model.num_classes, 0.5f, 2};
    size_t per = (size_t)task.channels * task.image_size * task.image_size;
    float *images = malloc(BATCH * per * sizeof *images);
    int32_t labels[BATCH];
    for (int s = 0; s < STEPS; s++) {
        synth_batch(&task, (uint64_t)s, BATCH, images, labels);
        CoreBatch b = {.images = images, .labels = labels, .n = BATCH, .memory = CORE_MEMORY_HOST};
        if (dp_step(dp, &b, NULL) != 0 || core_step(ref, &b, NULL) != 0) fail_msg("%s", error_message());
    }
    compare(dp_core(dp), ref, "DataParallel over 1 GPU");
    dp_free(dp);
    core_free(ref);
    free(images);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp_nccl_overlapped),
        cmocka_unit_test(test_ddp_nccl_not_overlapped),
        cmocka_unit_test(test_ddp_nccl_no_sync),
        cmocka_unit_test(test_data_parallel_one_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
