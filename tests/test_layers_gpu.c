// test_layers_gpu.c: each CUDA layer (cuDNN convolution, BN, ReLU, add, pooling, cuBLAS
// linear, softmax cross-entropy), forward and backward, against the CPU reference
// (layers_cpu.h) for every precision and both layouts. Skipped visibly without a GPU.
// Also every BN form (fused ReLU, accumulation, dx over dy, inference), repeatable bit for bit,
// and each element-wise kernel on its vector and unaligned paths, in place and out of place.
// Tolerance: relative L2 error of each output, per precision (layer_tol), times 3 for
// batch norm (its backward subtracts nearly equal sums).
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
#include "kernels/gpu_device.h"
#include "tests/support.h"
#include "kernels/layer_probe.h"
#include "kernels/layers_cpu.h"
#include "kernels/model.h"
#include "kernels/rng.h"

// Inputs rounded to the storage type (fp16: 2^-11, bf16: 2^-8 relative) or TF32 (2^-11
// in the products; fp32, PyTorch's default, allows it in cuDNN's convolutions),
// accumulated in fp32; strict fp32 differs by summation order only. Convolutions run
// deterministic cuDNN algorithms here (layer_probe.cu).
static double layer_tol(CorePrecision p)
{
    switch (p) {
    case CORE_PRECISION_FP32_STRICT: return 5e-4;
    case CORE_PRECISION_FP32: return 1e-2;
    case CORE_PRECISION_TF32: return 1e-2;
    case CORE_PRECISION_FP16: return 1e-2;
    case CORE_PRECISION_BF16: return 3e-2;
    case CORE_PRECISION_COUNT: break;
    }
    return 0.0;
}

static float *rnd(Rng *r, size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * rng_normal_float(r);
    return p;
}


static void expect_close(const char *what, const float *got, const float *want, size_t n, double tol)
{
    double e = test_rel_l2(got, want, n);
    if (e > tol) printf("  %s: rel err %.2e > tol %.1e\n", what, e, tol);
    assert_true(e <= tol);
}

static int probe_ok(int rc)
{
    if (rc != 0) printf("probe failed: %s\n", error_message());
    return rc;
}

static void check_conv(ConvShape s, CorePrecision p, CoreLayout l, CoreConvAlgo a)
{
    s.p = conv_out_size(s.h, s.r, s.stride, s.pad);
    s.q = conv_out_size(s.w, s.r, s.stride, s.pad);
    Rng r = {77};
    size_t xn = (size_t)s.n * s.c * s.h * s.w, wn = (size_t)s.k * s.c * s.r * s.r,
           yn = (size_t)s.n * s.k * s.p * s.q;
    float *x = rnd(&r, xn, 1.0f), *w = rnd(&r, wn, 0.3f), *dy = rnd(&r, yn, 1.0f);
    float *y0 = malloc(yn * 4), *dx0 = malloc(xn * 4), *dw0 = malloc(wn * 4);
    float *y1 = malloc(yn * 4), *dx1 = malloc(xn * 4), *dw1 = malloc(wn * 4);
    float *col = malloc((size_t)s.c * s.r * s.r * s.p * s.q * 4);
    conv_fwd_cpu(&s, x, w, y0, col);
    conv_bwd_data_cpu(&s, dy, w, dx0, false, col);
    conv_bwd_filter_cpu(&s, x, dy, dw0, false, col);
    assert_int_equal(probe_ok(layer_probe_conv(&s, p, l, a, x, w, dy, y1, dx1, dw1)), 0);
    double tol = layer_tol(p);
    printf("conv c%d->%d %dx%d r%d s%d %s %s %s: y %.1e dx %.1e dw %.1e (tol %.0e)\n", s.c, s.k,
           s.h, s.w, s.r, s.stride, core_precision_name(p), core_layout_name(l),
           core_conv_algo_name(a), test_rel_l2(y1, y0, yn), test_rel_l2(dx1, dx0, xn), test_rel_l2(dw1, dw0, wn), tol);
    expect_close("y", y1, y0, yn, tol);
    expect_close("dx", dx1, dx0, xn, tol);
    expect_close("dw", dw1, dw0, wn, tol);
    free(x); free(w); free(dy); free(y0); free(dx0); free(dw0); free(y1); free(dx1); free(dw1);
    free(col);
}

static void test_conv_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    ConvShape shapes[] = {
        {.n = 4, .c = 3, .h = 16, .w = 16, .k = 8, .r = 3, .stride = 1, .pad = 1},
        {.n = 4, .c = 8, .h = 16, .w = 16, .k = 16, .r = 3, .stride = 2, .pad = 1},
        {.n = 4, .c = 8, .h = 16, .w = 16, .k = 16, .r = 1, .stride = 2, .pad = 0},
        {.n = 2, .c = 3, .h = 32, .w = 32, .k = 16, .r = 7, .stride = 4, .pad = 3},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int p = 0; p < CORE_PRECISION_COUNT; p++)
            for (int l = CORE_LAYOUT_NCHW; l <= CORE_LAYOUT_NHWC; l++)
                for (int a = CORE_CONV_ALGO_HEURISTIC; a <= CORE_CONV_ALGO_AUTOTUNE; a++)
                    check_conv(shapes[i], (CorePrecision)p, (CoreLayout)l, (CoreConvAlgo)a);
}

static void test_bn_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    int n = 4, c = 6, hw = 25;
    size_t count = (size_t)n * c * hw;
    Rng r = {5};
    float *x = rnd(&r, count, 2.0f), *dy = rnd(&r, count, 1.0f), *g = rnd(&r, c, 1.0f),
          *b = rnd(&r, c, 1.0f);
    float *y0 = malloc(count * 4), *dx0 = malloc(count * 4), dg0[6], db0[6], mean[6], istd[6];
    float *y1 = malloc(count * 4), *dx1 = malloc(count * 4), dg1[6], db1[6];
    bn_fwd_train_cpu(n, c, hw, x, g, b, y0, mean, istd, NULL, NULL);
    bn_bwd_cpu(n, c, hw, x, dy, g, mean, istd, dx0, false, dg0, db0, false);
    for (int p = 0; p < CORE_PRECISION_COUNT; p++)
        for (int l = CORE_LAYOUT_NCHW; l <= CORE_LAYOUT_NHWC; l++) {
            assert_int_equal(probe_ok(layer_probe_bn(n, c, hw, (CorePrecision)p, (CoreLayout)l, x, g,
                                                     b, dy, y1, dx1, dg1, db1)), 0);
            double tol = 3 * layer_tol((CorePrecision)p);
            printf("bn %s %s: y %.1e dx %.1e dgamma %.1e dbeta %.1e (tol %.0e)\n",
                   core_precision_name((CorePrecision)p), core_layout_name((CoreLayout)l),
                   test_rel_l2(y1, y0, count), test_rel_l2(dx1, dx0, count), test_rel_l2(dg1, dg0, c),
                   test_rel_l2(db1, db0, c), tol);
            expect_close("y", y1, y0, count, tol);
            expect_close("dx", dx1, dx0, count, tol);
            expect_close("dgamma", dg1, dg0, c, tol);
            expect_close("dbeta", db1, db0, c, tol);
        }
    free(x); free(dy); free(g); free(b); free(y0); free(dx0); free(y1); free(dx1);
}

// Rounds to multiples of 1/32 in [-8, 8): at most 8 significant bits, exact in fp32, fp16 and bf16.
static void quantize(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = roundf(p[i] * 32.0f) / 32.0f;
        p[i] = v < -8.0f ? -8.0f : v > 7.96875f ? 7.96875f : v;
    }
}

// The CPU reference of one BN form: forward (ReLU'd when fused), backward with dy masked
// by the fused ReLU's output, accumulation into the given initial gradients.
static void bn_reference(int n, int c, int hw, const LayerProbeBnOptions *o, const float *x,
                         const float *g, const float *b, const float *dy, const float *dx_init,
                         const float *dg_init, const float *db_init, float *y, float *dx, float *dg,
                         float *db, float *mean, float *istd)
{
    size_t count = (size_t)n * c * hw;
    bn_fwd_train_cpu(n, c, hw, x, g, b, y, mean, istd, NULL, NULL);
    float *dm = malloc(count * sizeof *dm);
    assert_non_null(dm);
    for (size_t i = 0; i < count; i++) {
        if (o->relu && y[i] <= 0.0f) y[i] = 0.0f;
        dm[i] = o->relu && y[i] <= 0.0f ? 0.0f : dy[i];
    }
    if (o->accum) {
        memcpy(dx, dx_init, count * sizeof *dx);
        memcpy(dg, dg_init, c * sizeof *dg);
        memcpy(db, db_init, c * sizeof *db);
    }
    bn_bwd_cpu(n, c, hw, x, dm, g, mean, istd, dx, o->accum, dg, db, o->accum);
    free(dm);
}

// Every BN form (plain, fused ReLU, accumulating, dx written over dy) on shapes that take
// each path of the kernels: C not a multiple of the vector width (scalar NHWC), planes not
// 16-byte aligned (NCHW heads and tails), several splits per channel (N*HW >= 2 x 8192, the
// fixed-order merge of partials) and more than one NHWC channel tile (C = 96). Tolerance:
// relative L2 within 3 x layer_tol (as test_bn_matches_cpu); results repeat bit for bit;
// dx in place equals dx out of place bit for bit.
static void test_bn_forms_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const int shapes[][3] = {{4, 6, 25}, {8, 64, 49}, {32, 16, 784}, {16, 96, 1024}};
    const LayerProbeBnOptions forms[] = {
        {false, false, false}, {true, false, false}, {false, true, false}, {true, true, false},
        {false, false, true}, {true, false, true}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int n = shapes[si][0], c = shapes[si][1], hw = shapes[si][2];
        size_t count = (size_t)n * c * hw;
        Rng r = {40 + si};
        float *x = rnd(&r, count, 2.0f), *dy = rnd(&r, count, 1.0f), *dxi = rnd(&r, count, 1.0f);
        float *g = rnd(&r, c, 1.0f), *b = rnd(&r, c, 1.0f), *dgi = rnd(&r, c, 1.0f), *dbi = rnd(&r, c, 1.0f);
        for (size_t i = 0; i < count; i++) x[i] += 3.0f;  // a mean far from 0: one-pass E[x^2] would lose digits
        // inputs exact in every storage type, so the fused ReLU's mask (on y rounded to the
        // storage type) matches the reference's: otherwise elements near y = 0 flip with
        // the input rounding and dgamma/dbeta (sums with cancellation) drift with the size
        float *inputs[] = {x, dy, dxi, g, b, dgi, dbi};
        size_t sizes[] = {count, count, count, (size_t)c, (size_t)c, (size_t)c, (size_t)c};
        for (int k = 0; k < 7; k++) quantize(inputs[k], sizes[k]);
        float *y0 = malloc(count * 4), *dx0 = malloc(count * 4), *y1 = malloc(count * 4),
              *dx1 = malloc(count * 4), *dx_out = malloc(count * 4);
        float *small = malloc(10 * (size_t)c * 4);
        float *dg0 = small, *db0 = small + c, *m0 = small + 2 * c, *s0 = small + 3 * c, *dg1 = small + 4 * c,
              *db1 = small + 5 * c, *m1 = small + 6 * c, *s1 = small + 7 * c;
        for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
            const LayerProbeBnOptions *o = &forms[f];
            bn_reference(n, c, hw, o, x, g, b, dy, dxi, dgi, dbi, y0, dx0, dg0, db0, m0, s0);
            for (int p = 0; p < CORE_PRECISION_COUNT; p++)
                for (int l = CORE_LAYOUT_NCHW; l <= CORE_LAYOUT_NHWC; l++) {
                    bool repeatable = false;
                    assert_int_equal(probe_ok(layer_probe_bn_ex(n, c, hw, (CorePrecision)p, (CoreLayout)l, o, x, g,
                                                                b, dy, dxi, dgi, dbi, y1, dx1, dg1, db1, m1, s1,
                                                                &repeatable)), 0);
                    double tol = 3 * layer_tol((CorePrecision)p);
                    printf("bn n%d c%d hw%d relu %d accum %d in_place %d %s %s: y %.1e dx %.1e dgamma %.1e "
                           "dbeta %.1e mean %.1e invstd %.1e repeatable %d (tol %.0e)\n", n, c, hw, o->relu,
                           o->accum, o->in_place, core_precision_name((CorePrecision)p),
                           core_layout_name((CoreLayout)l), test_rel_l2(y1, y0, count), test_rel_l2(dx1, dx0, count),
                           test_rel_l2(dg1, dg0, c), test_rel_l2(db1, db0, c), test_rel_l2(m1, m0, c), test_rel_l2(s1, s0, c),
                           repeatable, tol);
                    expect_close("y", y1, y0, count, tol);
                    expect_close("dx", dx1, dx0, count, tol);
                    expect_close("dgamma", dg1, dg0, c, tol);
                    expect_close("dbeta", db1, db0, c, tol);
                    expect_close("mean", m1, m0, c, tol);
                    expect_close("invstd", s1, s0, c, tol);
                    assert_true(repeatable);
                    if (!o->in_place) continue;
                    // the same form out of place: dx identical
                    LayerProbeBnOptions out_of_place = *o;
                    out_of_place.in_place = false;
                    assert_int_equal(probe_ok(layer_probe_bn_ex(n, c, hw, (CorePrecision)p, (CoreLayout)l,
                                                                &out_of_place, x, g, b, dy, dxi, dgi, dbi, y1,
                                                                dx_out, dg1, db1, m1, s1, &repeatable)), 0);
                    assert_memory_equal(dx_out, dx1, count * sizeof(float));
                }
        }
        free(x); free(dy); free(dxi); free(g); free(b); free(dgi); free(dbi);
        free(y0); free(dx0); free(y1); free(dx1); free(dx_out); free(small);
    }
}

static void test_bn_infer_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const int shapes[][3] = {{4, 6, 25}, {8, 64, 49}, {3, 96, 784}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int n = shapes[si][0], c = shapes[si][1], hw = shapes[si][2];
        size_t count = (size_t)n * c * hw;
        Rng r = {60 + si};
        float *x = rnd(&r, count, 2.0f), *g = rnd(&r, c, 1.0f), *b = rnd(&r, c, 1.0f), *m = rnd(&r, c, 1.0f),
              *v = rnd(&r, c, 1.0f), *y0 = malloc(count * 4), *y1 = malloc(count * 4);
        for (int i = 0; i < c; i++) v[i] = v[i] * v[i] + 0.1f;
        for (int relu = 0; relu < 2; relu++) {
            bn_fwd_infer_cpu(n, c, hw, x, g, b, m, v, y0);
            if (relu) relu_fwd_cpu(count, y0, y0);
            for (int p = 0; p < CORE_PRECISION_COUNT; p++)
                for (int l = CORE_LAYOUT_NCHW; l <= CORE_LAYOUT_NHWC; l++) {
                    assert_int_equal(probe_ok(layer_probe_bn_infer(n, c, hw, (CorePrecision)p, (CoreLayout)l,
                                                                   relu, x, g, b, m, v, y1)), 0);
                    double tol = layer_tol((CorePrecision)p);
                    printf("bn infer n%d c%d hw%d relu %d %s %s: y %.1e (tol %.0e)\n", n, c, hw, relu,
                           core_precision_name((CorePrecision)p), core_layout_name((CoreLayout)l),
                           test_rel_l2(y1, y0, count), tol);
                    expect_close("y", y1, y0, count, tol);
                }
        }
        free(x); free(g); free(b); free(m); free(v); free(y0); free(y1);
    }
}

// Each element-wise kernel against the CPU reference, on counts that leave a tail after the
// 16-byte vectors, at offsets that take the vector path (0) and the unaligned scalar path
// (1, 3 elements); in place equals out of place bit for bit.
static void test_elementwise_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    static const char *names[PROBE_EW_COUNT] = {"relu", "relu_bwd", "relu_bwd_accum", "add", "add_relu",
                                                "copy_grad", "copy_grad_accum", "cast"};
    const size_t counts[] = {1, 13, 4096 + 13, 300007};
    const int offsets[] = {0, 1, 3};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t count = counts[ci];
        Rng r = {70 + ci};
        float *a = rnd(&r, count, 1.0f), *b = rnd(&r, count, 1.0f), *init = rnd(&r, count, 1.0f);
        float *want = malloc(count * 4), *got = malloc(count * 4), *got_ip = malloc(count * 4);
        for (int op = 0; op < PROBE_EW_COUNT; op++) {
            switch ((LayerProbeEw)op) {
            case PROBE_EW_RELU: relu_fwd_cpu(count, a, want); break;
            case PROBE_EW_RELU_BWD: relu_bwd_cpu(count, a, b, want, false); break;
            case PROBE_EW_RELU_BWD_ACCUM: memcpy(want, init, count * 4); relu_bwd_cpu(count, a, b, want, true); break;
            case PROBE_EW_ADD: add_fwd_cpu(count, a, b, want); break;
            case PROBE_EW_ADD_RELU: add_fwd_cpu(count, a, b, want); relu_fwd_cpu(count, want, want); break;
            case PROBE_EW_COPY_GRAD: copy_grad_cpu(count, a, want, false); break;
            case PROBE_EW_COPY_GRAD_ACCUM: memcpy(want, init, count * 4); copy_grad_cpu(count, a, want, true); break;
            case PROBE_EW_CAST: memcpy(want, a, count * 4); break;
            case PROBE_EW_COUNT: break;
            }
            bool in_place = op != PROBE_EW_RELU_BWD_ACCUM && op != PROBE_EW_COPY_GRAD_ACCUM && op != PROBE_EW_CAST;
            for (int p = 0; p < CORE_PRECISION_COUNT; p++)
                for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++) {
                    assert_int_equal(probe_ok(layer_probe_elementwise((LayerProbeEw)op, count, offsets[oi],
                                                                      (CorePrecision)p, a, b, init, got,
                                                                      in_place ? got_ip : NULL)), 0);
                    double tol = layer_tol((CorePrecision)p);
                    double e = test_rel_l2(got, want, count);
                    if (e > tol)
                        printf("%s count %zu offset %d %s: rel err %.1e > tol %.0e\n", names[op], count,
                               offsets[oi], core_precision_name((CorePrecision)p), e, tol);
                    expect_close(names[op], got, want, count, tol);
                    if (in_place) assert_memory_equal(got_ip, got, count * sizeof(float));
                }
        }
        printf("element-wise kernels, %zu elements: every op, precision and offset within tolerance\n", count);
        free(a); free(b); free(init); free(want); free(got); free(got_ip);
    }
}

static void test_pointwise_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    int n = 3, c = 5, hw = 49;
    size_t count = (size_t)n * c * hw;
    Rng r = {6};
    float *x = rnd(&r, count, 1.0f), *x2 = rnd(&r, count, 1.0f), *dy = rnd(&r, count, 1.0f),
          *dp = rnd(&r, (size_t)n * c, 1.0f);
    float *y0 = malloc(count * 4), *dx0 = malloc(count * 4), *s0 = malloc(count * 4),
          *p0 = malloc(n * c * 4), *dpo0 = malloc(count * 4);
    float *y1 = malloc(count * 4), *dx1 = malloc(count * 4), *s1 = malloc(count * 4),
          *p1 = malloc(n * c * 4), *dpo1 = malloc(count * 4);
    relu_fwd_cpu(count, x, y0);
    relu_bwd_cpu(count, y0, dy, dx0, false);
    add_fwd_cpu(count, x, x2, s0);
    gap_fwd_cpu(n, c, hw, x, p0);
    gap_bwd_cpu(n, c, hw, dp, dpo0, false);
    for (int p = 0; p < CORE_PRECISION_COUNT; p++)
        for (int l = CORE_LAYOUT_NCHW; l <= CORE_LAYOUT_NHWC; l++) {
            assert_int_equal(probe_ok(layer_probe_pointwise(n, c, hw, (CorePrecision)p, (CoreLayout)l,
                                                            x, x2, dy, dp, y1, dx1, s1, p1, dpo1)), 0);
            double tol = layer_tol((CorePrecision)p);
            printf("relu/add/gap %s %s: %.1e %.1e %.1e %.1e %.1e (tol %.0e)\n",
                   core_precision_name((CorePrecision)p), core_layout_name((CoreLayout)l),
                   test_rel_l2(y1, y0, count), test_rel_l2(dx1, dx0, count), test_rel_l2(s1, s0, count),
                   test_rel_l2(p1, p0, n * c), test_rel_l2(dpo1, dpo0, count), tol);
            expect_close("relu", y1, y0, count, tol);
            expect_close("relu'", dx1, dx0, count, tol);
            expect_close("add", s1, s0, count, tol);
            expect_close("gap", p1, p0, (size_t)n * c, tol);
            expect_close("gap'", dpo1, dpo0, count, tol);
        }
    free(x); free(x2); free(dy); free(dp); free(y0); free(dx0); free(s0); free(p0); free(dpo0);
    free(y1); free(dx1); free(s1); free(p1); free(dpo1);
}

static void test_linear_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    int n = 16, k = 64, m = 10;
    Rng r = {8};
    float *x = rnd(&r, (size_t)n * k, 1.0f), *w = rnd(&r, (size_t)m * k, 0.2f), *b = rnd(&r, m, 1.0f),
          *dy = rnd(&r, (size_t)n * m, 1.0f);
    float *y0 = malloc(n * m * 4), *dx0 = malloc(n * k * 4), *dw0 = malloc(m * k * 4), db0[10];
    float *y1 = malloc(n * m * 4), *dx1 = malloc(n * k * 4), *dw1 = malloc(m * k * 4), db1[10];
    linear_fwd_cpu(n, k, m, x, w, b, y0);
    linear_bwd_cpu(n, k, m, x, w, dy, dx0, false, dw0, db0, false);
    for (int p = 0; p < CORE_PRECISION_COUNT; p++) {
        assert_int_equal(probe_ok(layer_probe_linear(n, k, m, (CorePrecision)p, x, w, b, dy, y1, dx1,
                                                     dw1, db1)), 0);
        double tol = layer_tol((CorePrecision)p);
        printf("linear %s: y %.1e dx %.1e dw %.1e db %.1e (tol %.0e)\n",
               core_precision_name((CorePrecision)p), test_rel_l2(y1, y0, n * m), test_rel_l2(dx1, dx0, n * k),
               test_rel_l2(dw1, dw0, m * k), test_rel_l2(db1, db0, m), tol);
        expect_close("y", y1, y0, (size_t)n * m, tol);
        expect_close("dx", dx1, dx0, (size_t)n * k, tol);
        expect_close("dw", dw1, dw0, (size_t)m * k, tol);
        expect_close("db", db1, db0, m, tol);
    }
    free(x); free(w); free(b); free(dy); free(y0); free(dx0); free(dw0); free(y1); free(dx1); free(dw1);
}

static void test_softmax_ce_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    int n = 32, m = 1000;  // ImageNet-sized rows: more classes than threads per block
    Rng r = {9};
    float *z = rnd(&r, (size_t)n * m, 3.0f), *dz0 = malloc((size_t)n * m * 4),
          *dz1 = malloc((size_t)n * m * 4);
    int32_t labels[32];
    for (int i = 0; i < n; i++) labels[i] = (int32_t)(rng_next(&r) % m);
    labels[0] = 0;
    for (int j = 0; j < m; j++) z[j] = j == 0 ? 50.0f : z[j];  // sample 0 is right
    int c0 = 0, c1 = -1;
    float loss0 = (float)(softmax_ce_cpu(n, m, z, labels, 1.0f, dz0, &c0) / n), loss1 = NAN;
    for (int p = 0; p < CORE_PRECISION_COUNT; p++) {
        assert_int_equal(probe_ok(layer_probe_softmax_ce(n, m, (CorePrecision)p, z, labels, &loss1,
                                                         &c1, dz1)), 0);
        double tol = layer_tol((CorePrecision)p);
        printf("softmax_ce %s: loss %.5f vs %.5f, correct %d vs %d, dz %.1e (tol %.0e)\n",
               core_precision_name((CorePrecision)p), loss1, loss0, c1, c0,
               test_rel_l2(dz1, dz0, (size_t)n * m), tol);
        assert_true(fabs((double)loss1 - loss0) <= tol * fabs((double)loss0) + 1e-6);
        assert_true(c1 >= 1);
        if (p != CORE_PRECISION_BF16) assert_int_equal(c1, c0);  // bf16 rounding may tie logits
        expect_close("dz", dz1, dz0, (size_t)n * m, tol);
    }
    free(z); free(dz0); free(dz1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_matches_cpu),
        cmocka_unit_test(test_bn_matches_cpu),
        cmocka_unit_test(test_bn_forms_match_cpu),
        cmocka_unit_test(test_bn_infer_matches_cpu),
        cmocka_unit_test(test_elementwise_matches_cpu),
        cmocka_unit_test(test_pointwise_matches_cpu),
        cmocka_unit_test(test_linear_matches_cpu),
        cmocka_unit_test(test_softmax_ce_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
