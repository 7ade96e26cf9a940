// Host-emulated run of kernels/cuda/layers_cuda*.cu against the CPU reference.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "cuda_emul.h"
#include "kernels/layers_cuda.cuh"
#include "kernels/layers_cpu.h"

static int failures = 0;
static double rel_l2(const float *g, const float *w, size_t n)
{
    double a = 0, b = 0;
    for (size_t i = 0; i < n; i++) { double d = (double)g[i] - w[i]; a += d * d; b += (double)w[i] * w[i]; }
    return b > 0 ? sqrt(a / b) : sqrt(a);
}
static unsigned long long rs = 88172645463325252ull;
static float rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f; }
static std::vector<float> rv(size_t n, float sc, float sh = 0) { std::vector<float> v(n); for (auto &x : v) x = sc * rnd() + sh; return v; }
static void check(const char *what, const float *g, const float *w, size_t n, double tol, const char *ctx)
{
    double e = rel_l2(g, w, n);
    if (!(e <= tol)) { printf("FAIL %s %s: %.3e > %.1e\n", ctx, what, e, tol); failures++; }
}
static size_t es(DType d) { return d == DT_F32 ? 4 : 2; }
static const char *dn(DType d) { return d == DT_F32 ? "fp32" : d == DT_F16 ? "fp16" : "bf16"; }
static double tol_of(DType d) { return d == DT_F32 ? 1e-5 : d == DT_F16 ? 2e-3 : 1.5e-2; }

struct Dev {  // a tensor of type dt in layout g (host memory)
    std::vector<char> b;
    Dev(size_t n, DType dt) : b(n * es(dt) + 64) {}
    void *p(int off = 0, DType dt = DT_F32) { return b.data() + 16 + off * es(dt); }
};

static void put(const std::vector<float> &h, void *dst, DType dt, ChanGeom g) { cuda_convert_input(h.data(), dst, dt, g, 0); }
static std::vector<float> get(const void *src, DType dt, ChanGeom g)
{
    std::vector<float> h((size_t)g.n * g.c * g.hw);
    cuda_convert_output(src, h.data(), dt, g, 0);
    return h;
}

static void bn_case(int n, int c, int hw)
{
    size_t cnt = (size_t)n * c * hw;
    auto x = rv(cnt, 2.0f, 3.0f), dy = rv(cnt, 1.0f), dxi = rv(cnt, 1.0f), ga = rv(c, 1.0f), be = rv(c, 1.0f),
         dgi = rv(c, 1.0f), dbi = rv(c, 1.0f);
    for (auto *v : {&x, &dy, &dxi, &ga, &be, &dgi, &dbi})  // exact in every storage type (as the GPU test)
        for (auto &e : *v) e = roundf(e * 32.0f) / 32.0f;
    for (int relu = 0; relu < 2; relu++)
        for (int accum = 0; accum < 2; accum++) {
            // reference
            std::vector<float> y0(cnt), m0(c), s0(c), dx0 = dxi, dg0 = dgi, db0 = dbi, dm(cnt);
            bn_fwd_train_cpu(n, c, hw, x.data(), ga.data(), be.data(), y0.data(), m0.data(), s0.data(), NULL, NULL);
            for (size_t i = 0; i < cnt; i++) {
                if (relu && y0[i] <= 0) y0[i] = 0;
                dm[i] = relu && y0[i] <= 0 ? 0 : dy[i];
            }
            bn_bwd_cpu(n, c, hw, x.data(), dm.data(), ga.data(), m0.data(), s0.data(), dx0.data(), accum, dg0.data(),
                       db0.data(), accum);
            for (int d = 0; d < 3; d++)
                for (int nhwc = 0; nhwc < 2; nhwc++) {
                    DType dt = (DType)d;
                    ChanGeom g = {n, c, hw, nhwc != 0};
                    char ctx[160];
                    snprintf(ctx, sizeof ctx, "bn n%d c%d hw%d relu%d accum%d %s %s", n, c, hw, relu, accum, dn(dt),
                             nhwc ? "nhwc" : "nchw");
                    std::vector<float> prev_y, prev_dx;
                    for (int run = 0; run < 2; run++) {
                        Dev X(cnt, dt), Y(cnt, dt), DY(cnt, dt), DX(cnt, dt);
                        put(x, X.p(), dt, g);
                        put(dy, DY.p(), dt, g);
                        if (accum) put(dxi, DX.p(), dt, g);
                        std::vector<float> mean(c), istd(c), rm(c, 0.0f), rvv(c, 1.0f), dg = dgi, db = dbi;
                        std::vector<float> scratch(cuda_bn_scratch_floats(g));
                        int rc = relu ? cuda_bn_relu_fwd_train(X.p(), Y.p(), dt, g, ga.data(), be.data(), mean.data(),
                                                               istd.data(), rm.data(), rvv.data(), scratch.data(), 0)
                                      : cuda_bn_fwd_train(X.p(), Y.p(), dt, g, ga.data(), be.data(), mean.data(),
                                                          istd.data(), rm.data(), rvv.data(), scratch.data(), 0);
                        // in place (dx over dy) on the second run when not accumulating
                        bool in_place = run == 1 && !accum;
                        void *dxt = in_place ? DY.p() : DX.p();
                        rc |= relu ? cuda_bn_relu_bwd(X.p(), Y.p(), DY.p(), dxt, accum, dt, g, ga.data(), mean.data(),
                                                      istd.data(), dg.data(), db.data(), accum, scratch.data(), 0)
                                   : cuda_bn_bwd(X.p(), DY.p(), dxt, accum, dt, g, ga.data(), mean.data(), istd.data(),
                                                 dg.data(), db.data(), accum, scratch.data(), 0);
                        if (rc) { printf("FAIL %s: rc\n", ctx); failures++; }
                        auto y1 = get(Y.p(), dt, g), dx1 = get(dxt, dt, g);
                        double tol = 3 * tol_of(dt) + 1e-4;
                        check("y", y1.data(), y0.data(), cnt, tol, ctx);
                        check("dx", dx1.data(), dx0.data(), cnt, tol, ctx);
                        check("dgamma", dg.data(), dg0.data(), c, tol, ctx);
                        check("dbeta", db.data(), db0.data(), c, tol, ctx);
                        check("mean", mean.data(), m0.data(), c, 1e-5, ctx);
                        check("invstd", istd.data(), s0.data(), c, 1e-5, ctx);
                        if (run == 1 && (memcmp(prev_y.data(), y1.data(), cnt * 4) || memcmp(prev_dx.data(), dx1.data(), cnt * 4))) {
                            printf("FAIL %s: second run (in place %d) differs\n", ctx, in_place);
                            failures++;
                        }
                        prev_y = y1;
                        prev_dx = dx1;
                        // inference
                        if (run == 0 && !accum) {
                            std::vector<float> rmean = rv(c, 1.0f), rvar = rv(c, 0.5f, 1.0f), yi0(cnt);
                            bn_fwd_infer_cpu(n, c, hw, x.data(), ga.data(), be.data(), rmean.data(), rvar.data(), yi0.data());
                            if (relu) relu_fwd_cpu(cnt, yi0.data(), yi0.data());
                            (relu ? cuda_bn_relu_fwd_infer : cuda_bn_fwd_infer)(X.p(), Y.p(), dt, g, ga.data(), be.data(),
                                                                                rmean.data(), rvar.data(), 0);
                            auto yi1 = get(Y.p(), dt, g);
                            check("infer y", yi1.data(), yi0.data(), cnt, tol_of(dt) + 1e-6, ctx);
                        }
                    }
                }
        }
    printf("bn n%d c%d hw%d done (failures so far %d)\n", n, c, hw, failures);
    fflush(stdout);
}

static void ew_case(size_t cnt, int off)
{
    auto a = rv(cnt, 1.0f), b = rv(cnt, 1.0f), init = rv(cnt, 1.0f);
    ChanGeom g = {1, (int)cnt, 1, false};
    for (int d = 0; d < 3; d++) {
        DType dt = (DType)d;
        for (int op = 0; op < 8; op++) {
            std::vector<float> want(cnt);
            switch (op) {
            case 0: relu_fwd_cpu(cnt, a.data(), want.data()); break;
            case 1: relu_bwd_cpu(cnt, a.data(), b.data(), want.data(), false); break;
            case 2: want = init; relu_bwd_cpu(cnt, a.data(), b.data(), want.data(), true); break;
            case 3: add_fwd_cpu(cnt, a.data(), b.data(), want.data()); break;
            case 4: add_fwd_cpu(cnt, a.data(), b.data(), want.data()); relu_fwd_cpu(cnt, want.data(), want.data()); break;
            case 5: want = a; break;
            case 6: want = init; copy_grad_cpu(cnt, a.data(), want.data(), true); break;
            case 7: want = a; break;
            }
            Dev A(cnt, dt), B(cnt, dt), Y(cnt, dt);
            std::vector<char> af((cnt + off) * 4 + 64);
            float *a32 = (float *)(af.data() + 16) + off;
            memcpy(a32, a.data(), cnt * 4);
            put(a, A.p(off, dt), dt, g);
            put(b, B.p(off, dt), dt, g);
            put(init, Y.p(off, dt), dt, g);
            void *ap = A.p(off, dt), *bp = B.p(off, dt), *yp = Y.p(off, dt);
            switch (op) {
            case 0: cuda_relu_fwd(ap, yp, dt, cnt, 0); break;
            case 1: cuda_relu_bwd(ap, bp, yp, false, dt, cnt, 0); break;
            case 2: cuda_relu_bwd(ap, bp, yp, true, dt, cnt, 0); break;
            case 3: cuda_add_fwd(ap, bp, yp, dt, cnt, 0); break;
            case 4: cuda_add_relu_fwd(ap, bp, yp, dt, cnt, 0); break;
            case 5: cuda_copy_grad(ap, yp, false, dt, cnt, 0); break;
            case 6: cuda_copy_grad(ap, yp, true, dt, cnt, 0); break;
            case 7: cuda_cast(a32, yp, dt, cnt, 0); break;
            }
            auto got = get(yp, dt, g);
            char ctx[100];
            snprintf(ctx, sizeof ctx, "ew op%d n%zu off%d %s", op, cnt, off, dn(dt));
            check("y", got.data(), want.data(), cnt, tol_of(dt) + 1e-7, ctx);
            if (op == 0 || op == 3 || op == 4 || op == 1) {  // in place over a (relu_bwd: over dy)
                void *t = op == 1 ? bp : ap;
                switch (op) {
                case 0: cuda_relu_fwd(ap, ap, dt, cnt, 0); break;
                case 1: cuda_relu_bwd(ap, bp, bp, false, dt, cnt, 0); break;
                case 3: cuda_add_fwd(ap, bp, ap, dt, cnt, 0); break;
                case 4: cuda_add_relu_fwd(ap, bp, ap, dt, cnt, 0); break;
                }
                auto ip = get(t, dt, g);
                if (memcmp(ip.data(), got.data(), cnt * 4)) { printf("FAIL %s: in place differs\n", ctx); failures++; }
            }
        }
    }
}

int main(int argc, char **argv)
{
    int which = argc > 1 ? atoi(argv[1]) : -1;
    if (which < 0 || which == 0) {
        for (size_t cnt : {1ul, 13ul, 4109ul, 30007ul})
            for (int off : {0, 1, 3}) ew_case(cnt, off);
        printf("elementwise done (failures %d)\n", failures);
        // bias add and NHWC conversions round trip
        int n = 5, m = 37;
        auto y = rv((size_t)n * m, 1.0f), bb = rv(m, 1.0f);
        for (int d = 0; d < 3; d++) {
            DType dt = (DType)d;
            ChanGeom g = {n, m, 1, false};
            Dev Y((size_t)n * m, dt);
            put(y, Y.p(), dt, g);
            cuda_bias_add(Y.p(), bb.data(), dt, n, m, 0);
            auto got = get(Y.p(), dt, g);
            std::vector<float> want = y;
            for (int i = 0; i < n; i++) for (int j = 0; j < m; j++) want[(size_t)i * m + j] += bb[j];
            check("bias", got.data(), want.data(), want.size(), tol_of(dt) + 1e-7, dn(dt));
            ChanGeom g2 = {3, 7, 11, true};
            auto v = rv(231, 1.0f);
            Dev V(231, dt);
            put(v, V.p(), dt, g2);
            auto back = get(V.p(), dt, g2);
            check("nhwc round trip", back.data(), v.data(), 231, tol_of(dt), dn(dt));
            // NHWC order: element (n=1, c=2, hw=3) sits at ((1 * 11 + 3) * 7 + 2)
            float direct;
            std::vector<float> tmp(231);
            ChanGeom flat = {1, 231, 1, false};
            cuda_convert_output(V.p(), tmp.data(), dt, flat, 0);
            direct = tmp[(1 * 11 + 3) * 7 + 2];
            if (fabsf(direct - v[(1 * 7 + 2) * 11 + 3]) > 1e-2f) { printf("FAIL nhwc index\n"); failures++; }
        }
    }
    if (which < 0 || which == 1) { bn_case(4, 6, 25); bn_case(8, 64, 49); }
    if (which < 0 || which == 2) bn_case(32, 16, 784);
    if (which < 0 || which == 3) bn_case(8, 96, 1024);
    printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
    return failures != 0;
}
