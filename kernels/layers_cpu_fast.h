// layers_cpu_fast.h: the fast CPU layers (fp32, NCHW), the default `cpu` backend.
// The same maths as the reference of layers_cpu.h, computed differently: GEMMs through
// OpenBLAS's cblas_sgemm (beta = 0 overwrites, beta = 1 accumulates), images spread over
// the threads of cpu_pool.h (each task im2cols its own images; OpenBLAS itself runs one
// thread per call, so the two never oversubscribe), and the loops compiled for AVX-512,
// AVX2 and baseline x86-64, chosen at start-up (GCC target_clones). Results differ from the
// reference only by float rounding (summation order); tests/test_cpu_fast.c states how much.
// Backward functions take `accum`: true adds into the output gradient, false overwrites.
// In place (the memory plan, kernels/model_plan.h, relies on it): the pointwise layers may
// take y == an input, and the ReLU and BN backwards dx == dy when not accumulating.
#ifndef LAYERS_CPU_FAST_H
#define LAYERS_CPU_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/adamw.h"
#include "kernels/layers_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

// Threads and scratch for the fast layers. A call runs at most `threads` tasks at once
// and task t owns region t (im2col buffer, chunk buffer, partial weight gradient); the
// shared region holds what all tasks of one call read (a convolution's flipped weights).
typedef struct CpuWorkspace {
    int threads;          // threads a call may use (>= 1)
    size_t region_floats; // per region
    size_t shared_floats;
    float *scratch;       // shared_floats, then threads * region_floats
} CpuWorkspace;

// Allocates scratch for `threads` threads running any of the `count` convolutions
// (their n is ignored); -1 (out of memory) leaves ws empty. count 0: pointwise only.
int cpu_workspace_init(CpuWorkspace *ws, const ConvShape *convs, int count, int threads);
// Frees the scratch; ws can be initialised again.
void cpu_workspace_free(CpuWorkspace *ws);
// Bytes the scratch of ws holds.
size_t cpu_workspace_bytes(const CpuWorkspace *ws);
// Region t (region 0 has at least C*R*R*P*Q floats, the reference's im2col buffer).
static inline float *cpu_workspace_region(const CpuWorkspace *ws, int t)
{
    return ws->scratch + ws->shared_floats + (size_t)t * ws->region_floats;
}

// Once per process: OpenBLAS runs every call on the calling thread (the layers split
// images over their own threads, so BLAS threads would only oversubscribe the cores).
void cpu_fast_init(void);
// The instruction set the loops of this file run with here: "avx512f", "avx2" or "x86-64".
const char *cpu_fast_isa(void);
// The BLAS in use and its kernel for this CPU, e.g. "OpenBLAS 0.3.21 Cooperlake".
const char *cpu_fast_blas(void);

// y = conv(x, w) (+ bias per output channel unless bias is NULL: the GEMMs start from the
// bias instead of zero, so it takes no pass of its own).
void conv_fwd_fast(const CpuWorkspace *ws, const ConvShape *s, const float *x, const float *w,
                   const float *bias, float *y);
// Both convolution gradients in one pass over the images: dx (=|+= by accum_dx)
// conv_transpose(dy, w) unless dx is NULL, and dw (=|+= by accum_dw) summed over the batch.
void conv_bwd_fast(const CpuWorkspace *ws, const ConvShape *s, const float *x, const float *dy,
                   const float *w, float *dx, bool accum_dx, float *dw, bool accum_dw);
// As bn_fwd_train_cpu.
void bn_fwd_train_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                       const float *gamma, const float *beta, float *y, float *save_mean,
                       float *save_invstd, float *running_mean, float *running_var);
// bn_fwd_train_fast with a ReLU fused into the output: y = max(gamma * xhat + beta, 0),
// bit for bit bn_fwd_train_fast then relu_fwd_fast.
void bn_relu_fwd_train_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, float *y, float *save_mean,
                            float *save_invstd, float *running_mean, float *running_var);
// As bn_fwd_infer_cpu.
void bn_fwd_infer_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                       const float *gamma, const float *beta, const float *running_mean,
                       const float *running_var, float *y);
// bn_fwd_infer_fast with a fused ReLU.
void bn_relu_fwd_infer_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, const float *running_mean,
                            const float *running_var, float *y);
// As bn_bwd_cpu.
void bn_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x, const float *dy,
                 const float *gamma, const float *save_mean, const float *save_invstd,
                 float *dx, bool accum_dx, float *dgamma, float *dbeta, bool accum_param);
// bn_bwd_fast through a fused ReLU: dy masked by the fused forward's output y (dy where
// y > 0) in the same loops, the same values as relu_bwd_fast then bn_bwd_fast.
void bn_relu_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                      const float *y, const float *dy, const float *gamma, const float *save_mean,
                      const float *save_invstd, float *dx, bool accum_dx, float *dgamma,
                      float *dbeta, bool accum_param);
// y = max(x, 0).
void relu_fwd_fast(const CpuWorkspace *ws, size_t count, const float *x, float *y);
// dx (=|+=) dy where y > 0.
void relu_bwd_fast(const CpuWorkspace *ws, size_t count, const float *y, const float *dy,
                   float *dx, bool accum);
// y = a + b.
void add_fwd_fast(const CpuWorkspace *ws, size_t count, const float *a, const float *b, float *y);
// y = max(a + b, 0).
void add_relu_fwd_fast(const CpuWorkspace *ws, size_t count, const float *a, const float *b,
                       float *y);
// dx (=|+=) dy.
void copy_grad_fast(const CpuWorkspace *ws, size_t count, const float *dy, float *dx, bool accum);
// y (N, C) = mean over HW of x (N, C, HW).
void gap_fwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x, float *y);
// dx (=|+=) dy / HW broadcast.
void gap_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *dy, float *dx,
                  bool accum);
// y (N, M) = x (N, K) w^T + b, w (M, K).
void linear_fwd_fast(const CpuWorkspace *ws, int n, int k, int m, const float *x, const float *w,
                     const float *b, float *y);
// dx (=|+= accum_dx) = dy w; dw, db (=|+= accum_param) = dy^T x, sum dy. dx may be NULL.
void linear_bwd_fast(const CpuWorkspace *ws, int n, int k, int m, const float *x, const float *w,
                     const float *dy, float *dx, bool accum_dx, float *dw, float *db,
                     bool accum_param);
// SGD with momentum and weight decay over count parameters, element by element exactly
// as the reference loop of core_cpu.c: g = grad + wd*w; mom = m*mom + g; w -= lr*mom.
void sgd_update_fast(const CpuWorkspace *ws, size_t count, float *params, const float *grads,
                     float *mom, float lr, float momentum, float weight_decay);
// AdamW (kernels/adamw.h) over count parameters, element by element exactly as the
// reference loop of core_cpu.c; m: exp_avg, v: exp_avg_sq.
void adamw_update_fast(const CpuWorkspace *ws, size_t count, float *params, const float *grads,
                       float *m, float *v, const AdamwCoeffs *k);

#ifdef __cplusplus
}
#endif
#endif
