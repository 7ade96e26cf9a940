// sync_micro.h: the sync practice's micro benchmark: "steps" of L small kernels on one
// stream, with or without what makes the host wait for the device at the end of each
// step (.item(), nonzero, print, a stream synchronize) or in the middle of it (the hidden
// syncs: cudaMalloc/cudaFree, a copy from pageable memory). Every variant queues the
// same kernels over the same data; a step's first kernel covers half the elements (the
// count the last kernel computes, which the nonzero variant reads back to size it). All
// functions return 0 or -1 with the error set (kernels/error.h).
#ifndef SYNC_MICRO_H
#define SYNC_MICRO_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYNC_MICRO_ELEMENTS 65536    // floats each kernel updates: 256 KiB, they stay in L2
#define SYNC_MICRO_PRINT_VALUES 1000 // what print(tensor) shows before it summarises
#define SYNC_MICRO_SCRATCH_BYTES (1 << 20)
#define SYNC_MICRO_COPY_BYTES 4096

typedef enum {
    SYNC_NONE,          // the kernels only: the host queues ahead of the device
    SYNC_STREAM_SYNC,   // cudaStreamSynchronize after each step (what .item() ends in)
    SYNC_ITEM,          // a scalar copied to pageable host memory, then synchronize (.item())
    SYNC_NONZERO,       // a count read back (as .item()) and used to size the next launch
    SYNC_PRINT,         // SYNC_MICRO_PRINT_VALUES values copied back and formatted (print)
    SYNC_MALLOC_FREE,   // a scratch buffer cudaMalloc'd and cudaFree'd in every step
    SYNC_CACHED_ALLOC,  // the same scratch allocated once (PyTorch's caching allocator)
    SYNC_PAGEABLE_COPY, // a small host-to-device copy from pageable memory every step
    SYNC_PINNED_COPY,   // the same copy from pinned memory (cudaMemcpyAsync)
    SYNC_VARIANT_COUNT
} SyncVariant;

typedef struct SyncMicro {
    int kernels, steps;  // L kernels per step (>= 2: the last one counts), steps per run
    cudaStream_t stream;
    float *data;         // SYNC_MICRO_ELEMENTS
    int32_t *flags;      // every other element set: the count is half the elements
    int32_t *count;      // the last kernel's count
    void *scratch;       // SYNC_CACHED_ALLOC's buffer
    void *copy_in;       // device side of the copies
    void *copy_pageable, *copy_pinned;
    float *printed;      // pageable host copy of the printed values
    char *text;          // their formatted text
    cudaEvent_t *begin, *end; // per step: before its first kernel, after its last
} SyncMicro;

// What one run of `steps` steps measured.
typedef struct SyncMicroResult {
    double wall_seconds;   // host clock from the first launch until the stream is idle
    double kernel_seconds; // sum over steps of first kernel start to last kernel end
    int64_t wrong_counts;  // counts read back that were not half the elements
    int64_t text_bytes;    // what print formatted (nonzero for SYNC_PRINT)
} SyncMicroResult;

// Allocates the buffers, stream and events for steps of `kernels` kernels.
int sync_micro_create(SyncMicro *m, int kernels, int steps);
// Runs m->steps steps of variant v and waits for the device.
int sync_micro_run(SyncMicro *m, SyncVariant v, SyncMicroResult *r);
// The device's count after the last run (a check that every variant did the work).
int sync_micro_read_count(SyncMicro *m, int32_t *count);
void sync_micro_free(SyncMicro *m);

#ifdef __cplusplus
}
#endif
#endif
