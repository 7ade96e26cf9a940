// transfer.c: host buffers, checked copies and the copy/compute step pipelines.
#include "bench/transfer.h"

#include <stdlib.h>
#include <string.h>

#include "bench/step_compute.h"
#include "kernels/check.h"

static uint8_t pattern_byte(size_t i, uint32_t seed)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed;
    return (uint8_t)(x >> 24);
}

static void fill_pattern(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) p[i] = pattern_byte(i, seed);
}

static int64_t count_wrong(const uint8_t *p, size_t n, uint32_t seed)
{
    int64_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += p[i] != pattern_byte(i, seed);
    return wrong;
}

int host_buffer_alloc(HostBuffer *b, HostMemory memory, size_t bytes)
{
    b->memory = memory;
    b->ptr = NULL;
    if (memory == HOST_PINNED) {
        CUDA_TRY(cudaHostAlloc(&b->ptr, bytes, cudaHostAllocDefault));
    } else {
        b->ptr = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        if (!b->ptr) return check_fail(__FILE__, __LINE__, "aligned_alloc", "out of memory");
        memset(b->ptr, 0, bytes); // fault the pages in before anything is timed
        if (memory == HOST_REGISTERED) {
            cudaError_t e = cudaHostRegister(b->ptr, bytes, cudaHostRegisterDefault);
            if (e != cudaSuccess) {
                free(b->ptr);
                b->ptr = NULL;
                CUDA_TRY(e);
            }
        }
    }
    return 0;
}

void host_buffer_free(HostBuffer *b)
{
    if (!b->ptr) return;
    if (b->memory == HOST_PINNED) {
        cudaFreeHost(b->ptr);
    } else {
        if (b->memory == HOST_REGISTERED) cudaHostUnregister(b->ptr);
        free(b->ptr);
    }
    b->ptr = NULL;
}

// ---- one copy ------------------------------------------------------------------------

int copy_prepare(CopySetup *s, CopyVariant v, size_t bytes)
{
    memset(s, 0, sizeof *s);
    s->variant = v;
    s->bytes = bytes;
    TRY(host_buffer_alloc(&s->host, v.memory, bytes));
    TRY(host_buffer_alloc(&s->check, HOST_PAGEABLE, bytes));
    CUDA_TRY(cudaMalloc(&s->device, bytes));
    CUDA_TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    TRY(gpu_timer_create(&s->timer));
    return 0;
}

int copy_timed(CopySetup *s, bool h2d, double *seconds)
{
    void *dst = h2d ? s->device : s->host.ptr;
    const void *src = h2d ? s->host.ptr : s->device;
    enum cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    cudaStream_t stream = s->variant.async ? s->stream : 0;
    TRY(gpu_timer_start(&s->timer, stream));
    if (s->variant.async) CUDA_TRY(cudaMemcpyAsync(dst, src, s->bytes, kind, stream));
    else CUDA_TRY(cudaMemcpy(dst, src, s->bytes, kind));
    return gpu_timer_stop(&s->timer, stream, seconds);
}

int copy_verify(CopySetup *s, bool h2d, int64_t *wrong_bytes)
{
    double unused;
    const uint32_t seed = (uint32_t)s->bytes ^ 0x9e3779b9u;
    if (h2d) {
        fill_pattern(s->host.ptr, s->bytes, seed);
        TRY(copy_timed(s, true, &unused));
        memset(s->check.ptr, 0, s->bytes);
        CUDA_TRY(cudaMemcpy(s->check.ptr, s->device, s->bytes, cudaMemcpyDeviceToHost));
        *wrong_bytes = count_wrong(s->check.ptr, s->bytes, seed);
    } else {
        fill_pattern(s->check.ptr, s->bytes, seed);
        CUDA_TRY(cudaMemcpy(s->device, s->check.ptr, s->bytes, cudaMemcpyHostToDevice));
        memset(s->host.ptr, 0, s->bytes);
        TRY(copy_timed(s, false, &unused));
        *wrong_bytes = count_wrong(s->host.ptr, s->bytes, seed);
    }
    return 0;
}

void copy_release(CopySetup *s)
{
    host_buffer_free(&s->host);
    host_buffer_free(&s->check);
    if (s->device) cudaFree(s->device);
    if (s->stream) cudaStreamDestroy(s->stream);
    gpu_timer_destroy(&s->timer);
    memset(s, 0, sizeof *s);
}

// ---- copy/compute steps ----------------------------------------------------------------

void steps_release(StepsSetup *s)
{
    free(s->source);
    for (int i = 0; i < 2; i++) {
        host_buffer_free(&s->staging[i]);
        if (s->device_in[i]) cudaFree(s->device_in[i]);
        if (s->copied[i]) cudaEventDestroy(s->copied[i]);
        if (s->consumed[i]) cudaEventDestroy(s->consumed[i]);
    }
    if (s->device_out) cudaFree(s->device_out);
    if (s->copy_stream) cudaStreamDestroy(s->copy_stream);
    if (s->compute_stream) cudaStreamDestroy(s->compute_stream);
    memset(s, 0, sizeof *s);
}

int steps_prepare(StepsSetup *s, StepsVariant variant, size_t bytes)
{
    memset(s, 0, sizeof *s);
    s->floats = bytes / sizeof(float);
    if (s->floats == 0) return check_fail(__FILE__, __LINE__, "steps_prepare", "batch smaller than one float");
    s->source = malloc(s->floats * sizeof(float) * TRANSFER_STEPS_PER_ITERATION);
    if (!s->source) return check_fail(__FILE__, __LINE__, "malloc", "out of memory (host)");
    for (size_t i = 0; i < s->floats * TRANSFER_STEPS_PER_ITERATION; i++)
        s->source[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    for (int i = 0; i < 2; i++) {
        if (variant == STEPS_PINNED_ASYNC) TRY(host_buffer_alloc(&s->staging[i], HOST_PINNED, bytes));
        CUDA_TRY(cudaMalloc((void **)&s->device_in[i], bytes));
        CUDA_TRY(cudaEventCreateWithFlags(&s->copied[i], cudaEventDisableTiming));
        CUDA_TRY(cudaEventCreateWithFlags(&s->consumed[i], cudaEventDisableTiming));
    }
    CUDA_TRY(cudaMalloc((void **)&s->device_out, bytes));
    CUDA_TRY(cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&s->compute_stream, cudaStreamNonBlocking));
    return 0;
}

static const float *source_batch(const StepsSetup *s, int step)
{
    return s->source + (size_t)step * s->floats;
}

// Baseline: blocking copies from pageable memory; compute on the legacy stream, so
// each copy waits for the previous step's kernel and nothing overlaps.
static int steps_pageable_blocking(StepsSetup *s, int fma)
{
    size_t bytes = s->floats * sizeof(float);
    for (int step = 0; step <= TRANSFER_STEPS_PER_ITERATION; step++) {
        if (step < TRANSFER_STEPS_PER_ITERATION)
            CUDA_TRY(cudaMemcpy(s->device_in[step % 2], source_batch(s, step), bytes,
                                cudaMemcpyHostToDevice));
        if (step > 0)
            TRY(step_compute_launch(s->device_in[(step - 1) % 2], s->device_out, s->floats, fma, 0));
    }
    CUDA_TRY(cudaDeviceSynchronize());
    return 0;
}

// Copies batch `step` into pinned staging slot step%2 (after its previous async copy
// finished) and enqueues the host-to-device copy of it behind the compute that last
// read the device slot.
static int stage_and_copy(StepsSetup *s, int step, void *staging)
{
    size_t bytes = s->floats * sizeof(float);
    int slot = step % 2;
    memcpy(staging, source_batch(s, step), bytes);
    CUDA_TRY(cudaStreamWaitEvent(s->copy_stream, s->consumed[slot], 0));
    CUDA_TRY(cudaMemcpyAsync(s->device_in[slot], staging, bytes, cudaMemcpyHostToDevice,
                             s->copy_stream));
    CUDA_TRY(cudaEventRecord(s->copied[slot], s->copy_stream));
    return 0;
}

static int compute_after_copy(StepsSetup *s, int step, int fma)
{
    int slot = step % 2;
    CUDA_TRY(cudaStreamWaitEvent(s->compute_stream, s->copied[slot], 0));
    TRY(step_compute_launch(s->device_in[slot], s->device_out, s->floats, fma, s->compute_stream));
    CUDA_TRY(cudaEventRecord(s->consumed[slot], s->compute_stream));
    return 0;
}

// Tuned: pinned staging, async copies on the copy stream overlap the compute stream.
static int steps_pinned_async(StepsSetup *s, int fma)
{
    for (int step = 0; step <= TRANSFER_STEPS_PER_ITERATION; step++) {
        if (step < TRANSFER_STEPS_PER_ITERATION) {
            // the staging slot is reusable once its copy two steps ago has finished
            CUDA_TRY(cudaEventSynchronize(s->copied[step % 2]));
            TRY(stage_and_copy(s, step, s->staging[step % 2].ptr));
        }
        if (step > 0) TRY(compute_after_copy(s, step - 1, fma));
    }
    CUDA_TRY(cudaDeviceSynchronize());
    return 0;
}

// The pitfall: a fresh pinned buffer per batch, freed once its copy has finished
// (cudaHostAlloc/cudaFreeHost are slow and cudaFreeHost synchronizes the device).
static int steps_alloc_per_batch(StepsSetup *s, int fma)
{
    size_t bytes = s->floats * sizeof(float);
    for (int step = 0; step <= TRANSFER_STEPS_PER_ITERATION; step++) {
        HostBuffer fresh = {0};
        if (step < TRANSFER_STEPS_PER_ITERATION) {
            TRY(host_buffer_alloc(&fresh, HOST_PINNED, bytes));
            if (stage_and_copy(s, step, fresh.ptr) != 0) {
                host_buffer_free(&fresh);
                return -1;
            }
        }
        int rc = step > 0 ? compute_after_copy(s, step - 1, fma) : 0;
        if (fresh.ptr && cudaEventSynchronize(s->copied[step % 2]) != cudaSuccess) rc = -1;
        host_buffer_free(&fresh);
        if (rc != 0) return -1;
    }
    CUDA_TRY(cudaDeviceSynchronize());
    return 0;
}

// The last kernel read the last batch: compare a sample of its output with the CPU.
int steps_check_output(const StepsSetup *s, int fma, int64_t *wrong)
{
    enum { SAMPLE = 4096 };
    size_t n = s->floats < SAMPLE ? s->floats : SAMPLE;
    float got[SAMPLE];
    CUDA_TRY(cudaMemcpy(got, s->device_out + (s->floats - n), n * sizeof(float),
                        cudaMemcpyDeviceToHost));
    const float *last = source_batch(s, TRANSFER_STEPS_PER_ITERATION - 1) + (s->floats - n);
    *wrong = 0;
    for (size_t i = 0; i < n; i++) // fused multiply-adds on both sides: bit-identical
        *wrong += got[i] != step_compute_reference(last[i], fma);
    return 0;
}


int steps_run(StepsSetup *s, StepsVariant variant, int fma_per_element)
{
    switch (variant) {
    case STEPS_PAGEABLE_BLOCKING: return steps_pageable_blocking(s, fma_per_element);
    case STEPS_PINNED_ASYNC: return steps_pinned_async(s, fma_per_element);
    case STEPS_PINNED_PER_BATCH: return steps_alloc_per_batch(s, fma_per_element);
    }
    return check_fail(__FILE__, __LINE__, "steps_run", "unknown variant");
}
