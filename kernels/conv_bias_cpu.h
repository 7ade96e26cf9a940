// conv_bias_cpu.h: the per-channel bias of a convolution (CoreModelConfig.conv_bias) on the
// two CPU backends: forward y[n][c][hw] += b[c] in place over the convolution's output (the
// reference's; the fast backend starts its convolution's GEMMs from the bias), and
// backward db[c] (=|+= by accum) = the sum of dy over N and HW (as PyTorch's Conv2d bias
// gradient). The reference is plain C on one thread with double sums (the tests' oracle);
// the fast forms split channels over the threads of a CpuWorkspace (float sums per plane).
#ifndef CONV_BIAS_CPU_H
#define CONV_BIAS_CPU_H

#include <stdbool.h>

#include "kernels/layers_cpu_fast.h"

#ifdef __cplusplus
extern "C" {
#endif

// y (N, C, HW) += b (C), in place.
void conv_bias_fwd_cpu(int n, int c, int hw, const float *b, float *y);
// db (C) (=|+= by accum) = sum over N, HW of dy (N, C, HW).
void conv_bias_bwd_cpu(int n, int c, int hw, const float *dy, float *db, bool accum);
// The gradient on the fast backend's threads (its forward bias is inside conv_fwd_fast).
void conv_bias_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *dy,
                        float *db, bool accum);

#ifdef __cplusplus
}
#endif
#endif
