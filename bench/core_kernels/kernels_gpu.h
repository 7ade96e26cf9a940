// kernels_gpu.h: the device side of bench_kernels: one kernel of kernels_case.h on the GPU,
// our implementation (kernels/layers_cuda.cuh) or cuDNN's batch norm (the legacy API
// PyTorch calls: cudnnBatchNormalizationForwardTraining / ForwardInference / Backward,
// CUDNN_BATCHNORM_SPATIAL, or SPATIAL_PERSISTENT for NHWC training as PyTorch picks for
// channels_last), on the case's inputs converted to the storage type and layout; each
// launch timed alone by CUDA events, the L2 flushed before it (a cold cache, as a layer
// finds it in a training step).
#ifndef KERNELS_GPU_H
#define KERNELS_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "bench/core_kernels/kernels_case.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KB_IMPL_OURS, KB_IMPL_CUDNN } KbImpl;

typedef struct KbGpu KbGpu;

// Uploads kc's inputs in storage type `storage` (0 fp32, 1 fp16, 2 bf16) and layout (BN
// kernels; the element-wise ones are flat) and prepares impl. 0, or -1 with the error set
// (ERROR_OUT_OF_MEMORY when it does not fit; ERROR_BAD_USAGE when cuDNN lacks the kernel).
int kb_gpu_create(const KbCase *kc, int storage, bool nhwc, KbImpl impl, KbGpu **out);
// Runs the kernel once; *seconds: its time alone (CUDA events after an L2 flush).
int kb_gpu_run(KbGpu *g, double *seconds);
// The outputs of the last run as fp32 NCHW host arrays shaped like kc's (kb_outputs_alloc).
// For copy_grad_accum the output is valid after the first run only (dx keeps accumulating).
int kb_gpu_outputs(KbGpu *g, float *out[KB_MAX_OUT]);
void kb_gpu_free(KbGpu *g);
// After kb_gpu_create or kb_gpu_run failed: why cuDNN refused a bf16 batch norm (its status
// named), when that was the failure; else NULL. The row then skips (a fact about cuDNN).
const char *kb_gpu_cudnn_refusal(void);
// What the implementation ran, for the label (cuDNN's batch-norm mode; "ours").
const char *kb_gpu_note(const KbGpu *g);
// The device's peak DRAM bandwidth in bytes/s from its attributes (memory clock x bus width
// x 2 for double data rate); source names them. 0 (and -1) when the device does not say.
int kb_peak_bandwidth(double *bytes_per_second, char *source, size_t source_size);
// The device's name (for labels).
int kb_device_name(char *name, size_t size);

#ifdef __cplusplus
}
#endif
#endif
