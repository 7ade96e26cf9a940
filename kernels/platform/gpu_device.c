// gpu_device.c: probing for a CUDA device without failing when there is none.
#include "kernels/gpu_device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

bool gpu_device_available(char *why, size_t why_size)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0) return true;
    (void)cudaGetLastError();
    if (why && why_size) {
        if (e == cudaErrorInsufficientDriver)
            snprintf(why, why_size, "no CUDA device (no NVIDIA driver or one older than the CUDA runtime)");
        else if (e == cudaSuccess || e == cudaErrorNoDevice)
            snprintf(why, why_size, "no CUDA device");
        else
            snprintf(why, why_size, "no CUDA device (%s)", cudaGetErrorString(e));
    }
    return false;
}
