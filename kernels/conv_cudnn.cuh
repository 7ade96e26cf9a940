// conv_cudnn.cuh: cuDNN convolutions (forward, backward data, backward filter) with
// an algorithm policy: cuDNN heuristics (cudnnGetConvolution*Algorithm_v7) or
// autotuning by timing the candidates (cudnnFindConvolution*Algorithm, what
// cudnn.benchmark does). Either way the ranked candidates are tried in order with one
// real call each and the first that works is kept (conv_select.h), so an algorithm
// that cuDNN lists but cannot run (NOT_SUPPORTED, a failed launch, a workspace that does
// not fit) falls through to the next, as in PyTorch. Choices are cached process-wide per
// shape, dtype, layout, precision, policy, determinism, workspace limit and whether the plan
// is forward-only (inference); the caller counts hits, misses and tuning time.
#ifndef CONV_CUDNN_CUH
#define CONV_CUDNN_CUH

#include <stdbool.h>
#include <stddef.h>

#include "kernels/conv_select.h"
#include "kernels/core.h"
#include "kernels/cuda_common.cuh"
#include "kernels/layers_cpu.h"

// Everything that identifies a convolution for algorithm selection (all ints: memcmp-able).
typedef struct ConvKey {
    int device, n, c, h, w, k, r, stride, pad, p, q;
    int dtype, nhwc, precision, policy;
    int deterministic;
    int ws_limit_mb;
    int forward_only;  // an inference plan: the backward passes are neither selected nor
                       // tuned (cudnn.benchmark under no_grad times forward candidates only)
} ConvKey;

// The algorithms chosen for one key and their math types (a forward-only key's backward
// algorithms are 0 and their math types the precision's base: never run).
typedef struct ConvAlgos {
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
} ConvAlgos;

typedef struct ConvPlan {
    ConvKey key;
    bool created;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t fwd, bwd_data, bwd_filter;  // one per pass: own math type
    ConvAlgos algos;
    size_t ws_fwd, ws_bwd_data, ws_bwd_filter;
} ConvPlan;

// The key of convolution s on a device with these settings (workspace limit in bytes).
ConvKey conv_key_make(int device, const ConvShape *s, DType dtype, bool nhwc, CorePrecision precision,
                      CoreConvAlgo policy, bool deterministic, size_t workspace_limit);

// Device buffers the candidate trials run on; their contents are overwritten. x holds
// the input's size (also written as backward-data's output; NULL: conv_plan_set tries on a
// transient buffer of its own), y the output's (also read as dy), w a filter to read and
// dw a filter-sized buffer to write.
typedef struct ConvTrialBuffers { void *x, *y; const void *w; void *dw; } ConvTrialBuffers;

// The descriptors one pass runs on: x the input (dx in backward data), y the output (dy in
// both backward passes), w the filter (dw in backward filter), conv the pass's convolution.
typedef struct ConvPassDescs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} ConvPassDescs;

// Sets x, y and w to shape s in this layout and data type, and each of the nconv
// convolution descriptors to s's padding and stride (fp32 accumulation) and math type.
int conv_descs_set(cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, cudnnFilterDescriptor_t w,
                   const cudnnConvolutionDescriptor_t *convs, int nconv, const ConvShape *s,
                   cudnnTensorFormat_t fmt, cudnnDataType_t dt, cudnnMathType_t math);
// cuDNN's ranked list for one pass as candidates: Find (find: timed, what cudnn.benchmark
// does) or the heuristics (cudnnGetConvolution*Algorithm_v7). out holds
// CUDNN_CONVOLUTION_FWD_ALGO_COUNT entries (the largest of the three passes' counts).
int conv_rank_candidates(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d, bool find,
                         ConvCandidate *out, int *count);
// The workspace algo needs for the pass, with d->conv's current math type.
cudnnStatus_t conv_workspace_size(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d, int algo,
                                  size_t *bytes);
// Readies a trial of candidate c: d->conv gets c's math type under the rules, and *ws the
// workspace c needs (NULL when none; the caller cudaFrees it). A failure is returned as a
// status (allocation: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED), not raised.
cudnnStatus_t conv_candidate_ready(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d,
                                   const ConvSelectRules *rules, const ConvCandidate *c, void **ws,
                                   size_t *ws_size);
// One call of the pass with algo on buffers b (overwritten: beta = 0): forward writes b->y
// from b->x and b->w, backward data writes b->x from b->w and b->y, backward filter writes
// b->dw from b->x and b->y.
cudnnStatus_t conv_pass_call(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d, int algo,
                             const ConvTrialBuffers *b, void *ws, size_t ws_size);

// Counters of algorithm selection, added to by conv_plan_set.
typedef struct ConvTuneStats { double tune_ms; int hits, misses; } ConvTuneStats;

// Changes whenever the algorithm cache is cleared (core_conv_cache_clear): plans made
// under an older generation must be made again.
unsigned conv_cache_generation(void);
// Creates a plan's descriptors (once).
int conv_plan_create(ConvPlan *p);
// Frees a plan's descriptors; a plan never created is fine.
void conv_plan_destroy(ConvPlan *p);
// Configures descriptors for key and selects algorithms (cached) under the policy,
// trying candidates on `trial` (needed on a cache miss only).
int conv_plan_set(ConvPlan *p, cudnnHandle_t h, const ConvKey *key, const ConvTrialBuffers *trial,
                  ConvTuneStats *stats);
// y = conv(x, w).
// (The backward passes below refuse a forward-only plan.)
int conv_forward(const ConvPlan *p, cudnnHandle_t h, const void *x, const void *w, void *y,
                 void *ws, size_t ws_size);
// dx (=|+=) conv backward data of dy.
int conv_backward_data(const ConvPlan *p, cudnnHandle_t h, const void *w, const void *dy,
                       void *dx, bool accum, void *ws, size_t ws_size);
// dw (=|+=) conv backward filter of x and dy.
int conv_backward_filter(const ConvPlan *p, cudnnHandle_t h, const void *x, const void *dy,
                         void *dw, bool accum, void *ws, size_t ws_size);

#endif
