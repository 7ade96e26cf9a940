// conv_bias_cuda.cu: the convolution bias kernels of conv_bias_cuda.cuh.
#include "kernels/conv_bias_cuda.cuh"

#include "kernels/check.h"

#define GRID_STRIDE(i, total) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (total); \
         i += (size_t)gridDim.x * blockDim.x)

__global__ void conv_bias_add_kernel(void *y, const float *b, DType dt, ChanGeom g, size_t total)
{
    GRID_STRIDE(i, total) st(y, i, dt, ld(y, i, dt) + b[chan_of(g, i)]);
}

int cuda_conv_bias_add(void *y, const float *b, DType dt, ChanGeom g, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    if (total == 0) return 0;
    conv_bias_add_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(y, b, dt, g, total);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

// Block c sums channel c: thread t takes elements t, t + blockDim, ... of the channel's
// N * HW (in image-major order), then block_sum merges the threads in a fixed order.
__global__ void conv_bias_grad_kernel(const void *dy, float *db, bool accum, DType dt, ChanGeom g)
{
    int c = blockIdx.x;
    size_t per_chan = (size_t)g.n * g.hw;
    float s = 0.0f;
    for (size_t j = threadIdx.x; j < per_chan; j += blockDim.x) {
        int n = (int)(j / g.hw), hw = (int)(j % g.hw);
        s += ld(dy, chan_index(g, n, c, hw), dt);
    }
    s = block_sum(s);
    if (threadIdx.x == 0) db[c] = accum ? db[c] + s : s;
}

int cuda_conv_bias_grad(const void *dy, float *db, bool accum, DType dt, ChanGeom g,
                        cudaStream_t s)
{
    if (g.c <= 0) return 0;
    conv_bias_grad_kernel<<<(unsigned)g.c, CUDA_THREADS, 0, s>>>(dy, db, accum, dt, g);
    CUDA_TRY(cudaGetLastError());
    return 0;
}
