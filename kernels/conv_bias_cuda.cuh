// conv_bias_cuda.cuh: the per-channel bias of a convolution (CoreModelConfig.conv_bias) on
// the CUDA backend, in the activations' storage type (fp32, fp16, bf16) and layout (NCHW or
// NHWC, ChanGeom), the bias and its gradient fp32 (master weights, fp32 gradients). Our own
// kernels rather than cudnnAddTensor / cudnnConvolutionBackwardBias: one code path for
// every type and layout, a fixed summation order (the same gradient bit for bit run to
// run), and plain kernel launches that a CUDA graph captures like the rest of the step.
#ifndef CONV_BIAS_CUDA_CUH
#define CONV_BIAS_CUDA_CUH

#include "kernels/cuda_common.cuh"

// y (N, C, HW of g) += b[c], in place.
int cuda_conv_bias_add(void *y, const float *b, DType dt, ChanGeom g, cudaStream_t s);
// Floats of device scratch cuda_conv_bias_grad needs for a gradient of geometry g.
size_t cuda_conv_bias_scratch_floats(ChanGeom g);
// db (fp32, C) (=|+= by accum) = the sum of dy over N and HW. The N*HW rows of each channel
// are split into S parts (enough blocks to fill the GPU when C is small), each block sums
// its part in fp32 and merges its threads in a fixed order into one partial per (part,
// channel) in scratch; a finishing kernel adds each channel's S partials in order. No
// float atomics: the same result bit for bit run to run.
int cuda_conv_bias_grad(const void *dy, float *db, bool accum, DType dt, ChanGeom g,
                        float *scratch, cudaStream_t s);

#endif
