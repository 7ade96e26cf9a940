// cuda_common.cuh: what every .cu file of the core shares: the activation data types
// (fp32, fp16, bf16) with load/store helpers that compute in fp32, block reductions,
// and grid sizing for grid-stride loops. Included from .cu files only.
#ifndef CUDA_COMMON_CUH
#define CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <library_types.h>
#include <stddef.h>

// Storage type of activations and compute-precision weights.
typedef enum { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 } DType;

// Geometry of an activation for per-channel kernels: (N, C, HW) in NCHW or NHWC.
typedef struct ChanGeom { int n, c, hw; bool nhwc; } ChanGeom;

#define CUDA_THREADS 256

static inline size_t dtype_size(DType t) { return t == DT_F32 ? 4 : 2; }

static inline cudaDataType dtype_cuda(DType t)
{
    return t == DT_F16 ? CUDA_R_16F : t == DT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static inline cudnnDataType_t dtype_cudnn(DType t)
{
    return t == DT_F16 ? CUDNN_DATA_HALF : t == DT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

// Blocks for a grid-stride loop over n elements.
static inline unsigned grid_for(size_t n)
{
    size_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    if (b < 1) b = 1;
    if (b > 8192) b = 8192;
    return (unsigned)b;
}

__device__ __forceinline__ float ld(const void *p, size_t i, DType t)
{
    if (t == DT_F16) return __half2float(((const __half *)p)[i]);
    if (t == DT_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ void st(void *p, size_t i, DType t, float v)
{
    if (t == DT_F16) ((__half *)p)[i] = __float2half_rn(v);
    else if (t == DT_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else ((float *)p)[i] = v;
}

// Index of element (n, c, hw) in either layout.
__device__ __forceinline__ size_t chan_index(ChanGeom g, int n, int c, int hw)
{
    return g.nhwc ? ((size_t)n * g.hw + hw) * g.c + c : ((size_t)n * g.c + c) * g.hw + hw;
}

// Channel of flat element i.
__device__ __forceinline__ int chan_of(ChanGeom g, size_t i)
{
    return g.nhwc ? (int)(i % g.c) : (int)((i / g.hw) % g.c);
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets the result.
__device__ __forceinline__ float block_sum(float v)
{
    __shared__ float sh[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // earlier readers of sh[0] are done
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

#endif
