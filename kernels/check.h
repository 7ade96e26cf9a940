// check.h: checks for CUDA, cuBLAS, cuDNN and NCCL calls that name file and line.
// Errors are returned up the stack, not exit()ed: a failing check records a message
// (read it with check_last_error) and makes the enclosing function `return -1`.
// For kernel launches: `kernel<<<...>>>(...); CUDA_TRY(cudaGetLastError());`
#ifndef CHECK_H
#define CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

// Records "file:line: what: detail" as this thread's last error; returns -1.
int check_fail(const char *file, int line, const char *what, const char *detail);
// The last error recorded on this thread ("" when none).
const char *check_last_error(void);
// Clears this thread's last error.
void check_clear(void);
// True when the last recorded error was an out-of-memory condition.
bool check_last_was_oom(void);
const char *check_cublas_string(cublasStatus_t s);

#ifdef __cplusplus
}
#endif

#define CUDA_TRY(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) { (void)cudaGetLastError(); \
        return check_fail(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); } } while (0)
#define CUBLAS_TRY(call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) \
        return check_fail(__FILE__, __LINE__, #call, check_cublas_string(s_)); } while (0)
#define CUDNN_TRY(call) do { cudnnStatus_t s_ = (call); \
    if (s_ != CUDNN_STATUS_SUCCESS) \
        return check_fail(__FILE__, __LINE__, #call, cudnnGetErrorString(s_)); } while (0)
#define NCCL_TRY(call) do { ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) \
        return check_fail(__FILE__, __LINE__, #call, ncclGetErrorString(r_)); } while (0)
// Propagates a -1 from one of our own functions.
#define TRY(call) do { if ((call) != 0) return -1; } while (0)

#endif
