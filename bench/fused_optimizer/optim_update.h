// optim_update.h: one optimizer update over the parameter tensors of a core preset, the two
// ways torch.optim implements it (https://pytorch.org/docs/stable/optim.html, "foreach and
// fused implementations"): per tensor (foreach=False: a loop over the parameters, one call,
// on CUDA one kernel launch, per tensor) or multi-tensor (foreach / fused: one pass over all
// of them; CUDA: multi_tensor_apply's launches over a table of tensor addresses and sizes,
// CPU: one threaded loop over the flat buffers). Two optimizers with PyTorch's per-element
// arithmetic, the same in both ways so that they agree bit for bit:
//   SGD (torch.optim.SGD, momentum, weight decay, no dampening; the core's formula):
//     g' = g + wd*p; buf = m*buf + g'; p -= lr*buf
//   AdamW (torch.optim.AdamW, step t from 1): p *= 1 - lr*wd; m = lerp(m, g, 1-b1);
//     v = b2*v + (1-b2)*g*g; p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
// Parameters and optimizer state live on the GPU (gpu) or in host memory; the gradients
// are fixed random values, the same at every update.
#ifndef OPTIM_UPDATE_H
#define OPTIM_UPDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { OPTIM_SGD, OPTIM_ADAMW } OptimKind;

// The hyper-parameters (SGD: the preset's; AdamW: torch.optim.AdamW's defaults).
typedef struct OptimHyper {
    float lr, momentum, weight_decay;  // SGD
    float beta1, beta2, eps;           // AdamW (lr and weight_decay too)
} OptimHyper;

// One parameter tensor: its range in the flat parameter order.
typedef struct OptimTensor {
    size_t offset, count;
} OptimTensor;

typedef struct OptimUpdate OptimUpdate;

// Parameters (the model's initialisation from seed), gradients and zeroed state for the
// preset's model. 0 or -1.
int optim_update_create(const CoreModelConfig *model, uint64_t seed, OptimKind kind,
                        const OptimHyper *hyper, bool gpu, OptimUpdate **out);
// One update: per tensor or multi-tensor; `skip_last` leaves the last tensor out (the
// self-test's broken variant). Its time (CUDA events on the GPU, else the wall clock) into
// *seconds and the calls or kernel launches it made into *launches. 0 or -1.
int optim_update_step(OptimUpdate *u, bool multi_tensor, bool skip_last, double *seconds,
                      int *launches);
// Puts parameters back to their start and zeroes the state and the step count. 0 or -1.
int optim_update_reset(OptimUpdate *u);
// Parameters and state to host memory: params (floats), state (state_floats). 0 or -1.
int optim_update_read(OptimUpdate *u, float *params, float *state);
int optim_update_tensors(const OptimUpdate *u);
size_t optim_update_floats(const OptimUpdate *u);        // parameters
size_t optim_update_state_floats(const OptimUpdate *u);  // optimizer state (1 or 2 per parameter)
void optim_update_free(OptimUpdate *u);

// The parameter tensors of a model in the flat order (conv weight and bias, BN gamma and
// beta, linear weight and bias): their count, written to out (up to max) unless out is NULL.
int optim_model_tensors(const CoreModelConfig *model, OptimTensor *out, int max);

// The per-element updates (optim_update.c), the ones both ways run, on elements [lo, hi).
void optim_sgd_span(float *p, const float *g, float *buf, size_t lo, size_t hi, float lr,
                    float momentum, float wd);
// AdamW: step_size = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t) (computed in double, as
// PyTorch's Python scalars), decay = 1 - lr*wd.
typedef struct AdamwStep {
    float decay, beta1, beta2, step_size, bc2_sqrt, eps;
} AdamwStep;
AdamwStep optim_adamw_step_of(const OptimHyper *h, int step);
void optim_adamw_span(float *p, const float *g, float *m, float *v, size_t lo, size_t hi,
                      const AdamwStep *s);

// The GPU half (optim_update_cuda.cu): device buffers of `floats` parameters.
typedef struct OptimCuda OptimCuda;
int optim_cuda_create(const float *params, const float *grads, size_t floats, int state_per_param,
                      OptimCuda **out);
int optim_cuda_step(OptimCuda *c, OptimKind kind, const OptimHyper *h, int step,
                    const OptimTensor *tensors, int n_tensors, bool multi_tensor, double *seconds,
                    int *launches);
int optim_cuda_reset(OptimCuda *c, const float *params);
int optim_cuda_read(OptimCuda *c, float *params, float *state);
void optim_cuda_free(OptimCuda *c);

#ifdef __cplusplus
}
#endif
#endif
