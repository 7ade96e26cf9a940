// tc_gemm.cu: the square fp16 GEMM of the tensor_cores practice (tc_gemm.h).
#include "bench/tensor_cores/tc_gemm.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/check.h"
#include "kernels/error.h"

#define FILL_THREADS 256

struct TcGemm {
    int n;
    __half *a, *b, *c;
    cublasHandle_t blas;
    cudaStream_t stream;
    cudaEvent_t start, stop;
};

// Entry `index` of operand `which` times 8: an integer in [-8, 8] (a multiplicative hash).
static __host__ __device__ inline int operand_eighths(uint32_t which, uint64_t index)
{
    uint64_t x = (index + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)which * 0xc2b2ae3d27d4eb4full;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (int)(x % 17u) - 8;
}

static __global__ void fill_kernel(__half *p, size_t count, uint32_t which)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2half((float)operand_eighths(which, i) / 8.0f);
}

static int fill(__half *p, size_t count, uint32_t which, cudaStream_t s)
{
    size_t blocks = (count + FILL_THREADS - 1) / FILL_THREADS;
    fill_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), FILL_THREADS, 0, s>>>(p, count, which);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

double tc_gemm_tolerance(void) { return 1e-3; }

double tc_gemm_flops(const TcGemm *g) { return 2.0 * g->n * (double)g->n * g->n; }

void tc_gemm_free(TcGemm *g)
{
    if (!g) return;
    if (g->start) cudaEventDestroy(g->start);
    if (g->stop) cudaEventDestroy(g->stop);
    if (g->blas) cublasDestroy(g->blas);
    if (g->stream) cudaStreamDestroy(g->stream);
    cudaFree(g->a);
    cudaFree(g->b);
    cudaFree(g->c);
    free(g);
}

static int setup(TcGemm *g)
{
    size_t count = (size_t)g->n * g->n;
    CUDA_TRY(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreate(&g->start));
    CUDA_TRY(cudaEventCreate(&g->stop));
    CUDA_TRY(cudaMalloc((void **)&g->a, count * sizeof(__half)));
    CUDA_TRY(cudaMalloc((void **)&g->b, count * sizeof(__half)));
    CUDA_TRY(cudaMalloc((void **)&g->c, count * sizeof(__half)));
    CUBLAS_TRY(cublasCreate(&g->blas));
    CUBLAS_TRY(cublasSetStream(g->blas, g->stream));
    CUBLAS_TRY(cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH));  // the compute type decides
    TRY(fill(g->a, count, 1, g->stream));
    TRY(fill(g->b, count, 2, g->stream));
    CUDA_TRY(cudaMemsetAsync(g->c, 0, count * sizeof(__half), g->stream));
    CUDA_TRY(cudaStreamSynchronize(g->stream));
    return 0;
}

int tc_gemm_create(int size, TcGemm **out)
{
    *out = NULL;
    if (size <= 0 || size > 65536) return error_set(ERROR_BAD_USAGE, "tc_gemm: size %d out of 1..65536", size);
    TcGemm *g = (TcGemm *)calloc(1, sizeof *g);
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "tc_gemm: out of memory (host)");
    g->n = size;
    if (setup(g) != 0) {
        tc_gemm_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

int tc_gemm_time(TcGemm *g, double *seconds)
{
    const float one = 1.0f, zero = 0.0f;
    int n = g->n;
    CUDA_TRY(cudaEventRecord(g->start, g->stream));
    CUBLAS_TRY(cublasGemmEx(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, g->a, CUDA_R_16F, n, g->b,
                            CUDA_R_16F, n, &zero, g->c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CUDA_TRY(cudaEventRecord(g->stop, g->stream));
    CUDA_TRY(cudaEventSynchronize(g->stop));
    float ms = 0.0f;
    CUDA_TRY(cudaEventElapsedTime(&ms, g->start, g->stop));
    *seconds = 1e-3 * ms;
    return 0;
}

int tc_gemm_check(TcGemm *g, int samples, double *max_err)
{
    CUDA_TRY(cudaStreamSynchronize(g->stream));
    int n = g->n;
    double worst = 0.0;
    for (int s = 0; s < samples; s++) {
        int i = s == 0 || s == 2 ? 0 : s == 1 || s == 3 ? n - 1 : (int)((uint64_t)s * 7919u % (uint64_t)n);
        int j = s < 2 ? 0 : s < 4 ? n - 1 : (int)(((uint64_t)s * 104729u + 17u) % (uint64_t)n);
        int64_t exact = 0, magnitude = 0;  // in units of 1/64
        for (int p = 0; p < n; p++) {  // column-major: A(i, p) at i + p n, B(p, j) at p + j n
            int64_t prod = (int64_t)operand_eighths(1, (uint64_t)i + (uint64_t)p * n) *
                           operand_eighths(2, (uint64_t)p + (uint64_t)j * n);
            exact += prod;
            magnitude += prod < 0 ? -prod : prod;
        }
        __half h;
        CUDA_TRY(cudaMemcpy(&h, g->c + (size_t)j * n + i, sizeof h, cudaMemcpyDeviceToHost));
        double err = fabs((double)__half2float(h) - exact / 64.0) / (magnitude > 0 ? magnitude / 64.0 : 1.0);
        if (isnan(err)) {  // a NaN fails whatever else was seen
            worst = err;
            break;
        }
        if (err > worst) worst = err;
    }
    *max_err = worst;
    return 0;
}
