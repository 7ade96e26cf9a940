// layers_cpu_fast_bn.c: the fast CPU batch normalisation, training and inference, with
// or without a fused ReLU (see layers_cpu_fast.c for how the layers are cut into tasks).
#include <math.h>

#include "kernels/cpu_pool.h"
#include "kernels/cpu/layers_cpu_fast_internal.h"

// ---- batch normalisation ---------------------------------------------------------------

// The per-row loops (cloned per instruction set).

CPU_SIMD static float sqdev_span(const float *x, size_t n, float mean)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
    return s;
}

CPU_SIMD static void affine_span(const float *x, float *y, size_t n, float scale, float shift)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;
}

// affine_span then relu_span in one pass (the same two roundings, so the same bits).
CPU_SIMD static void affine_relu_span(const float *x, float *y, size_t n, float scale, float shift)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * scale + shift;
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

// sum dy and sum dy * (x - mean) * invstd over one row.
CPU_SIMD static void bn_grad_sums_span(const float *x, const float *dy, size_t n, float mean,
                                       float invstd, float *sdy, float *sdyx)
{
    float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
    for (size_t i = 0; i < n; i++) {
        a += dy[i];
        b += dy[i] * (x[i] - mean) * invstd;
    }
    *sdy = a;
    *sdyx = b;
}

// bn_grad_sums_span of dy masked by a fused ReLU's output y (dy where y > 0, else 0).
CPU_SIMD static void bn_relu_grad_sums_span(const float *x, const float *y, const float *dy,
                                            size_t n, float mean, float invstd, float *sdy,
                                            float *sdyx)
{
    float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
    for (size_t i = 0; i < n; i++) {
        float d = y[i] > 0.0f ? dy[i] : 0.0f;
        a += d;
        b += d * (x[i] - mean) * invstd;
    }
    *sdy = a;
    *sdyx = b;
}

// bn_dx_span of dy masked likewise.
CPU_SIMD static void bn_relu_dx_span(const float *x, const float *y, const float *dy, float *dx,
                                     size_t n, float k, float m, float db, float dg, float mean,
                                     float invstd, bool accum)
{
    if (accum)
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd, d = y[i] > 0.0f ? dy[i] : 0.0f;
            dx[i] += k * (m * d - db - xhat * dg);
        }
    else
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd, d = y[i] > 0.0f ? dy[i] : 0.0f;
            dx[i] = k * (m * d - db - xhat * dg);
        }
}

CPU_SIMD static void bn_dx_span(const float *x, const float *dy, float *dx, size_t n, float k,
                                float m, float db, float dg, float mean, float invstd, bool accum)
{
    if (accum)
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd;
            dx[i] += k * (m * dy[i] - db - xhat * dg);
        }
    else
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd;
            dx[i] = k * (m * dy[i] - db - xhat * dg);
        }
}

// Channels [c*t/T, c*(t+1)/T) per task.
typedef struct BnJob {
    int n, c, hw, tasks;
    const float *x, *dy, *gamma, *beta, *mean_in, *invstd_in, *running_mean_in, *running_var_in;
    const float *relu_y;  // backward through a fused ReLU: its output (the mask); else NULL
    float *y, *dx, *save_mean, *save_invstd, *running_mean, *running_var, *dgamma, *dbeta;
    bool accum_dx, accum_param;
    bool relu;            // forward: a ReLU fused into the output
} BnJob;

static void bn_fwd_train_task(void *arg, int t)
{
    const BnJob *j = arg;
    int n = j->n, c = j->c, hw = j->hw;
    double m = (double)n * hw;
    for (int ch = c * t / j->tasks; ch < c * (t + 1) / j->tasks; ch++) {
        // Per-row float sums (SIMD), rows summed in double.
        double sum = 0.0, sq = 0.0;
        for (int i = 0; i < n; i++) sum += sum_span(j->x + ((size_t)i * c + ch) * hw, (size_t)hw);
        double mean = sum / m;
        for (int i = 0; i < n; i++)
            sq += sqdev_span(j->x + ((size_t)i * c + ch) * hw, (size_t)hw, (float)mean);
        double var = sq / m;
        float invstd = (float)(1.0 / sqrt(var + MODEL_BN_EPS));
        j->save_mean[ch] = (float)mean;
        j->save_invstd[ch] = invstd;
        if (j->running_mean) {
            double unbiased = m > 1 ? var * m / (m - 1) : var;
            j->running_mean[ch] = (1 - MODEL_BN_MOMENTUM) * j->running_mean[ch] + MODEL_BN_MOMENTUM * (float)mean;
            j->running_var[ch] = (1 - MODEL_BN_MOMENTUM) * j->running_var[ch] + MODEL_BN_MOMENTUM * (float)unbiased;
        }
        float sc = j->gamma[ch] * invstd, sh = j->beta[ch] - (float)mean * sc;
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            if (j->relu) affine_relu_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
            else affine_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
        }
    }
}

static void bn_fwd_train_job(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, float *y, float *save_mean,
                             float *save_invstd, float *running_mean, float *running_var,
                             bool relu)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .gamma = gamma, .beta = beta, .y = y, .save_mean = save_mean,
               .save_invstd = save_invstd, .running_mean = running_mean,
               .running_var = running_var, .relu = relu};
    cpu_pool_run(ws->threads, j.tasks, bn_fwd_train_task, &j);
}

void bn_fwd_train_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                       const float *gamma, const float *beta, float *y, float *save_mean,
                       float *save_invstd, float *running_mean, float *running_var)
{
    bn_fwd_train_job(ws, n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                     running_var, false);
}

void bn_relu_fwd_train_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, float *y, float *save_mean,
                            float *save_invstd, float *running_mean, float *running_var)
{
    bn_fwd_train_job(ws, n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                     running_var, true);
}

static void bn_fwd_infer_task(void *arg, int t)
{
    const BnJob *j = arg;
    int n = j->n, c = j->c, hw = j->hw;
    for (int ch = c * t / j->tasks; ch < c * (t + 1) / j->tasks; ch++) {
        float sc = j->gamma[ch] / sqrtf(j->running_var_in[ch] + MODEL_BN_EPS);
        float sh = j->beta[ch] - j->running_mean_in[ch] * sc;
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            if (j->relu) affine_relu_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
            else affine_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
        }
    }
}

static void bn_fwd_infer_job(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, const float *running_mean,
                             const float *running_var, float *y, bool relu)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .gamma = gamma, .beta = beta, .running_mean_in = running_mean,
               .running_var_in = running_var, .y = y, .relu = relu};
    cpu_pool_run(ws->threads, j.tasks, bn_fwd_infer_task, &j);
}

void bn_fwd_infer_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                       const float *gamma, const float *beta, const float *running_mean,
                       const float *running_var, float *y)
{
    bn_fwd_infer_job(ws, n, c, hw, x, gamma, beta, running_mean, running_var, y, false);
}

void bn_relu_fwd_infer_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, const float *running_mean,
                            const float *running_var, float *y)
{
    bn_fwd_infer_job(ws, n, c, hw, x, gamma, beta, running_mean, running_var, y, true);
}

static void bn_bwd_task(void *arg, int t)
{
    const BnJob *j = arg;
    int n = j->n, c = j->c, hw = j->hw;
    float m = (float)n * hw;
    for (int ch = c * t / j->tasks; ch < c * (t + 1) / j->tasks; ch++) {
        double sdy = 0.0, sdyx = 0.0;
        float mean = j->mean_in[ch], invstd = j->invstd_in[ch];
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            float a, b;
            if (j->relu_y)
                bn_relu_grad_sums_span(j->x + o, j->relu_y + o, j->dy + o, (size_t)hw, mean, invstd,
                                       &a, &b);
            else
                bn_grad_sums_span(j->x + o, j->dy + o, (size_t)hw, mean, invstd, &a, &b);
            sdy += a;
            sdyx += b;
        }
        float db = (float)sdy, dg = (float)sdyx;
        j->dbeta[ch] = j->accum_param ? j->dbeta[ch] + db : db;
        j->dgamma[ch] = j->accum_param ? j->dgamma[ch] + dg : dg;
        if (!j->dx) continue;
        float k = j->gamma[ch] * invstd / m;
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            if (j->relu_y)
                bn_relu_dx_span(j->x + o, j->relu_y + o, j->dy + o, j->dx + o, (size_t)hw, k, m, db,
                                dg, mean, invstd, j->accum_dx);
            else
                bn_dx_span(j->x + o, j->dy + o, j->dx + o, (size_t)hw, k, m, db, dg, mean, invstd,
                           j->accum_dx);
        }
    }
}

void bn_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x, const float *dy,
                 const float *gamma, const float *save_mean, const float *save_invstd,
                 float *dx, bool accum_dx, float *dgamma, float *dbeta, bool accum_param)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .dy = dy, .gamma = gamma, .mean_in = save_mean, .invstd_in = save_invstd,
               .dx = dx, .dgamma = dgamma, .dbeta = dbeta, .accum_dx = accum_dx,
               .accum_param = accum_param};
    cpu_pool_run(ws->threads, j.tasks, bn_bwd_task, &j);
}

void bn_relu_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                      const float *y, const float *dy, const float *gamma, const float *save_mean,
                      const float *save_invstd, float *dx, bool accum_dx, float *dgamma,
                      float *dbeta, bool accum_param)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .dy = dy, .relu_y = y, .gamma = gamma, .mean_in = save_mean,
               .invstd_in = save_invstd, .dx = dx, .dgamma = dgamma, .dbeta = dbeta,
               .accum_dx = accum_dx, .accum_param = accum_param};
    cpu_pool_run(ws->threads, j.tasks, bn_bwd_task, &j);
}
