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

#include "bench/amp/amp_probe.h"
#include "kernels/amp.h"
#include "kernels/core.h"
#include "kernels/layers_cpu.h"
#include "kernels/layers_cpu_fast.h"
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
    r->b = (CoreBatch){.images = r->images, .labels = r->labels, .n = cfg.batch_size, .memory = CORE_MEMORY_HOST};
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

// ---- strict fp32 probe -------------------------------------------------------------------

static double as_is(float v) { return v; }

// The probe GEMM y (N, M) = x (N, K) w^T: returns the largest error of y against the exact
// product, and in *tf32_err that of the same inputs rounded to TF32 (double accumulation).
static double probe_gemm_error(const float *x, const float *w, const float *y, int n, int k, int m,
                               double *tf32_err)
{
    double worst = 0.0, worst_tf32 = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double exact = 0.0, tf32 = 0.0, mag = 0.0;
            for (int p = 0; p < k; p++) {
                exact += as_is(x[(size_t)i * k + p]) * as_is(w[(size_t)j * k + p]);
                tf32 += amp_tf32_round(x[(size_t)i * k + p]) * amp_tf32_round(w[(size_t)j * k + p]);
                mag += fabs((double)x[(size_t)i * k + p] * w[(size_t)j * k + p]);
            }
            worst = fmax(worst, fabs(y[(size_t)i * m + j] - exact) / mag);
            worst_tf32 = fmax(worst_tf32, fabs(tf32 - exact) / mag);
        }
    *tf32_err = worst_tf32;
    return worst;
}

// The probe's values: exact in fp32, never in TF32, and TF32 rounding moves them by 2^-12.
static void test_probe_values(void **state)
{
    (void)state;
    for (uint64_t i = 0; i < 1000; i++) {
        float v = amp_probe_value(7, i);
        assert_true(v > 1.0f && v < 1.25f);
        assert_true((double)v == 1.0 + ldexp(nearbyint(ldexp(v - 1.0, 12)), -12));  // a multiple of 2^-12
        assert_float_equal(v - amp_tf32_round(v), ldexp(1.0, -12), 0.0);
    }
    assert_true(amp_tf32_round(1.0f + 0x1p-10f) == 1.0 + 0x1p-10);  // on TF32's grid: unchanged
    assert_true(amp_tf32_round(-1.5f) == -1.5);
}

// On the CPU every precision computes in fp32: the fast backend's GEMM (OpenBLAS) and
// convolution, and the plain-C reference, on probe operands, stay below the strict-fp32
// limit, while the same inputs rounded to TF32 land far above it: the probe tells strict
// fp32 from TF32, and bench_amp's GPU rows apply it to cuBLAS and cuDNN.
static void test_strict_fp32_probe_on_the_cpu(void **state)
{
    (void)state;
    cpu_fast_init();
    enum { N = 16, K = 256, M = 24 };
    float *x = malloc(sizeof(float) * N * K), *w = malloc(sizeof(float) * M * K), *b = calloc(M, sizeof(float));
    float *y = malloc(sizeof(float) * N * M);
    assert_true(x && w && b && y);
    for (size_t i = 0; i < (size_t)N * K; i++) x[i] = amp_probe_value(1, i);
    for (size_t i = 0; i < (size_t)M * K; i++) w[i] = amp_probe_value(2, i);
    CpuWorkspace ws;
    assert_int_equal(cpu_workspace_init(&ws, NULL, 0, 1), 0);
    double tf32 = 0.0;
    linear_fwd_fast(&ws, N, K, M, x, w, b, y);
    double fast = probe_gemm_error(x, w, y, N, K, M, &tf32);
    linear_fwd_cpu(N, K, M, x, w, b, y);
    double ref = probe_gemm_error(x, w, y, N, K, M, &tf32);
    printf("probe GEMM %dx%dx%d: fast CPU %.3g, reference %.3g, TF32-rounded inputs %.3g (limit %g)\n",
           N, M, K, fast, ref, tf32, AMP_PROBE_STRICT_LIMIT);
    assert_true(fast < AMP_PROBE_STRICT_LIMIT && ref < AMP_PROBE_STRICT_LIMIT);
    assert_true(tf32 > 3.0 * AMP_PROBE_STRICT_LIMIT);
    cpu_workspace_free(&ws);
    free(x);
    free(w);
    free(b);
    free(y);

    // a 3x3 convolution, 32 channels: 288 terms per output
    ConvShape s = {2, 32, 8, 8, 16, 3, 1, 1, 8, 8};
    size_t nx = (size_t)s.n * s.c * s.h * s.w, nw = (size_t)s.k * s.c * s.r * s.r, ny = (size_t)s.n * s.k * s.p * s.q;
    float *cx = malloc(nx * sizeof(float)), *cw = malloc(nw * sizeof(float)), *cy = malloc(ny * sizeof(float));
    float *col = malloc((size_t)s.c * s.r * s.r * s.p * s.q * sizeof(float));
    assert_true(cx && cw && cy && col);
    for (size_t i = 0; i < nx; i++) cx[i] = amp_probe_value(11, i);
    for (size_t i = 0; i < nw; i++) cw[i] = amp_probe_value(13, i);
    assert_int_equal(cpu_workspace_init(&ws, &s, 1, 1), 0);
    double errs[2] = {0.0, 0.0}, tf32_conv = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0) conv_fwd_fast(&ws, &s, cx, cw, NULL, cy);
        else conv_fwd_cpu(&s, cx, cw, cy, col);
        for (int n = 0; n < s.n; n++)
            for (int k = 0; k < s.k; k++)
                for (int p = 0; p < s.p; p++)
                    for (int q = 0; q < s.q; q++) {
                        double exact = 0.0, t32 = 0.0, mag = 0.0;
                        for (int c = 0; c < s.c; c++)
                            for (int r = 0; r < s.r; r++)
                                for (int t = 0; t < s.r; t++) {
                                    int h = p - s.pad + r, ww = q - s.pad + t;
                                    if (h < 0 || h >= s.h || ww < 0 || ww >= s.w) continue;
                                    float xv = cx[(((size_t)n * s.c + c) * s.h + h) * s.w + ww];
                                    float wv = cw[(((size_t)k * s.c + c) * s.r + r) * s.r + t];
                                    exact += (double)xv * wv;
                                    t32 += amp_tf32_round(xv) * amp_tf32_round(wv);
                                    mag += fabs((double)xv * wv);
                                }
                        double got = cy[(((size_t)n * s.k + k) * s.p + p) * s.q + q];
                        errs[pass] = fmax(errs[pass], fabs(got - exact) / mag);
                        tf32_conv = fmax(tf32_conv, fabs(t32 - exact) / mag);
                    }
    }
    printf("probe convolution: fast CPU %.3g, reference %.3g, TF32-rounded inputs %.3g (limit %g)\n", errs[0],
           errs[1], tf32_conv, AMP_PROBE_STRICT_LIMIT);
    assert_true(errs[0] < AMP_PROBE_STRICT_LIMIT && errs[1] < AMP_PROBE_STRICT_LIMIT);
    assert_true(tf32_conv > 3.0 * AMP_PROBE_STRICT_LIMIT);
    cpu_workspace_free(&ws);
    free(cx);
    free(cw);
    free(cy);
    free(col);
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
        cmocka_unit_test(test_probe_values),
        cmocka_unit_test(test_strict_fp32_probe_on_the_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
