// step_compute.h: the stand-in "training step" compute of the copy/compute overlap
// benchmarks: y = x, then `fma_per_element` times y = y * 0.999 + 0.001. Used by
// transfer.c's step pipelines, so it sits beside it in driver/.
#ifndef STEP_COMPUTE_H
#define STEP_COMPUTE_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Launches the compute over n floats on stream; returns 0 or -1 (kernels/error.h).
int step_compute_launch(const float *in, float *out, size_t n, int fma_per_element,
                        cudaStream_t stream);
// The same math for one element on the CPU, bit for bit (fused multiply-adds).
float step_compute_reference(float x, int fma_per_element);

#ifdef __cplusplus
}
#endif
#endif
