// test_layers_gpt.c: the transformer layers of layers_gpt.h. The reference (*_cpu) against
// central finite differences, the fused attention against the unfused one, and the fast
// backend (*_fast) against the reference on 1 and 3 threads (accumulating or not, in place
// where the contract allows it), its backward bit for bit the same from call to call.
//
// Tolerances:
// - FD_TOL, finite differences: relative L2 error of every entry's central difference (in
//   double around the fp32 forward, step FD_EPS) against the analytic gradient. The
//   objective L = sum(y * r) is a sum of ~100 fp32 terms of order 1, so its rounding
//   (~1e-6) over a step of 2e-2 gives ~5e-5 per entry; the truncation error is
//   ~eps^2 f''' ~ 1e-5. Measured 4e-7 (embeddings, linear) to 2e-5 (LayerNorm dx),
//   asserted with 10x headroom; a missing term in a backward moves entries by 10-100%.
// - FAST_TOL and FUSED_TOL: relative L2 error, ||a - b|| / ||b||: the same sums in a different
//   order (BLAS blocking, float row sums against double, per-task partials, an online
//   softmax against a two-pass one), i.e. fp32 rounding, ~sqrt(terms) * 2^-24 ~ 1e-7
//   (measured up to 5e-7).
// The largest errors measured are printed (see the test's output).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/layers_cpu_fast.h"
#include "kernels/layers_gpt.h"
#include "kernels/rng.h"
#include "tests/support.h"

#define FD_EPS 1e-2f
#define FD_TOL 2e-4
#define FAST_TOL 1e-5
#define FUSED_TOL 1e-5
#define PROB_TOL 1e-5   // |sum_j p_ij - 1| and |lse - log sum exp s| (absolute)

static float *zeros(size_t n)
{
    float *p = calloc(n, sizeof *p);
    assert_non_null(p);
    return p;
}

static double dot_double(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// The largest relative L2 error seen by check_close, per kind, for the summary line.
static double max_fast_err, max_fused_err;

static void check_close(const char *what, const float *got, const float *want, size_t n,
                        double tol, double *max_seen)
{
    double e = test_rel_l2(got, want, n);
    if (e > *max_seen) *max_seen = e;
    if (!(e <= tol)) fail_msg("%s: relative L2 error %.3g > %.3g", what, e, tol);
}

// ---- (a) finite differences of the reference ---------------------------------------------

// The small case of the gradient checks, and every array its objectives read.
typedef struct Fd {
    int n, t, c, heads, vocab;
    int32_t *tok;
    float *wte, *wpe, *x, *gamma, *beta, *qkv, *y, *p, *lse, *r;
} Fd;

typedef double (*LossFn)(const Fd *f);  // L = sum(y * r) after one forward

static double loss_embed(const Fd *f)
{
    embed_fwd_cpu(f->n, f->t, f->c, f->tok, f->wte, f->wpe, f->y);
    return dot_double(f->y, f->r, (size_t)f->n * f->t * f->c);
}

static double loss_layernorm(const Fd *f)
{
    layernorm_fwd_cpu(f->n * f->t, f->c, f->x, f->gamma, f->beta, f->y);
    return dot_double(f->y, f->r, (size_t)f->n * f->t * f->c);
}

static double loss_gelu(const Fd *f)
{
    gelu_fwd_cpu((size_t)f->n * f->t * f->c, f->x, f->y);
    return dot_double(f->y, f->r, (size_t)f->n * f->t * f->c);
}

static double loss_attn_unfused(const Fd *f)
{
    attn_fwd_unfused_cpu(f->n, f->t, f->c, f->heads, f->qkv, f->p, f->y);
    return dot_double(f->y, f->r, (size_t)f->n * f->t * f->c);
}

static double loss_attn_fused(const Fd *f)
{
    attn_fwd_fused_cpu(f->n, f->t, f->c, f->heads, f->qkv, f->lse, f->y);
    return dot_double(f->y, f->r, (size_t)f->n * f->t * f->c);
}

// Relative L2 error of grad (n entries of var) against central differences of loss. The
// step is the one float rounding actually took, (x + eps) - (x - eps), not 2 eps.
static double fd_error(const char *what, LossFn loss, const Fd *f, float *var, size_t n,
                       const float *grad)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        float keep = var[i];
        var[i] = keep + FD_EPS;
        float hi = var[i];
        double lp = loss(f);
        var[i] = keep - FD_EPS;
        float lo = var[i];
        double lm = loss(f);
        var[i] = keep;
        double fd = (lp - lm) / ((double)hi - lo);
        num += (fd - grad[i]) * (fd - grad[i]);
        den += fd * fd;
    }
    double e = den > 0.0 ? sqrt(num / den) : sqrt(num);
    printf("  fd %-22s rel L2 %.2e\n", what, e);
    if (!(e <= FD_TOL)) fail_msg("%s: finite-difference error %.3g > %.3g", what, e, FD_TOL);
    return e;
}

static void test_reference_gradients(void **state)
{
    (void)state;
    Rng rng = rng_make(1, 2, 3);
    Fd f = {.n = 2, .t = 5, .c = 8, .heads = 2, .vocab = 7};
    size_t rows = (size_t)f.n * f.t, act = rows * f.c, qkvn = act * 3;
    f.tok = malloc(rows * sizeof *f.tok);
    assert_non_null(f.tok);
    for (size_t i = 0; i < rows; i++) f.tok[i] = (int32_t)rng_below(&rng, f.vocab);
    f.tok[1] = f.tok[0];  // a token seen twice: its gradient rows add
    f.wte = test_random_floats(&rng, (size_t)f.vocab * f.c, 1.0f);
    f.wpe = test_random_floats(&rng, (size_t)f.t * f.c, 1.0f);
    f.x = test_random_floats(&rng, act, 1.0f);
    f.gamma = test_random_floats(&rng, f.c, 1.0f);
    f.beta = test_random_floats(&rng, f.c, 1.0f);
    f.qkv = test_random_floats(&rng, qkvn, 1.0f);
    f.r = test_random_floats(&rng, act, 1.0f);
    f.y = zeros(act);
    f.p = zeros((size_t)f.n * f.heads * f.t * f.t);
    f.lse = zeros((size_t)f.n * f.heads * f.t);
    float *g1 = zeros(qkvn), *g2 = zeros(qkvn), *g3 = zeros(qkvn);

    // Embeddings: dwte, dwpe.
    float *dwte = zeros((size_t)f.vocab * f.c), *dwpe = zeros((size_t)f.t * f.c);
    embed_bwd_cpu(f.n, f.t, f.c, f.vocab, f.tok, f.r, dwte, dwpe, false);
    fd_error("embed dwte", loss_embed, &f, f.wte, (size_t)f.vocab * f.c, dwte);
    fd_error("embed dwpe", loss_embed, &f, f.wpe, (size_t)f.t * f.c, dwpe);

    // LayerNorm: dx, dgamma, dbeta.
    layernorm_bwd_cpu((int)rows, f.c, f.x, f.r, f.gamma, g1, false, g2, g3, false);
    fd_error("layernorm dx", loss_layernorm, &f, f.x, act, g1);
    fd_error("layernorm dgamma", loss_layernorm, &f, f.gamma, f.c, g2);
    fd_error("layernorm dbeta", loss_layernorm, &f, f.beta, f.c, g3);

    // GELU: dx.
    gelu_bwd_cpu(act, f.x, f.r, g1, false);
    fd_error("gelu dx", loss_gelu, &f, f.x, act, g1);

    // Attention, both forms: dqkv.
    attn_fwd_unfused_cpu(f.n, f.t, f.c, f.heads, f.qkv, f.p, f.y);
    attn_bwd_unfused_cpu(f.n, f.t, f.c, f.heads, f.qkv, f.p, f.r, g1, false);
    fd_error("attn unfused dqkv", loss_attn_unfused, &f, f.qkv, qkvn, g1);
    attn_fwd_fused_cpu(f.n, f.t, f.c, f.heads, f.qkv, f.lse, f.y);
    attn_bwd_fused_cpu(f.n, f.t, f.c, f.heads, f.qkv, f.y, f.lse, f.r, g2, false);
    fd_error("attn fused dqkv", loss_attn_fused, &f, f.qkv, qkvn, g2);

    free(g1), free(g2), free(g3), free(dwte), free(dwpe);
    free(f.tok), free(f.wte), free(f.wpe), free(f.x), free(f.gamma), free(f.beta);
    free(f.qkv), free(f.r), free(f.y), free(f.p), free(f.lse);
}

// accum adds exactly what a call without it writes; dx == dy in place gives the same bits.
static void test_reference_accum_and_in_place(void **state)
{
    (void)state;
    Rng rng = rng_make(4, 5, 6);
    int rows = 12, c = 16;
    size_t act = (size_t)rows * c;
    float *x = test_random_floats(&rng, act, 1.0f), *dy = test_random_floats(&rng, act, 1.0f);
    float *gamma = test_random_floats(&rng, c, 1.0f), *base = test_random_floats(&rng, act, 1.0f);
    float *dx = zeros(act), *dg = zeros(c), *db = zeros(c);
    float *acc = test_copy_floats(base, act), *dga = test_copy_floats(base, c), *dba = test_copy_floats(base + c, c);
    layernorm_bwd_cpu(rows, c, x, dy, gamma, dx, false, dg, db, false);
    layernorm_bwd_cpu(rows, c, x, dy, gamma, acc, true, dga, dba, true);
    for (size_t i = 0; i < act; i++) assert_float_equal(acc[i], base[i] + dx[i], 1e-5);
    for (int j = 0; j < c; j++) {
        assert_float_equal(dga[j], base[j] + dg[j], 1e-4);
        assert_float_equal(dba[j], base[c + j] + db[j], 1e-4);
    }
    float *inplace = test_copy_floats(dy, act);
    layernorm_bwd_cpu(rows, c, x, inplace, gamma, inplace, false, dga, dba, false);
    assert_memory_equal(inplace, dx, act * sizeof *dx);

    gelu_bwd_cpu(act, x, dy, dx, false);
    memcpy(acc, base, act * sizeof *acc);
    gelu_bwd_cpu(act, x, dy, acc, true);
    for (size_t i = 0; i < act; i++) assert_float_equal(acc[i], base[i] + dx[i], 1e-5);
    memcpy(inplace, dy, act * sizeof *inplace);
    gelu_bwd_cpu(act, x, inplace, inplace, false);
    assert_memory_equal(inplace, dx, act * sizeof *dx);

    free(x), free(dy), free(gamma), free(base), free(dx), free(dg), free(db);
    free(acc), free(dga), free(dba), free(inplace);
}

// ---- (b) fused attention against unfused ---------------------------------------------------

static void fused_matches_unfused(int n, int t, int c, int heads)
{
    Rng rng = rng_make(7, (uint64_t)t, (uint64_t)c);
    int d = c / heads;
    size_t act = (size_t)n * t * c, qkvn = act * 3, nh = (size_t)n * heads;
    float *qkv = test_random_floats(&rng, qkvn, 1.5f), *dy = test_random_floats(&rng, act, 1.0f);
    float *p = zeros(nh * t * t), *yu = zeros(act), *yf = zeros(act), *lse = zeros(nh * t);
    float *gu = zeros(qkvn), *gf = zeros(qkvn);
    attn_fwd_unfused_cpu(n, t, c, heads, qkv, p, yu);
    attn_fwd_fused_cpu(n, t, c, heads, qkv, lse, yf);
    check_close("fused y", yf, yu, act, FUSED_TOL, &max_fused_err);
    attn_bwd_unfused_cpu(n, t, c, heads, qkv, p, dy, gu, false);
    attn_bwd_fused_cpu(n, t, c, heads, qkv, yf, lse, dy, gf, false);
    check_close("fused dqkv", gf, gu, qkvn, FUSED_TOL, &max_fused_err);

    // p: rows of probabilities, causal; lse: log-sum-exp of the scaled scores (in double).
    double worst_sum = 0.0, worst_lse = 0.0;
    for (size_t bh = 0; bh < nh; bh++) {
        size_t b = bh / heads, h = bh % heads;
        for (int i = 0; i < t; i++) {
            const float *pr = p + (bh * t + i) * t;
            const float *q = qkv + (b * t + i) * 3 * c + h * d;
            double sum = 0.0, m = -INFINITY, se = 0.0;
            for (int j = 0; j < t; j++) {
                if (j > i) {
                    if (pr[j] != 0.0f) fail_msg("p[%zu][%d][%d] = %g above the diagonal", bh, i, j, pr[j]);
                    continue;
                }
                assert_true(pr[j] >= 0.0f);
                sum += pr[j];
                double s = dot_double(q, qkv + (b * t + j) * 3 * c + c + h * d, d) / sqrt(d);
                if (s > m) { se = se * exp(m - s) + 1.0; m = s; }
                else se += exp(s - m);
            }
            if (fabs(sum - 1.0) > worst_sum) worst_sum = fabs(sum - 1.0);
            double want = m + log(se);
            if (fabs(lse[bh * t + i] - want) > worst_lse) worst_lse = fabs(lse[bh * t + i] - want);
        }
    }
    printf("  n=%d t=%d c=%d heads=%d: |sum p - 1| <= %.1e, |lse - log sum exp| <= %.1e\n", n, t,
           c, heads, worst_sum, worst_lse);
    assert_true(worst_sum <= PROB_TOL);
    assert_true(worst_lse <= PROB_TOL);
    free(qkv), free(dy), free(p), free(yu), free(yf), free(lse), free(gu), free(gf);
}

static void test_fused_matches_unfused(void **state)
{
    (void)state;
    fused_matches_unfused(2, 5, 8, 2);
    fused_matches_unfused(2, 37, 48, 4);
    fused_matches_unfused(1, 130, 32, 2);
    printf("  largest fused vs unfused relative L2 error: %.2e\n", max_fused_err);
}

// ---- (c) fast against the reference --------------------------------------------------------

// One case's inputs (every array the layers read) and the shapes.
typedef struct Case {
    int n, t, c, heads, vocab;
    size_t act, qkvn, pn, ln;
    int32_t *tok;
    float *wte, *wpe, *x, *x4, *gamma, *beta, *qkv, *dy, *dy4, *base;
} Case;

static Case case_make(int n, int t, int c, int heads, int vocab)
{
    Rng rng = rng_make(11, (uint64_t)t, (uint64_t)c);
    Case k = {.n = n, .t = t, .c = c, .heads = heads, .vocab = vocab};
    k.act = (size_t)n * t * c;
    k.qkvn = 3 * k.act;
    k.pn = (size_t)n * heads * t * t;
    k.ln = (size_t)n * heads * t;
    k.tok = malloc((size_t)n * t * sizeof *k.tok);
    assert_non_null(k.tok);
    for (int i = 0; i < n * t; i++) k.tok[i] = (int32_t)rng_below(&rng, vocab);
    k.wte = test_random_floats(&rng, (size_t)vocab * c, 1.0f);
    k.wpe = test_random_floats(&rng, (size_t)t * c, 1.0f);
    k.x = test_random_floats(&rng, k.act, 2.0f);
    k.x4 = test_random_floats(&rng, 4 * k.act, 2.0f);  // the MLP's hidden width, for GELU
    k.gamma = test_random_floats(&rng, c, 1.0f);
    k.beta = test_random_floats(&rng, c, 1.0f);
    k.qkv = test_random_floats(&rng, k.qkvn, 1.5f);
    k.dy = test_random_floats(&rng, k.act, 1.0f);
    k.dy4 = test_random_floats(&rng, 4 * k.act, 1.0f);
    k.base = test_random_floats(&rng, 4 * k.act + (size_t)vocab * c, 1.0f);  // what accum adds to
    return k;
}

static void case_free(Case *k)
{
    free(k->tok), free(k->wte), free(k->wpe), free(k->x), free(k->x4), free(k->gamma);
    free(k->beta), free(k->qkv), free(k->dy), free(k->dy4), free(k->base);
}

// a and b both start from k->base's first n floats (accumulating) or from garbage.
static void prefill(const Case *k, float *a, float *b, size_t n, bool accum)
{
    for (size_t i = 0; i < n; i++) a[i] = b[i] = accum ? k->base[i] : NAN;
}

static void check_embed(const CpuWorkspace *ws, const Case *k)
{
    size_t wn = (size_t)k->vocab * k->c, pn = (size_t)k->t * k->c;
    float *yf = zeros(k->act), *yr = zeros(k->act);
    embed_fwd_fast(ws, k->n, k->t, k->c, k->tok, k->wte, k->wpe, yf);
    embed_fwd_cpu(k->n, k->t, k->c, k->tok, k->wte, k->wpe, yr);
    check_close("embed y", yf, yr, k->act, FAST_TOL, &max_fast_err);
    float *wf = zeros(wn), *wr = zeros(wn), *pf = zeros(pn), *pr = zeros(pn);
    for (int accum = 0; accum <= 1; accum++) {
        prefill(k, wf, wr, wn, accum);
        prefill(k, pf, pr, pn, accum);
        embed_bwd_fast(ws, k->n, k->t, k->c, k->vocab, k->tok, k->dy, wf, pf, accum);
        embed_bwd_cpu(k->n, k->t, k->c, k->vocab, k->tok, k->dy, wr, pr, accum);
        check_close("embed dwte", wf, wr, wn, FAST_TOL, &max_fast_err);
        check_close("embed dwpe", pf, pr, pn, FAST_TOL, &max_fast_err);
    }
    free(yf), free(yr), free(wf), free(wr), free(pf), free(pr);
}

static void check_layernorm(const CpuWorkspace *ws, const Case *k)
{
    int rows = k->n * k->t, c = k->c;
    float *yf = zeros(k->act), *yr = zeros(k->act);
    layernorm_fwd_fast(ws, rows, c, k->x, k->gamma, k->beta, yf);
    layernorm_fwd_cpu(rows, c, k->x, k->gamma, k->beta, yr);
    check_close("layernorm y", yf, yr, k->act, FAST_TOL, &max_fast_err);
    float *gf = zeros(c), *gr = zeros(c), *bf = zeros(c), *br = zeros(c);
    for (int accum = 0; accum <= 1; accum++) {
        // accum_dx and accum_param in both orders: (false, true), then (true, false).
        prefill(k, yf, yr, k->act, accum);
        prefill(k, gf, gr, c, !accum);
        prefill(k, bf, br, c, !accum);
        layernorm_bwd_fast(ws, rows, c, k->x, k->dy, k->gamma, yf, accum, gf, bf, !accum);
        layernorm_bwd_cpu(rows, c, k->x, k->dy, k->gamma, yr, accum, gr, br, !accum);
        check_close("layernorm dx", yf, yr, k->act, FAST_TOL, &max_fast_err);
        check_close("layernorm dgamma", gf, gr, c, FAST_TOL, &max_fast_err);
        check_close("layernorm dbeta", bf, br, c, FAST_TOL, &max_fast_err);
    }
    // In place: dx == dy (the reference out of place, accum_param false).
    memcpy(yf, k->dy, k->act * sizeof *yf);
    layernorm_bwd_fast(ws, rows, c, k->x, yf, k->gamma, yf, false, gf, bf, false);
    layernorm_bwd_cpu(rows, c, k->x, k->dy, k->gamma, yr, false, gr, br, false);
    check_close("layernorm dx in place", yf, yr, k->act, FAST_TOL, &max_fast_err);
    check_close("layernorm dgamma (in place)", gf, gr, c, FAST_TOL, &max_fast_err);
    free(yf), free(yr), free(gf), free(gr), free(bf), free(br);
}

static void check_gelu(const CpuWorkspace *ws, const Case *k)
{
    size_t n = 4 * k->act;
    float *yf = zeros(n), *yr = zeros(n);
    gelu_fwd_fast(ws, n, k->x4, yf);
    gelu_fwd_cpu(n, k->x4, yr);
    check_close("gelu y", yf, yr, n, FAST_TOL, &max_fast_err);
    for (int accum = 0; accum <= 1; accum++) {
        prefill(k, yf, yr, n, accum);
        gelu_bwd_fast(ws, n, k->x4, k->dy4, yf, accum);
        gelu_bwd_cpu(n, k->x4, k->dy4, yr, accum);
        check_close("gelu dx", yf, yr, n, FAST_TOL, &max_fast_err);
    }
    memcpy(yf, k->dy4, n * sizeof *yf);
    gelu_bwd_fast(ws, n, k->x4, yf, yf, false);
    gelu_bwd_cpu(n, k->x4, k->dy4, yr, false);
    check_close("gelu dx in place", yf, yr, n, FAST_TOL, &max_fast_err);
    free(yf), free(yr);
}

static void check_attention(const CpuWorkspace *ws, const Case *k)
{
    int n = k->n, t = k->t, c = k->c, h = k->heads;
    float *pf = zeros(k->pn), *pr = zeros(k->pn), *yf = zeros(k->act), *yr = zeros(k->act);
    float *lf = zeros(k->ln), *lr = zeros(k->ln), *gf = zeros(k->qkvn), *gr = zeros(k->qkvn);
    // Unfused (p above the diagonal must come out zero: it starts as garbage).
    prefill(k, pf, pr, k->pn, false);
    attn_fwd_unfused_fast(ws, n, t, c, h, k->qkv, pf, yf);
    attn_fwd_unfused_cpu(n, t, c, h, k->qkv, pr, yr);
    check_close("attn unfused p", pf, pr, k->pn, FAST_TOL, &max_fast_err);
    check_close("attn unfused y", yf, yr, k->act, FAST_TOL, &max_fast_err);
    for (int accum = 0; accum <= 1; accum++) {
        prefill(k, gf, gr, k->qkvn, accum);
        attn_bwd_unfused_fast(ws, n, t, c, h, k->qkv, pr, k->dy, gf, accum);
        attn_bwd_unfused_cpu(n, t, c, h, k->qkv, pr, k->dy, gr, accum);
        check_close("attn unfused dqkv", gf, gr, k->qkvn, FAST_TOL, &max_fast_err);
    }
    // Fused.
    attn_fwd_fused_fast(ws, n, t, c, h, k->qkv, lf, yf);
    attn_fwd_fused_cpu(n, t, c, h, k->qkv, lr, yr);
    check_close("attn fused lse", lf, lr, k->ln, FAST_TOL, &max_fast_err);
    check_close("attn fused y", yf, yr, k->act, FAST_TOL, &max_fast_err);
    for (int accum = 0; accum <= 1; accum++) {
        prefill(k, gf, gr, k->qkvn, accum);
        attn_bwd_fused_fast(ws, n, t, c, h, k->qkv, yr, lr, k->dy, gf, accum);
        attn_bwd_fused_cpu(n, t, c, h, k->qkv, yr, lr, k->dy, gr, accum);
        check_close("attn fused dqkv", gf, gr, k->qkvn, FAST_TOL, &max_fast_err);
    }
    free(pf), free(pr), free(yf), free(yr), free(lf), free(lr), free(gf), free(gr);
}

static void test_fast_matches_reference(void **state)
{
    (void)state;
    // 111 rows of 48 over up to 12 tasks; 12 (sequence, head) pairs; then sequences longer
    // than the attention's query and key blocks (several blocks, a partial last one).
    const int shapes[][5] = {{3, 37, 48, 4, 50}, {2, 130, 32, 2, 9}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        Case k = case_make(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4]);
        for (int threads = 1; threads <= 3; threads += 2) {
            CpuWorkspace ws;
            assert_int_equal(cpu_workspace_init(&ws, NULL, 0, threads), 0);
            check_embed(&ws, &k);
            check_layernorm(&ws, &k);
            check_gelu(&ws, &k);
            check_attention(&ws, &k);
            cpu_workspace_free(&ws);
        }
        case_free(&k);
    }
    printf("  largest fast vs reference relative L2 error: %.2e\n", max_fast_err);
}

// ---- (d) determinism -------------------------------------------------------------------------

// Every fast backward twice on 3 threads: the same bits.
static void test_fast_backward_deterministic(void **state)
{
    (void)state;
    Case k = case_make(3, 70, 48, 4, 20);
    CpuWorkspace ws;
    assert_int_equal(cpu_workspace_init(&ws, NULL, 0, 3), 0);
    int rows = k.n * k.t, c = k.c;
    size_t wn = (size_t)k.vocab * c, pn = (size_t)k.t * c;
    float *p = zeros(k.pn), *y = zeros(k.act), *lse = zeros(k.ln);
    attn_fwd_unfused_cpu(k.n, k.t, c, k.heads, k.qkv, p, y);
    attn_fwd_fused_cpu(k.n, k.t, c, k.heads, k.qkv, lse, y);
    float *out[2][8];
    for (int run = 0; run < 2; run++) {
        float **o = out[run];
        o[0] = zeros(wn), o[1] = zeros(pn), o[2] = zeros(k.act), o[3] = zeros(c);
        o[4] = zeros(c), o[5] = zeros(4 * k.act), o[6] = zeros(k.qkvn), o[7] = zeros(k.qkvn);
        embed_bwd_fast(&ws, k.n, k.t, c, k.vocab, k.tok, k.dy, o[0], o[1], false);
        layernorm_bwd_fast(&ws, rows, c, k.x, k.dy, k.gamma, o[2], false, o[3], o[4], false);
        gelu_bwd_fast(&ws, 4 * k.act, k.x4, k.dy4, o[5], false);
        attn_bwd_unfused_fast(&ws, k.n, k.t, c, k.heads, k.qkv, p, k.dy, o[6], false);
        attn_bwd_fused_fast(&ws, k.n, k.t, c, k.heads, k.qkv, y, lse, k.dy, o[7], false);
    }
    const size_t sizes[8] = {wn, pn, k.act, c, c, 4 * k.act, k.qkvn, k.qkvn};
    const char *names[8] = {"dwte", "dwpe", "layernorm dx", "dgamma", "dbeta", "gelu dx",
                            "unfused dqkv", "fused dqkv"};
    for (int i = 0; i < 8; i++) {
        if (memcmp(out[0][i], out[1][i], sizes[i] * sizeof(float)) != 0)
            fail_msg("%s differs between two identical calls", names[i]);
        free(out[0][i]), free(out[1][i]);
    }
    free(p), free(y), free(lse);
    cpu_workspace_free(&ws);
    case_free(&k);
}

static int group_setup(void **state)
{
    (void)state;
    cpu_fast_init();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_gradients),
        cmocka_unit_test(test_reference_accum_and_in_place),
        cmocka_unit_test(test_fused_matches_unfused),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_fast_backward_deterministic),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
