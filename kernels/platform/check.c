// check.c: what the *_TRY macros of check.h record.
#include "kernels/check.h"

ErrorKind check_cuda_kind(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation: return ERROR_OUT_OF_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return ERROR_NO_DEVICE;
    // cudaErrorInvalidDevice (an ordinal past the devices there are) is almost always a
    // device-index bug, not a fact about the machine: a library error, so a failure.
    default: return ERROR_LIBRARY;
    }
}

int check_cuda_failed(cudaError_t e, const char *file, int line, const char *call)
{
    (void)cudaGetLastError();  // clear a non-sticky error so later calls can go on
    return error_set_at(check_cuda_kind(e), file, line, "%s: %s", call, cudaGetErrorString(e));
}

int check_cublas_failed(cublasStatus_t s, const char *file, int line, const char *call)
{
    return error_set_at(s == CUBLAS_STATUS_ALLOC_FAILED ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY,
                        file, line, "%s: %s", call, check_cublas_string(s));
}

int check_cudnn_failed(cudnnStatus_t s, const char *file, int line, const char *call)
{
    bool oom = s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
               s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    return error_set_at(oom ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY, file, line, "%s: %s", call,
                        cudnnGetErrorString(s));
}

const char *check_cublas_string(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED (out of memory)";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unknown cuBLAS status";
}
