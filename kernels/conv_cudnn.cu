// conv_cudnn.cu: cuDNN convolution plans, algorithm selection and the per-shape cache.
#include "kernels/conv_cudnn.cuh"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "kernels/check.h"

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

static void cache_put(const ConvKey *k, const ConvAlgos *a)
{
    pthread_mutex_lock(&cache_lock);
    int slot = cache_count < CACHE_CAP ? cache_count++ : (cache_next++ % CACHE_CAP);
    cache[slot].key = *k;
    cache[slot].algos = *a;
    pthread_mutex_unlock(&cache_lock);
}

// The math type a pass starts from: strict FMA for fp32 (no TF32), cuDNN's default
// (TF32 allowed, as PyTorch with allow_tf32) for tf32, tensor ops for fp16/bf16.
static cudnnMathType_t base_math(int precision)
{
    switch ((CorePrecision)precision) {
    case CORE_PRECISION_FP32: return CUDNN_FMA_MATH;
    case CORE_PRECISION_TF32: return CUDNN_DEFAULT_MATH;
    default: return CUDNN_TENSOR_OP_MATH;
    }
}

static bool math_allowed(int precision, cudnnMathType_t m)
{
    if (precision != CORE_PRECISION_FP32) return true;
    return m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The math type a pass runs with once chosen (fp32 stays strict).
static cudnnMathType_t run_math(int precision, cudnnMathType_t perf_math)
{
    return precision == CORE_PRECISION_FP32 ? CUDNN_FMA_MATH : perf_math;
}

static int none_fits(const char *pass)
{
    return check_fail(__FILE__, __LINE__, pass,
                      "no cuDNN algorithm succeeds within the workspace limit (raise it)");
}

// Picks the first usable result: results come best first (by heuristic or measured time).
#define PICK_FIRST(perf, got, key, limit, out_algo, out_math, pass) do { \
        int pick_ = -1; \
        for (int i_ = 0; i_ < (got) && pick_ < 0; i_++) \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].memory <= (limit) && \
                math_allowed((key)->precision, (perf)[i_].mathType)) pick_ = i_; \
        if (pick_ < 0) return none_fits(pass); \
        (out_algo) = (perf)[pick_].algo; \
        (out_math) = run_math((key)->precision, (perf)[pick_].mathType); \
    } while (0)

static int select_algos(ConvPlan *p, cudnnHandle_t h, const ConvKey *k, ConvAlgos *a)
{
    size_t limit = (size_t)k->ws_limit_mb << 20;
    bool tune = k->policy == CORE_CONV_ALGO_AUTOTUNE;
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (tune)
        CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->fwd, p->y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp));
    else
        CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->fwd, p->y,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp));
    PICK_FIRST(fp, got, k, limit, a->fwd, a->fwd_math, "conv forward algorithm");

    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (tune)
        CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithm(
            h, p->w, p->y, p->bwd_data, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp));
    else
        CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            h, p->w, p->y, p->bwd_data, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp));
    PICK_FIRST(dp, got, k, limit, a->bwd_data, a->bwd_data_math, "conv backward-data algorithm");

    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if (tune)
        CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithm(
            h, p->x, p->y, p->bwd_filter, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, wp));
    else
        CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, p->x, p->y, p->bwd_filter, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, wp));
    PICK_FIRST(wp, got, k, limit, a->bwd_filter, a->bwd_filter_math, "conv backward-filter algorithm");
    return 0;
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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

int conv_plan_set(ConvPlan *p, cudnnHandle_t h, const ConvKey *k, ConvTuneStats *stats)
{
    TRY(conv_plan_create(p));
    p->key = *k;
    cudnnTensorFormat_t fmt = k->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnDataType_t dt = dtype_cudnn((DType)k->dtype);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(p->x, fmt, dt, k->n, k->c, k->h, k->w));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(p->y, fmt, dt, k->n, k->k, k->p, k->q));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(p->w, dt, fmt, k->k, k->c, k->r, k->r));
    cudnnConvolutionDescriptor_t descs[3] = {p->fwd, p->bwd_data, p->bwd_filter};
    for (int i = 0; i < 3; i++) {
        // fp32 accumulation for every data type (fp16/bf16: "pseudo" half configs).
        CUDNN_TRY(cudnnSetConvolution2dDescriptor(descs[i], k->pad, k->pad, k->stride, k->stride,
                                                  1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        CUDNN_TRY(cudnnSetConvolutionMathType(descs[i], base_math(k->precision)));
    }
    int on, oc, oh, ow;
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(p->fwd, p->x, p->w, &on, &oc, &oh, &ow));
    if (on != k->n || oc != k->k || oh != k->p || ow != k->q)
        return check_fail(__FILE__, __LINE__, "conv_plan_set", "cuDNN output shape differs from the model's");

    if (cache_get(k, &p->algos)) {
        stats->hits++;
    } else {
        double t0 = now_ms();
        TRY(select_algos(p, h, k, &p->algos));
        if (k->policy == CORE_CONV_ALGO_AUTOTUNE) stats->tune_ms += now_ms() - t0;
        stats->misses++;
        cache_put(k, &p->algos);
    }
    CUDNN_TRY(cudnnSetConvolutionMathType(p->fwd, p->algos.fwd_math));
    CUDNN_TRY(cudnnSetConvolutionMathType(p->bwd_data, p->algos.bwd_data_math));
    CUDNN_TRY(cudnnSetConvolutionMathType(p->bwd_filter, p->algos.bwd_filter_math));
    CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->fwd, p->y, p->algos.fwd,
                                                      &p->ws_fwd));
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
    const float one = 1.0f, beta = accum ? 1.0f : 0.0f;
    CUDNN_TRY(cudnnConvolutionBackwardData(h, &one, p->w, w, p->y, dy, p->bwd_data,
                                           p->algos.bwd_data, ws, ws_size, &beta, p->x, dx));
    return 0;
}

int conv_backward_filter(const ConvPlan *p, cudnnHandle_t h, const void *x, const void *dy,
                         void *dw, bool accum, void *ws, size_t ws_size)
{
    const float one = 1.0f, beta = accum ? 1.0f : 0.0f;
    CUDNN_TRY(cudnnConvolutionBackwardFilter(h, &one, p->x, x, p->y, dy, p->bwd_filter,
                                             p->algos.bwd_filter, ws, ws_size, &beta, p->w, dw));
    return 0;
}
