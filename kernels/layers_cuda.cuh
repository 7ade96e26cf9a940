// layers_cuda.cuh: our own CUDA kernels for everything cuDNN/cuBLAS do not do for us:
// input/weight casts and layout changes, batch norm, ReLU, residual add, global
// average pooling, linear bias, softmax cross-entropy. Launchers return 0 or -1
// (check.h); `accum` adds into the output gradient instead of overwriting it.
// Aliasing (the memory plan relies on it): every element-wise kernel may run in place
// (y == an input; dx == dy when not accumulating), and the BN backwards may write dx over
// dy when not accumulating. No other outputs may alias inputs.
#ifndef LAYERS_CUDA_CUH
#define LAYERS_CUDA_CUH

#include <stdint.h>

#include "kernels/cuda_common.cuh"

// dst (dtype, layout of g) = src (fp32 NCHW).
int cuda_convert_input(const float *src, void *dst, DType dt, ChanGeom g, cudaStream_t s);
// dst (fp32 NCHW) = src (dtype, layout of g); the inverse of cuda_convert_input.
int cuda_convert_output(const void *src, float *dst, DType dt, ChanGeom g, cudaStream_t s);
// dst (dtype, KCRS or KRSC) = fp32 KCRS filter.
int cuda_cast_filter(const float *w, void *dst, DType dt, int k, int c, int rs, bool nhwc,
                     cudaStream_t s);
// fp32 KCRS grad (=|+=) filter gradient g (dtype, KCRS or KRSC).
int cuda_gather_filter_grad(const void *g, DType dt, float *grad, int k, int c, int rs,
                            bool nhwc, bool accum, cudaStream_t s);
// dst (dtype) = src (fp32), n elements.
int cuda_cast(const float *src, void *dst, DType dt, size_t n, cudaStream_t s);
// Floats of device scratch that cuda_bn_fwd_train / cuda_bn_bwd (and their fused
// forms) need for a tensor of geometry g.
size_t cuda_bn_scratch_floats(ChanGeom g);
// Training BN: batch statistics into save_mean/save_invstd, running stats updated when
// running_mean != NULL, y = gamma * xhat + beta. scratch: cuda_bn_scratch_floats(g).
int cuda_bn_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                      const float *beta, float *save_mean, float *save_invstd,
                      float *running_mean, float *running_var, float *scratch, cudaStream_t s);
// The same with a ReLU fused into the output: y = max(gamma * xhat + beta, 0).
int cuda_bn_relu_fwd_train(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                           const float *beta, float *save_mean, float *save_invstd,
                           float *running_mean, float *running_var, float *scratch,
                           cudaStream_t s);
// Inference BN with running statistics.
int cuda_bn_fwd_infer(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                      const float *beta, const float *running_mean, const float *running_var,
                      cudaStream_t s);
// Inference BN with a fused ReLU.
int cuda_bn_relu_fwd_infer(const void *x, void *y, DType dt, ChanGeom g, const float *gamma,
                           const float *beta, const float *running_mean,
                           const float *running_var, cudaStream_t s);
// BN backward: dgamma/dbeta (fp32, =|+= by accum_param), dx (=|+= by accum_dx) when
// dx != NULL. scratch: cuda_bn_scratch_floats(g).
int cuda_bn_bwd(const void *x, const void *dy, void *dx, bool accum_dx, DType dt, ChanGeom g,
                const float *gamma, const float *save_mean, const float *save_invstd,
                float *dgamma, float *dbeta, bool accum_param, float *scratch, cudaStream_t s);
// BN backward through a fused ReLU: as cuda_bn_bwd with dy replaced by dy * (y > 0),
// y the fused forward's output.
int cuda_bn_relu_bwd(const void *x, const void *y, const void *dy, void *dx, bool accum_dx,
                     DType dt, ChanGeom g, const float *gamma, const float *save_mean,
                     const float *save_invstd, float *dgamma, float *dbeta, bool accum_param,
                     float *scratch, cudaStream_t s);
// y = max(x, 0).
int cuda_relu_fwd(const void *x, void *y, DType dt, size_t n, cudaStream_t s);
// dx (=|+=) dy * (y > 0).
int cuda_relu_bwd(const void *y, const void *dy, void *dx, bool accum, DType dt, size_t n,
                  cudaStream_t s);
// y = a + b.
int cuda_add_fwd(const void *a, const void *b, void *y, DType dt, size_t n, cudaStream_t s);
// y = max(a + b, 0) (its backward is cuda_relu_bwd on y, then the add's).
int cuda_add_relu_fwd(const void *a, const void *b, void *y, DType dt, size_t n, cudaStream_t s);
// dx (=|+=) dy.
int cuda_copy_grad(const void *dy, void *dx, bool accum, DType dt, size_t n, cudaStream_t s);
// y (N, C) = mean over HW of x.
int cuda_gap_fwd(const void *x, void *y, DType dt, ChanGeom g, cudaStream_t s);
// dx (=|+=) dy / HW.
int cuda_gap_bwd(const void *dy, void *dx, bool accum, DType dt, ChanGeom g, cudaStream_t s);
// y (N, M) += b (fp32, M).
int cuda_bias_add(void *y, const float *b, DType dt, int n, int m, cudaStream_t s);
// db (fp32, =|+=) = column sums of dy (N, M).
int cuda_bias_grad(const void *dy, float *db, bool accum, DType dt, int n, int m,
                   cudaStream_t s);
// Softmax cross-entropy over logits (N, M): adds the mean loss into *loss_sum, the
// number of correct argmax predictions into *correct (if not NULL), and writes
// dlogits = (softmax - onehot) * (*scale) * weight / N (scale NULL: 1) when dlogits != NULL
// (weight: the loss's weight, 1/K for one of K accumulated micro-batches; loss_sum is not
// weighted). sample_loss: N floats of device scratch for the per-sample losses, which are
// summed in a fixed order, so the loss is deterministic (no float atomics).
int cuda_softmax_ce(const void *logits, DType dt, const int32_t *labels, int n, int m,
                    const float *scale, float weight, void *dlogits, float *sample_loss,
                    float *loss_sum, int *correct, cudaStream_t s);

#endif
