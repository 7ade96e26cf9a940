// cudnn_regret.cu: every algorithm cuDNN offers for one convolution pass, timed with CUDA
// events, against the heuristics' pick and Find's pick (cudnn_regret.h).
#include "bench/cudnn_benchmark/cudnn_regret.h"

#include <stdio.h>
#include <string.h>

#include "bench/driver/gpu_timing.h"
#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/conv_cudnn.cuh"
#include "kernels/cuda_common.cuh"

// Deterministic values in [-0.5, 0.5): timing does not depend on them, but zeros could
// take shortcuts in some kernels.
__global__ void regret_fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = (float)(h & 0xffffu) / 65536.0f - 0.5f;
    }
}

typedef struct Regret {
    cudaStream_t stream;
    cudnnHandle_t dnn;
    ConvPassDescs d;
    float *x, *y, *w, *dw;
    ConvTrialBuffers buf;  // x, y, w, dw, as the calls take them
    ConvPass pass;
    GpuTimer timer;
    bool timer_made;
} Regret;

static void regret_free(Regret *r)
{
    if (r->stream) cudaStreamSynchronize(r->stream);
    cudaFree(r->x);
    cudaFree(r->y);
    cudaFree(r->w);
    cudaFree(r->dw);
    if (r->timer_made) gpu_timer_destroy(&r->timer);
    if (r->d.conv) cudnnDestroyConvolutionDescriptor(r->d.conv);
    if (r->d.w) cudnnDestroyFilterDescriptor(r->d.w);
    if (r->d.x) cudnnDestroyTensorDescriptor(r->d.x);
    if (r->d.y) cudnnDestroyTensorDescriptor(r->d.y);
    if (r->dnn) cudnnDestroy(r->dnn);
    if (r->stream) cudaStreamDestroy(r->stream);
}

static int fill(float *p, size_t n, unsigned seed, cudaStream_t stream)
{
    regret_fill<<<grid_for(n), CUDA_THREADS, 0, stream>>>(p, n, seed);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

static int regret_open(Regret *r, const ConvShape *s, ConvPass pass, cudnnMathType_t math)
{
    r->pass = pass;
    size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->p * s->q;
    size_t nw = (size_t)s->k * s->c * s->r * s->r;
    CUDA_TRY(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    CUDNN_TRY(cudnnCreate(&r->dnn));
    CUDNN_TRY(cudnnSetStream(r->dnn, r->stream));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&r->d.x));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&r->d.y));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&r->d.w));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&r->d.conv));
    TRY(conv_descs_set(r->d.x, r->d.y, r->d.w, &r->d.conv, 1, s, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, math));
    CUDA_TRY(cudaMalloc((void **)&r->x, nx * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&r->y, ny * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&r->w, nw * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&r->dw, nw * sizeof(float)));
    TRY(fill(r->x, nx, 1u, r->stream));
    TRY(fill(r->y, ny, 2u, r->stream));
    TRY(fill(r->w, nw, 3u, r->stream));
    r->buf = (ConvTrialBuffers){r->x, r->y, r->w, r->dw};
    TRY(gpu_timer_create(&r->timer));
    r->timer_made = true;
    CUDA_TRY(cudaStreamSynchronize(r->stream));
    return 0;
}

// One call of the pass with algo (the descriptor's math type set by the caller).
static cudnnStatus_t call(const Regret *r, int algo, void *ws, size_t ws_size)
{
    return conv_pass_call(r->dnn, r->pass, &r->d, algo, &r->buf, ws, ws_size);
}

typedef struct Timing {
    const Regret *r;
    const ConvSelectRules *rules;
    int reps;
    double ms;  // out: mean time of one call
} Timing;

// A ConvTrialFn: one untimed call, then reps timed calls of candidate c.
static cudnnStatus_t time_candidate(void *ctx, const ConvCandidate *c)
{
    Timing *t = (Timing *)ctx;
    const Regret *r = t->r;
    void *ws = NULL;
    size_t ws_size = 0;
    cudnnStatus_t s = conv_candidate_ready(r->dnn, r->pass, &r->d, t->rules, c, &ws, &ws_size);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    s = call(r, c->algo, ws, ws_size);
    if (s == CUDNN_STATUS_SUCCESS && cudaStreamSynchronize(r->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        s = CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    }
    double seconds = 0.0;
    if (s == CUDNN_STATUS_SUCCESS && gpu_timer_start((GpuTimer *)&r->timer, r->stream) != 0)
        s = CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    for (int i = 0; i < t->reps && s == CUDNN_STATUS_SUCCESS; i++) s = call(r, c->algo, ws, ws_size);
    if (s == CUDNN_STATUS_SUCCESS && gpu_timer_stop((GpuTimer *)&r->timer, r->stream, &seconds) != 0)
        s = CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    if (s != CUDNN_STATUS_SUCCESS) {
        (void)cudaStreamSynchronize(r->stream);
        (void)cudaGetLastError();
    }
    if (ws) cudaFree(ws);
    t->ms = 1e3 * seconds / t->reps;
    return s;
}

static int index_of(const RegretResult *out, int algo, cudnnMathType_t math)
{
    for (int i = 0; i < out->count; i++)
        if (out->algos[i].algo == algo && out->algos[i].math == math) return i;
    return -1;
}

// Times candidate c unless it is already in out; returns its index or -1 (not usable).
static int add_timed(RegretResult *out, Timing *t, const ConvCandidate *c)
{
    cudnnMathType_t math = conv_select_run_math(t->rules, c->math);
    int at = index_of(out, c->algo, math);
    if (at >= 0 || out->count == REGRET_MAX_ALGOS) return at;
    if (time_candidate(t, c) != CUDNN_STATUS_SUCCESS) return -1;
    size_t ws = 0;
    (void)conv_workspace_size(t->r->dnn, t->r->pass, &t->r->d, c->algo, &ws);
    out->algos[out->count] = (RegretAlgo){c->algo, math, ws, t->ms};
    return out->count++;
}

// The pick of a ranked list as the core makes it (conv_select: the first usable candidate
// whose real call works), as an index into out (timed if it was not yet).
static int pick(RegretResult *out, Timing *t, const ConvCandidate *cands, int count, ConvPass pass,
                const char *what)
{
    int i = conv_select(pass, cands, count, t->rules, time_candidate, t, what);
    if (i < 0) return -1;
    int at = add_timed(out, t, &cands[i]);
    if (at < 0)
        error_set(ERROR_LIBRARY, "%s: %s %s worked once, then failed when timed", what,
                  conv_pass_name(pass), conv_algo_name(pass, cands[i].algo));
    return at;
}

static int measure(Regret *r, const ConvShape *s, ConvPass pass, const ConvSelectRules *rules, int reps,
                   RegretResult *out)
{
    ConvCandidate heur[CUDNN_CONVOLUTION_FWD_ALGO_COUNT], find[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int nh = 0, nf = 0;
    TRY(conv_rank_candidates(r->dnn, pass, &r->d, false, heur, &nh));
    out->offered = nh;
    Timing t = {r, rules, reps, 0.0};
    // Every algorithm the heuristics list and the rules allow (a failing one is left out).
    for (int i = 0; i < nh; i++) {
        const ConvCandidate *c = &heur[i];
        if (c->status != CUDNN_STATUS_SUCCESS || c->memory > rules->workspace_limit) continue;
        if (rules->strict_fp32 && (c->math == CUDNN_TENSOR_OP_MATH ||
                                   c->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
            continue;
        (void)add_timed(out, &t, c);
    }
    char what[160];
    snprintf(what, sizeof what, "conv %dx%dx%dx%d k%d r%d s%d", s->n, s->c, s->h, s->w, s->k, s->r,
             s->stride);
    out->heuristic = pick(out, &t, heur, nh, pass, what);
    if (out->heuristic < 0) return -1;
    CUDNN_TRY(cudnnSetConvolutionMathType(r->d.conv, rules->strict_fp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
    double t0 = clock_seconds();
    TRY(conv_rank_candidates(r->dnn, pass, &r->d, true, find, &nf));
    out->find_search_ms = 1e3 * (clock_seconds() - t0);
    out->find = pick(out, &t, find, nf, pass, what);
    if (out->find < 0) return -1;
    out->fastest = 0;
    for (int i = 1; i < out->count; i++)
        if (out->algos[i].ms < out->algos[out->fastest].ms) out->fastest = i;
    return 0;
}

// ---- the engine-configuration search (backend API) ------------------------------------------

// The backend descriptors of one pass: three tensors (uid 1: x or dx, 2: w or dw, 3: y or
// dy), the convolution, the operation and its graph.
typedef struct Backend {
    cudnnBackendDescriptor_t x, w, y, conv, op, graph;
} Backend;

static void backend_free(Backend *b)
{
    cudnnBackendDescriptor_t all[6] = {b->graph, b->op, b->conv, b->y, b->w, b->x};
    for (int i = 0; i < 6; i++)
        if (all[i]) cudnnBackendDestroyDescriptor(all[i]);
    memset(b, 0, sizeof *b);
}

// An fp32 NCHW tensor (dims n, c, h, w) with a unique id.
static int backend_tensor(cudnnBackendDescriptor_t *d, int64_t uid, int n, int c, int h, int w)
{
    int64_t dims[4] = {n, c, h, w};
    int64_t strides[4] = {(int64_t)c * h * w, (int64_t)h * w, w, 1};
    int64_t align = 16;
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    CUDNN_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, d));
    CUDNN_TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    CUDNN_TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    CUDNN_TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    CUDNN_TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    CUDNN_TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    CUDNN_TRY(cudnnBackendFinalize(*d));
    return 0;
}

static int backend_open(Backend *b, const Regret *r, const ConvShape *s)
{
    TRY(backend_tensor(&b->x, 1, s->n, s->c, s->h, s->w));
    TRY(backend_tensor(&b->w, 2, s->k, s->c, s->r, s->r));
    TRY(backend_tensor(&b->y, 3, s->n, s->k, s->p, s->q));
    int64_t dims = 2, pad[2] = {s->pad, s->pad}, stride[2] = {s->stride, s->stride}, dil[2] = {1, 1};
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    CUDNN_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &b->conv));
    CUDNN_TRY(cudnnBackendSetAttribute(b->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
    CUDNN_TRY(cudnnBackendSetAttribute(b->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    CUDNN_TRY(cudnnBackendSetAttribute(b->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    CUDNN_TRY(cudnnBackendSetAttribute(b->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    CUDNN_TRY(cudnnBackendSetAttribute(b->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    CUDNN_TRY(cudnnBackendSetAttribute(b->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil));
    CUDNN_TRY(cudnnBackendSetAttribute(b->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride));
    CUDNN_TRY(cudnnBackendFinalize(b->conv));

    // The operation of the pass: which attribute takes which tensor.
    cudnnBackendDescriptorType_t kind = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
    cudnnBackendAttributeName_t ax = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                aw = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                ay = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                ac = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                aalpha = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                abeta = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
    if (r->pass == CONV_PASS_BWD_DATA) {
        kind = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
        ax = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
        aw = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
        ay = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
        ac = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
        aalpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA;
        abeta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
    } else if (r->pass == CONV_PASS_BWD_FILTER) {
        kind = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
        ax = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
        aw = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
        ay = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
        ac = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
        aalpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
        abeta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
    }
    const float alpha = 1.0f, beta = 0.0f;
    CUDNN_TRY(cudnnBackendCreateDescriptor(kind, &b->op));
    CUDNN_TRY(cudnnBackendSetAttribute(b->op, ax, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->x));
    CUDNN_TRY(cudnnBackendSetAttribute(b->op, aw, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->w));
    CUDNN_TRY(cudnnBackendSetAttribute(b->op, ay, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->y));
    CUDNN_TRY(cudnnBackendSetAttribute(b->op, ac, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->conv));
    CUDNN_TRY(cudnnBackendSetAttribute(b->op, aalpha, CUDNN_TYPE_FLOAT, 1, &alpha));
    CUDNN_TRY(cudnnBackendSetAttribute(b->op, abeta, CUDNN_TYPE_FLOAT, 1, &beta));
    CUDNN_TRY(cudnnBackendFinalize(b->op));

    cudnnHandle_t handle = r->dnn;
    CUDNN_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &b->graph));
    CUDNN_TRY(cudnnBackendSetAttribute(b->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->op));
    CUDNN_TRY(cudnnBackendSetAttribute(b->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    CUDNN_TRY(cudnnBackendFinalize(b->graph));
    return 0;
}

// The engine configurations one heuristics mode offers, appended to cfgs (created here,
// destroyed by the caller). 0 or -1.
static int engine_configs(const Backend *b, cudnnBackendHeurMode_t mode, cudnnBackendDescriptor_t *cfgs,
                          int max, int *count)
{
    cudnnBackendDescriptor_t heur = NULL;
    int rc = -1;
    int64_t offered = 0, got = 0;
    int room = max - *count, take = 0;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->graph);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(heur);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                      0, &offered, NULL);
    if (st != CUDNN_STATUS_SUCCESS) {
        check_cudnn_failed(st, __FILE__, __LINE__, "engine heuristics");
        goto done;
    }
    take = offered < room ? (int)offered : room;
    for (int i = 0; i < take; i++) {
        st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[*count + i]);
        if (st != CUDNN_STATUS_SUCCESS) {
            for (int j = 0; j < i; j++) cudnnBackendDestroyDescriptor(cfgs[*count + j]);
            check_cudnn_failed(st, __FILE__, __LINE__, "engine configuration descriptor");
            goto done;
        }
    }
    st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, take,
                                  &got, take > 0 ? &cfgs[*count] : NULL);
    if (st != CUDNN_STATUS_SUCCESS) {
        for (int j = 0; j < take; j++) cudnnBackendDestroyDescriptor(cfgs[*count + j]);
        check_cudnn_failed(st, __FILE__, __LINE__, "engine heuristics results");
        goto done;
    }
    for (int64_t j = got; j < take; j++) cudnnBackendDestroyDescriptor(cfgs[*count + j]);
    *count += got < take ? (int)got : take;
    rc = 0;
done:
    if (heur) cudnnBackendDestroyDescriptor(heur);
    return rc;
}

// What PyTorch's cudnn.benchmark filter drops (aten's filterEngineConfigs for float data):
// engines that down-convert their inputs (fp32 computed in fp16/bf16) always, and tensor-core
// engines (TF32) when TF32 is off (strict fp32). Unknown notes count as allowed. Also reads
// the engine's global index (-1 when unknown).
static bool engine_excluded(cudnnBackendDescriptor_t cfg, bool strict, long long *index)
{
    cudnnBackendDescriptor_t engine = NULL;
    bool tensor_core = false, down_convert = false;
    int64_t n = 0, idx = -1;
    *index = -1;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return false;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 &engine) == CUDNN_STATUS_SUCCESS && n == 1) {
        if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx) ==
            CUDNN_STATUS_SUCCESS && n == 1)
            *index = (long long)idx;
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++) {
                tensor_core = tensor_core || notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
                down_convert = down_convert || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
            }
    }
    cudnnBackendDestroyDescriptor(engine);
    return down_convert || (strict && tensor_core);
}

// Builds the plan of one configuration and times it (one untimed call, then reps); false
// when the configuration does not finalize, needs too much workspace or fails to run.
// *planned: it finalized into a plan within the workspace limit (what PyTorch's
// benchmark_limit counts).
static bool time_engine(const Regret *r, cudnnBackendDescriptor_t cfg, size_t limit, int reps, double *ms,
                        bool *planned)
{
    *planned = false;
    cudnnHandle_t handle = r->dnn;
    cudnnBackendDescriptor_t plan = NULL, pack = NULL;
    void *ws = NULL;
    int64_t ws_size = 0, n = 0;
    bool ok = false;
    double seconds = 0.0;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(plan);  // not supported: skipped
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                      &n, &ws_size);
    if (st != CUDNN_STATUS_SUCCESS || ws_size < 0 || (size_t)ws_size > limit) goto done;
    *planned = true;
    if (ws_size > 0 && cudaMalloc(&ws, (size_t)ws_size) != cudaSuccess) {
        (void)cudaGetLastError();
        ws = NULL;
        goto done;
    }
    {
        int64_t uids[3] = {1, 2, 3};
        void *ptrs[3] = {r->x, r->pass == CONV_PASS_BWD_FILTER ? (void *)r->dw : (void *)r->w, r->y};
        st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(pack);
    }
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(handle, plan, pack);
    if (st == CUDNN_STATUS_SUCCESS && cudaStreamSynchronize(r->stream) != cudaSuccess)
        st = CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    if (st == CUDNN_STATUS_SUCCESS && gpu_timer_start((GpuTimer *)&r->timer, r->stream) != 0)
        st = CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    for (int i = 0; i < reps && st == CUDNN_STATUS_SUCCESS; i++) st = cudnnBackendExecute(handle, plan, pack);
    if (st == CUDNN_STATUS_SUCCESS && gpu_timer_stop((GpuTimer *)&r->timer, r->stream, &seconds) != 0)
        st = CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    ok = st == CUDNN_STATUS_SUCCESS;
    if (!ok) {
        (void)cudaStreamSynchronize(r->stream);
        (void)cudaGetLastError();
    }
    *ms = 1e3 * seconds / reps;
done:
    if (pack) cudnnBackendDestroyDescriptor(pack);
    if (plan) cudnnBackendDestroyDescriptor(plan);
    if (ws) cudaFree(ws);
    return ok;
}

#define ENGINE_MAX_CONFIGS 256

// The configurations of heuristics modes A and FALLBACK (PyTorch's benchmark mode times
// the heuristics' list and the fallback list), in that order, filtered as PyTorch does, the
// first max_plans (0: all) that make plans within the workspace limit timed; the fastest
// goes into out.
static int engine_search(const Regret *r, const ConvShape *s, bool strict, size_t limit, int reps,
                         int max_plans, RegretResult *out)
{
    static cudnnBackendDescriptor_t cfgs[ENGINE_MAX_CONFIGS];  // under the caller's one thread
    Backend b;
    memset(&b, 0, sizeof b);
    int count = 0, rc = backend_open(&b, r, s);
    double t0 = clock_seconds();
    if (rc == 0) {  // either list may be empty or refused; both failing is an error
        int from_a = engine_configs(&b, CUDNN_HEUR_MODE_A, cfgs, ENGINE_MAX_CONFIGS, &count);
        int from_fallback = engine_configs(&b, CUDNN_HEUR_MODE_FALLBACK, cfgs, ENGINE_MAX_CONFIGS, &count);
        if (from_a != 0 && from_fallback != 0) rc = -1;
        else error_clear();
    }
    out->engine_offered = count;
    out->engine_index = -1;
    int plans = 0;
    for (int i = 0; i < count && rc == 0 && (max_plans == 0 || plans < max_plans); i++) {
        long long index = -1;
        if (engine_excluded(cfgs[i], strict, &index)) continue;
        double ms = 0.0;
        bool planned = false;
        bool timed = time_engine(r, cfgs[i], limit, reps, &ms, &planned);
        plans += planned;
        if (!timed) continue;
        if (out->engine_timed == 0 || ms < out->engine_ms) {
            out->engine_ms = ms;
            out->engine_index = index;
        }
        out->engine_timed++;
    }
    out->engine_search_ms = 1e3 * (clock_seconds() - t0);
    for (int i = 0; i < count; i++) cudnnBackendDestroyDescriptor(cfgs[i]);
    backend_free(&b);
    if (rc == 0 && out->engine_timed == 0)
        rc = error_set(ERROR_LIBRARY, "none of the %d engine configurations the backend heuristics "
                       "offered ran within the workspace limit", count);
    return rc;
}

extern "C" int regret_measure(const ConvShape *s, ConvPass pass, CorePrecision precision,
                              size_t workspace_limit, int reps, bool engines, int engine_limit,
                              RegretResult *out)
{
    memset(out, 0, sizeof *out);
    out->heuristic = out->find = out->fastest = -1;
    if (precision != CORE_PRECISION_FP32 && precision != CORE_PRECISION_FP32_STRICT)
        return error_set(ERROR_BAD_USAGE, "regret_measure: fp32 or fp32_strict only");
    if (reps < 1) return error_set(ERROR_BAD_USAGE, "regret_measure: reps must be >= 1");
    if (engine_limit < 0) return error_set(ERROR_BAD_USAGE, "regret_measure: engine_limit must be >= 0");
    const bool strict = precision == CORE_PRECISION_FP32_STRICT;
    const ConvSelectRules rules = {workspace_limit, strict, false};
    Regret r;
    memset(&r, 0, sizeof r);
    int rc = regret_open(&r, s, pass, strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH);
    if (rc == 0) rc = measure(&r, s, pass, &rules, reps, out);
    if (rc == 0 && engines && engine_search(&r, s, strict, workspace_limit, reps, engine_limit, out) != 0) {
        snprintf(out->engine_error, sizeof out->engine_error, "%s", error_message());
        error_clear();
    }
    regret_free(&r);
    return rc;
}
