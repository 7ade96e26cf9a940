// pin.c: the CUDA calls behind the loader's pinning stage (cudart only).
#include "loaders/pin.h"

#include "kernels/gpu_device.h"
#include "loaders/errors.h"

#include <cuda_runtime_api.h>

int pin_check_available(void)
{
    char why[256];
    if (!gpu_device_available(why, sizeof why)) return loaders_fail("%s", why);
    return 0;
}

int pin_alloc(size_t bytes, void **ptr)
{
    if (pin_check_available() != 0) return -1;
    cudaError_t e = cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return loaders_fail("pin: cudaHostAlloc(%zu bytes) failed: %s", bytes,
                            cudaGetErrorString(e));
    }
    return 0;
}

void pin_free(void *ptr)
{
    if (ptr) cudaFreeHost(ptr);
}

int pin_register(void *ptr, size_t bytes)
{
    if (pin_check_available() != 0) return -1;
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess)
        return loaders_fail("pin: cudaHostRegister(%zu bytes) failed: %s", bytes,
                            cudaGetErrorString(e));
    return 0;
}

void pin_unregister(void *ptr)
{
    if (ptr) cudaHostUnregister(ptr);
}
