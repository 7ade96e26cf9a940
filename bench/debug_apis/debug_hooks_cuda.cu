// debug_hooks_cuda.cu: the GPU half of the debugging hooks (debug_hooks.h): the anomaly scan
// (a kernel on the core's stream finds the first non-finite value of an op's gradient range;
// its index is copied back and waited for, as anomaly mode's check must be before it can
// raise) and the profiler's CUDA events (one per op, read after the step).
#include "bench/debug_apis/debug_hooks.h"

#include <cuda_runtime.h>
#include <stdlib.h>

#include "kernels/check.h"
#include "kernels/error.h"
#include "kernels/model.h"

#define SCAN_THREADS 256
#define SCAN_MAX_BLOCKS 1024

// *first = min(*first, i) over every non-finite grads[i] (first starts at count).
__global__ void find_nonfinite_kernel(const float *grads, size_t count, unsigned long long *first)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(grads[i])) {
            atomicMin(first, (unsigned long long)i);
            return;
        }
}

// One device word and its pinned host copy for the whole process (scans are sequential).
static unsigned long long *scan_dev, *scan_host;

extern "C" int debug_cuda_find_nonfinite(const float *grads, size_t count, void *stream, int64_t *bad_index)
{
    cudaStream_t s = (cudaStream_t)stream;
    *bad_index = -1;
    if (count == 0) return 0;
    if (!scan_dev) {
        CUDA_TRY(cudaMalloc((void **)&scan_dev, sizeof *scan_dev));
        CUDA_TRY(cudaMallocHost((void **)&scan_host, sizeof *scan_host));
    }
    *scan_host = count;
    CUDA_TRY(cudaMemcpyAsync(scan_dev, scan_host, sizeof *scan_dev, cudaMemcpyHostToDevice, s));
    size_t blocks = (count + SCAN_THREADS - 1) / SCAN_THREADS;
    if (blocks > SCAN_MAX_BLOCKS) blocks = SCAN_MAX_BLOCKS;
    find_nonfinite_kernel<<<(unsigned)blocks, SCAN_THREADS, 0, s>>>(grads, count, scan_dev);
    CUDA_TRY(cudaGetLastError());
    CUDA_TRY(cudaMemcpyAsync(scan_host, scan_dev, sizeof *scan_host, cudaMemcpyDeviceToHost, s));
    CUDA_TRY(cudaStreamSynchronize(s));  // anomaly mode raises at once: it waits for the answer
    if (*scan_host < count) *bad_index = (int64_t)*scan_host;
    return 0;
}

struct DebugEvents {
    cudaEvent_t e[MODEL_MAX_OPS + 1];
    int created;
};

extern "C" void debug_cuda_events_free(DebugEvents *e)
{
    if (!e) return;
    for (int i = 0; i < e->created; i++) cudaEventDestroy(e->e[i]);
    free(e);
}

extern "C" int debug_cuda_events_create(DebugEvents **out)
{
    DebugEvents *e = (DebugEvents *)calloc(1, sizeof *e);
    if (!e) return error_set(ERROR_OUT_OF_MEMORY, "profiler events: out of memory (host)");
    for (; e->created < MODEL_MAX_OPS + 1; e->created++)
        if (check_cuda_failed(cudaEventCreate(&e->e[e->created]), __FILE__, __LINE__, "cudaEventCreate") != 0) {
            debug_cuda_events_free(e);
            return -1;
        }
    *out = e;
    return 0;
}

extern "C" int debug_cuda_event_record(DebugEvents *e, int index, void *stream)
{
    if (index < 0 || index >= e->created) return error_set(ERROR_BAD_USAGE, "profiler: event %d out of range", index);
    CUDA_TRY(cudaEventRecord(e->e[index], (cudaStream_t)stream));
    return 0;
}

extern "C" int debug_cuda_events_read(DebugEvents *e, int count, double *ms)
{
    *ms = 0.0;
    if (count < 2) return 0;
    CUDA_TRY(cudaEventSynchronize(e->e[count - 1]));
    for (int i = 1; i < count; i++) {
        float part = 0.0f;
        CUDA_TRY(cudaEventElapsedTime(&part, e->e[i - 1], e->e[i]));
        *ms += part;
    }
    return 0;
}
