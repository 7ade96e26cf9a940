// sync_micro.cu: the sync micro benchmark's kernels and step loop (sync_micro.h).
#include "bench/sync/sync_micro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/pinned.h"

static const int SYNC_THREADS = 256;

// A small elementwise kernel, the kind a training step is made of: x = 0.5 x + 1.
__global__ void update_kernel(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.5f * x[i] + 1.0f;
}

// One block counts the set flags (what nonzero computes before it can size its output).
__global__ void count_kernel(const int32_t *flags, int n, int32_t *count)
{
    __shared__ int32_t partial[256];
    int32_t sum = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += flags[i] != 0;
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *count = partial[0];
}

__global__ void flags_kernel(int32_t *flags, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) flags[i] = i % 2 == 0;
}

static int launch_update(SyncMicro *m, int n)
{
    update_kernel<<<(n + SYNC_THREADS - 1) / SYNC_THREADS, SYNC_THREADS, 0, m->stream>>>(m->data, n);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

extern "C" int sync_micro_create(SyncMicro *m, int kernels, int steps)
{
    memset(m, 0, sizeof *m);
    if (kernels < 2 || steps < 1)
        return error_set(ERROR_BAD_USAGE, "sync micro: %d kernels, %d steps (want >= 2 and >= 1)", kernels, steps);
    m->kernels = kernels;
    m->steps = steps;
    const int n = SYNC_MICRO_ELEMENTS;
    m->begin = (cudaEvent_t *)calloc((size_t)steps, sizeof *m->begin);
    m->end = (cudaEvent_t *)calloc((size_t)steps, sizeof *m->end);
    m->copy_pageable = calloc(1, SYNC_MICRO_COPY_BYTES);
    m->printed = (float *)calloc(SYNC_MICRO_PRINT_VALUES, sizeof(float));
    m->text = (char *)malloc(SYNC_MICRO_PRINT_VALUES * 32);
    if (!m->begin || !m->end || !m->copy_pageable || !m->printed || !m->text)
        return error_set(ERROR_OUT_OF_MEMORY, "sync micro: out of memory (host)");
    CUDA_TRY(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    for (int s = 0; s < steps; s++) {
        CUDA_TRY(cudaEventCreate(&m->begin[s]));
        CUDA_TRY(cudaEventCreate(&m->end[s]));
    }
    CUDA_TRY(cudaMalloc((void **)&m->data, n * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&m->flags, n * sizeof(int32_t)));
    CUDA_TRY(cudaMalloc((void **)&m->count, sizeof(int32_t)));
    CUDA_TRY(cudaMalloc(&m->scratch, SYNC_MICRO_SCRATCH_BYTES));
    CUDA_TRY(cudaMalloc(&m->copy_in, SYNC_MICRO_COPY_BYTES));
    TRY(pinned_alloc(SYNC_MICRO_COPY_BYTES, &m->copy_pinned));
    memset(m->copy_pinned, 0, SYNC_MICRO_COPY_BYTES);
    CUDA_TRY(cudaMemsetAsync(m->data, 0, n * sizeof(float), m->stream));
    CUDA_TRY(cudaMemsetAsync(m->count, 0, sizeof(int32_t), m->stream));
    flags_kernel<<<(n + SYNC_THREADS - 1) / SYNC_THREADS, SYNC_THREADS, 0, m->stream>>>(m->flags, n);
    CUDA_TRY(cudaGetLastError());
    CUDA_TRY(cudaStreamSynchronize(m->stream));
    return 0;
}

// The host's part of print(tensor): every value formatted into text.
static int64_t format_values(const float *v, int n, char *text, size_t size)
{
    size_t used = 0;
    for (int i = 0; i < n && used < size; i++) {
        int w = snprintf(text + used, size - used, "%s%.4f", i ? ", " : "", v[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return (int64_t)(used < size ? used : size);
}

// What the variant does before the step's kernels (the hidden syncs' set-up).
static int step_before(SyncMicro *m, SyncVariant v, void **scratch)
{
    switch (v) {
    case SYNC_MALLOC_FREE:
        CUDA_TRY(cudaMalloc(scratch, SYNC_MICRO_SCRATCH_BYTES));
        CUDA_TRY(cudaMemsetAsync(*scratch, 0, SYNC_MICRO_SCRATCH_BYTES, m->stream));
        break;
    case SYNC_CACHED_ALLOC:
        CUDA_TRY(cudaMemsetAsync(m->scratch, 0, SYNC_MICRO_SCRATCH_BYTES, m->stream));
        break;
    case SYNC_PAGEABLE_COPY:
    case SYNC_PINNED_COPY:
        CUDA_TRY(cudaMemcpyAsync(m->copy_in, v == SYNC_PINNED_COPY ? m->copy_pinned : m->copy_pageable,
                                 SYNC_MICRO_COPY_BYTES, cudaMemcpyHostToDevice, m->stream));
        break;
    default:
        break;
    }
    return 0;
}

// What the variant does after them: the sync, if any. *next_n: the next first launch's size.
static int step_after(SyncMicro *m, SyncVariant v, void **scratch, int *next_n, SyncMicroResult *r)
{
    int32_t count = 0;
    switch (v) {
    case SYNC_STREAM_SYNC:
        CUDA_TRY(cudaStreamSynchronize(m->stream));
        break;
    case SYNC_ITEM:
    case SYNC_NONZERO:
        // .item(): a copy to a pageable CPU scalar on the current stream, then wait for it
        CUDA_TRY(cudaMemcpyAsync(&count, m->count, sizeof count, cudaMemcpyDeviceToHost, m->stream));
        CUDA_TRY(cudaStreamSynchronize(m->stream));
        r->wrong_counts += count != SYNC_MICRO_ELEMENTS / 2;
        if (v == SYNC_NONZERO) *next_n = count < 1 ? 1 : count > SYNC_MICRO_ELEMENTS ? SYNC_MICRO_ELEMENTS : count;
        break;
    case SYNC_PRINT:
        CUDA_TRY(cudaMemcpyAsync(m->printed, m->data, SYNC_MICRO_PRINT_VALUES * sizeof(float),
                                 cudaMemcpyDeviceToHost, m->stream));
        CUDA_TRY(cudaStreamSynchronize(m->stream));
        r->text_bytes += format_values(m->printed, SYNC_MICRO_PRINT_VALUES, m->text, SYNC_MICRO_PRINT_VALUES * 32);
        break;
    case SYNC_MALLOC_FREE:
        CUDA_TRY(cudaFree(*scratch));  // cudaFree waits for the device to be idle
        *scratch = NULL;
        break;
    default:
        break;
    }
    return 0;
}

extern "C" int sync_micro_run(SyncMicro *m, SyncVariant v, SyncMicroResult *r)
{
    memset(r, 0, sizeof *r);
    if ((unsigned)v >= SYNC_VARIANT_COUNT) return error_set(ERROR_BAD_USAGE, "sync micro: variant %d", (int)v);
    const int n = SYNC_MICRO_ELEMENTS;
    int first_n = n / 2;  // every variant's first launch covers the count of set flags
    void *scratch = NULL;
    int rc = 0;
    double t0 = clock_seconds();
    for (int s = 0; s < m->steps && rc == 0; s++) {
        rc = step_before(m, v, &scratch);
        cudaError_t e = rc == 0 ? cudaEventRecord(m->begin[s], m->stream) : cudaSuccess;
        if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "cudaEventRecord");
        if (rc == 0) rc = launch_update(m, first_n);
        for (int k = 1; k < m->kernels - 1 && rc == 0; k++) rc = launch_update(m, n);
        if (rc == 0) {
            count_kernel<<<1, 256, 0, m->stream>>>(m->flags, n, m->count);
            if ((e = cudaGetLastError()) == cudaSuccess) e = cudaEventRecord(m->end[s], m->stream);
            if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "count kernel");
        }
        if (rc == 0) rc = step_after(m, v, &scratch, &first_n, r);
    }
    if (scratch) cudaFree(scratch);
    TRY(rc);
    CUDA_TRY(cudaStreamSynchronize(m->stream));
    r->wall_seconds = clock_seconds() - t0;
    for (int s = 0; s < m->steps; s++) {
        float ms = 0.0f;
        CUDA_TRY(cudaEventElapsedTime(&ms, m->begin[s], m->end[s]));
        r->kernel_seconds += 1e-3 * ms;
    }
    return 0;
}

extern "C" int sync_micro_read_count(SyncMicro *m, int32_t *count)
{
    CUDA_TRY(cudaMemcpyAsync(count, m->count, sizeof *count, cudaMemcpyDeviceToHost, m->stream));
    CUDA_TRY(cudaStreamSynchronize(m->stream));
    return 0;
}

extern "C" void sync_micro_free(SyncMicro *m)
{
    if (m->stream) cudaStreamSynchronize(m->stream);
    for (int s = 0; m->begin && s < m->steps; s++)
        if (m->begin[s]) cudaEventDestroy(m->begin[s]);
    for (int s = 0; m->end && s < m->steps; s++)
        if (m->end[s]) cudaEventDestroy(m->end[s]);
    cudaFree(m->data);
    cudaFree(m->flags);
    cudaFree(m->count);
    cudaFree(m->scratch);
    cudaFree(m->copy_in);
    if (m->copy_pinned) pinned_free(m->copy_pinned);
    if (m->stream) cudaStreamDestroy(m->stream);
    free(m->begin);
    free(m->end);
    free(m->copy_pageable);
    free(m->printed);
    free(m->text);
    memset(m, 0, sizeof *m);
}
