// check.h: checks for CUDA, cuBLAS and cuDNN calls that name file and line.
// Errors are returned up the stack, not exit()ed: a failing check records the call and
// the library's status in the error store (kernels/error.h) with its kind - out of memory
// (cudaErrorMemoryAllocation, CUBLAS_STATUS_ALLOC_FAILED, cuDNN's allocation statuses), no
// device, or library - and makes the enclosing function `return -1`.
// For kernel launches: `kernel<<<...>>>(...); CUDA_TRY(cudaGetLastError());`
// (NCCL's check lives with the code that uses NCCL.)
#ifndef CHECK_H
#define CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "kernels/error.h"

#ifdef __cplusplus
extern "C" {
#endif

// The kind of a CUDA runtime error (out of memory, no device, or library).
ErrorKind check_cuda_kind(cudaError_t e);
// Record "call: status" with its kind for file:line; return -1 (the *_TRY macros).
int check_cuda_failed(cudaError_t e, const char *file, int line, const char *call);
int check_cublas_failed(cublasStatus_t s, const char *file, int line, const char *call);
int check_cudnn_failed(cudnnStatus_t s, const char *file, int line, const char *call);
const char *check_cublas_string(cublasStatus_t s);

#ifdef __cplusplus
}
#endif

#define CUDA_TRY(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) return check_cuda_failed(e_, __FILE__, __LINE__, #call); } while (0)
#define CUBLAS_TRY(call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) return check_cublas_failed(s_, __FILE__, __LINE__, #call); } while (0)
#define CUDNN_TRY(call) do { cudnnStatus_t s_ = (call); \
    if (s_ != CUDNN_STATUS_SUCCESS) return check_cudnn_failed(s_, __FILE__, __LINE__, #call); } while (0)

#endif
