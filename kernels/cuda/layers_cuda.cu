// layers_cuda.cu: our CUDA kernels for the layers cuDNN and cuBLAS do not cover
// (see layers_cuda.cuh). All arithmetic is fp32; storage is fp32, fp16 or bf16, chosen
// at compile time (templates) and moved 16 bytes per access where the pointers allow.
// This file: casts and layouts, the element-wise ops, pooling, the linear layer's bias,
// and the loss; batch normalisation is in layers_cuda_bn.cu.
#include "kernels/layers_cuda.cuh"

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "kernels/check.h"
#include "kernels/cuda/layers_cuda_typed.cuh"

// ---- element-wise map: y[i] = op(a[i], b[i], y[i]) ----
// Op::kB: reads b; Op::kY: reads y (accumulation). y may alias a or b (each thread reads
// its elements before it writes them), which the in-place guarantee of the header needs.

struct OpCast {
    static constexpr bool kB = false, kY = false;
    __device__ float operator()(float a, float, float) const { return a; }
};
struct OpRelu {
    static constexpr bool kB = false, kY = false;
    __device__ float operator()(float a, float, float) const { return fmaxf(a, 0.0f); }
};
template <bool ACC> struct OpReluBwd {  // a = y (forward output), b = dy, y = dx
    static constexpr bool kB = true, kY = ACC;
    __device__ float operator()(float y, float dy, float dx) const
    {
        float v = y > 0.0f ? dy : 0.0f;
        return ACC ? dx + v : v;
    }
};
template <bool RELU> struct OpAdd {
    static constexpr bool kB = true, kY = false;
    __device__ float operator()(float a, float b, float) const
    {
        return RELU ? fmaxf(a + b, 0.0f) : a + b;
    }
};
struct OpAccum {  // a = dy, y = dx: dx += dy
    static constexpr bool kB = false, kY = true;
    __device__ float operator()(float dy, float, float dx) const { return dx + dy; }
};

template <typename TA, typename T, int V, class Op>
__global__ void __launch_bounds__(CUDA_THREADS)
    map_kernel(const TA *a, const T *b, T *y, size_t n, Op op)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nv = n / V;
    for (size_t i = t0; i < nv; i += stride) {
        float fa[V], fb[V], fy[V];
        load_v<TA, V>(a, i * V, fa);
        if constexpr (Op::kB) load_v<T, V>(b, i * V, fb);
        else {
#pragma unroll
            for (int k = 0; k < V; k++) fb[k] = 0.0f;
        }
        if constexpr (Op::kY) load_v<T, V>(y, i * V, fy);
        else {
#pragma unroll
            for (int k = 0; k < V; k++) fy[k] = 0.0f;
        }
#pragma unroll
        for (int k = 0; k < V; k++) fy[k] = op(fa[k], fb[k], fy[k]);
        store_v<T, V>(y, i * V, fy);
    }
    for (size_t i = nv * V + t0; i < n; i += stride) {  // the tail (V > 1 only)
        float vb = 0.0f, vy = 0.0f;
        if constexpr (Op::kB) vb = to_f(b[i]);
        if constexpr (Op::kY) vy = to_f(y[i]);
        y[i] = from_f<T>(op(to_f(a[i]), vb, vy));
    }
}

template <typename TA, typename T, class Op>
static int map_launch(const TA *a, const T *b, T *y, size_t n, Op op, cudaStream_t s)
{
    constexpr int V = VecWidth<T>::value;
    if (aligned16(a) && aligned16(y) && (!Op::kB || aligned16(b)))
        map_kernel<TA, T, V, Op><<<grid_for(n / V + 1), CUDA_THREADS, 0, s>>>(a, b, y, n, op);
    else
        map_kernel<TA, T, 1, Op><<<grid_for(n), CUDA_THREADS, 0, s>>>(a, b, y, n, op);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// ---- casts and layouts ----

// NHWC destination from an fp32 NCHW source: one thread per pixel (n, hw), C channels.
template <typename T>
__global__ void convert_input_nhwc_kernel(const float *src, T *dst, ChanGeom g)
{
    const size_t pixels = (size_t)g.n * g.hw;
    GRID_STRIDE(p, pixels) {
        size_t n = p / g.hw, hw = p - n * g.hw;
        const float *in = src + n * g.c * g.hw + hw;
        T *out = dst + p * g.c;
        for (int c = 0; c < g.c; c++) out[c] = from_f<T>(in[(size_t)c * g.hw]);
    }
}

template <typename T>
__global__ void convert_output_nhwc_kernel(const T *src, float *dst, ChanGeom g)
{
    const size_t pixels = (size_t)g.n * g.hw;
    GRID_STRIDE(p, pixels) {
        size_t n = p / g.hw, hw = p - n * g.hw;
        const T *in = src + p * g.c;
        float *out = dst + n * g.c * g.hw + hw;
        for (int c = 0; c < g.c; c++) out[(size_t)c * g.hw] = to_f(in[c]);
    }
}

int cuda_convert_input(const float *src, void *dst, DType dt, ChanGeom g, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    int rc = 0;
    if (!g.nhwc) {
        DISPATCH_DT(dt, T, rc = map_launch<float, T>(src, (const T *)NULL, (T *)dst, total, OpCast(), s));
        return rc;
    }
    DISPATCH_DT(dt, T, convert_input_nhwc_kernel<T><<<grid_for((size_t)g.n * g.hw), CUDA_THREADS, 0, s>>>(
                           src, (T *)dst, g));
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cuda_convert_output(const void *src, float *dst, DType dt, ChanGeom g, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    int rc = 0;
    if (!g.nhwc) {
        DISPATCH_DT(dt, T, rc = map_launch<T, float>((const T *)src, (const float *)NULL, dst, total,
                                                     OpCast(), s));
        return rc;
    }
    DISPATCH_DT(dt, T, convert_output_nhwc_kernel<T><<<grid_for((size_t)g.n * g.hw), CUDA_THREADS, 0, s>>>(
                           (const T *)src, dst, g));
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cuda_cast(const float *src, void *dst, DType dt, size_t n, cudaStream_t s)
{
    int rc = 0;
    DISPATCH_DT(dt, T, rc = map_launch<float, T>(src, (const T *)NULL, (T *)dst, n, OpCast(), s));
    return rc;
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

// ---- elementwise ----

int cuda_relu_fwd(const void *x, void *y, DType dt, size_t n, cudaStream_t s)
{
    int rc = 0;
    DISPATCH_DT(dt, T, rc = map_launch<T, T>((const T *)x, (const T *)NULL, (T *)y, n, OpRelu(), s));
    return rc;
}

int cuda_relu_bwd(const void *y, const void *dy, void *dx, bool accum, DType dt, size_t n,
                  cudaStream_t s)
{
    int rc = 0;
    if (accum)
        DISPATCH_DT(dt, T, rc = map_launch<T, T>((const T *)y, (const T *)dy, (T *)dx, n,
                                                 OpReluBwd<true>(), s));
    else
        DISPATCH_DT(dt, T, rc = map_launch<T, T>((const T *)y, (const T *)dy, (T *)dx, n,
                                                 OpReluBwd<false>(), s));
    return rc;
}

int cuda_add_fwd(const void *a, const void *b, void *y, DType dt, size_t n, cudaStream_t s)
{
    int rc = 0;
    DISPATCH_DT(dt, T, rc = map_launch<T, T>((const T *)a, (const T *)b, (T *)y, n, OpAdd<false>(), s));
    return rc;
}

// One pass: the ReLU is applied to the sum in registers.
int cuda_add_relu_fwd(const void *a, const void *b, void *y, DType dt, size_t n, cudaStream_t s)
{
    int rc = 0;
    DISPATCH_DT(dt, T, rc = map_launch<T, T>((const T *)a, (const T *)b, (T *)y, n, OpAdd<true>(), s));
    return rc;
}

int cuda_copy_grad(const void *dy, void *dx, bool accum, DType dt, size_t n, cudaStream_t s)
{
    if (!accum) {
        if (dx != dy)
            CUDA_TRY(cudaMemcpyAsync(dx, dy, n * dtype_size(dt), cudaMemcpyDeviceToDevice, s));
        return 0;
    }
    int rc = 0;
    DISPATCH_DT(dt, T, rc = map_launch<T, T>((const T *)dy, (const T *)NULL, (T *)dx, n, OpAccum(), s));
    return rc;
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

// y (N, M) += b: blockIdx.y walks rows, x the columns (no division per element).
template <typename T>
__global__ void bias_add_kernel(T *y, const float *b, int n, int m)
{
    for (int r = blockIdx.y; r < n; r += gridDim.y) {
        T *row = y + (size_t)r * m;
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x)
            row[j] = from_f<T>(to_f(row[j]) + b[j]);
    }
}

int cuda_bias_add(void *y, const float *b, DType dt, int n, int m, cudaStream_t s)
{
    dim3 grid(blocks_for(m) < 1 ? 1 : blocks_for(m), (unsigned)(n < 1 ? 1 : n > 65535 ? 65535 : n));
    DISPATCH_DT(dt, T, bias_add_kernel<T><<<grid, CUDA_THREADS, 0, s>>>((T *)y, b, n, m));
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

// One block per sample: its loss into sample_loss[sample] (summed by loss_mean_kernel in a
// fixed order, so the loss is the same bit for bit on every run: float atomics would add
// the samples in whatever order the blocks finish).
__global__ void softmax_ce_kernel(const void *z, DType dt, const int32_t *labels, int n, int m,
                                  const float *scale, float weight, void *dz, float *sample_loss,
                                  int *correct)
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
        sample_loss[blockIdx.x] = valid ? lse - ld(z, base + label, dt) : NAN;
        if (correct && arg == label) atomicAdd(correct, 1);  // integers: exact in any order
    }
    if (!dz) return;
    float k = (scale ? *scale : 1.0f) * weight / (float)n;
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        float p = expf(ld(z, base + j, dt) - lse);
        st(dz, base + j, dt, (p - (j == label ? 1.0f : 0.0f)) * k);
    }
}

// One block: *loss_sum += the mean of sample_loss[0..n), each thread's strided partial sum
// then block_sum's fixed tree (deterministic for a fixed block size).
__global__ void loss_mean_kernel(const float *sample_loss, int n, float *loss_sum)
{
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += sample_loss[i];
    float total = block_sum(acc);
    if (threadIdx.x == 0) *loss_sum += total / (float)n;
}

int cuda_softmax_ce(const void *logits, DType dt, const int32_t *labels, int n, int m,
                    const float *scale, float weight, void *dlogits, float *sample_loss,
                    float *loss_sum, int *correct, cudaStream_t s)
{
    softmax_ce_kernel<<<n, CUDA_THREADS, 0, s>>>(logits, dt, labels, n, m, scale, weight, dlogits,
                                                 sample_loss, correct);
    CUDA_TRY(cudaGetLastError());
    loss_mean_kernel<<<1, CUDA_THREADS, 0, s>>>(sample_loss, n, loss_sum);
    CUDA_TRY(cudaGetLastError());
    return 0;
}
