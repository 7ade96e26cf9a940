// amp_fill.cuh: deterministic operands for bench_amp's micro benchmarks (GEMM and
// convolution): entry i of operand `which` is a multiple of 1/64 in [-1, 1] from a hash
// of (which, i). Exact in fp32, tf32, fp16 and bf16 (at most 7 significant bits), so the
// host can compute exact results; non-zero, so the tensor cores do real work (all-zero
// operands draw less power and can read faster than real data). Included from .cu files.
#ifndef AMP_FILL_CUH
#define AMP_FILL_CUH

#include <stdint.h>

#include "kernels/check.h"
#include "kernels/cuda_common.cuh"

// Entry `index` of operand `which` as an integer in [-64, 64]; its value is that / 64.
static __host__ __device__ inline int amp_operand_int(uint64_t which, uint64_t index)
{
    uint64_t x = which * 0x9e3779b97f4a7c15ull + index;  // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (int)(x % 129u) - 64;
}

static __global__ void amp_fill_kernel(void *p, size_t count, DType t, uint64_t which)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        st(p, i, t, (float)amp_operand_int(which, i) / 64.0f);
}

// Fills count entries of type t at p (device memory) on stream s.
static inline int amp_fill(void *p, size_t count, DType t, uint64_t which, cudaStream_t s)
{
    if (count == 0) return 0;
    amp_fill_kernel<<<grid_for(count), CUDA_THREADS, 0, s>>>(p, count, t, which);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

#endif
