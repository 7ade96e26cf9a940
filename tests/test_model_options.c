// test_model_options.c: the model options CoreModelConfig.conv_bias (a bias on every
// convolution, PyTorch's Conv2d default) and no_batch_norm (no BN ops: the shape of a
// BN-folded network). The parameter layout and initialisation; the fast CPU backend
// against the plain-C reference (loss, every gradient, parameters after a few steps) for
// each combination, with the memory plan's reuse and fused pointwise ops; a central
// finite-difference check of the bias gradient on the reference; the fact the conv_bias
// practice rests on (a bias before a training-mode BN gets a zero gradient); and the CUDA
// backend against the reference, skipped visibly ("skipped: no CUDA device") without a GPU.
// Tolerances: as tests/test_cpu_fast.c (fast vs reference: fp32 summation order) and
// tests/test_core_gpu.c (strict fp32 CUDA vs reference).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/core.h"
#include "kernels/model.h"
#include "kernels/synth.h"
#include "tests/support.h"

// Fast vs reference after rounding-order differences through the whole model (as
// test_cpu_fast.c's whole-model tolerances, which measured 3e-7 on tiny).
#define LOSS_TOL 1e-5
#define GRAD_TOL 2e-5
#define PARAM_TOL 1e-6
#define STEPS 3
// Strict fp32 CUDA (deterministic algorithms) vs the reference: test_core_gpu.c's.
#define GPU_LOSS_TOL 1e-4
#define GPU_GRAD_TOL 2e-3
// Central differences of the fp32 loss with step FD_H: truncation O(h^2 * third
// derivative) plus fp32 loss rounding (~1e-7 * |loss| / h); measured 0.01-0.4% on
// tiny; asserted per direction as
// |fd - analytic| <= FD_REL * |analytic| + FD_ABS.
#define FD_H 3e-3
#define FD_REL 2e-2
#define FD_ABS 2e-4
// A bias before a training-mode BN: its gradient is 0 in exact arithmetic (BN subtracts
// the batch mean); in fp32, rounding only, far below the weights' gradients.
#define BIAS_BEFORE_BN_TOL 1e-5

static CoreConfig tiny(bool conv_bias, bool no_bn, CoreBackend backend, int batch)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.model.conv_bias = conv_bias;
    cfg.model.no_batch_norm = no_bn;
    cfg.backend = backend;
    cfg.batch_size = batch;
    return cfg;
}

static const char *name_of(bool conv_bias, bool no_bn)
{
    return conv_bias ? (no_bn ? "conv_bias + no_batch_norm" : "conv_bias")
                     : (no_bn ? "no_batch_norm" : "default");
}

// Writes the conv biases' indices (in the flat parameter order) into idx; returns the count.
static size_t bias_indices(const ModelGraph *g, size_t *idx)
{
    size_t count = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind != OP_CONV || !op->bias) continue;
        for (int j = 0; j < op->cout; j++) idx[count++] = op->b_off + (size_t)j;
    }
    return count;
}

static double rel_l2_at(const float *got, const float *want, const size_t *idx, size_t n)
{
    double d = 0.0, w = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[idx[i]] - want[idx[i]];
        d += e * e;
        w += (double)want[idx[i]] * want[idx[i]];
    }
    return w > 0.0 ? sqrt(d / w) : sqrt(d);
}

static void test_layout_and_init(void **state)
{
    (void)state;
    CoreConfig base = tiny(false, false, CORE_BACKEND_CPU_REF, 8);
    CoreConfig with = tiny(true, false, CORE_BACKEND_CPU_REF, 8);
    CoreConfig nobn = tiny(false, true, CORE_BACKEND_CPU_REF, 8);
    ModelGraph *g0 = malloc(sizeof *g0), *g1 = malloc(sizeof *g1), *g2 = malloc(sizeof *g2);
    assert_true(g0 && g1 && g2);
    assert_int_equal(model_build(&base.model, g0), 0);
    assert_int_equal(model_build(&with.model, g1), 0);
    assert_int_equal(model_build(&nobn.model, g2), 0);

    // conv_bias: the same ops; each conv's bias of cout right after its weight.
    assert_int_equal(g1->n_ops, g0->n_ops);
    size_t extra = 0, bn0 = 0;
    for (int i = 0; i < g1->n_ops; i++) {
        const ModelOp *op = &g1->ops[i];
        assert_false(g0->ops[i].bias);
        if (g0->ops[i].kind == OP_BN) bn0 += 2 * (size_t)g0->ops[i].cin;
        if (op->kind != OP_CONV) continue;
        assert_true(op->bias);
        assert_true(op->b_off == op->w_off + (size_t)op->cout * op->cin * op->k * op->k);
        extra += (size_t)op->cout;
    }
    assert_true(g1->n_params == g0->n_params + extra);
    assert_true(g1->n_stats == g0->n_stats);

    // no_batch_norm: no BN op, no running statistics, the BN parameters gone.
    for (int i = 0; i < g2->n_ops; i++) assert_int_not_equal(g2->ops[i].kind, OP_BN);
    assert_true(g2->n_stats == 0 && g2->n_saved == 0);
    assert_true(g2->n_params == g0->n_params - bn0);

    // Biases: uniform in +-1/sqrt(fan_in), not all zero, deterministic in the seed.
    float *p1 = calloc(g1->n_params, sizeof(float)), *p2 = calloc(g1->n_params, sizeof(float));
    float *st = calloc(g1->n_stats + 1, sizeof(float));
    assert_true(p1 && p2 && st);
    model_init(g1, 7, p1, st);
    model_init(g1, 7, p2, st);
    assert_memory_equal(p1, p2, g1->n_params * sizeof(float));
    for (int i = 0; i < g1->n_ops; i++) {
        const ModelOp *op = &g1->ops[i];
        if (op->kind != OP_CONV) continue;
        float bound = 1.0f / sqrtf((float)op->cin * op->k * op->k);
        bool nonzero = false;
        for (int j = 0; j < op->cout; j++) {
            float b = p1[op->b_off + j];
            assert_true(fabsf(b) <= bound);
            nonzero |= b != 0.0f;
        }
        assert_true(nonzero);
    }
    free(p1); free(p2); free(st);

    // The default model is what it always was: core_buffer_count 0 only without BN.
    Core *core = NULL;
    assert_int_equal(core_create(&nobn, &core), 0);
    assert_true(core_buffer_count(core) == 0);
    core_free(core);
    free(g0); free(g1); free(g2);
}

// Fast (2 threads; separate and fused pointwise ops) against the reference.
static void check_fast_vs_reference(bool conv_bias, bool no_bn)
{
    CoreConfig rc = tiny(conv_bias, no_bn, CORE_BACKEND_CPU_REF, 16);
    TestRun ref = test_run_model(&rc, STEPS);
    ModelGraph *g = malloc(sizeof *g);
    size_t *idx = malloc(ref.np * sizeof *idx);
    assert_true(g && idx);
    assert_int_equal(model_build(&rc.model, g), 0);
    size_t nb = bias_indices(g, idx);
    for (int fused = 0; fused <= 1; fused++) {
        CoreConfig fc = tiny(conv_bias, no_bn, CORE_BACKEND_CPU, 16);
        fc.pointwise = fused ? CORE_POINTWISE_FUSED : CORE_POINTWISE_SEPARATE;
        core_cpu_set_threads(2);
        TestRun fast = test_run_model(&fc, STEPS);
        core_cpu_set_threads(0);
        assert_true(fast.np == ref.np);
        double el = fabs((double)fast.loss - ref.loss) / fabs((double)ref.loss);
        double eg = test_rel_l2(fast.grad, ref.grad, ref.np);
        double ep = test_rel_l2(fast.params, ref.params, ref.np);
        printf("%s (%s): fast vs reference: loss %.2g, gradients %.2g, parameters after %d "
               "steps %.2g", name_of(conv_bias, no_bn), fused ? "fused" : "separate", el, eg,
               STEPS, ep);
        if (nb && no_bn) {  // without BN the biases' gradients are real: compared on their own
            double eb = rel_l2_at(fast.grad, ref.grad, idx, nb);
            printf(", bias gradients %.2g", eb);
            if (!(eb <= GRAD_TOL)) fail_msg("bias gradients: relative L2 error %.3g", eb);
        }
        printf(" (relative)\n");
        if (!(el <= LOSS_TOL)) fail_msg("loss: relative error %.3g", el);
        if (!(eg <= GRAD_TOL)) fail_msg("gradients: relative L2 error %.3g", eg);
        if (!(ep <= PARAM_TOL)) fail_msg("parameters: relative L2 error %.3g", ep);
        assert_true(isfinite(fast.eval_loss));
        // the fast backend's biases are inside its convolutions' GEMMs; the reference's are
        // passes of their own
        printf("conv biases %d (fused: fast %d, reference %d)\n", fast.stats.conv_biases,
               fast.stats.conv_biases_fused, ref.stats.conv_biases_fused);
        int biased = 0;
        for (int i = 0; i < g->n_ops; i++) biased += g->ops[i].kind == OP_CONV && g->ops[i].bias;
        assert_int_equal(fast.stats.conv_biases, biased);
        assert_true(conv_bias ? biased > 0 : biased == 0);
        assert_int_equal(fast.stats.conv_biases_fused, fast.stats.conv_biases);
        assert_int_equal(ref.stats.conv_biases, fast.stats.conv_biases);
        assert_int_equal(ref.stats.conv_biases_fused, 0);
        test_run_free(&fast);
    }
    test_run_free(&ref);
    free(g);
    free(idx);
}

static void test_conv_bias_fast_matches_reference(void **state)
{
    (void)state;
    check_fast_vs_reference(true, false);
}

static void test_no_bn_fast_matches_reference(void **state)
{
    (void)state;
    check_fast_vs_reference(false, true);
}

static void test_folded_shape_fast_matches_reference(void **state)
{
    (void)state;
    check_fast_vs_reference(true, true);
}

// Central differences of the reference's loss along one direction per conv, its biases'
// own gradient (unit length: the derivative is then the gradient's norm, well above the
// fp32 loss's rounding over 2h; a single element's difference can straddle a ReLU input
// within h of 0) against the analytic gradient.
static void test_bias_gradient_finite_differences(void **state)
{
    (void)state;
    CoreConfig cfg = tiny(true, true, CORE_BACKEND_CPU_REF, 8);
    TestBatch b;
    test_batch_open(&b, &cfg, 8, 5);
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), 0);
    size_t np = core_param_count(core);
    float *p = malloc(np * sizeof(float)), *grad = malloc(np * sizeof(float));
    float *q = malloc(np * sizeof(float));
    ModelGraph *g = malloc(sizeof *g);
    assert_true(p && grad && q && g);
    assert_int_equal(core_params_get(core, p, np), 0);
    assert_int_equal(core_loss_grad(core, &b.b, NULL, grad), 0);
    assert_int_equal(model_build(&cfg.model, g), 0);
    int checked = 0;
    double worst = 0.0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind != OP_CONV) continue;
        double an = 0.0;
        for (int j = 0; j < op->cout; j++) an += (double)grad[op->b_off + j] * grad[op->b_off + j];
        an = sqrt(an);  // the derivative along grad / |grad|
        assert_true(an > 0.0);
        float lp = 0.0f, lm = 0.0f;
        for (int k = 0; k < 2; k++) {
            memcpy(q, p, np * sizeof(float));
            float h = k == 0 ? (float)FD_H : -(float)FD_H;
            for (int j = 0; j < op->cout; j++) q[op->b_off + j] += h * (float)(grad[op->b_off + j] / an);
            assert_int_equal(core_params_set(core, q, np), 0);
            assert_int_equal(core_loss_grad(core, &b.b, k == 0 ? &lp : &lm, NULL), 0);
        }
        double fd = ((double)lp - lm) / (2.0 * FD_H);
        double err = fabs(fd - an), tol = FD_REL * fabs(an) + FD_ABS;
        printf("conv op %d (%d biases): directional derivative: central difference %.6g, "
               "analytic %.6g\n", i, op->cout, fd, an);
        if (err > worst) worst = err;
        if (!(err <= tol))
            fail_msg("conv op %d biases: finite difference %.6g, analytic %.6g (error %.3g > "
                     "tolerance %.3g)", i, fd, an, err, tol);
        checked++;
    }
    printf("bias gradient vs central differences (h %.0e): %d directions, worst absolute "
           "error %.2g\n", FD_H, checked, worst);
    assert_true(checked > 0);
    free(g); free(p); free(q); free(grad);
    core_free(core);
    test_batch_close(&b);
}

// A bias right before a training-mode BN changes nothing: its gradient is rounding only,
// on both CPU backends (what bench/conv_bias checks over whole updates).
static void test_bias_before_bn_gets_no_gradient(void **state)
{
    (void)state;
    CoreBackend backends[] = {CORE_BACKEND_CPU_REF, CORE_BACKEND_CPU};
    for (int k = 0; k < 2; k++) {
        CoreConfig cfg = tiny(true, false, backends[k], 8);
        TestBatch b;
        test_batch_open(&b, &cfg, 8, 6);
        Core *core = NULL;
        assert_int_equal(core_create(&cfg, &core), 0);
        size_t np = core_param_count(core);
        float *grad = malloc(np * sizeof(float));
        size_t *idx = malloc(np * sizeof *idx);
        ModelGraph *g = malloc(sizeof *g);
        assert_true(grad && idx && g);
        assert_int_equal(core_loss_grad(core, &b.b, NULL, grad), 0);
        assert_int_equal(model_build(&cfg.model, g), 0);
        size_t nb = bias_indices(g, idx);
        double bias_sq = 0.0, all_sq = 0.0;
        for (size_t i = 0; i < nb; i++) bias_sq += (double)grad[idx[i]] * grad[idx[i]];
        for (size_t i = 0; i < np; i++) all_sq += (double)grad[i] * grad[i];
        double ratio = sqrt(bias_sq / all_sq);
        printf("%s: ||bias gradient|| / ||gradient|| = %.2g (tolerance %.0e)\n",
               core_backend_name(backends[k]), ratio, BIAS_BEFORE_BN_TOL);
        assert_true(nb > 0);
        assert_true(ratio <= BIAS_BEFORE_BN_TOL);
        free(grad); free(idx); free(g);
        core_free(core);
        test_batch_close(&b);
    }
}

// The CUDA backend (strict fp32, both layouts, separate and fused) against the reference.
static void test_gpu_matches_reference(void **state)
{
    (void)state;
    REQUIRE_GPU();
    for (int combo = 1; combo <= 3; combo++) {
        bool conv_bias = combo & 1, no_bn = combo & 2;
        CoreConfig rc = tiny(conv_bias, no_bn, CORE_BACKEND_CPU_REF, 8);
        TestBatch b;
        test_batch_open(&b, &rc, 8, 3);
        Core *ref = NULL;
        assert_int_equal(core_create(&rc, &ref), 0);
        size_t np = core_param_count(ref);
        float *p = malloc(np * sizeof(float)), *gr = malloc(np * sizeof(float)),
              *gg = malloc(np * sizeof(float));
        assert_true(p && gr && gg);
        assert_int_equal(core_params_get(ref, p, np), 0);
        float lr = 0.0f;
        assert_int_equal(core_loss_grad(ref, &b.b, &lr, gr), 0);
        core_free(ref);
        for (int v = 0; v < 4; v++) {
            CoreConfig gc = tiny(conv_bias, no_bn, CORE_BACKEND_CUDA, 8);
            gc.precision = CORE_PRECISION_FP32_STRICT;
            gc.deterministic = true;
            gc.layout = (v & 1) ? CORE_LAYOUT_NHWC : CORE_LAYOUT_NCHW;
            gc.pointwise = (v & 2) ? CORE_POINTWISE_FUSED : CORE_POINTWISE_SEPARATE;
            Core *gpu = NULL;
            int rc2 = core_create(&gc, &gpu);
            if (rc2 != 0) fail_msg("core_create: %s", error_message());
            assert_int_equal(core_params_set(gpu, p, np), 0);
            float lg = 0.0f;
            assert_int_equal(core_loss_grad(gpu, &b.b, &lg, gg), 0);
            double el = fabs((double)lg - lr) / fabs((double)lr), eg = test_rel_l2(gg, gr, np);
            printf("%s, cuda %s %s: loss rel %.2g (tol %.0e), gradients rel %.2g (tol %.0e)\n",
                   name_of(conv_bias, no_bn), core_layout_name(gc.layout),
                   core_pointwise_name(gc.pointwise), el, GPU_LOSS_TOL, eg, GPU_GRAD_TOL);
            assert_true(el <= GPU_LOSS_TOL);
            assert_true(eg <= GPU_GRAD_TOL);
            // And a few training steps stay finite (the update path with the new params).
            CoreStepResult r;
            for (int s = 0; s < 3; s++) assert_int_equal(core_step(gpu, &b.b, &r), 0);
            assert_true(isfinite(r.loss));
            core_free(gpu);
        }
        free(p); free(gr); free(gg);
        test_batch_close(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_init),
        cmocka_unit_test(test_conv_bias_fast_matches_reference),
        cmocka_unit_test(test_no_bn_fast_matches_reference),
        cmocka_unit_test(test_folded_shape_fast_matches_reference),
        cmocka_unit_test(test_bias_gradient_finite_differences),
        cmocka_unit_test(test_bias_before_bn_gets_no_gradient),
        cmocka_unit_test(test_gpu_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
