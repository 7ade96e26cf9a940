// layers_cuda.cu: our CUDA kernels for the layers cuDNN and cuBLAS do not cover
// (see layers_cuda.cuh). All arithmetic is fp32; storage is fp32, fp16 or bf16.
#include "kernels/layers_cuda.cuh"

#include <limits.h>
#include <math.h>

#include "kernels/check.h"
#include "kernels/model.h"

#define GRID_STRIDE(i, total) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
         i += (size_t)gridDim.x * blockDim.x)

// ---- casts and layouts ----

__global__ void convert_input_kernel(const float *src, void *dst, DType dt, ChanGeom g)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    GRID_STRIDE(i, total) {
        int n, c, hw;
        if (g.nhwc) { c = (int)(i % g.c); hw = (int)((i / g.c) % g.hw); n = (int)(i / ((size_t)g.c * g.hw)); }
        else { hw = (int)(i % g.hw); c = (int)((i / g.hw) % g.c); n = (int)(i / ((size_t)g.c * g.hw)); }
        st(dst, i, dt, src[((size_t)n * g.c + c) * g.hw + hw]);
    }
}

int cuda_convert_input(const float *src, void *dst, DType dt, ChanGeom g, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    convert_input_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(src, dst, dt, g);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void convert_output_kernel(const void *src, float *dst, DType dt, ChanGeom g)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    GRID_STRIDE(i, total) {  // i indexes the NCHW destination
        int hw = (int)(i % g.hw), c = (int)((i / g.hw) % g.c), n = (int)(i / ((size_t)g.c * g.hw));
        dst[i] = ld(src, chan_index(g, n, c, hw), dt);
    }
}

int cuda_convert_output(const void *src, float *dst, DType dt, ChanGeom g, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    convert_output_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(src, dst, dt, g);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// Index in a KRSC filter of KCRS element i.
__device__ __forceinline__ size_t filter_index(size_t i, int c, int rs, bool nhwc)
{
    if (!nhwc) return i;
    size_t k = i / ((size_t)c * rs);
    int ci = (int)((i / rs) % c), r = (int)(i % rs);
    return (k * rs + r) * c + ci;
}

__global__ void cast_filter_kernel(const float *w, void *dst, DType dt, size_t total, int c,
                                   int rs, bool nhwc)
{
    GRID_STRIDE(i, total) st(dst, filter_index(i, c, rs, nhwc), dt, w[i]);
}

int cuda_cast_filter(const float *w, void *dst, DType dt, int k, int c, int rs, bool nhwc,
                     cudaStream_t s)
{
    size_t total = (size_t)k * c * rs;
    cast_filter_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(w, dst, dt, total, c, rs, nhwc);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void gather_filter_grad_kernel(const void *g, DType dt, float *grad, size_t total,
                                          int c, int rs, bool nhwc, bool accum)
{
    GRID_STRIDE(i, total) {
        float v = ld(g, filter_index(i, c, rs, nhwc), dt);
        grad[i] = accum ? grad[i] + v : v;
    }
}

int cuda_gather_filter_grad(const void *g, DType dt, float *grad, int k, int c, int rs,
                            bool nhwc, bool accum, cudaStream_t s)
{
    size_t total = (size_t)k * c * rs;
    gather_filter_grad_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(g, dt, grad, total, c, rs,
                                                                        nhwc, accum);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void cast_kernel(const float *src, void *dst, DType dt, size_t n)
{
    GRID_STRIDE(i, n) st(dst, i, dt, src[i]);
}

int cuda_cast(const float *src, void *dst, DType dt, size_t n, cudaStream_t s)
{
    cast_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(src, dst, dt, n);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// ---- batch norm ----

// One block per channel: two passes (mean, then variance) over N*HW elements.
__global__ void bn_stats_kernel(const void *x, DType dt, ChanGeom g, float *save_mean,
                                float *save_invstd, float *rm, float *rv)
{
    int c = blockIdx.x;
    size_t m = (size_t)g.n * g.hw;
    float s = 0.0f;
    for (size_t i = threadIdx.x; i < m; i += blockDim.x)
        s += ld(x, chan_index(g, (int)(i / g.hw), c, (int)(i % g.hw)), dt);
    float mean = block_sum(s) / (float)m;
    float q = 0.0f;
    for (size_t i = threadIdx.x; i < m; i += blockDim.x) {
        float d = ld(x, chan_index(g, (int)(i / g.hw), c, (int)(i % g.hw)), dt) - mean;
        q += d * d;
    }
    float var = block_sum(q) / (float)m;
    if (threadIdx.x == 0) {
        save_mean[c] = mean;
        save_invstd[c] = rsqrtf(var + MODEL_BN_EPS);
        if (rm) {
            float unbiased = m > 1 ? var * (float)m / (float)(m - 1) : var;
            rm[c] = (1.0f - MODEL_BN_MOMENTUM) * rm[c] + MODEL_BN_MOMENTUM * mean;
            rv[c] = (1.0f - MODEL_BN_MOMENTUM) * rv[c] + MODEL_BN_MOMENTUM * unbiased;
        }
    }
}

// y = x * gamma * invstd + (beta - mean * gamma * invstd); `infer` takes a variance.
__global__ void bn_apply_kernel(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                                const float *beta, const float *mean, const float *stat,
                                bool infer, bool relu)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    GRID_STRIDE(i, total) {
        int c = chan_of(g, i);
        float invstd = infer ? rsqrtf(stat[c] + MODEL_BN_EPS) : stat[c];
        float sc = gamma[c] * invstd, sh = beta[c] - mean[c] * sc;
        float v = ld(x, i, dt) * sc + sh;
        st(y, i, dt, relu ? fmaxf(v, 0.0f) : v);
    }
}

// NHWC: the tensor is a (rows = N*HW, C) matrix. A (32, 8) block reads 32 adjacent
// channels of 8 rows at a time (coalesced), many blocks split the rows, and per-channel
// block totals are added atomically into a and b:
//   BN_SUM_X:   a[c] += x
//   BN_SUM_VAR: b[c] += (x - a[c] / rows)^2      (a holds the sum from BN_SUM_X)
//   BN_SUM_BWD: a[c] += dy, b[c] += dy * (x - mean[c]) * invstd[c]
typedef enum { BN_SUM_X, BN_SUM_VAR, BN_SUM_BWD } BnSumMode;
#define BN_TILE_C 32
#define BN_TILE_R 8

__global__ void bn_nhwc_sum_kernel(const void *x, const void *relu_y, const void *dy, DType dt,
                                   size_t rows, int C, const float *mean, const float *invstd,
                                   float *a, float *b, BnSumMode mode)
{
    __shared__ float sa[BN_TILE_R][BN_TILE_C + 1], sb[BN_TILE_R][BN_TILE_C + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * BN_TILE_C + tx;
    float ta = 0.0f, tb = 0.0f;
    if (c < C) {
        float mu = mode == BN_SUM_VAR ? a[c] / (float)rows : mode == BN_SUM_BWD ? mean[c] : 0.0f;
        float is = mode == BN_SUM_BWD ? invstd[c] : 1.0f;
        for (size_t r = (size_t)blockIdx.y * BN_TILE_R + ty; r < rows;
             r += (size_t)gridDim.y * BN_TILE_R) {
            size_t i = r * C + c;
            float v = ld(x, i, dt);
            if (mode == BN_SUM_X) {
                ta += v;
            } else if (mode == BN_SUM_VAR) {
                tb += (v - mu) * (v - mu);
            } else {
                float d = relu_y && ld(relu_y, i, dt) <= 0.0f ? 0.0f : ld(dy, i, dt);
                ta += d;
                tb += d * (v - mu) * is;
            }
        }
    }
    sa[ty][tx] = ta;
    sb[ty][tx] = tb;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int k = 1; k < BN_TILE_R; k++) { ta += sa[k][tx]; tb += sb[k][tx]; }
        if (mode != BN_SUM_VAR) atomicAdd(&a[c], ta);
        if (mode != BN_SUM_X) atomicAdd(&b[c], tb);
    }
}

static int bn_nhwc_sum(const void *x, const void *relu_y, const void *dy, DType dt, ChanGeom g,
                       const float *mean, const float *invstd, float *a, float *b, BnSumMode mode,
                       cudaStream_t s)
{
    size_t rows = (size_t)g.n * g.hw;
    unsigned gx = (unsigned)((g.c + BN_TILE_C - 1) / BN_TILE_C);
    size_t gy = (rows + 255) / 256;  // >= 32 rows per thread row
    size_t cap = 2048 / gx;
    if (gy > cap) gy = cap;
    if (gy < 1) gy = 1;
    dim3 grid(gx, (unsigned)gy), block(BN_TILE_C, BN_TILE_R);
    bn_nhwc_sum_kernel<<<grid, block, 0, s>>>(x, relu_y, dy, dt, rows, g.c, mean, invstd, a, b,
                                              mode);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// Turns the NHWC sums (save_mean = sum x, save_invstd = sum (x - mean)^2) into the
// batch statistics and updates the running statistics.
__global__ void bn_nhwc_finish_kernel(int C, size_t rows, float *save_mean, float *save_invstd,
                                      float *rm, float *rv)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float mean = save_mean[c] / (float)rows, var = save_invstd[c] / (float)rows;
    save_mean[c] = mean;
    save_invstd[c] = rsqrtf(var + MODEL_BN_EPS);
    if (rm) {
        float unbiased = rows > 1 ? var * (float)rows / (float)(rows - 1) : var;
        rm[c] = (1.0f - MODEL_BN_MOMENTUM) * rm[c] + MODEL_BN_MOMENTUM * mean;
        rv[c] = (1.0f - MODEL_BN_MOMENTUM) * rv[c] + MODEL_BN_MOMENTUM * unbiased;
    }
}

// dgamma/dbeta (=|+=) the NHWC backward sums in scratch (sum dy, then sum dy * xhat).
__global__ void bn_nhwc_bwd_finish_kernel(int C, const float *scratch, float *dgamma, float *dbeta,
                                          bool accum)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    dbeta[c] = accum ? dbeta[c] + scratch[c] : scratch[c];
    dgamma[c] = accum ? dgamma[c] + scratch[C + c] : scratch[C + c];
}

static unsigned blocks_for(int n) { return (unsigned)((n + CUDA_THREADS - 1) / CUDA_THREADS); }

static int bn_stats(const void *x, DType dt, ChanGeom g, float *save_mean, float *save_invstd,
                    float *running_mean, float *running_var, cudaStream_t s)
{
    if (!g.nhwc) {
        bn_stats_kernel<<<g.c, CUDA_THREADS, 0, s>>>(x, dt, g, save_mean, save_invstd,
                                                     running_mean, running_var);
        CUDA_TRY(cudaGetLastError());
        return 0;
    }
    CUDA_TRY(cudaMemsetAsync(save_mean, 0, g.c * sizeof(float), s));
    CUDA_TRY(cudaMemsetAsync(save_invstd, 0, g.c * sizeof(float), s));
    TRY(bn_nhwc_sum(x, NULL, NULL, dt, g, NULL, NULL, save_mean, save_invstd, BN_SUM_X, s));
    TRY(bn_nhwc_sum(x, NULL, NULL, dt, g, NULL, NULL, save_mean, save_invstd, BN_SUM_VAR, s));
    bn_nhwc_finish_kernel<<<blocks_for(g.c), CUDA_THREADS, 0, s>>>(
        g.c, (size_t)g.n * g.hw, save_mean, save_invstd, running_mean, running_var);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

size_t cuda_bn_scratch_floats(ChanGeom g) { return 2 * (size_t)g.c; }

static int bn_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                        const float *beta, float *save_mean, float *save_invstd,
                        float *running_mean, float *running_var, bool relu, cudaStream_t s)
{
    TRY(bn_stats(x, dt, g, save_mean, save_invstd, running_mean, running_var, s));
    size_t total = (size_t)g.n * g.c * g.hw;
    bn_apply_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(x, y, dt, g, gamma, beta, save_mean,
                                                             save_invstd, false, relu);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cuda_bn_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                      const float *beta, float *save_mean, float *save_invstd,
                      float *running_mean, float *running_var, float *scratch, cudaStream_t s)
{
    (void)scratch;
    return bn_fwd_train(x, y, dt, g, gamma, beta, save_mean, save_invstd, running_mean,
                        running_var, false, s);
}

int cuda_bn_relu_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                           const float *beta, float *save_mean, float *save_invstd,
                           float *running_mean, float *running_var, float *scratch,
                           cudaStream_t s)
{
    (void)scratch;
    return bn_fwd_train(x, y, dt, g, gamma, beta, save_mean, save_invstd, running_mean,
                        running_var, true, s);
}

static int bn_fwd_infer(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                        const float *beta, const float *running_mean, const float *running_var,
                        bool relu, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    bn_apply_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(x, y, dt, g, gamma, beta,
                                                             running_mean, running_var, true, relu);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cuda_bn_fwd_infer(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                      const float *beta, const float *running_mean, const float *running_var,
                      cudaStream_t s)
{
    return bn_fwd_infer(x, y, dt, g, gamma, beta, running_mean, running_var, false, s);
}

int cuda_bn_relu_fwd_infer(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                           const float *beta, const float *running_mean,
                           const float *running_var, cudaStream_t s)
{
    return bn_fwd_infer(x, y, dt, g, gamma, beta, running_mean, running_var, true, s);
}

// One block per channel: sum(dy) and sum(dy * xhat) into the parameter grads and scratch.
__global__ void bn_bwd_reduce_kernel(const void *x, const void *relu_y, const void *dy, DType dt,
                                     ChanGeom g,
                                     const float *mean, const float *invstd, float *dgamma,
                                     float *dbeta, bool accum, float *scratch)
{
    int c = blockIdx.x;
    size_t m = (size_t)g.n * g.hw;
    float mu = mean[c], is = invstd[c], sdy = 0.0f, sdyx = 0.0f;
    for (size_t i = threadIdx.x; i < m; i += blockDim.x) {
        size_t j = chan_index(g, (int)(i / g.hw), c, (int)(i % g.hw));
        float d = relu_y && ld(relu_y, j, dt) <= 0.0f ? 0.0f : ld(dy, j, dt);
        sdy += d;
        sdyx += d * (ld(x, j, dt) - mu) * is;
    }
    float db = block_sum(sdy), dg = block_sum(sdyx);
    if (threadIdx.x == 0) {
        dbeta[c] = accum ? dbeta[c] + db : db;
        dgamma[c] = accum ? dgamma[c] + dg : dg;
        scratch[c] = db;
        scratch[g.c + c] = dg;
    }
}

__global__ void bn_bwd_dx_kernel(const void *x, const void *relu_y, const void *dy, void *dx,
                                 bool accum, DType dt, ChanGeom g, const float *gamma, const float *mean,
                                 const float *invstd, const float *scratch)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    float m = (float)g.n * g.hw;
    GRID_STRIDE(i, total) {
        int c = chan_of(g, i);
        float is = invstd[c], xhat = (ld(x, i, dt) - mean[c]) * is;
        float d = relu_y && ld(relu_y, i, dt) <= 0.0f ? 0.0f : ld(dy, i, dt);
        float v = gamma[c] * is / m * (m * d - scratch[c] - xhat * scratch[g.c + c]);
        st(dx, i, dt, accum ? ld(dx, i, dt) + v : v);
    }
}

// relu_y: the fused ReLU's output (its mask applies to dy), or NULL.
static int bn_bwd(const void *x, const void *relu_y, const void *dy, void *dx, bool accum_dx,
                  DType dt, ChanGeom g, const float *gamma, const float *save_mean,
                  const float *save_invstd, float *dgamma, float *dbeta, bool accum_param,
                  float *scratch, cudaStream_t s)
{
    if (!g.nhwc) {
        bn_bwd_reduce_kernel<<<g.c, CUDA_THREADS, 0, s>>>(x, relu_y, dy, dt, g, save_mean,
                                                          save_invstd, dgamma, dbeta, accum_param,
                                                          scratch);
        CUDA_TRY(cudaGetLastError());
    } else {
        CUDA_TRY(cudaMemsetAsync(scratch, 0, 2 * (size_t)g.c * sizeof(float), s));
        TRY(bn_nhwc_sum(x, relu_y, dy, dt, g, save_mean, save_invstd, scratch, scratch + g.c,
                        BN_SUM_BWD, s));
        bn_nhwc_bwd_finish_kernel<<<blocks_for(g.c), CUDA_THREADS, 0, s>>>(g.c, scratch, dgamma,
                                                                           dbeta, accum_param);
        CUDA_TRY(cudaGetLastError());
    }
    if (!dx) return 0;
    size_t total = (size_t)g.n * g.c * g.hw;
    bn_bwd_dx_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(x, relu_y, dy, dx, accum_dx, dt, g,
                                                              gamma, save_mean, save_invstd,
                                                              scratch);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cuda_bn_bwd(const void *x, const void *dy, void *dx, bool accum_dx, DType dt, ChanGeom g,
                const float *gamma, const float *save_mean, const float *save_invstd,
                float *dgamma, float *dbeta, bool accum_param, float *scratch, cudaStream_t s)
{
    return bn_bwd(x, NULL, dy, dx, accum_dx, dt, g, gamma, save_mean, save_invstd, dgamma, dbeta,
                  accum_param, scratch, s);
}

int cuda_bn_relu_bwd(const void *x, const void *y, const void *dy, void *dx, bool accum_dx,
                     DType dt, ChanGeom g, const float *gamma, const float *save_mean,
                     const float *save_invstd, float *dgamma, float *dbeta, bool accum_param,
                     float *scratch, cudaStream_t s)
{
    return bn_bwd(x, y, dy, dx, accum_dx, dt, g, gamma, save_mean, save_invstd, dgamma, dbeta,
                  accum_param, scratch, s);
}

// ---- elementwise ----

__global__ void relu_fwd_kernel(const void *x, void *y, DType dt, size_t n)
{
    GRID_STRIDE(i, n) st(y, i, dt, fmaxf(ld(x, i, dt), 0.0f));
}

int cuda_relu_fwd(const void *x, void *y, DType dt, size_t n, cudaStream_t s)
{
    relu_fwd_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(x, y, dt, n);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void relu_bwd_kernel(const void *y, const void *dy, void *dx, bool accum, DType dt,
                                size_t n)
{
    GRID_STRIDE(i, n) {
        float v = ld(y, i, dt) > 0.0f ? ld(dy, i, dt) : 0.0f;
        st(dx, i, dt, accum ? ld(dx, i, dt) + v : v);
    }
}

int cuda_relu_bwd(const void *y, const void *dy, void *dx, bool accum, DType dt, size_t n,
                  cudaStream_t s)
{
    relu_bwd_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(y, dy, dx, accum, dt, n);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void add_kernel(const void *a, const void *b, void *y, DType dt, size_t n, bool relu)
{
    GRID_STRIDE(i, n) {
        float v = ld(a, i, dt) + ld(b, i, dt);
        st(y, i, dt, relu ? fmaxf(v, 0.0f) : v);
    }
}

int cuda_add_fwd(const void *a, const void *b, void *y, DType dt, size_t n, cudaStream_t s)
{
    add_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(a, b, y, dt, n, false);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cuda_add_relu_fwd(const void *a, const void *b, void *y, DType dt, size_t n, cudaStream_t s)
{
    add_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(a, b, y, dt, n, true);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cuda_copy_grad(const void *dy, void *dx, bool accum, DType dt, size_t n, cudaStream_t s)
{
    if (!accum) {
        CUDA_TRY(cudaMemcpyAsync(dx, dy, n * dtype_size(dt), cudaMemcpyDeviceToDevice, s));
        return 0;
    }
    add_kernel<<<grid_for(n), CUDA_THREADS, 0, s>>>(dx, dy, dx, dt, n, false);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// ---- pooling and linear helpers ----

__global__ void gap_fwd_kernel(const void *x, void *y, DType dt, ChanGeom g)
{
    size_t total = (size_t)g.n * g.c;
    GRID_STRIDE(i, total) {
        int n = (int)(i / g.c), c = (int)(i % g.c);
        float s = 0.0f;
        for (int hw = 0; hw < g.hw; hw++) s += ld(x, chan_index(g, n, c, hw), dt);
        st(y, i, dt, s / (float)g.hw);
    }
}

int cuda_gap_fwd(const void *x, void *y, DType dt, ChanGeom g, cudaStream_t s)
{
    gap_fwd_kernel<<<grid_for((size_t)g.n * g.c), CUDA_THREADS, 0, s>>>(x, y, dt, g);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void gap_bwd_kernel(const void *dy, void *dx, bool accum, DType dt, ChanGeom g)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    GRID_STRIDE(i, total) {
        int n = (int)(i / ((size_t)g.c * g.hw)), c = chan_of(g, i);
        float v = ld(dy, (size_t)n * g.c + c, dt) / (float)g.hw;
        st(dx, i, dt, accum ? ld(dx, i, dt) + v : v);
    }
}

int cuda_gap_bwd(const void *dy, void *dx, bool accum, DType dt, ChanGeom g, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    gap_bwd_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(dy, dx, accum, dt, g);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void bias_add_kernel(void *y, const float *b, DType dt, int n, int m)
{
    size_t total = (size_t)n * m;
    GRID_STRIDE(i, total) st(y, i, dt, ld(y, i, dt) + b[i % m]);
}

int cuda_bias_add(void *y, const float *b, DType dt, int n, int m, cudaStream_t s)
{
    bias_add_kernel<<<grid_for((size_t)n * m), CUDA_THREADS, 0, s>>>(y, b, dt, n, m);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

__global__ void bias_grad_kernel(const void *dy, float *db, bool accum, DType dt, int n, int m)
{
    GRID_STRIDE(j, (size_t)m) {
        float s = 0.0f;
        for (int i = 0; i < n; i++) s += ld(dy, (size_t)i * m + j, dt);
        db[j] = accum ? db[j] + s : s;
    }
}

int cuda_bias_grad(const void *dy, float *db, bool accum, DType dt, int n, int m, cudaStream_t s)
{
    bias_grad_kernel<<<grid_for((size_t)m), CUDA_THREADS, 0, s>>>(dy, db, accum, dt, n, m);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// ---- softmax cross-entropy ----

// Largest value (lowest index on ties) over the block; every thread gets the result.
__device__ void block_argmax(float *v, int *a)
{
    __shared__ float sv[32];
    __shared__ int sa[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_down_sync(0xffffffffu, *v, o);
        int oa = __shfl_down_sync(0xffffffffu, *a, o);
        if (ov > *v || (ov == *v && oa < *a)) { *v = ov; *a = oa; }
    }
    __syncthreads();
    if (lane == 0) { sv[warp] = *v; sa[warp] = *a; }
    __syncthreads();
    if (warp == 0) {
        *v = lane < nwarps ? sv[lane] : -INFINITY;
        *a = lane < nwarps ? sa[lane] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_down_sync(0xffffffffu, *v, o);
            int oa = __shfl_down_sync(0xffffffffu, *a, o);
            if (ov > *v || (ov == *v && oa < *a)) { *v = ov; *a = oa; }
        }
        if (lane == 0) { sv[0] = *v; sa[0] = *a; }
    }
    __syncthreads();
    *v = sv[0];
    *a = sa[0];
}

// One block per sample.
__global__ void softmax_ce_kernel(const void *z, DType dt, const int32_t *labels, int n, int m,
                                  const float *scale, void *dz, float *loss_sum, int *correct)
{
    size_t base = (size_t)blockIdx.x * m;
    float best = -INFINITY;
    int arg = INT_MAX;
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        float v = ld(z, base + j, dt);
        if (v > best || (v == best && j < arg)) { best = v; arg = j; }
    }
    block_argmax(&best, &arg);
    float se = 0.0f;
    for (int j = threadIdx.x; j < m; j += blockDim.x) se += expf(ld(z, base + j, dt) - best);
    float lse = best + logf(block_sum(se));
    int label = labels[blockIdx.x];
    bool valid = label >= 0 && label < m;
    if (threadIdx.x == 0) {
        float loss = valid ? lse - ld(z, base + label, dt) : NAN;
        atomicAdd(loss_sum, loss / (float)n);
        if (correct && arg == label) atomicAdd(correct, 1);
    }
    if (!dz) return;
    float k = (scale ? *scale : 1.0f) / (float)n;
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        float p = expf(ld(z, base + j, dt) - lse);
        st(dz, base + j, dt, (p - (j == label ? 1.0f : 0.0f)) * k);
    }
}

int cuda_softmax_ce(const void *logits, DType dt, const int32_t *labels, int n, int m,
                    const float *scale, void *dlogits, float *loss_sum, int *correct,
                    cudaStream_t s)
{
    softmax_ce_kernel<<<n, CUDA_THREADS, 0, s>>>(logits, dt, labels, n, m, scale, dlogits,
                                                 loss_sum, correct);
    CUDA_TRY(cudaGetLastError());
    return 0;
}
