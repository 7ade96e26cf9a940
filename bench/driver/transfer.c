// transfer.c: host buffers, checked copies and the copy/compute step pipelines.
#include "bench/driver/transfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/step_compute.h"
#include "kernels/check.h"
#include "kernels/pinned.h"
#include "kernels/error.h"
#include "loaders/pin_thread.h"

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
    if (memory == HOST_PINNED) return pinned_alloc(bytes, &b->ptr);
    b->ptr = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!b->ptr) return error_set(ERROR_OUT_OF_MEMORY, "aligned_alloc(%zu bytes): out of memory", bytes);
    memset(b->ptr, 0, bytes); // fault the pages in before anything is timed
    if (memory == HOST_REGISTERED && pinned_register(b->ptr, bytes) != 0) {
        free(b->ptr);
        b->ptr = NULL;
        return -1;
    }
    return 0;
}

void host_buffer_free(HostBuffer *b)
{
    if (!b->ptr) return;
    if (b->memory == HOST_PINNED) {
        pinned_free(b->ptr);
    } else {
        if (b->memory == HOST_REGISTERED) pinned_unregister(b->ptr);
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
        // A pageable cudaMemcpy may return before its DMA lands, and the timed copy below
        // may run on a non-blocking stream that does not wait for the legacy stream: wait
        // here, so that bytes that arrive wrong can only mean a wrong copy.
        CUDA_TRY(cudaDeviceSynchronize());
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
    pin_thread_destroy(s->pin);
    free(s->source);
    for (int i = 0; i < 2; i++) {
        if (s->device_in[i]) cudaFree(s->device_in[i]);
        if (s->copied[i]) cudaEventDestroy(s->copied[i]);
        if (s->consumed[i]) cudaEventDestroy(s->consumed[i]);
    }
    if (s->device_out) cudaFree(s->device_out);
    if (s->copy_stream) cudaStreamDestroy(s->copy_stream);
    if (s->compute_stream) cudaStreamDestroy(s->compute_stream);
    memset(s, 0, sizeof *s);
}

static const float *source_batch(const StepsSetup *s, int64_t step)
{
    return s->source + (size_t)step * s->floats;
}

// The pin thread's work: batch `step` from its pageable source into a pinned buffer.
static int pin_fill_batch(void *ctx, int64_t step, void *dst, size_t capacity, size_t *used,
                          const atomic_bool *cancel)
{
    const StepsSetup *s = ctx;
    size_t bytes = s->floats * sizeof(float);
    (void)cancel;
    if (bytes > capacity)
        return error_set(ERROR_LIBRARY, "steps: batch of %zu bytes, pinned buffer of %zu", bytes,
                         capacity);
    memcpy(dst, source_batch(s, step), bytes);
    *used = bytes;
    return 0;
}

int steps_prepare(StepsSetup *s, StepsVariant variant, size_t bytes)
{
    memset(s, 0, sizeof *s);
    s->floats = bytes / sizeof(float);
    if (s->floats == 0) return error_set(ERROR_BAD_USAGE, "steps_prepare: batch smaller than one float");
    s->source = malloc(s->floats * sizeof(float) * TRANSFER_STEPS_PER_ITERATION);
    if (!s->source) return error_set(ERROR_OUT_OF_MEMORY, "malloc: out of memory (host)");
    for (size_t i = 0; i < s->floats * TRANSFER_STEPS_PER_ITERATION; i++)
        s->source[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    for (int i = 0; i < 2; i++) {
        CUDA_TRY(cudaMalloc((void **)&s->device_in[i], bytes));
        CUDA_TRY(cudaEventCreateWithFlags(&s->copied[i], cudaEventDisableTiming));
        CUDA_TRY(cudaEventCreateWithFlags(&s->consumed[i], cudaEventDisableTiming));
    }
    CUDA_TRY(cudaMalloc((void **)&s->device_out, bytes));
    CUDA_TRY(cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&s->compute_stream, cudaStreamNonBlocking));
    if (variant != STEPS_PAGEABLE_BLOCKING) {
        // 3 buffers: one whose copy is in flight, one being queued, one being filled.
        PinThreadConfig pc = {.depth = 3, .buffer_bytes = bytes, .fill = pin_fill_batch, .ctx = s,
                              .fresh_buffer_per_item = variant == STEPS_PINNED_PER_BATCH};
        if (pin_thread_create(&pc, &s->pin) != 0)
            return error_wrap("pin thread");
    }
    return 0;
}

// Batch `step` in pinned memory from the pin thread (it may still be copying it).
static int take_pinned(StepsSetup *s, int step, const void **src)
{
    void *buf = NULL;
    size_t used = 0;
    for (int waited_ms = 0; waited_ms < 30000; waited_ms += 100) {
        int rc = pin_thread_next(s->pin, step, &buf, &used, 100);
        if (rc == 1) {
            *src = buf;
            return 0;
        }
        if (rc < 0) return error_wrap("pin thread");
    }
    return error_set(ERROR_LIBRARY, "pin thread: no batch after 30 s");
}

// Gives back the pinned buffers the thread still lends out after a run (or a failure).
static void release_pinned(StepsSetup *s, int from, int to)
{
    for (int step = from; step < to; step++) pin_thread_release(s->pin, step);
}

int steps_run(StepsSetup *s, int fma)
{
    const size_t bytes = s->floats * sizeof(float);
    const int n = TRANSFER_STEPS_PER_ITERATION;
    int held_from = 0;  // pinned: steps [held_from, step) are lent to this thread
    if (s->pin && pin_thread_start(s->pin, 0, n) != 0)
        return error_wrap("pin thread");
    int rc = 0;
    for (int step = 0; step <= n && rc == 0; step++) {
        if (step < n) {
            int slot = step % 2;
            const void *src = source_batch(s, step);
            if (s->pin) {
                // The copy two steps ago read this slot's pinned buffer: once it is done the
                // buffer goes back to the pin thread (PyTorch's caching host allocator waits
                // for the copy's event likewise).
                if (step >= 2) {
                    cudaError_t e = cudaEventSynchronize(s->copied[slot]);
                    if (e != cudaSuccess) {
                        rc = check_cuda_failed(e, __FILE__, __LINE__, "cudaEventSynchronize");
                        break;
                    }
                    pin_thread_release(s->pin, held_from++);
                }
                if ((rc = take_pinned(s, step, &src)) != 0) break;
            }
            cudaError_t e = cudaStreamWaitEvent(s->copy_stream, s->consumed[slot], 0);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(s->device_in[slot], src, bytes, cudaMemcpyHostToDevice,
                                    s->copy_stream);
            if (e == cudaSuccess) e = cudaEventRecord(s->copied[slot], s->copy_stream);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                rc = check_cuda_failed(e, __FILE__, __LINE__, "queueing the batch copy");
                break;
            }
        }
        if (step > 0) {
            int slot = (step - 1) % 2;
            cudaError_t e = cudaStreamWaitEvent(s->compute_stream, s->copied[slot], 0);
            if (e != cudaSuccess ||
                step_compute_launch(s->device_in[slot], s->device_out, s->floats, fma,
                                    s->compute_stream) != 0 ||
                (e = cudaEventRecord(s->consumed[slot], s->compute_stream)) != cudaSuccess) {
                if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "compute");
                else rc = -1;
                break;
            }
        }
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (s->pin) release_pinned(s, held_from, n);
    if (rc == 0 && e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "cudaDeviceSynchronize");
    return rc;
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
