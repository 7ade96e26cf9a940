// amp_gemm.cu: one cuBLAS GEMM per math type, timed and checked (amp_gemm.h).
#include "bench/amp/amp_gemm.h"

#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench/amp/amp_fill.cuh"
#include "bench/amp/amp_probe.h"
#include "kernels/check.h"
#include "kernels/cuda_common.cuh"
#include "kernels/error.h"

struct AmpGemm {
    AmpMath math;
    int m, n, k;
    DType in_type, out_type;
    void *a, *b, *c;
    cublasHandle_t blas;
    cudaStream_t stream;
    cudaEvent_t start, stop;
};

double amp_gemm_tolerance(AmpMath math)
{
    return math == AMP_MATH_BF16 ? 8e-3 : math == AMP_MATH_FP16 ? 1e-3 : 1e-4;
}

double amp_gemm_flops(const AmpGemm *g) { return 2.0 * g->m * g->n * g->k; }

void amp_gemm_free(AmpGemm *g)
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

static int setup(AmpGemm *g)
{
    size_t in = dtype_size(g->in_type), out = dtype_size(g->out_type);
    size_t na = (size_t)g->m * g->k, nb = (size_t)g->k * g->n, nc = (size_t)g->m * g->n;
    CUDA_TRY(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreate(&g->start));
    CUDA_TRY(cudaEventCreate(&g->stop));
    CUDA_TRY(cudaMalloc(&g->a, na * in));
    CUDA_TRY(cudaMalloc(&g->b, nb * in));
    CUDA_TRY(cudaMalloc(&g->c, nc * out));
    CUBLAS_TRY(cublasCreate(&g->blas));
    CUBLAS_TRY(cublasSetStream(g->blas, g->stream));
    // Strict fp32 must not be turned into TF32 by the handle's math mode: the default
    // mode, with the compute type saying what is allowed (as PyTorch with allow_tf32 off).
    CUBLAS_TRY(cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH));
    TRY(amp_fill(g->a, na, g->in_type, 1, g->stream));
    TRY(amp_fill(g->b, nb, g->in_type, 2, g->stream));
    CUDA_TRY(cudaMemsetAsync(g->c, 0, nc * out, g->stream));
    CUDA_TRY(cudaStreamSynchronize(g->stream));
    return 0;
}

int amp_gemm_create(AmpMath math, int m, int n, int k, AmpGemm **out)
{
    *out = NULL;
    if ((unsigned)math >= AMP_MATH_COUNT || m <= 0 || n <= 0 || k <= 0)
        return error_set(ERROR_BAD_USAGE, "amp_gemm: bad math type or size %d x %d x %d", m, n, k);
    AmpGemm *g = (AmpGemm *)calloc(1, sizeof *g);
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "amp_gemm: out of memory (host)");
    g->math = math;
    g->m = m;
    g->n = n;
    g->k = k;
    g->in_type = math == AMP_MATH_FP16 ? DT_F16 : math == AMP_MATH_BF16 ? DT_BF16 : DT_F32;
    g->out_type = g->in_type;  // autocast's output type is its input type
    if (setup(g) != 0) {
        amp_gemm_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

int amp_gemm_time(AmpGemm *g, double *seconds)
{
    const float one = 1.0f, zero = 0.0f;
    cublasComputeType_t compute = g->math == AMP_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType in = dtype_cuda(g->in_type), out = dtype_cuda(g->out_type);
    CUDA_TRY(cudaEventRecord(g->start, g->stream));
    CUBLAS_TRY(cublasGemmEx(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &one, g->a, in, g->m,
                            g->b, in, g->k, &zero, g->c, out, g->m, compute, CUBLAS_GEMM_DEFAULT));
    CUDA_TRY(cudaEventRecord(g->stop, g->stream));
    CUDA_TRY(cudaEventSynchronize(g->stop));
    float ms = 0.0f;
    CUDA_TRY(cudaEventElapsedTime(&ms, g->start, g->stop));
    *seconds = 1e-3 * ms;
    return 0;
}

// One entry of C, read back and widened to double.
static int read_entry(const AmpGemm *g, int i, int j, double *v)
{
    size_t at = (size_t)j * g->m + i;
    if (g->out_type == DT_F32) {
        float f = 0.0f;
        CUDA_TRY(cudaMemcpy(&f, (const float *)g->c + at, sizeof f, cudaMemcpyDeviceToHost));
        *v = f;
    } else if (g->out_type == DT_F16) {
        __half h;
        CUDA_TRY(cudaMemcpy(&h, (const __half *)g->c + at, sizeof h, cudaMemcpyDeviceToHost));
        *v = __half2float(h);
    } else {
        __nv_bfloat16 h;
        CUDA_TRY(cudaMemcpy(&h, (const __nv_bfloat16 *)g->c + at, sizeof h, cudaMemcpyDeviceToHost));
        *v = __bfloat162float(h);
    }
    return 0;
}

int amp_gemm_check(AmpGemm *g, int samples, double *max_err)
{
    CUDA_TRY(cudaStreamSynchronize(g->stream));
    double worst = 0.0;
    for (int s = 0; s < samples; s++) {
        // the corners first, then entries spread by a hash
        int i = s == 0 || s == 2 ? 0 : s == 1 || s == 3 ? g->m - 1 : (int)((amp_operand_int(3, (uint64_t)s) + 64) * (uint64_t)(g->m - 1) / 128);
        int j = s < 2 ? 0 : s < 4 ? g->n - 1 : (int)((amp_operand_int(4, (uint64_t)s) + 64) * (uint64_t)(g->n - 1) / 128);
        int64_t exact = 0, magnitude = 0;  // in units of 1/4096
        for (int p = 0; p < g->k; p++) {
            int64_t prod = (int64_t)amp_operand_int(1, (uint64_t)i + (uint64_t)p * g->m) *
                           amp_operand_int(2, (uint64_t)p + (uint64_t)j * g->k);
            exact += prod;
            magnitude += prod < 0 ? -prod : prod;
        }
        double got = 0.0;
        TRY(read_entry(g, i, j, &got));
        double err = fabs(got - exact / 4096.0) / (magnitude > 0 ? magnitude / 4096.0 : 1.0);
        if (isnan(err)) {  // a NaN fails whatever else was seen
            worst = err;
            break;
        }
        if (err > worst) worst = err;
    }
    *max_err = worst;
    return 0;
}

// ---- the strict-fp32 probe --------------------------------------------------------------------

enum { PROBE_SIZE = 256 };

static __global__ void probe_fill_kernel(float *p, size_t count, uint64_t which)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        p[i] = amp_probe_value(which, i);
}

int amp_gemm_probe(AmpMath math, int samples, double *max_err)
{
    if (math != AMP_MATH_FP32 && math != AMP_MATH_TF32)
        return error_set(ERROR_BAD_USAGE, "amp_gemm_probe: fp32 or tf32 only");
    const int n = PROBE_SIZE;
    const size_t count = (size_t)n * n;
    AmpGemm g = {};
    g.math = math;
    g.m = g.n = g.k = n;
    g.in_type = g.out_type = DT_F32;
    int rc = setup(&g);  // the same handle set-up as the timed GEMMs
    if (rc == 0) {
        probe_fill_kernel<<<grid_for(count), CUDA_THREADS, 0, g.stream>>>((float *)g.a, count, 31);
        probe_fill_kernel<<<grid_for(count), CUDA_THREADS, 0, g.stream>>>((float *)g.b, count, 32);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "probe operands");
    }
    double seconds = 0.0, worst = 0.0;
    if (rc == 0) rc = amp_gemm_time(&g, &seconds);
    if (rc == 0) {
        cudaError_t e = cudaStreamSynchronize(g.stream);
        if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "probe GEMM");
    }
    for (int s = 0; s < samples && rc == 0; s++) {
        int i = (int)((amp_operand_int(33, (uint64_t)s) + 64) * (uint64_t)(n - 1) / 128);
        int j = (int)((amp_operand_int(34, (uint64_t)s) + 64) * (uint64_t)(n - 1) / 128);
        double exact = 0.0, magnitude = 0.0, got = 0.0;
        for (int p = 0; p < n; p++) {  // column-major: A(i, p) at i + p m, B(p, j) at p + j k
            double prod = (double)amp_probe_value(31, (uint64_t)i + (uint64_t)p * n) *
                          amp_probe_value(32, (uint64_t)p + (uint64_t)j * n);
            exact += prod;
            magnitude += fabs(prod);
        }
        rc = read_entry(&g, i, j, &got);
        double err = fabs(got - exact) / magnitude;
        if (rc == 0 && (isnan(err) || err > worst)) worst = err;
    }
    if (g.start) cudaEventDestroy(g.start);
    if (g.stop) cudaEventDestroy(g.stop);
    if (g.blas) cublasDestroy(g.blas);
    if (g.stream) cudaStreamDestroy(g.stream);
    cudaFree(g.a);
    cudaFree(g.b);
    cudaFree(g.c);
    if (rc == 0) *max_err = worst;
    return rc;
}
