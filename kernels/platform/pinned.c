// pinned.c: cudaHostAlloc / cudaHostRegister with the error kinds of kernels/error.h.
#include "kernels/pinned.h"

#include <cuda_runtime_api.h>

#include "kernels/error.h"
#include "kernels/gpu_device.h"

int pinned_check_available(void)
{
    char why[256];
    if (!gpu_device_available(why, sizeof why)) return error_set(ERROR_NO_DEVICE, "%s", why);
    return 0;
}

static int cuda_failure(cudaError_t e, const char *what, size_t bytes)
{
    (void)cudaGetLastError();
    return error_set(e == cudaErrorMemoryAllocation ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY,
                     "%s(%zu bytes) failed: %s", what, bytes, cudaGetErrorString(e));
}

int pinned_alloc(size_t bytes, void **ptr)
{
    *ptr = NULL;
    if (pinned_check_available() != 0) return -1;
    cudaError_t e = cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return cuda_failure(e, "cudaHostAlloc", bytes);
    }
    return 0;
}

void pinned_free(void *ptr)
{
    if (ptr) cudaFreeHost(ptr);
}

int pinned_register(void *ptr, size_t bytes)
{
    if (pinned_check_available() != 0) return -1;
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) return cuda_failure(e, "cudaHostRegister", bytes);
    return 0;
}

void pinned_unregister(void *ptr)
{
    if (ptr) cudaHostUnregister(ptr);
}
