// test_layers_cpu.c: finite-difference gradient checks of every CPU reference layer
// and of whole tiny models (ResNet-style and MLP) through core_loss_grad, on the
// reference backend and on the fast CPU backend.
// Objective per layer: L = sum(y * r) for a fixed random r, so dL/dy = r.
// Central differences in fp32; tolerance: relative L2 error of the checked entries.
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
#include "kernels/layers_cpu.h"
#include "kernels/model.h"
#include "kernels/rng.h"
#include "kernels/synth.h"

#define LAYER_TOL 1e-2  // relative L2 error, linear and smooth layers
#define MODEL_TOL 3e-2  // whole models (ReLU kinks, BN through many layers)
#define FD_EPS 1e-2f
#define MAX_CHECKS 48

static float *rand_array(Rng *r, size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * rng_normal_float(r);
    return p;
}

// A layer under test: recompute its objective after a perturbation.
typedef double (*ObjectiveFn)(void *ctx);

// Checks up to MAX_CHECKS entries: evenly spaced ones, or when `largest`, the entries
// with the largest analytic gradient (a whole model's loss is a float near 2, so tiny
// gradients drown in its rounding: 2^-23 * 2 / (2 * eps) ~ 1e-5).
static double rel_error_fd_pick(ObjectiveFn f, void *ctx, float *var, size_t n,
                                const float *grad, float eps, bool largest)
{
    double num = 0.0, den = 0.0;
    size_t stride = n > MAX_CHECKS ? n / MAX_CHECKS : 1;
    bool *used = largest ? calloc(n, sizeof *used) : NULL;
    for (size_t it = 0, i = 0; largest ? it < MAX_CHECKS && it < n : i < n;
         it++, i = largest ? 0 : i + stride) {
        if (largest) {
            size_t best = 0;
            float bv = -1.0f;
            for (size_t j = 0; j < n; j++)
                if (!used[j] && fabsf(grad[j]) > bv) { bv = fabsf(grad[j]); best = j; }
            used[best] = true;
            i = best;
        }
        float keep = var[i];
        var[i] = keep + eps; double lp = f(ctx);
        var[i] = keep - eps; double lm = f(ctx);
        var[i] = keep;
        double fd = (lp - lm) / (2.0 * eps);
        num += (fd - grad[i]) * (fd - grad[i]);
        den += fd * fd + (double)grad[i] * grad[i];
        if (largest) i = 0;
    }
    free(used);
    return den > 0 ? sqrt(num / (0.5 * den)) : 0.0;
}

static double rel_error_fd(ObjectiveFn f, void *ctx, float *var, size_t n, const float *grad,
                           float eps)
{
    return rel_error_fd_pick(f, ctx, var, n, grad, eps, false);
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// ---- convolution ----
typedef struct { ConvShape s; float *x, *w, *y, *r, *col; } ConvCtx;

static double conv_obj(void *p)
{
    ConvCtx *c = p;
    conv_fwd_cpu(&c->s, c->x, c->w, c->y, c->col);
    return dot(c->y, c->r, (size_t)c->s.n * c->s.k * c->s.p * c->s.q);
}

static void check_conv(int n, int ch, int hw, int k, int r, int stride, int pad)
{
    Rng rng = {42};
    ConvCtx c;
    int p = conv_out_size(hw, r, stride, pad);
    c.s = (ConvShape){n, ch, hw, hw, k, r, stride, pad, p, p};
    size_t xn = (size_t)n * ch * hw * hw, wn = (size_t)k * ch * r * r, yn = (size_t)n * k * p * p;
    c.x = rand_array(&rng, xn, 1.0f); c.w = rand_array(&rng, wn, 0.5f);
    c.r = rand_array(&rng, yn, 1.0f); c.y = malloc(yn * sizeof(float));
    c.col = malloc((size_t)ch * r * r * p * p * sizeof(float));
    float *dx = malloc(xn * sizeof(float)), *dw = malloc(wn * sizeof(float));
    conv_bwd_data_cpu(&c.s, c.r, c.w, dx, false, c.col);
    conv_bwd_filter_cpu(&c.s, c.x, c.r, dw, false, c.col);
    double ex = rel_error_fd(conv_obj, &c, c.x, xn, dx, FD_EPS);
    double ew = rel_error_fd(conv_obj, &c, c.w, wn, dw, FD_EPS);
    printf("conv n%d c%d %dx%d k%d r%d s%d p%d: rel err dx %.2e dw %.2e (tol %.0e)\n",
           n, ch, hw, hw, k, r, stride, pad, ex, ew, LAYER_TOL);
    assert_true(ex < LAYER_TOL);
    assert_true(ew < LAYER_TOL);
    // accum=true must add onto what is there: dw2 = dw + dw.
    float *dw2 = malloc(wn * sizeof(float));
    memcpy(dw2, dw, wn * sizeof(float));
    conv_bwd_filter_cpu(&c.s, c.x, c.r, dw2, true, c.col);
    for (size_t i = 0; i < wn; i++) assert_float_equal(dw2[i], 2.0f * dw[i], 1e-4f * (1.0f + fabsf(dw[i])));
    free(c.x); free(c.w); free(c.r); free(c.y); free(c.col); free(dx); free(dw); free(dw2);
}

static void test_conv_grad(void **state)
{
    (void)state;
    check_conv(2, 3, 6, 4, 3, 1, 1);
    check_conv(2, 3, 7, 4, 3, 2, 1);
    check_conv(2, 4, 6, 5, 1, 2, 0);
    check_conv(1, 2, 9, 3, 7, 4, 3);
}

// ---- batch norm (training mode) ----
typedef struct { int n, c, hw; float *x, *g, *b, *y, *r, *mean, *invstd; } BnCtx;

static double bn_obj(void *p)
{
    BnCtx *c = p;
    bn_fwd_train_cpu(c->n, c->c, c->hw, c->x, c->g, c->b, c->y, c->mean, c->invstd, NULL, NULL);
    return dot(c->y, c->r, (size_t)c->n * c->c * c->hw);
}

static void test_bn_grad(void **state)
{
    (void)state;
    Rng rng = {7};
    BnCtx c = {.n = 4, .c = 3, .hw = 5};
    size_t xn = (size_t)c.n * c.c * c.hw;
    c.x = rand_array(&rng, xn, 2.0f); c.r = rand_array(&rng, xn, 1.0f);
    c.g = rand_array(&rng, c.c, 1.0f); c.b = rand_array(&rng, c.c, 1.0f);
    c.y = malloc(xn * sizeof(float));
    c.mean = malloc(c.c * sizeof(float)); c.invstd = malloc(c.c * sizeof(float));
    float *dx = malloc(xn * sizeof(float)), dg[3], db[3];
    bn_obj(&c);
    bn_bwd_cpu(c.n, c.c, c.hw, c.x, c.r, c.g, c.mean, c.invstd, dx, false, dg, db, false);
    double ex = rel_error_fd(bn_obj, &c, c.x, xn, dx, FD_EPS);
    double eg = rel_error_fd(bn_obj, &c, c.g, c.c, dg, FD_EPS);
    double eb = rel_error_fd(bn_obj, &c, c.b, c.c, db, FD_EPS);
    printf("bn: rel err dx %.2e dgamma %.2e dbeta %.2e (tol %.0e)\n", ex, eg, eb, LAYER_TOL);
    assert_true(ex < LAYER_TOL && eg < LAYER_TOL && eb < LAYER_TOL);
    // Running statistics: momentum 0.1 towards the batch mean and unbiased variance.
    float rm[3] = {0}, rv[3] = {1, 1, 1};
    bn_fwd_train_cpu(c.n, c.c, c.hw, c.x, c.g, c.b, c.y, c.mean, c.invstd, rm, rv);
    float m = (float)(c.n * c.hw);
    float var = 1.0f / (c.invstd[0] * c.invstd[0]) - MODEL_BN_EPS;
    assert_float_equal(rm[0], 0.1f * c.mean[0], 1e-5f);
    assert_float_equal(rv[0], 0.9f + 0.1f * var * m / (m - 1), 1e-3f);
    free(c.x); free(c.r); free(c.g); free(c.b); free(c.y); free(c.mean); free(c.invstd); free(dx);
}

// ---- relu, add, gap ----
typedef struct { size_t n; int nb, c, hw; float *x, *x2, *y, *r; int which; } EwCtx;

static double ew_obj(void *p)
{
    EwCtx *c = p;
    if (c->which == 0) relu_fwd_cpu(c->n, c->x, c->y);
    else if (c->which == 1) add_fwd_cpu(c->n, c->x, c->x2, c->y);
    else { gap_fwd_cpu(c->nb, c->c, c->hw, c->x, c->y); return dot(c->y, c->r, (size_t)c->nb * c->c); }
    return dot(c->y, c->r, c->n);
}

static void test_elementwise_grad(void **state)
{
    (void)state;
    Rng rng = {9};
    EwCtx c = {.n = 60, .nb = 3, .c = 4, .hw = 5};
    c.x = rand_array(&rng, c.n, 1.0f); c.x2 = rand_array(&rng, c.n, 1.0f);
    c.r = rand_array(&rng, c.n, 1.0f); c.y = malloc(c.n * sizeof(float));
    for (size_t i = 0; i < c.n; i++)  // keep ReLU inputs away from the kink
        if (fabsf(c.x[i]) < 0.05f) c.x[i] = 0.5f;
    float *dx = malloc(c.n * sizeof(float));
    c.which = 0; ew_obj(&c);
    relu_bwd_cpu(c.n, c.y, c.r, dx, false);
    double er = rel_error_fd(ew_obj, &c, c.x, c.n, dx, FD_EPS);
    c.which = 1;
    copy_grad_cpu(c.n, c.r, dx, false);
    double ea = rel_error_fd(ew_obj, &c, c.x2, c.n, dx, FD_EPS);
    c.which = 2;
    gap_bwd_cpu(c.nb, c.c, c.hw, c.r, dx, false);
    double eg = rel_error_fd(ew_obj, &c, c.x, c.n, dx, FD_EPS);
    printf("relu %.2e add %.2e gap %.2e (tol %.0e)\n", er, ea, eg, LAYER_TOL);
    assert_true(er < LAYER_TOL && ea < LAYER_TOL && eg < LAYER_TOL);
    free(c.x); free(c.x2); free(c.r); free(c.y); free(dx);
}

// ---- linear ----
typedef struct { int n, k, m; float *x, *w, *b, *y, *r; } LinCtx;

static double lin_obj(void *p)
{
    LinCtx *c = p;
    linear_fwd_cpu(c->n, c->k, c->m, c->x, c->w, c->b, c->y);
    return dot(c->y, c->r, (size_t)c->n * c->m);
}

static void test_linear_grad(void **state)
{
    (void)state;
    Rng rng = {11};
    LinCtx c = {.n = 5, .k = 7, .m = 3};
    c.x = rand_array(&rng, 35, 1.0f); c.w = rand_array(&rng, 21, 1.0f);
    c.b = rand_array(&rng, 3, 1.0f); c.r = rand_array(&rng, 15, 1.0f);
    c.y = malloc(15 * sizeof(float));
    float dx[35], dw[21], db[3];
    linear_bwd_cpu(c.n, c.k, c.m, c.x, c.w, c.r, dx, false, dw, db, false);
    double ex = rel_error_fd(lin_obj, &c, c.x, 35, dx, FD_EPS);
    double ew = rel_error_fd(lin_obj, &c, c.w, 21, dw, FD_EPS);
    double eb = rel_error_fd(lin_obj, &c, c.b, 3, db, FD_EPS);
    printf("linear: dx %.2e dw %.2e db %.2e (tol %.0e)\n", ex, ew, eb, LAYER_TOL);
    assert_true(ex < LAYER_TOL && ew < LAYER_TOL && eb < LAYER_TOL);
    free(c.x); free(c.w); free(c.b); free(c.r); free(c.y);
}

// ---- softmax cross-entropy ----
typedef struct { int n, m; float *z; int32_t *labels; } CeCtx;

static double ce_obj(void *p)
{
    CeCtx *c = p;
    return softmax_ce_cpu(c->n, c->m, c->z, c->labels, 1.0f, NULL, NULL) / c->n;
}

static void test_softmax_ce_grad(void **state)
{
    (void)state;
    Rng rng = {13};
    int32_t labels[4] = {0, 2, 1, 4};
    CeCtx c = {.n = 4, .m = 5, .labels = labels};
    c.z = rand_array(&rng, 20, 2.0f);
    float dz[20], dz_scaled[20];
    int correct = -1;
    softmax_ce_cpu(c.n, c.m, c.z, labels, 1.0f, dz, &correct);
    double e = rel_error_fd(ce_obj, &c, c.z, 20, dz, FD_EPS);
    printf("softmax_ce: rel err %.2e (tol %.0e)\n", e, LAYER_TOL);
    assert_true(e < LAYER_TOL);
    assert_in_range(correct, 0, 4);
    // The loss-scale factor multiplies the gradient exactly (a power of two).
    softmax_ce_cpu(c.n, c.m, c.z, labels, 65536.0f, dz_scaled, NULL);
    for (int i = 0; i < 20; i++) assert_true(dz_scaled[i] == 65536.0f * dz[i]);
    // Uniform logits: loss is log(m).
    float zero[20] = {0};
    assert_float_equal(softmax_ce_cpu(c.n, c.m, zero, labels, 1.0f, NULL, NULL) / c.n, logf(5.0f), 1e-5);
    free(c.z);
}

// ---- whole models ----
typedef struct { Core *core; float *params; size_t np; CoreBatch batch; } ModelCtx;

static double model_obj(void *p)
{
    ModelCtx *c = p;
    float loss = 0.0f;
    assert_int_equal(core_params_set(c->core, c->params, c->np), 0);
    assert_int_equal(core_loss_grad(c->core, &c->batch, &loss, NULL), 0);
    return loss;
}

static void check_model(const char *preset, int image_size, int width, CoreBackend backend)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = backend;
    cfg.model.image_size = image_size;
    cfg.model.width = width;
    cfg.model.mlp_hidden = 16;
    cfg.batch_size = 6;
    Core *core;
    assert_int_equal(core_create(&cfg, &core), 0);
    ModelCtx c = {.core = core, .np = core_param_count(core)};
    size_t img = (size_t)3 * image_size * image_size;
    float *images = malloc(6 * img * sizeof(float));
    int32_t labels[6];
    SynthTask task = {3, image_size, cfg.model.num_classes, 0.5f, 3};
    synth_batch(&task, 0, 6, images, labels);
    c.batch = (CoreBatch){.images = images, .labels = labels, .n = 6, .memory = CORE_MEMORY_HOST};
    c.params = malloc(c.np * sizeof(float));
    float *grad = malloc(c.np * sizeof(float));
    assert_int_equal(core_params_get(core, c.params, c.np), 0);
    float loss;
    assert_int_equal(core_loss_grad(core, &c.batch, &loss, grad), 0);
    double e = rel_error_fd_pick(model_obj, &c, c.params, c.np, grad, FD_EPS, true);
    printf("model %s on %s (%zu params): loss %.4f, rel err %.2e (tol %.0e)\n", preset,
           core_backend_name(backend), c.np, loss, e, MODEL_TOL);
    assert_true(isfinite(loss));
    assert_true(e < MODEL_TOL);
    core_free(core);
    free(images); free(c.params); free(grad);
}

// Whole models on the reference and, independently of it, on the fast CPU backend.
static void test_model_resnet_grad(void **state)
{
    (void)state;
    check_model("tiny", 8, 4, CORE_BACKEND_CPU_REF);
    check_model("tiny", 8, 4, CORE_BACKEND_CPU);
}

static void test_model_mlp_grad(void **state)
{
    (void)state;
    check_model("mlp", 6, 4, CORE_BACKEND_CPU_REF);
    check_model("mlp", 6, 4, CORE_BACKEND_CPU);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_grad),
        cmocka_unit_test(test_bn_grad),
        cmocka_unit_test(test_elementwise_grad),
        cmocka_unit_test(test_linear_grad),
        cmocka_unit_test(test_softmax_ce_grad),
        cmocka_unit_test(test_model_resnet_grad),
        cmocka_unit_test(test_model_mlp_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
