// amp_scaler.cu: the GradScaler pieces bench_amp varies or times (amp_scaler.h).
#include "bench/amp/amp_scaler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/amp.h"
#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/optim_cuda.cuh"

__global__ void amp_grad_scale_kernel(float *g, size_t n, float coef)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] *= coef;
}

int amp_grad_norm(const float *g, size_t n, void *stream, double *norm)
{
    if (!stream) {
        double sq = 0.0;
        for (size_t i = 0; i < n; i++) sq += (double)g[i] * g[i];
        *norm = sqrt(sq);
        return 0;
    }
    cudaStream_t s = (cudaStream_t)stream;
    double *dsq = NULL, sq = 0.0;
    CUDA_TRY(cudaMallocAsync((void **)&dsq, sizeof *dsq, s));
    int rc = cuda_sumsq(g, n, dsq, s);  // the core's own reduction (it zeroes dsq first)
    cudaError_t e = rc == 0 ? cudaMemcpyAsync(&sq, dsq, sizeof sq, cudaMemcpyDeviceToHost, s) : cudaSuccess;
    cudaError_t f = cudaFreeAsync(dsq, s);
    cudaError_t w = cudaStreamSynchronize(s);
    if (rc != 0) return -1;
    if (e != cudaSuccess) return check_cuda_failed(e, __FILE__, __LINE__, "cudaMemcpyAsync(norm)");
    if (f != cudaSuccess) return check_cuda_failed(f, __FILE__, __LINE__, "cudaFreeAsync(norm)");
    if (w != cudaSuccess) return check_cuda_failed(w, __FILE__, __LINE__, "cudaStreamSynchronize");
    *norm = sqrt(sq);
    return 0;
}

int amp_grad_scale(float *g, size_t n, float coef, void *stream)
{
    if (!stream) {
        for (size_t i = 0; i < n; i++) g[i] *= coef;
        return 0;
    }
    if (n == 0) return 0;
    amp_grad_scale_kernel<<<grid_for(n), CUDA_THREADS, 0, (cudaStream_t)stream>>>(g, n, coef);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The gradients are zeros: every pass multiplies them by 1/scale again, and repeated
// scaling of non-zero values would end in subnormals, which x86 CPUs handle slowly
// (a cost real gradients do not have). The work per element is the same.
static int pass_cpu(size_t n, int reps, double *times)
{
    float *g = (float *)calloc(n ? n : 1, sizeof(float));
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "GradScaler pass: %zu gradients: out of memory (host)", n);
    AmpScalerConfig cfg = amp_scaler_config_default();
    AmpScaler s;
    amp_scaler_init(&s, &cfg);
    for (int r = -1; r < reps; r++) {  // r = -1: untimed first touch
        double t0 = clock_seconds();
        bool found_inf = amp_unscale_check(g, n, s.scale);
        amp_scaler_update(&s, &cfg, found_inf);
        if (r >= 0) times[r] = clock_seconds() - t0;
    }
    free(g);
    return 0;
}

static int pass_gpu_timed(float *g, DevScalars *d, size_t n, int reps, double *times, cudaStream_t s,
                          cudaEvent_t start, cudaEvent_t stop)
{
    AmpScalerConfig cfg = amp_scaler_config_default();
    for (int r = -1; r < reps; r++) {  // r = -1: untimed warm-up (module load, first touch)
        CUDA_TRY(cudaEventRecord(start, s));
        TRY(cuda_unscale_check(g, n, &d->scale, &d->found_inf, s));
        TRY(cuda_scaler_update(d, cfg, s));
        CUDA_TRY(cudaEventRecord(stop, s));
        CUDA_TRY(cudaEventSynchronize(stop));
        float ms = 0.0f;
        CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
        if (r >= 0) times[r] = 1e-3 * ms;
    }
    return 0;
}

static int pass_gpu(size_t n, int reps, double *times)
{
    float *g = NULL;
    DevScalars *d = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    DevScalars init;
    memset(&init, 0, sizeof init);
    init.scale = amp_scaler_config_default().init_scale;
    int rc = 0;
    // everything on the timed stream: a non-blocking stream does not wait for the legacy one
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc((void **)&g, (n ? n : 1) * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&d, sizeof *d);
    if (e == cudaSuccess) e = cudaMemsetAsync(g, 0, (n ? n : 1) * sizeof(float), s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(d, &init, sizeof init, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = cudaEventCreate(&start);
    if (e == cudaSuccess) e = cudaEventCreate(&stop);
    if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "GradScaler pass set-up");
    if (rc == 0) rc = pass_gpu_timed(g, d, n, reps, times, s, start, stop);
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    if (s) cudaStreamDestroy(s);
    cudaFree(d);
    cudaFree(g);
    return rc;
}

int amp_scaler_pass_seconds(size_t n, bool gpu, int reps, double *seconds)
{
    if (reps < 1) return error_set(ERROR_BAD_USAGE, "GradScaler pass: reps %d < 1", reps);
    double *times = (double *)malloc((size_t)reps * sizeof *times);
    if (!times) return error_set(ERROR_OUT_OF_MEMORY, "GradScaler pass: out of memory (host)");
    int rc = gpu ? pass_gpu(n, reps, times) : pass_cpu(n, reps, times);
    if (rc == 0) *seconds = median(times, reps);
    free(times);
    return rc;
}
