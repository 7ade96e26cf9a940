// on_device_kernels.cu: the kernels that build tensors on the device (on_device.h).
#include <curand_kernel.h>

#include "bench/on_device/on_device.h"
#include "kernels/check.h"

static const unsigned FILL_THREADS = 256, FILL_MAX_BLOCKS = 1024;

static unsigned fill_blocks(size_t work_items)
{
    size_t blocks = (work_items + FILL_THREADS - 1) / FILL_THREADS;
    if (blocks < 1) blocks = 1;
    return blocks > FILL_MAX_BLOCKS ? FILL_MAX_BLOCKS : (unsigned)blocks;
}

// Each thread owns Philox subsequence `thread` and takes 4 normals per round (one
// curand_normal4: two Box-Muller pairs from 4 uniforms), as PyTorch's distribution
// kernels do; `offset` skips what earlier draws of the same subsequence consumed.
__global__ void normal_kernel(float *dst, size_t n, unsigned long long seed, unsigned long long offset)
{
    size_t thread = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t threads = (size_t)gridDim.x * blockDim.x;
    curandStatePhilox4_32_10_t state;
    curand_init(seed, thread, offset, &state);
    for (size_t i = thread * 4; i < n; i += threads * 4) {
        float4 v = curand_normal4(&state);
        dst[i] = v.x;
        if (i + 1 < n) dst[i + 1] = v.y;
        if (i + 2 < n) dst[i + 2] = v.z;
        if (i + 3 < n) dst[i + 3] = v.w;
    }
}

__global__ void arange_kernel(int32_t *dst, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (int32_t)i;
}

__global__ void add_scaled_kernel(float *out, const float *base, const float *noise, float scale, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = base[i] + scale * noise[i];
}

extern "C" int device_fill_normal(float *dst, size_t n, uint64_t seed, uint64_t draw, cudaStream_t stream)
{
    unsigned blocks = fill_blocks((n + 3) / 4);
    size_t threads = (size_t)blocks * FILL_THREADS;
    // 32-bit values one thread consumes per draw: 4 per round
    unsigned long long per_draw = 4ull * ((n + 4 * threads - 1) / (4 * threads));
    normal_kernel<<<blocks, FILL_THREADS, 0, stream>>>(dst, n, seed, draw * per_draw);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

extern "C" int device_fill_arange(int32_t *dst, size_t n, cudaStream_t stream)
{
    arange_kernel<<<fill_blocks(n), FILL_THREADS, 0, stream>>>(dst, n);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

extern "C" int device_add_scaled(float *out, const float *base, const float *noise, float scale, size_t n,
                                 cudaStream_t stream)
{
    add_scaled_kernel<<<fill_blocks(n), FILL_THREADS, 0, stream>>>(out, base, noise, scale, n);
    CUDA_TRY(cudaGetLastError());
    return 0;
}
