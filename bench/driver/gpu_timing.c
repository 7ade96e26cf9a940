// gpu_timing.c: CUDA-event timers and the L2 flush.
#include "bench/driver/gpu_timing.h"

#include "kernels/check.h"

int gpu_timer_create(GpuTimer *t)
{
    t->start = t->stop = NULL;
    CUDA_TRY(cudaEventCreate(&t->start));
    CUDA_TRY(cudaEventCreate(&t->stop));
    return 0;
}

int gpu_timer_start(GpuTimer *t, cudaStream_t stream)
{
    CUDA_TRY(cudaEventRecord(t->start, stream));
    return 0;
}

int gpu_timer_stop(GpuTimer *t, cudaStream_t stream, double *seconds)
{
    float ms = 0.0f;
    CUDA_TRY(cudaEventRecord(t->stop, stream));
    CUDA_TRY(cudaEventSynchronize(t->stop));
    CUDA_TRY(cudaEventElapsedTime(&ms, t->start, t->stop));
    *seconds = ms * 1e-3;
    return 0;
}

void gpu_timer_destroy(GpuTimer *t)
{
    if (t->start) cudaEventDestroy(t->start);
    if (t->stop) cudaEventDestroy(t->stop);
    t->start = t->stop = NULL;
}

int l2_flusher_create(L2Flusher *f)
{
    int device = 0, l2 = 0;
    f->buffer = NULL;
    f->bytes = 0;
    CUDA_TRY(cudaGetDevice(&device));
    CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    if (l2 <= 0) return 0;
    f->bytes = 2 * (size_t)l2;
    CUDA_TRY(cudaMalloc(&f->buffer, f->bytes));
    return 0;
}

int l2_flush(const L2Flusher *f, cudaStream_t stream)
{
    if (f->buffer) CUDA_TRY(cudaMemsetAsync(f->buffer, 0, f->bytes, stream));
    return 0;
}

int gpu_timer_start_cold(GpuTimer *t, const L2Flusher *f, cudaStream_t stream)
{
    TRY(l2_flush(f, stream));
    return gpu_timer_start(t, stream);
}

void l2_flusher_destroy(L2Flusher *f)
{
    if (f->buffer) cudaFree(f->buffer);
    f->buffer = NULL;
}
