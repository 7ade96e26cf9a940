// grad_pass.h: the two pieces of a training step that zero_grad's modes do differently,
// over the parameter tensors and layer shapes of a core preset, for bench_zero_grad's micro
// benchmarks: zeroing every gradient (memset, as optimizer.zero_grad(set_to_none=False)
// does, per tensor or over one flat buffer) and the weight-gradient pass of every layer
// with beta = 1 (accumulate into the zeroed gradients) or beta = 0 (the first write
// overwrites: set_to_none). On the fast CPU layers (conv_bwd_fast, linear_bwd_fast) or on
// the GPU (cuDNN backward-filter, cuBLAS; strict fp32).
#ifndef GRAD_PASS_H
#define GRAD_PASS_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GradPass GradPass;

// Buffers for the preset's model at batch n, on the GPU when gpu (else the CPU). 0 or -1.
int grad_pass_create(const CoreModelConfig *model, int n, bool gpu, GradPass **out);
// Parameter tensors and their total floats.
int grad_pass_tensors(const GradPass *p);
size_t grad_pass_floats(const GradPass *p);
// Zeroes every gradient: one memset per tensor, or one over the flat buffer. Wall time on
// the CPU, CUDA events on the GPU. 0 or -1.
int grad_pass_zero(GradPass *p, bool per_tensor, double *seconds);
// The weight-gradient pass of every conv and linear layer, accumulating or overwriting. 0 or -1.
int grad_pass_weights(GradPass *p, bool accumulate, double *seconds);
void grad_pass_free(GradPass *p);

// The GPU half (grad_pass_cuda.cu).
typedef struct GradPassCuda GradPassCuda;
int grad_pass_cuda_create(const CoreModelConfig *model, int n, GradPassCuda **out);
int grad_pass_cuda_zero(GradPassCuda *p, bool per_tensor, double *seconds);
int grad_pass_cuda_weights(GradPassCuda *p, bool accumulate, double *seconds);
void grad_pass_cuda_free(GradPassCuda *p);

#ifdef __cplusplus
}
#endif
#endif
