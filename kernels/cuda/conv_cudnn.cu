// conv_cudnn.cu: cuDNN convolution plans, algorithm selection and the per-shape cache.
#include "kernels/conv_cudnn.cuh"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/conv_select.h"

#define CACHE_CAP 1024

typedef struct CacheEntry { ConvKey key; ConvAlgos algos; } CacheEntry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static CacheEntry cache[CACHE_CAP];
static int cache_count, cache_next;

static bool cache_get(const ConvKey *k, ConvAlgos *out)
{
    bool hit = false;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < cache_count && !hit; i++)
        if (memcmp(&cache[i].key, k, sizeof *k) == 0) { *out = cache[i].algos; hit = true; }
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

static unsigned cache_generation;  // under cache_lock

unsigned conv_cache_generation(void)
{
    pthread_mutex_lock(&cache_lock);
    unsigned g = cache_generation;
    pthread_mutex_unlock(&cache_lock);
    return g;
}

extern "C" void core_conv_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    cache_count = 0;
    cache_next = 0;
    cache_generation++;
    pthread_mutex_unlock(&cache_lock);
}

static void cache_put(const ConvKey *k, const ConvAlgos *a)
{
    pthread_mutex_lock(&cache_lock);
    int slot = cache_count < CACHE_CAP ? cache_count++ : (cache_next++ % CACHE_CAP);
    cache[slot].key = *k;
    cache[slot].algos = *a;
    pthread_mutex_unlock(&cache_lock);
}

// The math type every pass starts from: FMA only for strict fp32; cuDNN's default (TF32
// allowed on Ampere and later, as PyTorch's torch.backends.cudnn.allow_tf32 = True) for
// fp32 and tf32; tensor ops for fp16/bf16.
static cudnnMathType_t base_math(int precision)
{
    switch ((CorePrecision)precision) {
    case CORE_PRECISION_FP32_STRICT: return CUDNN_FMA_MATH;
    case CORE_PRECISION_FP32:
    case CORE_PRECISION_TF32: return CUDNN_DEFAULT_MATH;
    default: return CUDNN_TENSOR_OP_MATH;
    }
}

static ConvSelectRules rules_for(const ConvKey *k)
{
    ConvSelectRules r = {(size_t)k->ws_limit_mb << 20, k->precision == CORE_PRECISION_FP32_STRICT,
                         k->deterministic != 0};
    return r;
}

typedef struct Trial {
    const ConvPlan *plan;
    cudnnHandle_t h;
    ConvPass pass;
    const ConvSelectRules *rules;
    const ConvTrialBuffers *buf;
} Trial;

static cudnnConvolutionDescriptor_t pass_desc(const ConvPlan *p, ConvPass pass)
{
    return pass == CONV_PASS_FWD ? p->fwd : pass == CONV_PASS_BWD_DATA ? p->bwd_data : p->bwd_filter;
}

static ConvPassDescs pass_descs(const ConvPlan *p, ConvPass pass)
{
    ConvPassDescs d = {p->x, p->y, p->w, pass_desc(p, pass)};
    return d;
}

cudnnStatus_t conv_workspace_size(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d, int algo,
                                  size_t *bytes)
{
    switch (pass) {
    case CONV_PASS_FWD:
        return cudnnGetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    case CONV_PASS_BWD_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            h, d->w, d->y, d->conv, d->x, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    case CONV_PASS_BWD_FILTER:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h, d->x, d->y, d->conv, d->w, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    }
    return CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t conv_candidate_ready(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d,
                                   const ConvSelectRules *rules, const ConvCandidate *c, void **ws,
                                   size_t *ws_size)
{
    *ws = NULL;
    *ws_size = 0;
    cudnnStatus_t s = cudnnSetConvolutionMathType(d->conv, conv_select_run_math(rules, c->math));
    if (s == CUDNN_STATUS_SUCCESS) s = conv_workspace_size(h, pass, d, c->algo, ws_size);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    if (*ws_size > 0 && cudaMalloc(ws, *ws_size) != cudaSuccess) {
        (void)cudaGetLastError();
        *ws = NULL;
        return CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t conv_pass_call(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d, int algo,
                             const ConvTrialBuffers *b, void *ws, size_t ws_size)
{
    const float one = 1.0f, zero = 0.0f;
    switch (pass) {
    case CONV_PASS_FWD:
        return cudnnConvolutionForward(h, &one, d->x, b->x, d->w, b->w, d->conv,
                                       (cudnnConvolutionFwdAlgo_t)algo, ws, ws_size, &zero, d->y, b->y);
    case CONV_PASS_BWD_DATA:
        return cudnnConvolutionBackwardData(h, &one, d->w, b->w, d->y, b->y, d->conv,
                                            (cudnnConvolutionBwdDataAlgo_t)algo, ws, ws_size, &zero,
                                            d->x, b->x);
    case CONV_PASS_BWD_FILTER:
        return cudnnConvolutionBackwardFilter(h, &one, d->x, b->x, d->y, b->y, d->conv,
                                              (cudnnConvolutionBwdFilterAlgo_t)algo, ws, ws_size,
                                              &zero, d->w, b->dw);
    }
    return CUDNN_STATUS_BAD_PARAM;
}

// One real call of the pass with candidate c on the trial buffers, then a synchronize so
// that a failed launch shows up here and not in the first training step.
static cudnnStatus_t run_trial(void *ctx, const ConvCandidate *c)
{
    const Trial *t = (const Trial *)ctx;
    const ConvPassDescs d = pass_descs(t->plan, t->pass);
    void *ws = NULL;
    size_t ws_size = 0;
    cudnnStatus_t s = conv_candidate_ready(t->h, t->pass, &d, t->rules, c, &ws, &ws_size);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    s = conv_pass_call(t->h, t->pass, &d, c->algo, t->buf, ws, ws_size);
    cudaStream_t stream = NULL;
    if (s == CUDNN_STATUS_SUCCESS && cudnnGetStream(t->h, &stream) == CUDNN_STATUS_SUCCESS &&
        cudaStreamSynchronize(stream) != cudaSuccess) {
        (void)cudaGetLastError();
        s = CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    }
    if (ws) cudaFree(ws);
    return s;
}

int conv_rank_candidates(cudnnHandle_t h, ConvPass pass, const ConvPassDescs *d, bool find,
                         ConvCandidate *out, int *count)
{
    int got = 0;
    switch (pass) {
    case CONV_PASS_FWD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if (find)
            CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(h, d->x, d->w, d->conv, d->y,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
        else
            CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y,
                                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
        for (int i = 0; i < got; i++)
            out[i] = (ConvCandidate){perf[i].algo, perf[i].status, perf[i].memory, perf[i].mathType,
                                     perf[i].determinism};
        break;
    }
    case CONV_PASS_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (find)
            CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithm(
                h, d->w, d->y, d->conv, d->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
        else
            CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                h, d->w, d->y, d->conv, d->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
        for (int i = 0; i < got; i++)
            out[i] = (ConvCandidate){perf[i].algo, perf[i].status, perf[i].memory, perf[i].mathType,
                                     perf[i].determinism};
        break;
    }
    case CONV_PASS_BWD_FILTER: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if (find)
            CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithm(
                h, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
        else
            CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                h, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
        for (int i = 0; i < got; i++)
            out[i] = (ConvCandidate){perf[i].algo, perf[i].status, perf[i].memory, perf[i].mathType,
                                     perf[i].determinism};
        break;
    }
    }
    *count = got;
    return 0;
}

static int select_algos(ConvPlan *p, cudnnHandle_t h, const ConvKey *k,
                        const ConvTrialBuffers *buf, ConvAlgos *a)
{
    const ConvSelectRules rules = rules_for(k);
    const bool tune = k->policy == CORE_CONV_ALGO_AUTOTUNE;
    const int last = k->forward_only ? CONV_PASS_FWD : CONV_PASS_BWD_FILTER;
    int algo[3] = {0, 0, 0};
    cudnnMathType_t math[3] = {base_math(k->precision), base_math(k->precision), base_math(k->precision)};
    for (int pass = CONV_PASS_FWD; pass <= last; pass++) {
        ConvCandidate cands[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];  // the largest of the three
        int count = 0;
        const ConvPassDescs d = pass_descs(p, (ConvPass)pass);
        TRY(conv_rank_candidates(h, (ConvPass)pass, &d, tune, cands, &count));
        char what[160];
        snprintf(what, sizeof what, "conv %dx%dx%dx%d k%d r%d s%d (%s%s)", k->n, k->c, k->h, k->w,
                 k->k, k->r, k->stride, core_precision_name((CorePrecision)k->precision),
                 k->nhwc ? " nhwc" : "");
        const Trial t = {p, h, (ConvPass)pass, &rules, buf};
        int pick = conv_select((ConvPass)pass, cands, count, &rules, run_trial, (void *)&t, what);
        // each pass's descriptor keeps the math type of its chosen candidate
        CUDNN_TRY(cudnnSetConvolutionMathType(pass_desc(p, (ConvPass)pass), base_math(k->precision)));
        if (pick < 0) return -1;
        algo[pass] = cands[pick].algo;
        math[pass] = conv_select_run_math(&rules, cands[pick].math);
    }
    a->fwd = (cudnnConvolutionFwdAlgo_t)algo[CONV_PASS_FWD];
    a->bwd_data = (cudnnConvolutionBwdDataAlgo_t)algo[CONV_PASS_BWD_DATA];
    a->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)algo[CONV_PASS_BWD_FILTER];
    a->fwd_math = math[CONV_PASS_FWD];
    a->bwd_data_math = math[CONV_PASS_BWD_DATA];
    a->bwd_filter_math = math[CONV_PASS_BWD_FILTER];
    return 0;
}

// select_algos on `trial`; with no trial input (trial->x NULL: the layer reads the caller's
// batch in place, which the backward-data trials would overwrite) on a transient buffer of
// the input's size, freed before returning. It is not the core's memory: like the trials'
// workspaces, it exists only while candidates are tried.
static int select_with_trial_input(ConvPlan *p, cudnnHandle_t h, const ConvKey *k,
                                   const ConvTrialBuffers *trial)
{
    ConvTrialBuffers buf = *trial;
    if (buf.x) return select_algos(p, h, k, &buf, &p->algos);
    size_t bytes = (size_t)k->n * k->c * k->h * k->w * dtype_size((DType)k->dtype);
    cudaError_t e = cudaMalloc(&buf.x, bytes);
    if (e != cudaSuccess) {
        buf.x = NULL;
        return check_cuda_failed(e, __FILE__, __LINE__, "the convolution trials' input");
    }
    int rc = select_algos(p, h, k, &buf, &p->algos);
    cudaFree(buf.x);
    return rc;
}

static int create_descriptors(ConvPlan *p)
{
    CUDNN_TRY(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&p->y));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&p->w));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&p->fwd));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&p->bwd_data));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&p->bwd_filter));
    return 0;
}

int conv_plan_create(ConvPlan *p)
{
    if (p->created) return 0;
    // Plans start zeroed, so a failure part-way leaves NULLs after the descriptors made so
    // far: free those (they used to leak) and leave the plan "not created" for a retry.
    p->created = true;
    if (create_descriptors(p) != 0) {
        conv_plan_destroy(p);
        return -1;
    }
    return 0;
}

void conv_plan_destroy(ConvPlan *p)
{
    if (!p->created) return;
    if (p->x) cudnnDestroyTensorDescriptor(p->x);
    if (p->y) cudnnDestroyTensorDescriptor(p->y);
    if (p->w) cudnnDestroyFilterDescriptor(p->w);
    if (p->fwd) cudnnDestroyConvolutionDescriptor(p->fwd);
    if (p->bwd_data) cudnnDestroyConvolutionDescriptor(p->bwd_data);
    if (p->bwd_filter) cudnnDestroyConvolutionDescriptor(p->bwd_filter);
    p->x = p->y = NULL;
    p->w = NULL;
    p->fwd = p->bwd_data = p->bwd_filter = NULL;
    p->created = false;
}

ConvKey conv_key_make(int device, const ConvShape *s, DType dtype, bool nhwc, CorePrecision precision,
                      CoreConvAlgo policy, bool deterministic, size_t workspace_limit)
{
    ConvKey k;
    memset(&k, 0, sizeof k);  // memcmp'd in the cache: no stray padding
    k.device = device;
    k.n = s->n; k.c = s->c; k.h = s->h; k.w = s->w; k.k = s->k; k.r = s->r;
    k.stride = s->stride; k.pad = s->pad; k.p = s->p; k.q = s->q;
    k.dtype = dtype; k.nhwc = nhwc; k.precision = precision; k.policy = policy;
    k.deterministic = deterministic;
    k.ws_limit_mb = (int)(workspace_limit >> 20);
    return k;
}

int conv_descs_set(cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, cudnnFilterDescriptor_t w,
                   const cudnnConvolutionDescriptor_t *convs, int nconv, const ConvShape *s,
                   cudnnTensorFormat_t fmt, cudnnDataType_t dt, cudnnMathType_t math)
{
    CUDNN_TRY(cudnnSetTensor4dDescriptor(x, fmt, dt, s->n, s->c, s->h, s->w));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(y, fmt, dt, s->n, s->k, s->p, s->q));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(w, dt, fmt, s->k, s->c, s->r, s->r));
    for (int i = 0; i < nconv; i++) {
        // fp32 accumulation for every data type (fp16/bf16: "pseudo" half configs).
        CUDNN_TRY(cudnnSetConvolution2dDescriptor(convs[i], s->pad, s->pad, s->stride, s->stride,
                                                  1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        CUDNN_TRY(cudnnSetConvolutionMathType(convs[i], math));
    }
    return 0;
}

int conv_plan_set(ConvPlan *p, cudnnHandle_t h, const ConvKey *k, const ConvTrialBuffers *trial,
                  ConvTuneStats *stats)
{
    TRY(conv_plan_create(p));
    p->key = *k;
    const ConvShape shape = {k->n, k->c, k->h, k->w, k->k, k->r, k->stride, k->pad, k->p, k->q};
    const cudnnConvolutionDescriptor_t descs[3] = {p->fwd, p->bwd_data, p->bwd_filter};
    TRY(conv_descs_set(p->x, p->y, p->w, descs, 3, &shape, k->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                       dtype_cudnn((DType)k->dtype), base_math(k->precision)));
    int on, oc, oh, ow;
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(p->fwd, p->x, p->w, &on, &oc, &oh, &ow));
    if (on != k->n || oc != k->k || oh != k->p || ow != k->q)
        return error_set(ERROR_LIBRARY, "conv_plan_set: cuDNN output shape differs from the model's");

    if (cache_get(k, &p->algos)) {
        stats->hits++;
    } else {
        double t0 = 1e3 * clock_seconds();
        TRY(select_with_trial_input(p, h, k, trial));
        if (k->policy == CORE_CONV_ALGO_AUTOTUNE) stats->tune_ms += 1e3 * clock_seconds() - t0;
        stats->misses++;
        cache_put(k, &p->algos);
    }
    CUDNN_TRY(cudnnSetConvolutionMathType(p->fwd, p->algos.fwd_math));
    CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->fwd, p->y, p->algos.fwd,
                                                      &p->ws_fwd));
    p->ws_bwd_data = p->ws_bwd_filter = 0;
    if (k->forward_only) return 0;
    CUDNN_TRY(cudnnSetConvolutionMathType(p->bwd_data, p->algos.bwd_data_math));
    CUDNN_TRY(cudnnSetConvolutionMathType(p->bwd_filter, p->algos.bwd_filter_math));
    CUDNN_TRY(cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, p->y, p->bwd_data, p->x,
                                                           p->algos.bwd_data, &p->ws_bwd_data));
    CUDNN_TRY(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->x, p->y, p->bwd_filter, p->w,
                                                             p->algos.bwd_filter, &p->ws_bwd_filter));
    return 0;
}

int conv_forward(const ConvPlan *p, cudnnHandle_t h, const void *x, const void *w, void *y,
                 void *ws, size_t ws_size)
{
    const float one = 1.0f, zero = 0.0f;
    CUDNN_TRY(cudnnConvolutionForward(h, &one, p->x, x, p->w, w, p->fwd, p->algos.fwd, ws,
                                      ws_size, &zero, p->y, y));
    return 0;
}

int conv_backward_data(const ConvPlan *p, cudnnHandle_t h, const void *w, const void *dy,
                       void *dx, bool accum, void *ws, size_t ws_size)
{
    if (p->key.forward_only) return error_set(ERROR_BAD_USAGE, "conv_backward_data: a forward-only plan");
    const float one = 1.0f, beta = accum ? 1.0f : 0.0f;
    CUDNN_TRY(cudnnConvolutionBackwardData(h, &one, p->w, w, p->y, dy, p->bwd_data,
                                           p->algos.bwd_data, ws, ws_size, &beta, p->x, dx));
    return 0;
}

int conv_backward_filter(const ConvPlan *p, cudnnHandle_t h, const void *x, const void *dy,
                         void *dw, bool accum, void *ws, size_t ws_size)
{
    if (p->key.forward_only) return error_set(ERROR_BAD_USAGE, "conv_backward_filter: a forward-only plan");
    const float one = 1.0f, beta = accum ? 1.0f : 0.0f;
    CUDNN_TRY(cudnnConvolutionBackwardFilter(h, &one, p->x, x, p->y, dy, p->bwd_filter,
                                             p->algos.bwd_filter, ws, ws_size, &beta, p->w, dw));
    return 0;
}
