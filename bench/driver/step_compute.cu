// step_compute.cu: the compute kernel of the copy/compute overlap benchmarks.
#include "bench/driver/step_compute.h"

#include <math.h>

#include "kernels/check.h"

#define STEP_A 0.999f
#define STEP_B 0.001f

// in, out: (n,)
__global__ void step_compute_kernel(const float *in, float *out, size_t n, int fma_per_element)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float y = in[i];
        for (int k = 0; k < fma_per_element; k++) y = __fmaf_rn(y, STEP_A, STEP_B);
        out[i] = y;
    }
}

extern "C" int step_compute_launch(const float *in, float *out, size_t n, int fma_per_element,
                                   cudaStream_t stream)
{
    int device = 0, sms = 0;
    CUDA_TRY(cudaGetDevice(&device));
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int block = 256;
    size_t blocks = (n + block - 1) / block;
    size_t max_blocks = (size_t)sms * 8;
    if (blocks > max_blocks) blocks = max_blocks;
    if (blocks == 0) return 0;
    step_compute_kernel<<<(unsigned)blocks, block, 0, stream>>>(in, out, n, fma_per_element);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

extern "C" float step_compute_reference(float x, int fma_per_element)
{
    for (int k = 0; k < fma_per_element; k++) x = fmaf(x, STEP_A, STEP_B);
    return x;
}
