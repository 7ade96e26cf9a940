// transfer.h: the host<->device transfer machinery the pin_memory practice measures:
// host buffers of each kind (pageable, pinned, registered), one checked copy, and
// the "copy batch i in, compute on batch i-1" step pipelines. All functions return
// 0 or -1 with the error set (kernels/error.h; out of memory is its own kind).
// In driver/ because two practices use it: pin_memory (bench/pin_memory/) and
// on_device (its host-built variants' buffers and copies, bench/on_device/).
#ifndef TRANSFER_H
#define TRANSFER_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/driver/gpu_timing.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRANSFER_STEPS_PER_ITERATION 8

typedef enum { HOST_PAGEABLE, HOST_PINNED, HOST_REGISTERED } HostMemory;

typedef struct {
    HostMemory memory;
    void *ptr;
} HostBuffer;

// Allocates bytes of host memory of the given kind, pages touched.
int host_buffer_alloc(HostBuffer *b, HostMemory memory, size_t bytes);
void host_buffer_free(HostBuffer *b);

typedef struct {
    HostMemory memory;
    bool async; // cudaMemcpyAsync on a created stream instead of blocking cudaMemcpy
} CopyVariant;

typedef struct {
    CopyVariant variant;
    size_t bytes;
    HostBuffer host, check;
    void *device;
    cudaStream_t stream;
    GpuTimer timer;
} CopySetup;

// Allocates the buffers, stream and timer for copies of `bytes` with variant v.
int copy_prepare(CopySetup *s, CopyVariant v, size_t bytes);
// One copy (host-to-device when h2d), timed with CUDA events on its stream.
int copy_timed(CopySetup *s, bool h2d, double *seconds);
// Moves a byte pattern through the variant's copy path; counts bytes that differ.
int copy_verify(CopySetup *s, bool h2d, int64_t *wrong_bytes);
void copy_release(CopySetup *s);

// Every variant runs the same arrangement: each batch's host-to-device copy is queued
// with cudaMemcpyAsync on a copy stream (after the compute that last read its device
// slot) and the compute of the batch on a compute stream (after its copy). They differ
// only in the host memory the copy reads, i.e. in the practice:
typedef enum {
    STEPS_PAGEABLE_BLOCKING, // the batch's own pageable memory: the driver stages it
                             // through its bounce buffer while the host waits, as
                             // .to(device, non_blocking=True) does from unpinned memory
    STEPS_PINNED_ASYNC,      // pin_memory=True: a pin thread copies each batch into one of
                             // 3 pinned buffers (allocated once) off the timed thread
    STEPS_PINNED_PER_BATCH,  // the same pin thread, but a cudaHostAlloc for every batch and a
                             // cudaFreeHost once its copy is done (no caching allocator)
} StepsVariant;

typedef struct PinThread PinThread;

typedef struct {
    size_t floats;         // floats per batch
    float *source;         // TRANSFER_STEPS_PER_ITERATION batches in pageable memory
    PinThread *pin;        // the pinned variants' pin thread
    float *device_in[2], *device_out;
    cudaStream_t copy_stream, compute_stream;
    cudaEvent_t copied[2], consumed[2];
} StepsSetup;

// Allocates everything the step pipeline of `variant` needs for batches of `bytes`.
int steps_prepare(StepsSetup *s, StepsVariant variant, size_t bytes);
// Runs TRANSFER_STEPS_PER_ITERATION steps of the prepared variant and synchronizes the device.
int steps_run(StepsSetup *s, int fma_per_element);
// Compares a sample of the last step's output with the CPU reference, bit for bit.
int steps_check_output(const StepsSetup *s, int fma_per_element, int64_t *wrong_values);
void steps_release(StepsSetup *s);

#ifdef __cplusplus
}
#endif
#endif
