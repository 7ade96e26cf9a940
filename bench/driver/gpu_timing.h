// gpu_timing.h: timing device work with CUDA events, and flushing the L2 cache so a
// measurement starts cold. For benchmarks; the training core does not use it.
#ifndef GPU_TIMING_H
#define GPU_TIMING_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    cudaEvent_t start, stop;
} GpuTimer;

// Creates the two events; returns 0 or -1 (kernels/error.h says why).
int gpu_timer_create(GpuTimer *t);
// Records the start event on stream.
int gpu_timer_start(GpuTimer *t, cudaStream_t stream);
// Records the stop event on stream, waits for it, and writes the elapsed seconds.
int gpu_timer_stop(GpuTimer *t, cudaStream_t stream, double *seconds);
void gpu_timer_destroy(GpuTimer *t);

typedef struct {
    void *buffer;
    size_t bytes;
} L2Flusher;

// Allocates a device buffer twice the size of the L2 cache of the current device.
int l2_flusher_create(L2Flusher *f);
// Overwrites the buffer on stream, evicting whatever the L2 held.
int l2_flush(const L2Flusher *f, cudaStream_t stream);
void l2_flusher_destroy(L2Flusher *f);
// A cold-cache measurement (HARNESS_CACHE_COLD): flushes the L2 on stream, then records
// the start event after the flush, so the flush itself is not timed.
int gpu_timer_start_cold(GpuTimer *t, const L2Flusher *f, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
