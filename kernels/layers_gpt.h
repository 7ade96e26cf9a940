// layers_gpt.h: the transformer's layers on the CPU (fp32): the plain-C reference (the
// oracle, *_cpu, kernels/reference/layers_gpt.c) and the fast backend's (*_fast,
// kernels/cpu/layers_gpt_fast.c: threads of cpu_pool.h, OpenBLAS GEMMs, the same maths
// up to float rounding).
// Activations are token-major: a sequence of t tokens of width c is t rows of c floats,
// n sequences one after the other ([n][t][c]). Backward functions take `accum`: true adds
// into the output gradient, false overwrites.
// Attention: qkv is [n][t][3c], each row q | k | v; head h owns columns h*d .. h*d+d-1 of
// each part (d = c / heads); y is [n][t][c], the heads' outputs side by side (the layout
// of a GPT's c_attn / c_proj and of torch's scaled_dot_product_attention after its
// view/transpose). Causal (query i sees keys 0..i), scale 1/sqrt(d). Two forms with the
// same maths:
//   unfused: the scores and their softmax materialised, p [n][heads][t][t] (zero above the
//            diagonal), kept for backward: what softmax(QK^T/sqrt(d))V in eager PyTorch saves;
//   fused:   one pass over the keys per query with an online softmax (running max and
//            sum), the t x t matrix never stored; lse [n][heads][t] (each query row's
//            log-sum-exp of its scaled scores) kept for backward, which recomputes the
//            probabilities from q, k and lse (FlashAttention's backward, with
//            D_i = sum_j dy_ij y_ij).
// In place (the memory plan relies on it): layernorm_bwd and gelu_bwd take dx == dy when
// not accumulating.
#ifndef LAYERS_GPT_H
#define LAYERS_GPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/layers_cpu_fast.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_LN_EPS 1e-5f   // nn.LayerNorm's default

// ---- reference ---------------------------------------------------------------------------
// y[b][i] = wte[tok[b][i]] + wpe[i]; tok in [0, vocab).
void embed_fwd_cpu(int n, int t, int c, const int32_t *tok, const float *wte, const float *wpe,
                   float *y);
// dwte (vocab x c) and dwpe (t x c of the position table's first t rows) =|+= by accum: rows
// of dy added at their token's and their position's row (zeroed first unless accum).
void embed_bwd_cpu(int n, int t, int c, int vocab, const int32_t *tok, const float *dy,
                   float *dwte, float *dwpe, bool accum);
// Over the last dimension of `rows` rows of c: y = (x - mean) / sqrt(var + eps) * gamma + beta
// (biased variance, as nn.LayerNorm).
void layernorm_fwd_cpu(int rows, int c, const float *x, const float *gamma, const float *beta,
                       float *y);
// Recomputes each row's mean and 1/std from x. dx =|+= accum_dx; dgamma, dbeta =|+= accum_param.
void layernorm_bwd_cpu(int rows, int c, const float *x, const float *dy, const float *gamma,
                       float *dx, bool accum_dx, float *dgamma, float *dbeta, bool accum_param);
// GELU, exact (nn.GELU() default): y = x/2 (1 + erf(x / sqrt 2)).
void gelu_fwd_cpu(size_t count, const float *x, float *y);
void gelu_bwd_cpu(size_t count, const float *x, const float *dy, float *dx, bool accum);
void attn_fwd_unfused_cpu(int n, int t, int c, int heads, const float *qkv, float *p, float *y);
void attn_bwd_unfused_cpu(int n, int t, int c, int heads, const float *qkv, const float *p,
                          const float *dy, float *dqkv, bool accum);
void attn_fwd_fused_cpu(int n, int t, int c, int heads, const float *qkv, float *lse, float *y);
void attn_bwd_fused_cpu(int n, int t, int c, int heads, const float *qkv, const float *y,
                        const float *lse, const float *dy, float *dqkv, bool accum);

// ---- fast: the same, on ws->threads threads (no scratch of ws needed) ---------------------
void embed_fwd_fast(const CpuWorkspace *ws, int n, int t, int c, const int32_t *tok,
                    const float *wte, const float *wpe, float *y);
void embed_bwd_fast(const CpuWorkspace *ws, int n, int t, int c, int vocab, const int32_t *tok,
                    const float *dy, float *dwte, float *dwpe, bool accum);
void layernorm_fwd_fast(const CpuWorkspace *ws, int rows, int c, const float *x,
                        const float *gamma, const float *beta, float *y);
void layernorm_bwd_fast(const CpuWorkspace *ws, int rows, int c, const float *x, const float *dy,
                        const float *gamma, float *dx, bool accum_dx, float *dgamma,
                        float *dbeta, bool accum_param);
void gelu_fwd_fast(const CpuWorkspace *ws, size_t count, const float *x, float *y);
void gelu_bwd_fast(const CpuWorkspace *ws, size_t count, const float *x, const float *dy,
                   float *dx, bool accum);
void attn_fwd_unfused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                           const float *qkv, float *p, float *y);
void attn_bwd_unfused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                           const float *qkv, const float *p, const float *dy, float *dqkv,
                           bool accum);
void attn_fwd_fused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                         const float *qkv, float *lse, float *y);
void attn_bwd_fused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                         const float *qkv, const float *y, const float *lse, const float *dy,
                         float *dqkv, bool accum);

#ifdef __cplusplus
}
#endif
#endif
