// pin_thread.h: PyTorch's pin_memory thread in C. A thread of the training process
// copies each batch, in order, into one of `depth` page-locked buffers while the
// caller is busy with earlier ones, so the copy into pinned memory is not charged to
// the training loop (torch.utils.data.DataLoader(pin_memory=True) with workers). The
// caller takes items in order and gives each buffer back when it is done with it (for
// an asynchronous host-to-device copy: once that copy has finished), as PyTorch's
// caching host allocator reuses a pinned block only after its copy's event.
#ifndef LOADERS_PIN_THREAD_H
#define LOADERS_PIN_THREAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Fills dst (capacity bytes) with item `item` on the pin thread and sets *used. Must
// return within ~50 ms of *cancel becoming true (long waits poll it). Returns 0, 1 when
// cancelled, or -1 with the pin thread's error set (kernels/error.h); the caller of
// pin_thread_next gets that error, kind and message.
typedef int (*PinFillFn)(void *ctx, int64_t item, void *dst, size_t capacity, size_t *used,
                         const atomic_bool *cancel);

typedef struct PinThreadConfig {
    int depth;                        // buffers (>= 2): held by the caller, ready, or filling
    size_t buffer_bytes;
    PinFillFn fill;
    void *ctx;                        // passed to fill
    bool fresh_buffer_per_item;       // allocate a buffer for every item, free it on release
                                      // (the no-caching-allocator pitfall); else allocate once
    int (*alloc)(size_t bytes, void **ptr); // NULL: pinned_alloc (cudaHostAlloc); tests: malloc
    void (*free)(void *ptr);                // NULL: pinned_free
} PinThreadConfig;

typedef struct PinThread PinThread;

// Allocates the buffers (unless fresh_buffer_per_item) and starts the thread. 0 or -1.
int pin_thread_create(const PinThreadConfig *cfg, PinThread **out);
// Starts filling items first .. first+count-1, in order; the previous run must have been
// stopped or finished (every item taken). 0 or -1.
int pin_thread_start(PinThread *t, int64_t first, int64_t count);
// Waits up to timeout_ms for `item`, which must be the next item of the run not yet
// taken: 1 with *buffer and *bytes set (the caller holds it until pin_thread_release),
// 0 when it is not ready yet (call again), -1 when its fill failed (that error is set).
int pin_thread_next(PinThread *t, int64_t item, void **buffer, size_t *bytes, int timeout_ms);
// Gives back the buffer of a taken item; the thread may fill it again.
void pin_thread_release(PinThread *t, int64_t item);
// Cancels the current run and waits until the thread is idle; every buffer is free again.
void pin_thread_stop(PinThread *t);
// Seconds the pin thread has spent inside fill (waits included) and allocating buffers.
double pin_thread_busy_seconds(PinThread *t);
// Stops the thread and frees every buffer. NULL is fine.
void pin_thread_destroy(PinThread *t);

#ifdef __cplusplus
}
#endif
#endif
