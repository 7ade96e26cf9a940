// layers_gpt.c: the transformer layers' plain-C reference (the *_cpu of layers_gpt.h):
// token and position embeddings, LayerNorm, exact GELU and causal self-attention in its
// two forms (unfused: scores and softmax materialised; fused: online softmax, lse kept).
// Single-threaded loops written for clarity; the fast backend (kernels/cpu/layers_gpt_fast.c)
// is checked against them (tests/test_layers_gpt.c), and they against finite differences.
// Row statistics (LayerNorm mean and variance, softmax sums) are summed in double.
#include "kernels/layers_gpt.h"

#include <math.h>
#include <string.h>

#define GELU_INV_SQRT2 0.70710678118654752440f  // 1 / sqrt(2)
#define GELU_INV_SQRT2PI 0.39894228040143267794f  // 1 / sqrt(2 pi)

// ---- embeddings --------------------------------------------------------------------------

void embed_fwd_cpu(int n, int t, int c, const int32_t *tok, const float *wte, const float *wpe,
                   float *y)
{
    for (int b = 0; b < n; b++)
        for (int i = 0; i < t; i++) {
            size_t row = (size_t)b * t + i;
            const float *we = wte + (size_t)tok[row] * c, *pe = wpe + (size_t)i * c;
            float *yr = y + row * c;
            for (int j = 0; j < c; j++) yr[j] = we[j] + pe[j];
        }
}

void embed_bwd_cpu(int n, int t, int c, int vocab, const int32_t *tok, const float *dy,
                   float *dwte, float *dwpe, bool accum)
{
    if (!accum) {
        memset(dwte, 0, (size_t)vocab * c * sizeof *dwte);
        memset(dwpe, 0, (size_t)t * c * sizeof *dwpe);
    }
    for (int b = 0; b < n; b++)
        for (int i = 0; i < t; i++) {
            size_t row = (size_t)b * t + i;
            const float *g = dy + row * c;
            float *we = dwte + (size_t)tok[row] * c, *pe = dwpe + (size_t)i * c;
            for (int j = 0; j < c; j++) {
                we[j] += g[j];
                pe[j] += g[j];
            }
        }
}

// ---- LayerNorm ---------------------------------------------------------------------------

// A row's mean and 1 / sqrt(biased variance + eps).
static void row_stats(const float *x, int c, float *mean, float *rstd)
{
    double s = 0.0, sq = 0.0;
    for (int j = 0; j < c; j++) s += x[j];
    double m = s / c;
    for (int j = 0; j < c; j++) sq += (x[j] - m) * (x[j] - m);
    *mean = (float)m;
    *rstd = (float)(1.0 / sqrt(sq / c + GPT_LN_EPS));
}

void layernorm_fwd_cpu(int rows, int c, const float *x, const float *gamma, const float *beta,
                       float *y)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * c;
        float *yr = y + (size_t)r * c;
        float mean, rstd;
        row_stats(xr, c, &mean, &rstd);
        for (int j = 0; j < c; j++) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
    }
}

void layernorm_bwd_cpu(int rows, int c, const float *x, const float *dy, const float *gamma,
                       float *dx, bool accum_dx, float *dgamma, float *dbeta, bool accum_param)
{
    if (!accum_param) {
        memset(dgamma, 0, (size_t)c * sizeof *dgamma);
        memset(dbeta, 0, (size_t)c * sizeof *dbeta);
    }
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * c, *gr = dy + (size_t)r * c;
        float *dxr = dx + (size_t)r * c;
        float mean, rstd;
        row_stats(xr, c, &mean, &rstd);
        // Everything that reads dy first: dx may be dy.
        double sd = 0.0, sdx = 0.0;  // sums of dxhat and dxhat * xhat
        for (int j = 0; j < c; j++) {
            float xhat = (xr[j] - mean) * rstd, dxhat = gr[j] * gamma[j];
            sd += dxhat;
            sdx += dxhat * xhat;
            dgamma[j] += gr[j] * xhat;
            dbeta[j] += gr[j];
        }
        float md = (float)(sd / c), mdx = (float)(sdx / c);
        for (int j = 0; j < c; j++) {
            float xhat = (xr[j] - mean) * rstd, dxhat = gr[j] * gamma[j];
            float v = rstd * (dxhat - md - xhat * mdx);
            dxr[j] = accum_dx ? dxr[j] + v : v;
        }
    }
}

// ---- GELU --------------------------------------------------------------------------------

void gelu_fwd_cpu(size_t count, const float *x, float *y)
{
    for (size_t i = 0; i < count; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * GELU_INV_SQRT2));
}

void gelu_bwd_cpu(size_t count, const float *x, const float *dy, float *dx, bool accum)
{
    for (size_t i = 0; i < count; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * GELU_INV_SQRT2));
        float pdf = expf(-0.5f * x[i] * x[i]) * GELU_INV_SQRT2PI;
        float v = dy[i] * (cdf + x[i] * pdf);
        dx[i] = accum ? dx[i] + v : v;
    }
}

// ---- attention ---------------------------------------------------------------------------

static float dot(const float *a, const float *b, int d)
{
    float s = 0.0f;
    for (int e = 0; e < d; e++) s += a[e] * b[e];
    return s;
}

// a[0..d) += s * b[0..d)
static void axpy(float *a, float s, const float *b, int d)
{
    for (int e = 0; e < d; e++) a[e] += s * b[e];
}

void attn_fwd_unfused_cpu(int n, int t, int c, int heads, const float *qkv, float *p, float *y)
{
    int d = c / heads;
    float scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < n; b++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < t; i++) {
                const float *q = qkv + ((size_t)b * t + i) * 3 * c + (size_t)h * d;
                float *pr = p + (((size_t)b * heads + h) * t + i) * t;
                float *yr = y + ((size_t)b * t + i) * c + (size_t)h * d;
                float m = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * t + j) * 3 * c + c + (size_t)h * d;
                    pr[j] = dot(q, k, d) * scale;
                    if (pr[j] > m) m = pr[j];
                }
                double sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    pr[j] = expf(pr[j] - m);
                    sum += pr[j];
                }
                for (int j = 0; j <= i; j++) pr[j] = (float)(pr[j] / sum);
                for (int j = i + 1; j < t; j++) pr[j] = 0.0f;
                memset(yr, 0, (size_t)d * sizeof *yr);
                for (int j = 0; j <= i; j++)
                    axpy(yr, pr[j], qkv + ((size_t)b * t + j) * 3 * c + 2 * c + (size_t)h * d, d);
            }
}

void attn_bwd_unfused_cpu(int n, int t, int c, int heads, const float *qkv, const float *p,
                          const float *dy, float *dqkv, bool accum)
{
    int d = c / heads;
    float scale = 1.0f / sqrtf((float)d);
    if (!accum) memset(dqkv, 0, (size_t)n * t * 3 * c * sizeof *dqkv);
    float dp[t];  // one row of dp = dy v^T
    for (int b = 0; b < n; b++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < t; i++) {
                size_t qo = ((size_t)b * t + i) * 3 * c + (size_t)h * d;
                const float *pr = p + (((size_t)b * heads + h) * t + i) * t;
                const float *g = dy + ((size_t)b * t + i) * c + (size_t)h * d;
                double rowsum = 0.0;  // sum_j dp_ij p_ij
                for (int j = 0; j <= i; j++) {
                    const float *v = qkv + ((size_t)b * t + j) * 3 * c + 2 * c + (size_t)h * d;
                    dp[j] = dot(g, v, d);
                    rowsum += (double)dp[j] * pr[j];
                }
                for (int j = 0; j <= i; j++) {
                    size_t ko = ((size_t)b * t + j) * 3 * c + c + (size_t)h * d;
                    float ds = pr[j] * (dp[j] - (float)rowsum);
                    axpy(dqkv + qo, ds * scale, qkv + ko, d);      // dq_i += ds_ij k_j / sqrt d
                    axpy(dqkv + ko, ds * scale, qkv + qo, d);      // dk_j += ds_ij q_i / sqrt d
                    axpy(dqkv + ko + c, pr[j], g, d);              // dv_j += p_ij dy_i
                }
            }
}

void attn_fwd_fused_cpu(int n, int t, int c, int heads, const float *qkv, float *lse, float *y)
{
    int d = c / heads;
    float scale = 1.0f / sqrtf((float)d);
    float o[d];  // the query row's unnormalised output
    for (int b = 0; b < n; b++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < t; i++) {
                const float *q = qkv + ((size_t)b * t + i) * 3 * c + (size_t)h * d;
                float m = -INFINITY, l = 0.0f;
                memset(o, 0, sizeof o);
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * t + j) * 3 * c + c + (size_t)h * d;
                    float s = dot(q, k, d) * scale;
                    if (s > m) {  // a new maximum: rescale what was summed against the old one
                        float alpha = expf(m - s);
                        l *= alpha;
                        for (int e = 0; e < d; e++) o[e] *= alpha;
                        m = s;
                    }
                    float w = expf(s - m);
                    l += w;
                    axpy(o, w, k + c, d);
                }
                float *yr = y + ((size_t)b * t + i) * c + (size_t)h * d;
                for (int e = 0; e < d; e++) yr[e] = o[e] / l;
                lse[((size_t)b * heads + h) * t + i] = m + logf(l);
            }
}

void attn_bwd_fused_cpu(int n, int t, int c, int heads, const float *qkv, const float *y,
                        const float *lse, const float *dy, float *dqkv, bool accum)
{
    int d = c / heads;
    float scale = 1.0f / sqrtf((float)d);
    if (!accum) memset(dqkv, 0, (size_t)n * t * 3 * c * sizeof *dqkv);
    for (int b = 0; b < n; b++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < t; i++) {
                size_t qo = ((size_t)b * t + i) * 3 * c + (size_t)h * d;
                size_t yo = ((size_t)b * t + i) * c + (size_t)h * d;
                const float *q = qkv + qo, *g = dy + yo;
                float li = lse[((size_t)b * heads + h) * t + i];
                float di = dot(g, y + yo, d);  // D_i = sum_j dp_ij p_ij = dy_i . y_i
                for (int j = 0; j <= i; j++) {
                    size_t ko = ((size_t)b * t + j) * 3 * c + c + (size_t)h * d;
                    float pij = expf(dot(q, qkv + ko, d) * scale - li);
                    float ds = pij * (dot(g, qkv + ko + c, d) - di);
                    axpy(dqkv + qo, ds * scale, qkv + ko, d);
                    axpy(dqkv + ko, ds * scale, q, d);
                    axpy(dqkv + ko + c, pij, g, d);
                }
            }
}
