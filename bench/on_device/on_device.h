// on_device.h: building a tensor where it is used, the on_device practice's machinery.
// A TensorBuilder makes one tensor of a kind (random normal, zeros, an arange) on the
// device, either as PyTorch's torch.randn(n).cuda() does it (built on the host, then
// copied: from pageable memory, or pinned memory with an async copy) or as
// torch.randn(n, device='cuda') does it (a kernel on the device: a Philox generator, the
// counter-based generator of cuRAND's device API that PyTorch's CUDA kernels use too).
// Every call ends when the tensor is on the device (the stream synchronized). All
// functions return 0 or -1 with the error set (kernels/error.h).
#ifndef ON_DEVICE_H
#define ON_DEVICE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/on_device/fill_check.h"
#include "bench/driver/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TENSOR_NORMAL, TENSOR_ZEROS, TENSOR_ARANGE } TensorKind;

typedef enum {
    BUILT_HOST_PAGEABLE, // built in malloc'd memory, then cudaMemcpyAsync + synchronize
                         // (the driver stages the pageable bytes: torch.randn(n).cuda())
    BUILT_HOST_PINNED,   // built in pinned memory (allocated once), async copy + synchronize
    BUILT_DEVICE,        // built by the device: Philox kernel, cudaMemsetAsync, arange kernel
} TensorBuild;

typedef struct TensorBuilder {
    TensorKind kind;
    TensorBuild build;
    size_t bytes;
    HostBuffer host;      // the host-built variants' buffer
    void *device;         // the tensor (bytes)
    cudaStream_t stream;
    uint64_t seed, draws; // random tensors: every call draws fresh values
} TensorBuilder;

// Allocates what builds of `bytes` (a multiple of 4; random tensors at least 2 values) need.
int tensor_builder_create(TensorBuilder *b, TensorKind kind, TensorBuild build, size_t bytes);
// Builds the tensor on the device and waits until it is there.
int tensor_builder_run(TensorBuilder *b);
// Poisons the device buffer (0xff bytes: NaN floats, -1 ints), builds once, copies the
// tensor back and checks it. *wrong: bytes (zeros) or elements (arange) that differ, or 1
// when a normal sample fails its check (*normal has the statistics).
int tensor_builder_check(TensorBuilder *b, int64_t *wrong, NormalCheck *normal);
void tensor_builder_free(TensorBuilder *b);

// ---- device kernels (on_device_kernels.cu), queued on a stream ----------------------------

// n standard normal floats from Philox4x32-10 (seed); `draw` numbers the call so that
// every draw gives fresh values.
int device_fill_normal(float *dst, size_t n, uint64_t seed, uint64_t draw, cudaStream_t stream);
// dst[i] = i.
int device_fill_arange(int32_t *dst, size_t n, cudaStream_t stream);
// out[i] = base[i] + scale * noise[i] (noise augmentation).
int device_add_scaled(float *out, const float *base, const float *noise, float scale, size_t n,
                      cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
