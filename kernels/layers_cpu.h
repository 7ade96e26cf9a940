// layers_cpu.h: plain-C reference layers (fp32, NCHW), the oracle for the GPU backend.
// Backward functions take `accum`: true adds into the output gradient, false overwrites.
#ifndef LAYERS_CPU_H
#define LAYERS_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Shape of one convolution: x (N, C, H, W), w (K, C, R, R), y (N, K, P, Q).
typedef struct ConvShape { int n, c, h, w, k, r, stride, pad, p, q; } ConvShape;

// Row-major C (m, n) = alpha * op(A) op(B) + beta * C, op = transpose when ta/tb.
void gemm_cpu(bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
              const float *b, float beta, float *c);
// Output size of a convolution along one dimension.
int conv_out_size(int in, int r, int stride, int pad);
// y = conv(x, w); col is scratch of C*R*R*P*Q floats.
void conv_fwd_cpu(const ConvShape *s, const float *x, const float *w, float *y, float *col);
// dx (=|+=) conv_transpose(dy, w).
void conv_bwd_data_cpu(const ConvShape *s, const float *dy, const float *w, float *dx,
                       bool accum, float *col);
// dw (=|+=) correlation of x and dy summed over the batch.
void conv_bwd_filter_cpu(const ConvShape *s, const float *x, const float *dy, float *dw,
                         bool accum, float *col);
// Training BN over (N, HW) per channel: y, batch mean/invstd into save_mean/save_invstd,
// running stats updated with momentum when running_mean != NULL.
void bn_fwd_train_cpu(int n, int c, int hw, const float *x, const float *gamma,
                      const float *beta, float *y, float *save_mean, float *save_invstd,
                      float *running_mean, float *running_var);
// Inference BN with running statistics.
void bn_fwd_infer_cpu(int n, int c, int hw, const float *x, const float *gamma,
                      const float *beta, const float *running_mean,
                      const float *running_var, float *y);
// BN backward: dx (=|+= by accum_dx), dgamma/dbeta (=|+= by accum_param).
void bn_bwd_cpu(int n, int c, int hw, const float *x, const float *dy, const float *gamma,
                const float *save_mean, const float *save_invstd, float *dx, bool accum_dx,
                float *dgamma, float *dbeta, bool accum_param);
// y = max(x, 0).
void relu_fwd_cpu(size_t count, const float *x, float *y);
// dx (=|+=) dy where y > 0.
void relu_bwd_cpu(size_t count, const float *y, const float *dy, float *dx, bool accum);
// y = a + b.
void add_fwd_cpu(size_t count, const float *a, const float *b, float *y);
// dx (=|+=) dy (the gradient of each input of an add).
void copy_grad_cpu(size_t count, const float *dy, float *dx, bool accum);
// y (N, C) = mean over HW of x (N, C, HW).
void gap_fwd_cpu(int n, int c, int hw, const float *x, float *y);
// dx (=|+=) dy / HW broadcast.
void gap_bwd_cpu(int n, int c, int hw, const float *dy, float *dx, bool accum);
// y (N, M) = x (N, K) w^T + b, w (M, K).
void linear_fwd_cpu(int n, int k, int m, const float *x, const float *w, const float *b,
                    float *y);
// dx (=|+= accum_dx) = dy w; dw, db (=|+= accum_param) = dy^T x, sum dy. dx may be NULL.
void linear_bwd_cpu(int n, int k, int m, const float *x, const float *w, const float *dy,
                    float *dx, bool accum_dx, float *dw, float *db, bool accum_param);
// Softmax cross-entropy on logits (N, M): returns the summed loss, counts correct
// argmax predictions, and writes dlogits = (softmax - onehot) * grad_scale / N if not NULL.
double softmax_ce_cpu(int n, int m, const float *logits, const int32_t *labels,
                      float grad_scale, float *dlogits, int *correct);

#ifdef __cplusplus
}
#endif
#endif
