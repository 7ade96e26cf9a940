// check.c: the per-thread last-error record behind the *_TRY macros.
#include "kernels/check.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1536];

int check_fail(const char *file, int line, const char *what, const char *detail)
{
    snprintf(last_error, sizeof last_error, "%s:%d: %s: %s", file, line, what, detail);
    return -1;
}

const char *check_last_error(void) { return last_error; }

void check_clear(void) { last_error[0] = '\0'; }

bool check_last_was_oom(void)
{
    return strstr(last_error, "out of memory") != NULL ||
           strstr(last_error, "ALLOC_FAILED") != NULL;
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
