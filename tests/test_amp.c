// test_amp.c: the GradScaler rules, alone and inside the core (CPU backend, FP16 path):
// scale values, growth tracker and skipped steps with inf/nan injected at chosen steps,
// exactly as torch.amp.GradScaler gives them; and unscaling happens before clipping.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/amp.h"
#include "kernels/core.h"
#include "kernels/synth.h"

// Steps 0..11 with growth_interval 4 and inf/nan found at steps 3, 4 and 10, worked by
// hand from GradScaler.update: backoff halves and resets; the 4th clean step doubles.
#define TRAJ_STEPS 12
static const bool traj_inf[TRAJ_STEPS] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0};
static const float traj_scale[TRAJ_STEPS] = {65536, 65536, 65536, 32768, 16384, 16384,
                                             16384, 16384, 32768, 32768, 16384, 16384};
static const int traj_tracker[TRAJ_STEPS] = {1, 2, 3, 0, 0, 1, 2, 3, 0, 1, 0, 1};

static void test_defaults_match_pytorch(void **state)
{
    (void)state;
    AmpScalerConfig c = amp_scaler_config_default();
    assert_true(c.init_scale == 65536.0f);
    assert_true(c.growth_factor == 2.0f);
    assert_true(c.backoff_factor == 0.5f);
    assert_int_equal(c.growth_interval, 2000);
}

static void test_scaler_trajectory(void **state)
{
    (void)state;
    AmpScalerConfig c = amp_scaler_config_default();
    c.growth_interval = 4;
    AmpScaler s;
    amp_scaler_init(&s, &c);
    assert_true(s.scale == 65536.0f);
    for (int i = 0; i < TRAJ_STEPS; i++) {
        assert_int_equal(amp_scaler_update(&s, &c, traj_inf[i]), traj_inf[i]);
        assert_true(s.scale == traj_scale[i]);
        assert_int_equal(s.growth_tracker, traj_tracker[i]);
    }
    // Default interval: 1999 clean steps keep the scale, the 2000th doubles it.
    c = amp_scaler_config_default();
    amp_scaler_init(&s, &c);
    for (int i = 0; i < 1999; i++) amp_scaler_update(&s, &c, false);
    assert_true(s.scale == 65536.0f);
    assert_int_equal(s.growth_tracker, 1999);
    amp_scaler_update(&s, &c, false);
    assert_true(s.scale == 131072.0f);
    assert_int_equal(s.growth_tracker, 0);
}

static void test_growth_keeps_scale_finite(void **state)
{
    (void)state;
    AmpScalerConfig c = amp_scaler_config_default();
    c.growth_interval = 1;
    AmpScaler s = {.scale = FLT_MAX / 1.5f, .growth_tracker = 0};
    amp_scaler_update(&s, &c, false);  // FLT_MAX/1.5 * 2 overflows: keep the old scale
    assert_true(s.scale == FLT_MAX / 1.5f);
    assert_int_equal(s.growth_tracker, 0);
}

// torch._amp_foreach_non_finite_check_and_unscale_ checks the *scaled* gradient before it
// multiplies by inv_scale, and leaves values untouched when inv_scale is 1:
//   torch.tensor([3.4e38, 1., -0.]) unscaled with scale 0.5 -> [inf, 2., -0.], found_inf 0
// (the overflow happens after the check, so PyTorch does not flag it);
//   [inf, 1.] with scale 65536 -> found_inf 1;  [nan] with scale 1 -> found_inf 1, nan kept.
static void test_unscale_checks_scaled_values_first(void **state)
{
    (void)state;
    float a[3] = {FLT_MAX, 1.0f, -0.0f};
    assert_false(amp_unscale_check(a, 3, 0.5f));
    assert_true(isinf(a[0]) && a[0] > 0);
    assert_true(a[1] == 2.0f);
    assert_true(a[2] == 0.0f && signbit(a[2]));
    float b[2] = {INFINITY, 1.0f};
    assert_true(amp_unscale_check(b, 2, 65536.0f));
    assert_true(b[1] == 1.0f / 65536.0f);
    float c[2] = {NAN, 1e-45f};  // scale 1: no multiply, the denormal stays bit-exact
    assert_true(amp_unscale_check(c, 2, 1.0f));
    assert_true(isnan(c[0]));
    assert_true(c[1] == 1e-45f);
    // inv_scale is float(1 / double(scale)), as GradScaler computes it
    assert_true(amp_inv_scale(3.0f) == (float)(1.0 / 3.0));
}

typedef struct Run { Core *core; float *images; int32_t *labels; CoreBatch b; SynthTask t; } Run;

static void run_open(Run *r, CoreConfig cfg)
{
    assert_int_equal(core_create(&cfg, &r->core), 0);
    const CoreModelConfig *m = &cfg.model;
    r->t = (SynthTask){m->in_channels, m->image_size, m->num_classes, 0.5f, 5};
    r->images = malloc((size_t)cfg.batch_size * m->in_channels * m->image_size * m->image_size * sizeof(float));
    r->labels = malloc((size_t)cfg.batch_size * sizeof(int32_t));
    r->b = (CoreBatch){r->images, r->labels, cfg.batch_size, CORE_MEMORY_HOST};
}

static void run_close(Run *r)
{
    core_free(r->core);
    free(r->images);
    free(r->labels);
}

static void test_core_fp16_trajectory_with_injected_faults(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.precision = CORE_PRECISION_FP16;
    cfg.scaler.growth_interval = 4;
    cfg.batch_size = 8;
    Run r;
    run_open(&r, cfg);
    size_t np = core_param_count(r.core);
    float *before = malloc(np * sizeof(float)), *after = malloc(np * sizeof(float));
    int skipped = 0;
    for (int i = 0; i < TRAJ_STEPS; i++) {
        synth_batch(&r.t, (uint64_t)i, cfg.batch_size, r.images, r.labels);
        if (traj_inf[i]) assert_int_equal(core_inject_grad_fault(r.core, i == 10 ? NAN : INFINITY), 0);
        assert_int_equal(core_params_get(r.core, before, np), 0);
        CoreStepResult res;
        assert_int_equal(core_step(r.core, &r.b, &res), 0);
        assert_true(isfinite(res.loss));
        assert_int_equal(core_params_get(r.core, after, np), 0);
        if (traj_inf[i]) assert_memory_equal(before, after, np * sizeof(float));  // step skipped
        else assert_memory_not_equal(before, after, np * sizeof(float));
        CoreStats st;
        assert_int_equal(core_stats(r.core, &st), 0);
        skipped += traj_inf[i];
        assert_true(st.loss_scale == traj_scale[i]);
        assert_int_equal(st.growth_tracker, traj_tracker[i]);
        assert_int_equal(st.skipped_steps, skipped);
        for (size_t j = 0; j < np; j++) assert_true(isfinite(after[j]));
    }
    printf("fp16 core: scale trajectory and %d skipped steps as GradScaler gives\n", skipped);
    free(before); free(after);
    run_close(&r);
}

// With a power-of-two scale, scale-then-unscale is exact in fp32, so an FP16-path run
// with clipping must match the plain run; clipping the still-scaled gradients would
// shrink them by ~65536 and make the two diverge.
static void test_unscale_before_clipping(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.batch_size = 8;
    cfg.optim.clip_norm = 0.5f;
    Run a, b, c;
    run_open(&a, cfg);
    cfg.optim.clip_norm = 0.0f;
    run_open(&c, cfg);  // unclipped, to show that clipping is active
    cfg.optim.clip_norm = 0.5f;
    cfg.precision = CORE_PRECISION_FP16;
    run_open(&b, cfg);
    size_t np = core_param_count(a.core);
    float *pa = malloc(np * sizeof(float)), *pb = malloc(np * sizeof(float)), *p0 = malloc(np * sizeof(float));
    assert_int_equal(core_params_get(a.core, p0, np), 0);
    for (int i = 0; i < 4; i++) {
        synth_batch(&a.t, (uint64_t)i, cfg.batch_size, a.images, a.labels);
        memcpy(b.images, a.images, (size_t)cfg.batch_size * 3 * 16 * 16 * sizeof(float));
        memcpy(b.labels, a.labels, (size_t)cfg.batch_size * sizeof(int32_t));
        assert_int_equal(core_step(a.core, &a.b, NULL), 0);
        assert_int_equal(core_step(b.core, &b.b, NULL), 0);
        assert_int_equal(core_step(c.core, &a.b, NULL), 0);
    }
    float *pc = malloc(np * sizeof(float));
    assert_int_equal(core_params_get(c.core, pc, np), 0);
    assert_int_equal(core_params_get(a.core, pa, np), 0);
    assert_int_equal(core_params_get(b.core, pb, np), 0);
    double diff = 0.0, moved = 0.0, clipped = 0.0;
    for (size_t j = 0; j < np; j++) {
        clipped = fmax(clipped, fabs((double)pa[j] - pc[j]));
        diff = fmax(diff, fabs((double)pa[j] - pb[j]));
        moved = fmax(moved, fabs((double)pa[j] - p0[j]));
    }
    printf("clip after unscale: max |fp32 - fp16-path| = %.3g, max update %.3g, "
           "clipping changed weights by %.3g\n", diff, moved, clipped);
    assert_true(moved > 1e-3);
    assert_true(clipped > 0.1 * moved);
    assert_true(diff <= 1e-6 * moved);  // tolerance: fp32 rounding only
    free(pa); free(pb); free(p0); free(pc);
    run_close(&c);
    run_close(&a);
    run_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_match_pytorch),
        cmocka_unit_test(test_scaler_trajectory),
        cmocka_unit_test(test_growth_keeps_scale_finite),
        cmocka_unit_test(test_unscale_checks_scaled_values_first),
        cmocka_unit_test(test_core_fp16_trajectory_with_injected_faults),
        cmocka_unit_test(test_unscale_before_clipping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
