// test_dist_dp.c: single-process DataParallel on CPU threads (one replica per thread)
// against one core training on the same batches: broadcast, scatter (torch.chunk sizes,
// uneven here: 10 = 4 + 4 + 2), per-replica forward/backward, the size-weighted reduction
// onto replica 0 and its update must give the same parameters after K steps:
//   |dp - single| <= 1e-6 + 1e-5 * |single|   (fp32; only the summation order differs)
// on the BN-free MLP (BatchNorm statistics are per replica, in PyTorch as here).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist/data_parallel.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/synth.h"

enum { STEPS = 4 };

static void dp_matches_single(int devices, int batch)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "mlp"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.batch_size = batch;
    cfg.optim.warmup_steps = 0;
    cfg.optim.decay = CORE_LR_CONSTANT;
    SynthTask task = {cfg.model.in_channels, cfg.model.image_size, cfg.model.num_classes, 0.5f, 4};
    size_t per = (size_t)task.channels * task.image_size * task.image_size;
    float *images = malloc((size_t)batch * per * sizeof *images);
    int32_t *labels = malloc((size_t)batch * sizeof *labels);
    DataParallel *dp = NULL;
    Core *ref = NULL;
    if (dp_create(&cfg, devices, &dp) != 0 || core_create(&cfg, &ref) != 0) fail_msg("%s", error_message());
    for (int s = 0; s < STEPS; s++) {
        synth_batch(&task, (uint64_t)s, batch, images, labels);
        CoreBatch b = {.images = images, .labels = labels, .n = batch, .memory = CORE_MEMORY_HOST};
        if (dp_step(dp, &b, NULL) != 0 || core_step(ref, &b, NULL) != 0) fail_msg("%s", error_message());
    }
    size_t np = core_param_count(ref);
    float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q), *init = malloc(np * sizeof *init);
    Core *fresh = NULL;
    assert_int_equal(core_params_get(dp_core(dp), p, np), 0);
    assert_int_equal(core_params_get(ref, q, np), 0);
    assert_int_equal(core_create(&cfg, &fresh), 0);
    assert_int_equal(core_params_get(fresh, init, np), 0);
    double worst = 0, moved = 0;
    size_t bad = 0;
    for (size_t i = 0; i < np; i++) {
        double d = fabs((double)p[i] - q[i]);
        worst = fmax(worst, d);
        moved = fmax(moved, fabs((double)q[i] - init[i]));
        if (d > 1e-6 + 1e-5 * fabs(q[i])) bad++;
    }
    for (int r = 0; r < devices; r++) {
        size_t peak = 0;
        assert_int_equal(dp_replica_memory(dp, r, &peak, NULL), 0);
        assert_true(peak > 0);
    }
    printf("DataParallel over %d threads, batch %d: max |dp - single| = %.3g (%zu outside), moved %.3g\n",
           devices, batch, worst, bad, moved);
    assert_int_equal(bad, 0);
    assert_true(moved > 1e-3);  // the weights did change
    core_free(fresh);
    core_free(ref);
    dp_free(dp);
    core_cpu_set_threads(0);
    free(p); free(q); free(init); free(images); free(labels);
}

static void test_dp_2_threads(void **state) { (void)state; dp_matches_single(2, 8); }
static void test_dp_3_threads_uneven_chunks(void **state) { (void)state; dp_matches_single(3, 10); }
static void test_dp_more_devices_than_samples(void **state) { (void)state; dp_matches_single(4, 3); }

static void test_dp_bad_input(void **state)
{
    (void)state;
    CoreConfig cfg;
    core_config_preset(&cfg, "mlp");
    cfg.backend = CORE_BACKEND_CPU;
    DataParallel *dp = NULL;
    assert_int_equal(dp_create(&cfg, 0, &dp), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    cfg.backend = CORE_BACKEND_AUTO;
    assert_int_equal(dp_create(&cfg, 2, &dp), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    core_cpu_set_threads(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dp_2_threads),
        cmocka_unit_test(test_dp_3_threads_uneven_chunks),
        cmocka_unit_test(test_dp_more_devices_than_samples),
        cmocka_unit_test(test_dp_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
