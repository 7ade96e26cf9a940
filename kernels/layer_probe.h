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
