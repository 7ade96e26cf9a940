// optim_cuda.cu: GradScaler unscale/check, gradient norm, SGD, AdamW and scaler update kernels.
#include "kernels/optim_cuda.cuh"

#include <math.h>

#include "kernels/check.h"

#define GRID_STRIDE(i, total) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
         i += (size_t)gridDim.x * blockDim.x)

__global__ void unscale_check_kernel(float *g, size_t n, const float *scale, int *found_inf)
{
    // Like PyTorch: check the scaled value, then multiply by float(1 / double(scale)).
    const float inv = amp_inv_scale(*scale);
    bool bad = false;
    GRID_STRIDE(i, n) g[i] = amp_unscale_value(g[i], inv, &bad);
    if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1;
}

int cuda_unscale_check(float *g, size_t n, const float *scale, int *found_inf, cudaStream_t s)
{
    unscale_check_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(g, n, scale, found_inf);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void sumsq_kernel(const float *g, size_t n, double *out)
{
    float acc = 0.0f;
    GRID_STRIDE(i, n) acc += g[i] * g[i];
    float total = block_sum(acc);
    if (threadIdx.x == 0) atomicAdd(out, (double)total);
}

int cuda_sumsq(const float *g, size_t n, double *sumsq, cudaStream_t s)
{
    CUDA_TRY(cudaMemsetAsync(sumsq, 0, sizeof *sumsq, s));
    sumsq_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(g, n, sumsq);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void sgd_kernel(float *w, const float *g, float *mom, size_t n, float lr_arg,
                           const float *lr_dev, float m, float wd, const double *sumsq, float clip,
                           const int *found_inf)
{
    if (found_inf && *found_inf) return;  // GradScaler.step skips optimizer.step
    const float lr = lr_dev ? *lr_dev : lr_arg;
    float coef = 1.0f;
    if (sumsq) {  // clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1
        coef = clip / ((float)sqrt(*sumsq) + 1e-6f);
        if (coef > 1.0f) coef = 1.0f;
    }
    GRID_STRIDE(i, n) {
        float gi = g[i] * coef + wd * w[i];
        float b = m * mom[i] + gi;
        mom[i] = b;
        w[i] -= lr * b;
    }
}

int cuda_sgd(float *w, const float *g, float *mom, size_t n, float lr, const float *lr_dev,
             float momentum, float weight_decay, const double *sumsq, float clip,
             const int *found_inf, cudaStream_t s)
{
    sgd_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(w, g, mom, n, lr, lr_dev, momentum,
                                                    weight_decay, sumsq, clip, found_inf);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// One thread: advances t and computes the update's scalars unless the step is skipped.
__global__ void adamw_coeffs_kernel(DevScalars *d, float lr_arg, const float *lr_dev, float wd,
                                    float beta1, float beta2, float eps, const int *found_inf)
{
    if (found_inf && *found_inf) return;  // optimizer.step() is not called: t stays
    const float lr = lr_dev ? *lr_dev : lr_arg;
    d->adamw = adamw_coeffs(lr, wd, beta1, beta2, eps, ++d->adamw_t);
}

// The per-element arithmetic of the CPU reference's ref_adamw (kernels/cpu/core_cpu.c).
__global__ void adamw_kernel(float *w, const float *g, float *m, float *v, size_t n,
                             const double *sumsq, float clip, const int *found_inf,
                             const AdamwCoeffs *coeffs)
{
    if (found_inf && *found_inf) return;
    const AdamwCoeffs k = *coeffs;
    float coef = 1.0f;
    if (sumsq) {  // clip_grad_norm_, as in sgd_kernel
        coef = clip / ((float)sqrt(*sumsq) + 1e-6f);
        if (coef > 1.0f) coef = 1.0f;
    }
    const float w1 = 1.0f - k.beta1, w2 = 1.0f - k.beta2;
    GRID_STRIDE(i, n) {
        float gi = g[i] * coef;
        float mi = m[i] + w1 * (gi - m[i]);
        float vi = k.beta2 * v[i] + w2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
        w[i] = w[i] * k.decay - k.step_size * (mi / denom);
    }
}

int cuda_adamw(float *w, const float *g, float *m, float *v, size_t n, float lr,
               const float *lr_dev, const CoreOptimConfig *o, const double *sumsq,
               const int *found_inf, DevScalars *d, cudaStream_t s)
{
    adamw_coeffs_kernel<<<1, 1, 0, s>>>(d, lr, lr_dev, o->weight_decay, o->beta1, o->beta2,
                                        o->eps, found_inf);
    CUDA_TRY(cudaGetLastError());
    adamw_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(w, g, m, v, n, sumsq, o->clip_norm,
                                                      found_inf, &d->adamw);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void scaler_update_kernel(DevScalars *d, AmpScalerConfig cfg)
{
    bool found = d->found_inf != 0;
    amp_scaler_rule(&d->scale, &d->growth_tracker, found, cfg.growth_factor,
                    cfg.backoff_factor, cfg.growth_interval);
    d->skipped += found;
    d->found_inf = 0;
}

int cuda_scaler_update(DevScalars *d, AmpScalerConfig cfg, cudaStream_t s)
{
    scaler_update_kernel<<<1, 1, 0, s>>>(d, cfg);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void set_value_kernel(float *p, float v) { *p = v; }

int cuda_set_value(float *p, float v, cudaStream_t s)
{
    set_value_kernel<<<1, 1, 0, s>>>(p, v);
    CUDA_TRY(cudaGetLastError());
    return 0;
}
