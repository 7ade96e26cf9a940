// layers_cpu.c: the CPU reference layers (im2col + GEMM convolutions, BN, ReLU,
// residual add, global average pooling, linear, softmax cross-entropy).
#include "kernels/layers_cpu.h"

#include <math.h>
#include <string.h>

#include "kernels/model.h"

void gemm_cpu(bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
              const float *b, float beta, float *c)
{
    size_t mn = (size_t)m * n;
    if (beta == 0.0f) memset(c, 0, mn * sizeof *c);
    else if (beta != 1.0f) for (size_t i = 0; i < mn; i++) c[i] *= beta;
    if (!ta && !tb) {        // A (m, k), B (k, n)
        for (int i = 0; i < m; i++)
            for (int p = 0; p < k; p++) {
                float av = alpha * a[(size_t)i * k + p];
                const float *br = b + (size_t)p * n;
                float *cr = c + (size_t)i * n;
                for (int j = 0; j < n; j++) cr[j] += av * br[j];
            }
    } else if (!ta && tb) {  // A (m, k), B (n, k)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                const float *ar = a + (size_t)i * k, *br = b + (size_t)j * k;
                float s = 0.0f;
                for (int p = 0; p < k; p++) s += ar[p] * br[p];
                c[(size_t)i * n + j] += alpha * s;
            }
    } else if (ta && !tb) {  // A (k, m), B (k, n)
        for (int p = 0; p < k; p++)
            for (int i = 0; i < m; i++) {
                float av = alpha * a[(size_t)p * m + i];
                const float *br = b + (size_t)p * n;
                float *cr = c + (size_t)i * n;
                for (int j = 0; j < n; j++) cr[j] += av * br[j];
            }
    } else {                 // A (k, m), B (n, k)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float s = 0.0f;
                for (int p = 0; p < k; p++) s += a[(size_t)p * m + i] * b[(size_t)j * k + p];
                c[(size_t)i * n + j] += alpha * s;
            }
    }
}

int conv_out_size(int in, int r, int stride, int pad) { return (in + 2 * pad - r) / stride + 1; }

// col (C*R*R, P*Q) from one image x (C, H, W).
static void im2col(const ConvShape *s, const float *x, float *col)
{
    int pq = s->p * s->q;
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->r; i++)
            for (int j = 0; j < s->r; j++) {
                float *row = col + ((size_t)(c * s->r + i) * s->r + j) * pq;
                for (int p = 0; p < s->p; p++) {
                    int y = p * s->stride - s->pad + i;
                    for (int q = 0; q < s->q; q++) {
                        int xx = q * s->stride - s->pad + j;
                        row[p * s->q + q] = (y >= 0 && y < s->h && xx >= 0 && xx < s->w)
                            ? x[((size_t)c * s->h + y) * s->w + xx] : 0.0f;
                    }
                }
            }
}

// dx (C, H, W) += col scattered back.
static void col2im_add(const ConvShape *s, const float *col, float *dx)
{
    int pq = s->p * s->q;
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->r; i++)
            for (int j = 0; j < s->r; j++) {
                const float *row = col + ((size_t)(c * s->r + i) * s->r + j) * pq;
                for (int p = 0; p < s->p; p++) {
                    int y = p * s->stride - s->pad + i;
                    if (y < 0 || y >= s->h) continue;
                    for (int q = 0; q < s->q; q++) {
                        int xx = q * s->stride - s->pad + j;
                        if (xx >= 0 && xx < s->w)
                            dx[((size_t)c * s->h + y) * s->w + xx] += row[p * s->q + q];
                    }
                }
            }
}

void conv_fwd_cpu(const ConvShape *s, const float *x, const float *w, float *y, float *col)
{
    size_t xs = (size_t)s->c * s->h * s->w, ys = (size_t)s->k * s->p * s->q;
    int crr = s->c * s->r * s->r, pq = s->p * s->q;
    for (int n = 0; n < s->n; n++) {
        im2col(s, x + n * xs, col);
        gemm_cpu(false, false, s->k, pq, crr, 1.0f, w, col, 0.0f, y + n * ys);
    }
}

void conv_bwd_data_cpu(const ConvShape *s, const float *dy, const float *w, float *dx,
                       bool accum, float *col)
{
    size_t xs = (size_t)s->c * s->h * s->w, ys = (size_t)s->k * s->p * s->q;
    int crr = s->c * s->r * s->r, pq = s->p * s->q;
    if (!accum) memset(dx, 0, (size_t)s->n * xs * sizeof *dx);
    for (int n = 0; n < s->n; n++) {
        gemm_cpu(true, false, crr, pq, s->k, 1.0f, w, dy + n * ys, 0.0f, col);
        col2im_add(s, col, dx + n * xs);
    }
}

void conv_bwd_filter_cpu(const ConvShape *s, const float *x, const float *dy, float *dw,
                         bool accum, float *col)
{
    size_t xs = (size_t)s->c * s->h * s->w, ys = (size_t)s->k * s->p * s->q;
    int crr = s->c * s->r * s->r, pq = s->p * s->q;
    for (int n = 0; n < s->n; n++) {
        im2col(s, x + n * xs, col);
        gemm_cpu(false, true, s->k, crr, pq, 1.0f, dy + n * ys, col,
                 (accum || n > 0) ? 1.0f : 0.0f, dw);
    }
}

void bn_fwd_train_cpu(int n, int c, int hw, const float *x, const float *gamma,
                      const float *beta, float *y, float *save_mean, float *save_invstd,
                      float *running_mean, float *running_var)
{
    double m = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        double sum = 0.0, sq = 0.0;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) sum += xp[j];
        }
        double mean = sum / m;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) sq += (xp[j] - mean) * (xp[j] - mean);
        }
        double var = sq / m;
        float invstd = (float)(1.0 / sqrt(var + MODEL_BN_EPS));
        save_mean[ch] = (float)mean;
        save_invstd[ch] = invstd;
        if (running_mean) {
            double unbiased = m > 1 ? var * m / (m - 1) : var;
            running_mean[ch] = (1 - MODEL_BN_MOMENTUM) * running_mean[ch] + MODEL_BN_MOMENTUM * (float)mean;
            running_var[ch] = (1 - MODEL_BN_MOMENTUM) * running_var[ch] + MODEL_BN_MOMENTUM * (float)unbiased;
        }
        float sc = gamma[ch] * invstd, sh = beta[ch] - (float)mean * sc;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((size_t)i * c + ch) * hw;
            float *yp = y + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) yp[j] = xp[j] * sc + sh;
        }
    }
}

void bn_fwd_infer_cpu(int n, int c, int hw, const float *x, const float *gamma,
                      const float *beta, const float *running_mean,
                      const float *running_var, float *y)
{
    for (int ch = 0; ch < c; ch++) {
        float sc = gamma[ch] / sqrtf(running_var[ch] + MODEL_BN_EPS);
        float sh = beta[ch] - running_mean[ch] * sc;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((size_t)i * c + ch) * hw;
            float *yp = y + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) yp[j] = xp[j] * sc + sh;
        }
    }
}

void bn_bwd_cpu(int n, int c, int hw, const float *x, const float *dy, const float *gamma,
                const float *save_mean, const float *save_invstd, float *dx, bool accum_dx,
                float *dgamma, float *dbeta, bool accum_param)
{
    float m = (float)n * hw;
    for (int ch = 0; ch < c; ch++) {
        double sdy = 0.0, sdyx = 0.0;
        float mean = save_mean[ch], invstd = save_invstd[ch];
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) {
                sdy += dy[o + j];
                sdyx += dy[o + j] * (x[o + j] - mean) * invstd;
            }
        }
        float db = (float)sdy, dg = (float)sdyx;
        dbeta[ch] = accum_param ? dbeta[ch] + db : db;
        dgamma[ch] = accum_param ? dgamma[ch] + dg : dg;
        if (!dx) continue;
        float k = gamma[ch] * invstd / m;
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) {
                float xhat = (x[o + j] - mean) * invstd;
                float g = k * (m * dy[o + j] - db - xhat * dg);
                dx[o + j] = accum_dx ? dx[o + j] + g : g;
            }
        }
    }
}

void relu_fwd_cpu(size_t count, const float *x, float *y)
{
    for (size_t i = 0; i < count; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_bwd_cpu(size_t count, const float *y, const float *dy, float *dx, bool accum)
{
    for (size_t i = 0; i < count; i++) {
        float g = y[i] > 0.0f ? dy[i] : 0.0f;
        dx[i] = accum ? dx[i] + g : g;
    }
}

void add_fwd_cpu(size_t count, const float *a, const float *b, float *y)
{
    for (size_t i = 0; i < count; i++) y[i] = a[i] + b[i];
}

void copy_grad_cpu(size_t count, const float *dy, float *dx, bool accum)
{
    if (!accum) { memcpy(dx, dy, count * sizeof *dx); return; }
    for (size_t i = 0; i < count; i++) dx[i] += dy[i];
}

void gap_fwd_cpu(int n, int c, int hw, const float *x, float *y)
{
    for (size_t i = 0; i < (size_t)n * c; i++) {
        double s = 0.0;
        for (int j = 0; j < hw; j++) s += x[i * hw + j];
        y[i] = (float)(s / hw);
    }
}

void gap_bwd_cpu(int n, int c, int hw, const float *dy, float *dx, bool accum)
{
    for (size_t i = 0; i < (size_t)n * c; i++) {
        float g = dy[i] / (float)hw;
        for (int j = 0; j < hw; j++) dx[i * hw + j] = accum ? dx[i * hw + j] + g : g;
    }
}

void linear_fwd_cpu(int n, int k, int m, const float *x, const float *w, const float *b,
                    float *y)
{
    gemm_cpu(false, true, n, m, k, 1.0f, x, w, 0.0f, y);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) y[(size_t)i * m + j] += b[j];
}

void linear_bwd_cpu(int n, int k, int m, const float *x, const float *w, const float *dy,
                    float *dx, bool accum_dx, float *dw, float *db, bool accum_param)
{
    if (dx) gemm_cpu(false, false, n, k, m, 1.0f, dy, w, accum_dx ? 1.0f : 0.0f, dx);
    gemm_cpu(true, false, m, k, n, 1.0f, dy, x, accum_param ? 1.0f : 0.0f, dw);
    for (int j = 0; j < m; j++) {
        float s = 0.0f;
        for (int i = 0; i < n; i++) s += dy[(size_t)i * m + j];
        db[j] = accum_param ? db[j] + s : s;
    }
}

double softmax_ce_cpu(int n, int m, const float *logits, const int32_t *labels,
                      float grad_scale, float *dlogits, int *correct)
{
    double total = 0.0;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * m;
        int arg = 0;
        for (int j = 1; j < m; j++) if (z[j] > z[arg]) arg = j;
        double sum = 0.0;
        for (int j = 0; j < m; j++) sum += exp((double)z[j] - z[arg]);
        double lse = z[arg] + log(sum);
        total += lse - z[labels[i]];
        ok += arg == labels[i];
        if (dlogits)
            for (int j = 0; j < m; j++) {
                float p = (float)exp((double)z[j] - lse);
                dlogits[(size_t)i * m + j] = (p - (j == labels[i] ? 1.0f : 0.0f)) * grad_scale / (float)n;
            }
    }
    if (correct) *correct = ok;
    return total;
}
