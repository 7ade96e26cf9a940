// layer_probe.h: runs single layers of the CUDA backend on host arrays, for tests that
// compare each layer with the CPU reference (layers_cpu.h). Inputs and outputs are
// fp32 NCHW (filters KCRS) on the host; inside, data is cast to the precision's storage
// type and layout exactly as the core does. Returns 0, or -1 with error_message().
#ifndef LAYER_PROBE_H
#define LAYER_PROBE_H

#include <stdint.h>

#include "kernels/core.h"
#include "kernels/layers_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

// Convolution: y = conv(x, w); dx, dw from dy (cuDNN with the given algorithm policy).
int layer_probe_conv(const ConvShape *s, CorePrecision p, CoreLayout l, CoreConvAlgo a,
                     const float *x, const float *w, const float *dy, float *y, float *dx,
                     float *dw);
// Training batch norm forward and backward (batch statistics).
int layer_probe_bn(int n, int c, int hw, CorePrecision p, CoreLayout l, const float *x,
                   const float *gamma, const float *beta, const float *dy, float *y, float *dx,
                   float *dgamma, float *dbeta);
// Batch norm in every form the core calls: `relu` fuses a ReLU (cuda_bn_relu_fwd_train and
// cuda_bn_relu_bwd); `accum` adds into dx, dgamma and dbeta, which then start from dx_init,
// dgamma_init and dbeta_init (else they are overwritten and those may be NULL); `in_place`
// writes dx over dy (not with accum). Also returns the batch statistics (mean, invstd).
// The forward and backward run twice on the same inputs: *repeatable is true when the
// second run's outputs equal the first's bit for bit (the reductions' fixed order).
typedef struct LayerProbeBnOptions { bool relu, accum, in_place; } LayerProbeBnOptions;
int layer_probe_bn_ex(int n, int c, int hw, CorePrecision p, CoreLayout l,
                      const LayerProbeBnOptions *o, const float *x, const float *gamma,
                      const float *beta, const float *dy, const float *dx_init,
                      const float *dgamma_init, const float *dbeta_init, float *y, float *dx,
                      float *dgamma, float *dbeta, float *mean, float *invstd, bool *repeatable);
// Inference batch norm (running statistics), with a fused ReLU when `relu`.
int layer_probe_bn_infer(int n, int c, int hw, CorePrecision p, CoreLayout l, bool relu,
                         const float *x, const float *gamma, const float *beta,
                         const float *running_mean, const float *running_var, float *y);

// The element-wise kernels one at a time on flat arrays (layers_cuda.cuh):
//   RELU y = relu(a); RELU_BWD dx = b * (a > 0) (a = y, b = dy), RELU_BWD_ACCUM dx = init + that;
//   ADD y = a + b; ADD_RELU y = relu(a + b); COPY_GRAD dx = a; COPY_GRAD_ACCUM dx = init + a;
//   CAST y = a cast from fp32 to the storage type.
typedef enum {
    PROBE_EW_RELU, PROBE_EW_RELU_BWD, PROBE_EW_RELU_BWD_ACCUM, PROBE_EW_ADD, PROBE_EW_ADD_RELU,
    PROBE_EW_COPY_GRAD, PROBE_EW_COPY_GRAD_ACCUM, PROBE_EW_CAST, PROBE_EW_COUNT
} LayerProbeEw;
// Runs op on count elements that start `offset` elements past a 256-byte boundary (an
// offset that is not a multiple of 16 bytes takes the unaligned scalar path), out of place
// into out and, when out_in_place is not NULL and the header allows it (not for the
// accumulating forms or CAST), in place: the output written over input a (RELU_BWD: dx over
// dy). Results are fp32 on the host.
int layer_probe_elementwise(LayerProbeEw op, size_t count, int offset, CorePrecision p,
                            const float *a, const float *b, const float *init, float *out,
                            float *out_in_place);
// ReLU, residual add and global average pooling, forward and backward:
// y = relu(x), dx = relu'(dy); sum = x + x2; pooled (n, c) = gap(x), dpool = gap'(dpooled).
int layer_probe_pointwise(int n, int c, int hw, CorePrecision p, CoreLayout l, const float *x,
                          const float *x2, const float *dy, const float *dpooled, float *y,
                          float *dx, float *sum, float *pooled, float *dpool);
// Linear: y (n, m) = x (n, k) w^T + b; dx, dw, db from dy.
int layer_probe_linear(int n, int k, int m, CorePrecision p, const float *x, const float *w,
                       const float *b, const float *dy, float *y, float *dx, float *dw, float *db);
// Softmax cross-entropy: mean loss, correct count, dz = (softmax - onehot) / n.
int layer_probe_softmax_ce(int n, int m, CorePrecision p, const float *z, const int32_t *labels,
                           float *loss, int *correct, float *dz);

#ifdef __cplusplus
}
#endif
#endif
