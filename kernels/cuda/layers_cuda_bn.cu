// layers_cuda_bn.cu: our CUDA batch normalisation (see layers_cuda.cuh): the statistics,
// the normalisation (with or without a fused ReLU) and the backward, in NCHW and NHWC.
#include <math.h>

#include "kernels/check.h"
#include "kernels/cuda/layers_cuda_typed.cuh"
#include "kernels/model.h"

// ---- batch norm ----
// Statistics: one pass over x. The reduction over (N, HW) of each channel is split into
// S parts (bn_splits: enough blocks to fill the GPU when C is small); each block keeps
// per-thread Welford/Chan accumulators (count, mean, M2), merges them in a fixed order
// (warp shuffles, then shared memory) and writes one partial per (split, channel) to the
// scratch; a finishing kernel merges the S partials of each channel in split order. No
// float atomics: the result is the same bit for bit run to run.
// Backward: one reduction pass (sum dy, sum dy * xhat, dy masked by the fused ReLU's output)
// with the same split and fixed-order merge, then one dx pass.
// Apply passes (y, dx): NCHW walks planes (n, c) - one warp per plane, c known per plane;
// NHWC walks vectors of V adjacent channels, c advanced by addition, per-channel
// coefficients in shared memory.
// Scratch (cuda_bn_scratch_floats): partial counts, means and M2 [S][C] each (the backward
// reuses the first two as partial sums), then 2 * C finished backward sums.

#define BN_TARGET_BLOCKS 1024   // blocks the statistics pass aims for (8+ per SM)
#define BN_MIN_BLOCK 8192       // elements a statistics block should at least reduce
#define BN_TILE_C 64            // NHWC: channels per block
#define BN_WARPS 8              // NCHW: warps per block (one plane per warp at a time)

// Number of splits of each channel's reduction; a function of g only (the scratch size).
static int bn_splits(ChanGeom g)
{
    // NCHW: a block reduces m / S elements of one channel; NHWC: m / S rows of a channel tile
    size_t m = (size_t)g.n * g.hw;
    size_t tiles = g.nhwc ? ((size_t)g.c + BN_TILE_C - 1) / BN_TILE_C : (size_t)g.c;
    size_t per_block = g.nhwc ? (size_t)(g.c < BN_TILE_C ? g.c : BN_TILE_C) : 1;  // NHWC: of a tile
    size_t s = (BN_TARGET_BLOCKS + tiles - 1) / tiles;
    size_t by_work = m * per_block / BN_MIN_BLOCK;
    if (s > by_work) s = by_work;
    if (!g.nhwc && s > (size_t)g.n) s = (size_t)g.n;  // NCHW splits whole images
    if (s > 1024) s = 1024;
    return s < 1 ? 1 : (int)s;
}

size_t cuda_bn_scratch_floats(ChanGeom g)
{
    return 3 * (size_t)bn_splits(g) * g.c + 2 * (size_t)g.c;
}

// Running (count, mean, M2) of a set of values.
struct Welford { float n, mean, m2; };

// Chan et al.'s merge of (nb, mb, qb) into a.
__device__ __forceinline__ void welford_merge(Welford &a, float nb, float mb, float qb)
{
    float n = a.n + nb;
    if (n == 0.0f) return;
    float d = mb - a.mean, r = nb / n;
    a.mean += d * r;
    a.m2 += qb + d * d * a.n * r;
    a.n = n;
}

// Adds V values: their own mean and M2 (two passes in registers), then one merge.
template <int V>
__device__ __forceinline__ void welford_add(Welford &a, const float (&f)[V])
{
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) s += f[k];
    float mv = s * (1.0f / V), q = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) q += (f[k] - mv) * (f[k] - mv);
    welford_merge(a, (float)V, mv, q);
}

__device__ __forceinline__ void welford_warp(Welford &a)
{
    for (int o = 16; o > 0; o >>= 1) {
        float nb = __shfl_down_sync(0xffffffffu, a.n, o);
        float mb = __shfl_down_sync(0xffffffffu, a.mean, o);
        float qb = __shfl_down_sync(0xffffffffu, a.m2, o);
        welford_merge(a, nb, mb, qb);
    }
}

// Visits the HW elements of the plane starting at element `base`, `lanes` threads at a
// time: a scalar head up to the first multiple of V, V-wide accesses, a scalar tail.
template <int V, class FS, class FV>
__device__ __forceinline__ void plane_for(size_t base, int hw, int lane, int lanes, FS fs, FV fv)
{
    int head = (int)((V - (base & (V - 1))) & (V - 1));
    if (head > hw) head = hw;
    int nv = (hw - head) / V;
    for (int i = lane; i < head; i += lanes) fs(base + i);
    const size_t vb = base + head;
    for (int i = lane; i < nv; i += lanes) fv(vb + (size_t)i * V);
    for (int i = head + nv * V + lane; i < hw; i += lanes) fs(base + i);
}

// Partials of split blockIdx.y of channel blockIdx.x (NCHW): warps take images in turn.
template <typename T, int V>
__global__ void __launch_bounds__(BN_WARPS * 32)
    bn_stats_nchw_kernel(const T *x, ChanGeom g, int splits, float *part)
{
    const int c = blockIdx.x, j = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = (int)((long long)g.n * j / splits), n1 = (int)((long long)g.n * (j + 1) / splits);
    Welford a = {0.0f, 0.0f, 0.0f};
    for (int n = n0 + warp; n < n1; n += BN_WARPS)
        plane_for<V>(((size_t)n * g.c + c) * g.hw, g.hw, lane, 32,
                     [&](size_t i) { float f[1] = {to_f(x[i])}; welford_add<1>(a, f); },
                     [&](size_t i) { float f[V]; load_v<T, V>(x, i, f); welford_add<V>(a, f); });
    welford_warp(a);
    __shared__ Welford sh[BN_WARPS];
    if (lane == 0) sh[warp] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
        Welford t = sh[0];
        for (int w = 1; w < BN_WARPS; w++) welford_merge(t, sh[w].n, sh[w].mean, sh[w].m2);
        size_t sc = (size_t)splits * g.c, k = (size_t)j * g.c + c;
        part[k] = t.n;
        part[sc + k] = t.mean;
        part[2 * sc + k] = t.m2;
    }
}

// NHWC: the tensor is a (rows = N*HW, C) matrix. Block (tile, split): BN_TILE_C channels
// (TX threads of V adjacent channels) by the split's rows (TY rows at a time).
template <typename T, int V>
__global__ void __launch_bounds__(CUDA_THREADS)
    bn_stats_nhwc_kernel(const T *x, ChanGeom g, int splits, float *part)
{
    constexpr int TX = BN_TILE_C / V, TY = CUDA_THREADS / TX;
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX, j = blockIdx.y;
    const int c0 = blockIdx.x * BN_TILE_C + tx * V;
    const size_t rows = (size_t)g.n * g.hw;
    const size_t r0 = rows * j / splits, r1 = rows * (j + 1) / splits;
    float cnt = 0.0f, mean[V], m2[V];
#pragma unroll
    for (int k = 0; k < V; k++) mean[k] = m2[k] = 0.0f;
    if (c0 < g.c) {
        for (size_t r = r0 + ty; r < r1; r += TY) {
            float f[V];
            load_v<T, V>(x, r * g.c + c0, f);
            cnt += 1.0f;
            float inv = 1.0f / cnt;
#pragma unroll
            for (int k = 0; k < V; k++) {
                float d = f[k] - mean[k];
                mean[k] += d * inv;
                m2[k] += d * (f[k] - mean[k]);
            }
        }
    }
    __shared__ float s_cnt[TY], s_mean[TY][BN_TILE_C], s_m2[TY][BN_TILE_C];
    if (tx == 0) s_cnt[ty] = cnt;
#pragma unroll
    for (int k = 0; k < V; k++) { s_mean[ty][tx * V + k] = mean[k]; s_m2[ty][tx * V + k] = m2[k]; }
    __syncthreads();
    for (int h = TY / 2; h > 0; h >>= 1) {  // fixed-order tree over the rows
        if (ty < h) {
            float na = s_cnt[ty], nb = s_cnt[ty + h];
#pragma unroll
            for (int k = 0; k < V; k++) {
                Welford a = {na, s_mean[ty][tx * V + k], s_m2[ty][tx * V + k]};
                welford_merge(a, nb, s_mean[ty + h][tx * V + k], s_m2[ty + h][tx * V + k]);
                s_mean[ty][tx * V + k] = a.mean;
                s_m2[ty][tx * V + k] = a.m2;
            }
        }
        __syncthreads();
        if (ty < h && tx == 0) s_cnt[ty] += s_cnt[ty + h];
        __syncthreads();
    }
    if (ty == 0 && c0 < g.c) {
        size_t sc = (size_t)splits * g.c;
#pragma unroll
        for (int k = 0; k < V; k++) {
            size_t i = (size_t)j * g.c + c0 + k;
            part[i] = s_cnt[0];
            part[sc + i] = s_mean[0][tx * V + k];
            part[2 * sc + i] = s_m2[0][tx * V + k];
        }
    }
}

// Per channel: the S partials merged in split order; batch statistics and running stats.
__global__ void bn_stats_finish_kernel(int C, int splits, const float *part, float *save_mean,
                                       float *save_invstd, float *rm, float *rv)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    size_t sc = (size_t)splits * C;
    Welford a = {0.0f, 0.0f, 0.0f};
    for (int j = 0; j < splits; j++) {
        size_t i = (size_t)j * C + c;
        welford_merge(a, part[i], part[sc + i], part[2 * sc + i]);
    }
    float var = a.n > 0.0f ? a.m2 / a.n : 0.0f;
    save_mean[c] = a.mean;
    save_invstd[c] = rsqrtf(var + MODEL_BN_EPS);
    if (rm) {
        float unbiased = a.n > 1.0f ? a.m2 / (a.n - 1.0f) : var;
        rm[c] = (1.0f - MODEL_BN_MOMENTUM) * rm[c] + MODEL_BN_MOMENTUM * a.mean;
        rv[c] = (1.0f - MODEL_BN_MOMENTUM) * rv[c] + MODEL_BN_MOMENTUM * unbiased;
    }
}

// NHWC vector width: V adjacent channels need C % V == 0 (and aligned pointers).
template <typename T> static bool bn_nhwc_vec(ChanGeom g, const void *a, const void *b,
                                              const void *c, const void *d)
{
    const int V = VecWidth<T>::value;
    return g.c % V == 0 && aligned16(a) && aligned16(b) && aligned16(c) && aligned16(d);
}

template <typename T>
static int bn_stats_t(const T *x, ChanGeom g, float *save_mean, float *save_invstd, float *rm,
                      float *rv, float *scratch, cudaStream_t s)
{
    constexpr int V = VecWidth<T>::value;
    const int splits = bn_splits(g);
    if (!g.nhwc) {
        dim3 grid((unsigned)g.c, (unsigned)splits);
        if (aligned16(x)) bn_stats_nchw_kernel<T, V><<<grid, BN_WARPS * 32, 0, s>>>(x, g, splits, scratch);
        else bn_stats_nchw_kernel<T, 1><<<grid, BN_WARPS * 32, 0, s>>>(x, g, splits, scratch);
    } else {
        dim3 grid((unsigned)((g.c + BN_TILE_C - 1) / BN_TILE_C), (unsigned)splits);
        if (bn_nhwc_vec<T>(g, x, x, x, x))
            bn_stats_nhwc_kernel<T, V><<<grid, CUDA_THREADS, 0, s>>>(x, g, splits, scratch);
        else bn_stats_nhwc_kernel<T, 1><<<grid, CUDA_THREADS, 0, s>>>(x, g, splits, scratch);
    }
    CUDA_TRY(cudaGetLastError());
    bn_stats_finish_kernel<<<blocks_for(g.c), CUDA_THREADS, 0, s>>>(g.c, splits, scratch, save_mean,
                                                                     save_invstd, rm, rv);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// y = x * sc[c] + sh[c] (then ReLU), sc = gamma * invstd, sh = beta - mean * sc; `infer`:
// stat is a variance (running), else an inverse std (batch).
__device__ __forceinline__ void bn_coef(int c, const float *gamma, const float *beta,
                                        const float *mean, const float *stat, bool infer,
                                        float *sc, float *sh)
{
    float invstd = infer ? rsqrtf(stat[c] + MODEL_BN_EPS) : stat[c];
    *sc = gamma[c] * invstd;
    *sh = beta[c] - mean[c] * *sc;
}

template <typename T, int V, bool RELU>
__global__ void __launch_bounds__(BN_WARPS * 32)
    bn_apply_nchw_kernel(const T *x, T *y, ChanGeom g, const float *gamma, const float *beta,
                         const float *mean, const float *stat, bool infer)
{
    const int lane = threadIdx.x & 31;
    const size_t planes = (size_t)g.n * g.c, warps = (size_t)gridDim.x * BN_WARPS;
    for (size_t p = (size_t)blockIdx.x * BN_WARPS + (threadIdx.x >> 5); p < planes; p += warps) {
        float sc, sh;
        bn_coef((int)(p % g.c), gamma, beta, mean, stat, infer, &sc, &sh);
        plane_for<V>(p * g.hw, g.hw, lane, 32,
                     [&](size_t i) {
                         float v = to_f(x[i]) * sc + sh;
                         y[i] = from_f<T>(RELU ? fmaxf(v, 0.0f) : v);
                     },
                     [&](size_t i) {
                         float f[V];
                         load_v<T, V>(x, i, f);
#pragma unroll
                         for (int k = 0; k < V; k++) {
                             f[k] = f[k] * sc + sh;
                             if (RELU) f[k] = fmaxf(f[k], 0.0f);
                         }
                         store_v<T, V>(y, i, f);
                     });
    }
}

template <typename T, int V, bool RELU>
__global__ void __launch_bounds__(CUDA_THREADS)
    bn_apply_nhwc_kernel(const T *x, T *y, ChanGeom g, const float *gamma, const float *beta,
                         const float *mean, const float *stat, bool infer)
{
    extern __shared__ float coef[];  // sc[C], sh[C]
    float *s_sc = coef, *s_sh = coef + g.c;
    for (int c = threadIdx.x; c < g.c; c += blockDim.x)
        bn_coef(c, gamma, beta, mean, stat, infer, &s_sc[c], &s_sh[c]);
    __syncthreads();
    const size_t nv = (size_t)g.n * g.hw * g.c / V, stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int c = (int)((i * V) % g.c);
    const int step = (int)((stride * V) % g.c);
    for (; i < nv; i += stride) {
        float f[V];
        load_v<T, V>(x, i * V, f);
#pragma unroll
        for (int k = 0; k < V; k++) {
            f[k] = f[k] * s_sc[c + k] + s_sh[c + k];
            if (RELU) f[k] = fmaxf(f[k], 0.0f);
        }
        store_v<T, V>(y, i * V, f);
        c += step;
        if (c >= g.c) c -= g.c;
    }
}

static unsigned bn_plane_blocks(ChanGeom g)
{
    size_t b = ((size_t)g.n * g.c + BN_WARPS - 1) / BN_WARPS;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

template <typename T, bool RELU>
static int bn_apply_t(const T *x, T *y, ChanGeom g, const float *gamma, const float *beta,
                      const float *mean, const float *stat, bool infer, cudaStream_t s)
{
    constexpr int V = VecWidth<T>::value;
    if (!g.nhwc) {
        if (aligned16(x) && aligned16(y))
            bn_apply_nchw_kernel<T, V, RELU><<<bn_plane_blocks(g), BN_WARPS * 32, 0, s>>>(
                x, y, g, gamma, beta, mean, stat, infer);
        else
            bn_apply_nchw_kernel<T, 1, RELU><<<bn_plane_blocks(g), BN_WARPS * 32, 0, s>>>(
                x, y, g, gamma, beta, mean, stat, infer);
    } else {
        size_t smem = 2 * (size_t)g.c * sizeof(float), total = (size_t)g.n * g.c * g.hw;
        if (bn_nhwc_vec<T>(g, x, y, x, y))
            bn_apply_nhwc_kernel<T, V, RELU><<<grid_for(total / V), CUDA_THREADS, smem, s>>>(
                x, y, g, gamma, beta, mean, stat, infer);
        else
            bn_apply_nhwc_kernel<T, 1, RELU><<<grid_for(total), CUDA_THREADS, smem, s>>>(
                x, y, g, gamma, beta, mean, stat, infer);
    }
    CUDA_TRY(cudaGetLastError());
    return 0;
}

static int bn_apply(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                    const float *beta, const float *mean, const float *stat, bool infer,
                    bool relu, cudaStream_t s)
{
    int rc = 0;
    if (relu)
        DISPATCH_DT(dt, T, rc = bn_apply_t<T, true>((const T *)x, (T *)y, g, gamma, beta, mean,
                                                    stat, infer, s));
    else
        DISPATCH_DT(dt, T, rc = bn_apply_t<T, false>((const T *)x, (T *)y, g, gamma, beta, mean,
                                                     stat, infer, s));
    return rc;
}

static int bn_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                        const float *beta, float *save_mean, float *save_invstd,
                        float *running_mean, float *running_var, float *scratch, bool relu,
                        cudaStream_t s)
{
    int rc = 0;
    DISPATCH_DT(dt, T, rc = bn_stats_t<T>((const T *)x, g, save_mean, save_invstd, running_mean,
                                          running_var, scratch, s));
    if (rc != 0) return rc;
    return bn_apply(x, y, dt, g, gamma, beta, save_mean, save_invstd, false, relu, s);
}

int cuda_bn_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                      const float *beta, float *save_mean, float *save_invstd,
                      float *running_mean, float *running_var, float *scratch, cudaStream_t s)
{
    return bn_fwd_train(x, y, dt, g, gamma, beta, save_mean, save_invstd, running_mean,
                        running_var, scratch, false, s);
}

int cuda_bn_relu_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                           const float *beta, float *save_mean, float *save_invstd,
                           float *running_mean, float *running_var, float *scratch,
                           cudaStream_t s)
{
    return bn_fwd_train(x, y, dt, g, gamma, beta, save_mean, save_invstd, running_mean,
                        running_var, scratch, true, s);
}

int cuda_bn_fwd_infer(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                      const float *beta, const float *running_mean, const float *running_var,
                      cudaStream_t s)
{
    return bn_apply(x, y, dt, g, gamma, beta, running_mean, running_var, true, false, s);
}

int cuda_bn_relu_fwd_infer(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                           const float *beta, const float *running_mean,
                           const float *running_var, cudaStream_t s)
{
    return bn_apply(x, y, dt, g, gamma, beta, running_mean, running_var, true, true, s);
}

// Backward reduction, NCHW: partial sum dy and sum dy * xhat of split blockIdx.y of channel
// blockIdx.x. relu_y (fused ReLU's output) masks dy, or NULL.
template <typename T, int V>
__global__ void __launch_bounds__(BN_WARPS * 32)
    bn_bwd_reduce_nchw_kernel(const T *x, const T *relu_y, const T *dy, ChanGeom g, int splits,
                              const float *mean, const float *invstd, float *part)
{
    const int c = blockIdx.x, j = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = (int)((long long)g.n * j / splits), n1 = (int)((long long)g.n * (j + 1) / splits);
    const float mu = mean[c], is = invstd[c];
    float sdy = 0.0f, sdyx = 0.0f;
    for (int n = n0 + warp; n < n1; n += BN_WARPS)
        plane_for<V>(((size_t)n * g.c + c) * g.hw, g.hw, lane, 32,
                     [&](size_t i) {
                         float d = relu_y && to_f(relu_y[i]) <= 0.0f ? 0.0f : to_f(dy[i]);
                         sdy += d;
                         sdyx += d * (to_f(x[i]) - mu) * is;
                     },
                     [&](size_t i) {
                         float fx[V], fd[V];
                         load_v<T, V>(x, i, fx);
                         load_v<T, V>(dy, i, fd);
                         if (relu_y) {
                             float fy[V];
                             load_v<T, V>(relu_y, i, fy);
#pragma unroll
                             for (int k = 0; k < V; k++) fd[k] = fy[k] <= 0.0f ? 0.0f : fd[k];
                         }
#pragma unroll
                         for (int k = 0; k < V; k++) {
                             sdy += fd[k];
                             sdyx += fd[k] * (fx[k] - mu) * is;
                         }
                     });
    sdy = warp_sum(sdy);
    sdyx = warp_sum(sdyx);
    __shared__ float sh[2][BN_WARPS];
    if (lane == 0) { sh[0][warp] = sdy; sh[1][warp] = sdyx; }
    __syncthreads();
    if (threadIdx.x == 0) {
        float a = 0.0f, b = 0.0f;
        for (int w = 0; w < BN_WARPS; w++) { a += sh[0][w]; b += sh[1][w]; }
        size_t k = (size_t)j * g.c + c;
        part[k] = a;
        part[(size_t)splits * g.c + k] = b;
    }
}

template <typename T, int V>
__global__ void __launch_bounds__(CUDA_THREADS)
    bn_bwd_reduce_nhwc_kernel(const T *x, const T *relu_y, const T *dy, ChanGeom g, int splits,
                              const float *mean, const float *invstd, float *part)
{
    constexpr int TX = BN_TILE_C / V, TY = CUDA_THREADS / TX;
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX, j = blockIdx.y;
    const int c0 = blockIdx.x * BN_TILE_C + tx * V;
    const size_t rows = (size_t)g.n * g.hw;
    const size_t r0 = rows * j / splits, r1 = rows * (j + 1) / splits;
    float sdy[V], sdyx[V], mu[V], is[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        sdy[k] = sdyx[k] = 0.0f;
        mu[k] = c0 + k < g.c ? mean[c0 + k] : 0.0f;
        is[k] = c0 + k < g.c ? invstd[c0 + k] : 0.0f;
    }
    if (c0 < g.c) {
        for (size_t r = r0 + ty; r < r1; r += TY) {
            float fx[V], fd[V];
            size_t i = r * g.c + c0;
            load_v<T, V>(x, i, fx);
            load_v<T, V>(dy, i, fd);
            if (relu_y) {
                float fy[V];
                load_v<T, V>(relu_y, i, fy);
#pragma unroll
                for (int k = 0; k < V; k++) fd[k] = fy[k] <= 0.0f ? 0.0f : fd[k];
            }
#pragma unroll
            for (int k = 0; k < V; k++) {
                sdy[k] += fd[k];
                sdyx[k] += fd[k] * (fx[k] - mu[k]) * is[k];
            }
        }
    }
    __shared__ float s_a[TY][BN_TILE_C], s_b[TY][BN_TILE_C];
#pragma unroll
    for (int k = 0; k < V; k++) { s_a[ty][tx * V + k] = sdy[k]; s_b[ty][tx * V + k] = sdyx[k]; }
    __syncthreads();
    for (int h = TY / 2; h > 0; h >>= 1) {
        if (ty < h) {
#pragma unroll
            for (int k = 0; k < V; k++) {
                s_a[ty][tx * V + k] += s_a[ty + h][tx * V + k];
                s_b[ty][tx * V + k] += s_b[ty + h][tx * V + k];
            }
        }
        __syncthreads();
    }
    if (ty == 0 && c0 < g.c) {
#pragma unroll
        for (int k = 0; k < V; k++) {
            size_t i = (size_t)j * g.c + c0 + k;
            part[i] = s_a[0][tx * V + k];
            part[(size_t)splits * g.c + i] = s_b[0][tx * V + k];
        }
    }
}

// Per channel: partial sums added in split order into dbeta/dgamma and the scratch's
// finished sums (sum[c] = sum dy, sum[C + c] = sum dy * xhat).
__global__ void bn_bwd_finish_kernel(int C, int splits, const float *part, float *sum,
                                     float *dgamma, float *dbeta, bool accum)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    size_t sc = (size_t)splits * C;
    float a = 0.0f, b = 0.0f;
    for (int j = 0; j < splits; j++) {
        a += part[(size_t)j * C + c];
        b += part[sc + (size_t)j * C + c];
    }
    sum[c] = a;
    sum[C + c] = b;
    dbeta[c] = accum ? dbeta[c] + a : a;
    dgamma[c] = accum ? dgamma[c] + b : b;
}

// dx = A (d - sum_dy / m) - B (x - mean), A = gamma * invstd, B = A * invstd * sum_dyxhat / m.
struct BnDxCoef { float a, mdy, b, mu; };

__device__ __forceinline__ BnDxCoef bn_dx_coef(int c, int C, float m, const float *gamma,
                                               const float *mean, const float *invstd,
                                               const float *sum)
{
    BnDxCoef k;
    float is = invstd[c];
    k.a = gamma[c] * is;
    k.mdy = sum[c] / m;
    k.b = k.a * is * (sum[C + c] / m);
    k.mu = mean[c];
    return k;
}

template <typename T, int V, bool ACC>
__global__ void __launch_bounds__(BN_WARPS * 32)
    bn_dx_nchw_kernel(const T *x, const T *relu_y, const T *dy, T *dx, ChanGeom g,
                      const float *gamma, const float *mean, const float *invstd, const float *sum)
{
    const int lane = threadIdx.x & 31;
    const size_t planes = (size_t)g.n * g.c, warps = (size_t)gridDim.x * BN_WARPS;
    const float m = (float)g.n * (float)g.hw;
    for (size_t p = (size_t)blockIdx.x * BN_WARPS + (threadIdx.x >> 5); p < planes; p += warps) {
        const BnDxCoef k = bn_dx_coef((int)(p % g.c), g.c, m, gamma, mean, invstd, sum);
        plane_for<V>(p * g.hw, g.hw, lane, 32,
                     [&](size_t i) {
                         float d = relu_y && to_f(relu_y[i]) <= 0.0f ? 0.0f : to_f(dy[i]);
                         float v = k.a * (d - k.mdy) - k.b * (to_f(x[i]) - k.mu);
                         if (ACC) v += to_f(dx[i]);
                         dx[i] = from_f<T>(v);
                     },
                     [&](size_t i) {
                         float fx[V], fd[V], fo[V];
                         load_v<T, V>(x, i, fx);
                         load_v<T, V>(dy, i, fd);
                         if (relu_y) {
                             float fy[V];
                             load_v<T, V>(relu_y, i, fy);
#pragma unroll
                             for (int e = 0; e < V; e++) fd[e] = fy[e] <= 0.0f ? 0.0f : fd[e];
                         }
                         if (ACC) load_v<T, V>(dx, i, fo);
#pragma unroll
                         for (int e = 0; e < V; e++) {
                             float v = k.a * (fd[e] - k.mdy) - k.b * (fx[e] - k.mu);
                             fo[e] = ACC ? fo[e] + v : v;
                         }
                         store_v<T, V>(dx, i, fo);
                     });
    }
}

template <typename T, int V, bool ACC>
__global__ void __launch_bounds__(CUDA_THREADS)
    bn_dx_nhwc_kernel(const T *x, const T *relu_y, const T *dy, T *dx, ChanGeom g,
                      const float *gamma, const float *mean, const float *invstd, const float *sum)
{
    extern __shared__ float coef[];  // a, mdy, b, mu: C each
    const float m = (float)g.n * (float)g.hw;
    for (int c = threadIdx.x; c < g.c; c += blockDim.x) {
        BnDxCoef k = bn_dx_coef(c, g.c, m, gamma, mean, invstd, sum);
        coef[c] = k.a;
        coef[g.c + c] = k.mdy;
        coef[2 * g.c + c] = k.b;
        coef[3 * g.c + c] = k.mu;
    }
    __syncthreads();
    const float *s_a = coef, *s_mdy = coef + g.c, *s_b = coef + 2 * g.c, *s_mu = coef + 3 * g.c;
    const size_t nv = (size_t)g.n * g.hw * g.c / V, stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int c = (int)((i * V) % g.c);
    const int step = (int)((stride * V) % g.c);
    for (; i < nv; i += stride) {
        float fx[V], fd[V], fo[V];
        load_v<T, V>(x, i * V, fx);
        load_v<T, V>(dy, i * V, fd);
        if (relu_y) {
            float fy[V];
            load_v<T, V>(relu_y, i * V, fy);
#pragma unroll
            for (int e = 0; e < V; e++) fd[e] = fy[e] <= 0.0f ? 0.0f : fd[e];
        }
        if (ACC) load_v<T, V>(dx, i * V, fo);
#pragma unroll
        for (int e = 0; e < V; e++) {
            float v = s_a[c + e] * (fd[e] - s_mdy[c + e]) - s_b[c + e] * (fx[e] - s_mu[c + e]);
            fo[e] = ACC ? fo[e] + v : v;
        }
        store_v<T, V>(dx, i * V, fo);
        c += step;
        if (c >= g.c) c -= g.c;
    }
}

template <typename T, bool ACC>
static int bn_dx_t(const T *x, const T *relu_y, const T *dy, T *dx, ChanGeom g, const float *gamma,
                   const float *mean, const float *invstd, const float *sum, cudaStream_t s)
{
    constexpr int V = VecWidth<T>::value;
    const T *ry = relu_y ? relu_y : x;  // alignment only
    if (!g.nhwc) {
        if (aligned16(x) && aligned16(ry) && aligned16(dy) && aligned16(dx))
            bn_dx_nchw_kernel<T, V, ACC><<<bn_plane_blocks(g), BN_WARPS * 32, 0, s>>>(
                x, relu_y, dy, dx, g, gamma, mean, invstd, sum);
        else
            bn_dx_nchw_kernel<T, 1, ACC><<<bn_plane_blocks(g), BN_WARPS * 32, 0, s>>>(
                x, relu_y, dy, dx, g, gamma, mean, invstd, sum);
    } else {
        size_t smem = 4 * (size_t)g.c * sizeof(float), total = (size_t)g.n * g.c * g.hw;
        if (bn_nhwc_vec<T>(g, x, ry, dy, dx))
            bn_dx_nhwc_kernel<T, V, ACC><<<grid_for(total / V), CUDA_THREADS, smem, s>>>(
                x, relu_y, dy, dx, g, gamma, mean, invstd, sum);
        else
            bn_dx_nhwc_kernel<T, 1, ACC><<<grid_for(total), CUDA_THREADS, smem, s>>>(
                x, relu_y, dy, dx, g, gamma, mean, invstd, sum);
    }
    CUDA_TRY(cudaGetLastError());
    return 0;
}

template <typename T>
static int bn_bwd_t(const T *x, const T *relu_y, const T *dy, T *dx, bool accum_dx, ChanGeom g,
                    const float *gamma, const float *mean, const float *invstd, float *dgamma,
                    float *dbeta, bool accum_param, float *scratch, cudaStream_t s)
{
    constexpr int V = VecWidth<T>::value;
    const int splits = bn_splits(g);
    const T *ry = relu_y ? relu_y : x;  // alignment only
    if (!g.nhwc) {
        dim3 grid((unsigned)g.c, (unsigned)splits);
        if (aligned16(x) && aligned16(ry) && aligned16(dy))
            bn_bwd_reduce_nchw_kernel<T, V><<<grid, BN_WARPS * 32, 0, s>>>(x, relu_y, dy, g, splits,
                                                                          mean, invstd, scratch);
        else
            bn_bwd_reduce_nchw_kernel<T, 1><<<grid, BN_WARPS * 32, 0, s>>>(x, relu_y, dy, g, splits,
                                                                          mean, invstd, scratch);
    } else {
        dim3 grid((unsigned)((g.c + BN_TILE_C - 1) / BN_TILE_C), (unsigned)splits);
        if (bn_nhwc_vec<T>(g, x, ry, dy, dy))
            bn_bwd_reduce_nhwc_kernel<T, V><<<grid, CUDA_THREADS, 0, s>>>(x, relu_y, dy, g, splits,
                                                                        mean, invstd, scratch);
        else
            bn_bwd_reduce_nhwc_kernel<T, 1><<<grid, CUDA_THREADS, 0, s>>>(x, relu_y, dy, g, splits,
                                                                        mean, invstd, scratch);
    }
    CUDA_TRY(cudaGetLastError());
    float *sum = scratch + 3 * (size_t)splits * g.c;
    bn_bwd_finish_kernel<<<blocks_for(g.c), CUDA_THREADS, 0, s>>>(g.c, splits, scratch, sum, dgamma,
                                                                   dbeta, accum_param);
    CUDA_TRY(cudaGetLastError());
    if (!dx) return 0;
    if (accum_dx) return bn_dx_t<T, true>(x, relu_y, dy, dx, g, gamma, mean, invstd, sum, s);
    return bn_dx_t<T, false>(x, relu_y, dy, dx, g, gamma, mean, invstd, sum, s);
}

// relu_y: the fused ReLU's output (its mask applies to dy), or NULL.
static int bn_bwd(const void *x, const void *relu_y, const void *dy, void *dx, bool accum_dx,
                  DType dt, ChanGeom g, const float *gamma, const float *save_mean,
                  const float *save_invstd, float *dgamma, float *dbeta, bool accum_param,
                  float *scratch, cudaStream_t s)
{
    int rc = 0;
    DISPATCH_DT(dt, T, rc = bn_bwd_t<T>((const T *)x, (const T *)relu_y, (const T *)dy, (T *)dx,
                                        accum_dx, g, gamma, save_mean, save_invstd, dgamma, dbeta,
                                        accum_param, scratch, s));
    return rc;
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
