// test_fusion.c: fused pointwise ops (CoreConfig.pointwise = CORE_POINTWISE_FUSED:
// BN+ReLU and add+ReLU as one op each) against the separate ops, and the memory plan seen
// through the core (CoreStats.activation_bytes).
// On the fast CPU backend fusion must be bit-identical: the fused loops compute the same
// expressions with the same roundings in the same order (layer by layer below, then the
// loss, every gradient, eval and the parameters after STEPS steps of whole models). Fused
// fast runs must also match the reference backend within test_cpu_fast.c's tolerances.
// On CUDA (skipped visibly without a device) the fused kernels are other kernels: fused
// and separate agree within a relative L2 tolerance stated per precision below.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/layers_cpu_fast.h"
#include "kernels/rng.h"
#include "kernels/synth.h"
#include "tests/support.h"

#define STEPS 3
// Fused fast vs the reference: as test_cpu_fast.c (MODEL_LOSS_TOL, MODEL_GRAD_TOL,
// MODEL_PARAM_TOL): summation order only.
#define REF_LOSS_TOL 1e-5
#define REF_GRAD_TOL 2e-5
#define REF_PARAM_TOL 1e-6
// CUDA fused vs separate, parameters after STEPS steps: strict fp32 differs by the fused
// kernels' summation order only; fp16 also by where values are rounded to 10 bits.
#define GPU_FP32_TOL 1e-4
#define GPU_FP16_TOL 1e-2


static void assert_same(const char *what, const float *a, const float *b, size_t n)
{
    if (memcmp(a, b, n * sizeof *a) != 0)
        fail_msg("%s: not bit-identical (relative L2 %.3g)", what, test_rel_l2(a, b, n));
}

static float *rand_array(Rng *r, size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * rng_normal_float(r);
    return p;
}

// ---- layers: each fused loop against its two separate ones --------------------------------

static void test_fused_layers_bit_identical(void **state)
{
    (void)state;
    const int n = 3, c = 5, hw = 37;  // odd sizes: SIMD tails
    size_t count = (size_t)n * c * hw;
    Rng r = {7};
    float *x = rand_array(&r, count, 1.0f), *x2 = rand_array(&r, count, 1.0f);
    float *dy = rand_array(&r, count, 1.0f), *gamma = rand_array(&r, (size_t)c, 1.0f);
    float *beta = rand_array(&r, (size_t)c, 0.5f);
    float *y_sep = calloc(count, sizeof(float)), *y_fused = calloc(count, sizeof(float));
    float *dx_sep = rand_array(&r, count, 1.0f), *dx_fused = malloc(count * sizeof(float));
    float *masked = malloc(count * sizeof(float));
    float stats[8][16] = {{0}};
    assert_non_null(y_sep); assert_non_null(y_fused); assert_non_null(dx_fused); assert_non_null(masked);
    memcpy(dx_fused, dx_sep, count * sizeof(float));
    for (int k = 0; k < c; k++) stats[2][k] = stats[6][k] = 1.0f;  // running var 1
    for (int threads = 1; threads <= 2; threads++) {
        CpuWorkspace ws;
        assert_int_equal(cpu_workspace_init(&ws, NULL, 0, threads), 0);
        // training forward: BN then ReLU in place, against BN+ReLU
        bn_fwd_train_fast(&ws, n, c, hw, x, gamma, beta, y_sep, stats[0], stats[1], stats[3], stats[2]);
        relu_fwd_fast(&ws, count, y_sep, y_sep);
        bn_relu_fwd_train_fast(&ws, n, c, hw, x, gamma, beta, y_fused, stats[4], stats[5], stats[7],
                               stats[6]);
        assert_same("BN+ReLU forward", y_fused, y_sep, count);
        assert_same("BN+ReLU saved statistics", stats[4], stats[0], 2 * 16);
        // backward: ReLU backward into a buffer, BN backward of it; against the fused one
        for (int accum = 0; accum <= 1; accum++) {
            float dg_sep[16], db_sep[16], dg_fused[16], db_fused[16];
            relu_bwd_fast(&ws, count, y_sep, dy, masked, false);
            bn_bwd_fast(&ws, n, c, hw, x, masked, gamma, stats[0], stats[1], dx_sep, accum, dg_sep,
                        db_sep, false);
            bn_relu_bwd_fast(&ws, n, c, hw, x, y_fused, dy, gamma, stats[4], stats[5], dx_fused, accum,
                             dg_fused, db_fused, false);
            assert_same("BN+ReLU backward dx", dx_fused, dx_sep, count);
            assert_same("BN+ReLU backward dgamma", dg_fused, dg_sep, (size_t)c);
            assert_same("BN+ReLU backward dbeta", db_fused, db_sep, (size_t)c);
        }
        // in place, as the memory plan runs it: dx over dy
        memcpy(masked, dy, count * sizeof(float));
        float dg[16], db[16];
        bn_relu_bwd_fast(&ws, n, c, hw, x, y_fused, masked, gamma, stats[4], stats[5], masked, false,
                         dg, db, false);
        bn_relu_bwd_fast(&ws, n, c, hw, x, y_fused, dy, gamma, stats[4], stats[5], dx_fused, false,
                         dg, db, false);
        assert_same("BN+ReLU backward in place", masked, dx_fused, count);
        // inference forward
        bn_fwd_infer_fast(&ws, n, c, hw, x, gamma, beta, stats[3], stats[2], y_sep);
        relu_fwd_fast(&ws, count, y_sep, y_sep);
        bn_relu_fwd_infer_fast(&ws, n, c, hw, x, gamma, beta, stats[3], stats[2], y_fused);
        assert_same("BN+ReLU inference", y_fused, y_sep, count);
        // add + ReLU, also in place over the first input
        add_fwd_fast(&ws, count, x, x2, y_sep);
        relu_fwd_fast(&ws, count, y_sep, y_sep);
        add_relu_fwd_fast(&ws, count, x, x2, y_fused);
        assert_same("add+ReLU", y_fused, y_sep, count);
        memcpy(masked, x, count * sizeof(float));
        add_relu_fwd_fast(&ws, count, masked, x2, masked);
        assert_same("add+ReLU in place", masked, y_sep, count);
        cpu_workspace_free(&ws);
    }
    free(x); free(x2); free(dy); free(gamma); free(beta); free(y_sep); free(y_fused);
    free(dx_sep); free(dx_fused); free(masked);
}

// ---- whole models -------------------------------------------------------------------------

static TestRun run_model(const char *preset, CoreBackend backend, CorePrecision precision,
                         CorePointwise pointwise, int batch)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = backend;
    cfg.precision = precision;
    cfg.pointwise = pointwise;
    cfg.batch_size = batch;
    cfg.deterministic = true;
    return test_run_model(&cfg, STEPS);
}

static void check_cpu(const char *preset, int batch)
{
    TestRun sep = run_model(preset, CORE_BACKEND_CPU, CORE_PRECISION_FP32, CORE_POINTWISE_SEPARATE, batch);
    TestRun fused = run_model(preset, CORE_BACKEND_CPU, CORE_PRECISION_FP32, CORE_POINTWISE_FUSED, batch);
    TestRun ref = run_model(preset, CORE_BACKEND_CPU_REF, CORE_PRECISION_FP32, CORE_POINTWISE_FUSED, batch);
    assert_same("loss", &fused.loss, &sep.loss, 1);
    assert_same("gradients", fused.grad, sep.grad, sep.np);
    assert_same("parameters", fused.params, sep.params, sep.np);
    assert_same("eval loss", &fused.eval_loss, &sep.eval_loss, 1);
    double el = fabs((double)fused.loss - ref.loss) / fabs((double)ref.loss);
    double eg = test_rel_l2(fused.grad, ref.grad, ref.np), ep = test_rel_l2(fused.params, ref.params, ref.np);
    printf("%s, batch %d: fused == separate bit for bit; fused vs reference: loss %.2g, gradients "
           "%.2g, parameters %.2g; activation bytes: planned %zu (fused %zu), reference %zu\n",
           preset, batch, el, eg, ep, sep.stats.activation_bytes, fused.stats.activation_bytes,
           ref.stats.activation_bytes);
    if (!(el <= REF_LOSS_TOL)) fail_msg("%s loss vs reference: %.3g", preset, el);
    if (!(eg <= REF_GRAD_TOL)) fail_msg("%s gradients vs reference: %.3g", preset, eg);
    if (!(ep <= REF_PARAM_TOL)) fail_msg("%s parameters vs reference: %.3g", preset, ep);
    // The plan reuses memory; the reference keeps everything (it never fuses).
    assert_true(sep.stats.activation_bytes > 0);
    assert_true(fused.stats.activation_bytes <= sep.stats.activation_bytes);
    assert_true(sep.stats.activation_bytes < ref.stats.activation_bytes);
    assert_true(sep.stats.peak_bytes < ref.stats.peak_bytes);
    test_run_free(&sep);
    test_run_free(&fused);
    test_run_free(&ref);
}

static void test_cpu_tiny_fused_equals_separate(void **state) { (void)state; check_cpu("tiny", 16); }
static void test_cpu_mlp_fused_equals_separate(void **state) { (void)state; check_cpu("mlp", 16); }
static void test_cpu_small_fused_equals_separate(void **state) { (void)state; check_cpu("small", 3); }

// The number of operations a core fused (CoreStats.fused_ops) on one step of batch 2: every
// ResNet preset has BN+ReLU and add+ReLU, so the fast CPU backend (and CUDA) fuses some
// when asked, none when not; the MLP has nothing to fuse; the reference backend never fuses.
static int fused_ops_of(const char *preset, CoreBackend backend, CorePointwise pointwise)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = backend;
    cfg.pointwise = pointwise;
    cfg.batch_size = 2;
    TestRun r = test_run_model(&cfg, 1);
    int fused = r.stats.fused_ops;
    test_run_free(&r);
    return fused;
}

static void test_fused_ops_counted(void **state)
{
    (void)state;
    const char *resnets[] = {"tiny", "small", "medium", "resnet18"};
    for (int i = 0; i < 4; i++) {
        int fused = fused_ops_of(resnets[i], CORE_BACKEND_CPU, CORE_POINTWISE_FUSED);
        printf("%s: %d operations fused\n", resnets[i], fused);
        if (fused <= 0) fail_msg("%s: a fused config fused %d operations", resnets[i], fused);
        assert_int_equal(fused_ops_of(resnets[i], CORE_BACKEND_CPU, CORE_POINTWISE_SEPARATE), 0);
    }
    // tiny: stem BN+ReLU, one block's first BN+ReLU and its add+ReLU per stage (2 stages)
    assert_int_equal(fused_ops_of("tiny", CORE_BACKEND_CPU, CORE_POINTWISE_FUSED), 5);
    assert_int_equal(fused_ops_of("mlp", CORE_BACKEND_CPU, CORE_POINTWISE_FUSED), 0);
    assert_int_equal(fused_ops_of("tiny", CORE_BACKEND_CPU_REF, CORE_POINTWISE_FUSED), 0);
}

static void test_gpu_fused_ops_counted(void **state)
{
    (void)state;
    REQUIRE_GPU();
    assert_true(fused_ops_of("tiny", CORE_BACKEND_CUDA, CORE_POINTWISE_FUSED) > 0);
    assert_int_equal(fused_ops_of("tiny", CORE_BACKEND_CUDA, CORE_POINTWISE_SEPARATE), 0);
}

static void test_pointwise_names(void **state)
{
    (void)state;
    CorePointwise p;
    assert_int_equal(core_pointwise_parse("fused", &p), 0);
    assert_int_equal(p, CORE_POINTWISE_FUSED);
    assert_string_equal(core_pointwise_name(CORE_POINTWISE_SEPARATE), "separate");
    assert_int_equal(core_pointwise_parse("fuse", &p), -1);
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    assert_int_equal(cfg.pointwise, CORE_POINTWISE_SEPARATE);  // PyTorch eager's default
    cfg.pointwise = (CorePointwise)7;
    assert_int_equal(core_config_validate(&cfg), -1);
}

static void check_gpu(const char *preset, CorePrecision precision, double tol)
{
    TestRun sep = run_model(preset, CORE_BACKEND_CUDA, precision, CORE_POINTWISE_SEPARATE, 16);
    TestRun fused = run_model(preset, CORE_BACKEND_CUDA, precision, CORE_POINTWISE_FUSED, 16);
    double el = fabs((double)fused.loss - sep.loss) / fabs((double)sep.loss);
    double eg = test_rel_l2(fused.grad, sep.grad, sep.np), ep = test_rel_l2(fused.params, sep.params, sep.np);
    printf("cuda %s %s: fused vs separate: loss %.2g, gradients %.2g, parameters %.2g; activation "
           "bytes %zu (fused %zu), peak %zu\n", preset, core_precision_name(precision), el, eg, ep,
           sep.stats.activation_bytes, fused.stats.activation_bytes, sep.stats.peak_bytes);
    if (!(el <= tol && eg <= tol && ep <= tol)) fail_msg("%s: fused vs separate beyond %.g", preset, tol);
    assert_true(sep.stats.activation_bytes > 0);
    assert_true(fused.stats.activation_bytes <= sep.stats.activation_bytes);
    test_run_free(&sep);
    test_run_free(&fused);
}

static void test_gpu_fused_equals_separate(void **state)
{
    (void)state;
    REQUIRE_GPU();
    check_gpu("tiny", CORE_PRECISION_FP32_STRICT, GPU_FP32_TOL);
    check_gpu("small", CORE_PRECISION_FP32_STRICT, GPU_FP32_TOL);
    check_gpu("tiny", CORE_PRECISION_FP16, GPU_FP16_TOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_layers_bit_identical),
        cmocka_unit_test(test_cpu_tiny_fused_equals_separate),
        cmocka_unit_test(test_cpu_mlp_fused_equals_separate),
        cmocka_unit_test(test_cpu_small_fused_equals_separate),
        cmocka_unit_test(test_fused_ops_counted),
        cmocka_unit_test(test_gpu_fused_ops_counted),
        cmocka_unit_test(test_pointwise_names),
        cmocka_unit_test(test_gpu_fused_equals_separate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
