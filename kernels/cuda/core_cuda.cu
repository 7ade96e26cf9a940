// core_cuda.cu: the CUDA backend of the core. cuDNN convolutions (conv_cudnn.cu),
// cuBLAS GEMMs for the linear layers, our kernels for the rest (layers_cuda.cu,
// optim_cuda.cu). fp32 master weights and gradients; activations in fp32, fp16 or
// bf16 and NCHW or NHWC. A step queues all its work on one stream and synchronises
// only to read the loss back (every step, or every K steps when deferred) and to let
// the caller reuse its host batch buffers (it waits for the upload copy only).
// Activations and their gradients are views into one arena laid out by the memory plan
// (kernels/model_plan.h): kept only while backward needs them, ReLUs and adds in place,
// the residual add's gradient passed on without a copy. With CORE_POINTWISE_FUSED, BN+ReLU
// and add+ReLU run as one kernel each (layers_cuda.cuh).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/conv_cudnn.cuh"
#include "kernels/conv_select.h"
#include "kernels/core_backends.h"
#include "kernels/core_internal.h"
#include "kernels/conv_bias_cuda.cuh"
#include "kernels/layers_cuda.cuh"
#include "kernels/model_plan.h"
#include "kernels/optim_cuda.cuh"

typedef enum { FWD_TRAIN, FWD_TRAIN_NO_STATS, FWD_INFER } FwdMode;

// Everything a captured step reads by address (CUDA graph kernels hold raw pointers and
// sizes): the shape, the plans' generation and every buffer. A graph is replayed only
// while the key it was captured under still holds.
#define STEP_GRAPH_KEY_MAX (24 + 2 * MODEL_MAX_TENSORS)

// cuda_graph: the captured training step of the current shape (see graph_step).
typedef struct StepGraph {
    cudaGraphExec_t exec;          // NULL: none captured for `key`
    uintptr_t key[STEP_GRAPH_KEY_MAX];
    int key_len;                   // 0: no shape seen yet
    bool eager_done;               // a step of this key ran eagerly (plans, autotuning done)
    int captures, replays, eager_steps;
    double capture_ms;
} StepGraph;

typedef struct CudaCore {
    int device;
    cudaStream_t s;              // all compute
    cudaStream_t cs;             // host-to-device uploads of batches
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    DType dt;                    // activation storage type
    bool nhwc;                   // activation layout (ResNet only; MLP always NCHW)
    bool staged;                 // weights cast/permuted per step; conv dW gathered back
    float *params, *grads, *mom, *stats, *saved;
    float *scratch;              // the reductions' scratch, one user at a time on the compute
                                 // stream: BN's (cuda_bn_scratch_floats), the conv biases'
                                 // gradient's (cuda_conv_bias_scratch_floats) and the loss's
                                 // per-sample values (one float per sample)
    size_t scratch_cap;          // floats of scratch
    void *wc;                    // compute-type weight copy (staged)
    void *gc;                    // compute-type conv filter gradient (staged); always the
                                 // candidate trials' filter-gradient scratch
    ModelPlan plan;              // where activations and gradients live (model_plan.h)
    void *arena;                 // the plan's arena; it only grows
    size_t arena_cap;            // bytes of arena
    void *act[MODEL_MAX_TENSORS], *dact[MODEL_MAX_TENSORS]; // views into arena; act[0]: the
                                 // staged input (its own buffer), NULL when not staged
    float *in_stage[2];          // device copies of host batches, ping-pong
    int32_t *lab_stage[2];
    cudaEvent_t copied[2], consumed[2];
    int next_slot, slot;
    const void *x0;              // this pass's tensor 0
    const int32_t *labels;       // this pass's labels on the device
    void *ws;
    size_t ws_size;
    ConvPlan plans[MODEL_MAX_OPS];
    size_t x0_cap;               // elements allocated for act[0]
    size_t in_cap[2];            // floats of in_stage[i]
    size_t lab_cap[2];           // labels of lab_stage[i]
    int cur_n, cur_size;         // the (n, image size) the plans are for; 0: none
    bool plan_infer;             // plan is core_infer's inference plan (CORE_GRAD_OFF)
    unsigned replans;            // prepare's re-plans so far (a captured graph's buffers
                                 // and algorithms are those of one plan)
    float *logits32;             // core_infer: fp32 logits of a non-fp32 pass
    size_t logits32_cap;         // floats of logits32
    unsigned plan_generation;    // conv_cache_generation() when they were made
    DevScalars *dsc;             // device scalars
    DevScalars *hsc;             // pinned host mirror
    int loss_count;              // steps in the current read-back window
    long window_samples;         // images in the current read-back window
    bool fault_pending;
    float fault_value;
    size_t bytes, peak;
    void *blas_ws;               // cuBLAS workspace, ours so that peak counts it
    size_t free_at_create;       // cudaMemGetInfo's free bytes before the core allocated
    size_t device_used_peak;     // largest drop of free bytes since then
    ConvTuneStats tune;
    cudaEvent_t grad_ready[MODEL_MAX_OPS]; // per op, recorded after its gradients (DDP hooks)
    StepGraph graph;             // cuda_graph
    StepGraph infer_graph;       // cuda_graph: core_infer's captured forward
} CudaCore;

// cuBLAS's workspace per handle, as PyTorch sizes it on Hopper and later (4 MiB x 8;
// CUBLAS_WORKSPACE_CONFIG=:4096:8); 1 MiB x 4 before Hopper.
static size_t blas_workspace_bytes(int device)
{
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
        (void)cudaGetLastError();
        major = 0;
    }
    return major >= 9 ? (size_t)32 << 20 : (size_t)4 << 20;
}

// Device memory the process gained since the core was created (all allocations,
// libraries' included), kept as a running maximum.
static int sample_device_used(CudaCore *c)
{
    size_t free_now = 0, total = 0;
    CUDA_TRY(cudaMemGetInfo(&free_now, &total));
    if (c->free_at_create > free_now && c->free_at_create - free_now > c->device_used_peak)
        c->device_used_peak = c->free_at_create - free_now;
    return 0;
}

static CudaCore *cu(Core *core) { return (CudaCore *)core->impl; }

static int dev_alloc(CudaCore *c, void **p, size_t bytes)
{
    *p = NULL;
    CUDA_TRY(cudaMalloc(p, bytes ? bytes : 1));
    c->bytes += bytes;
    if (c->bytes > c->peak) c->peak = c->bytes;
    return 0;
}

static void dev_free(CudaCore *c, void **p, size_t bytes)
{
    if (!*p) return;
    cudaFree(*p);
    *p = NULL;
    c->bytes -= bytes;
}

#define DEV_ALLOC(c, ptr, bytes) dev_alloc((c), (void **)&(ptr), (bytes))
#define DEV_FREE(c, ptr, bytes) dev_free((c), (void **)&(ptr), (bytes))

static size_t in_elems(const Core *core, int n) { return (size_t)n * model_tensor_size(&core->graph, 0); }

// Buffers are sized by what each one holds (its capacity), never by the graph: the image
// size, and so the graph's shapes, may have changed since they were allocated.
static void free_activations(Core *core)
{
    CudaCore *c = cu(core);
    DEV_FREE(c, c->act[0], c->x0_cap * dtype_size(c->dt));
    c->x0_cap = 0;
    DEV_FREE(c, c->arena, c->arena_cap);
    c->arena_cap = 0;
    memset(c->act, 0, sizeof c->act);
    memset(c->dact, 0, sizeof c->dact);
    for (int i = 0; i < 2; i++) {
        DEV_FREE(c, c->in_stage[i], c->in_cap[i] * sizeof(float));
        DEV_FREE(c, c->lab_stage[i], c->lab_cap[i] * sizeof(int32_t));
        c->in_cap[i] = c->lab_cap[i] = 0;
    }
    c->cur_n = 0;
    c->cur_size = 0;
}

// (Re)allocates *p for `need` elements of `elem` bytes when *cap is smaller. On failure
// *p is NULL and *cap 0, so that free_activations stays exact.
static int grow(CudaCore *c, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    dev_free(c, p, *cap * elem);
    *cap = 0;
    TRY(dev_alloc(c, p, need * elem));
    *cap = need;
    return 0;
}

// The memory plan for n samples of the current image size, its arena (activations and
// their gradients) and the staged input; a buffer is reallocated only when it must grow (a
// larger batch or larger images). The upload buffers are the first host batch's to make
// (stage_reserve): a core fed from device memory never has them.
static int alloc_activations(Core *core, int n, bool inference)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    size_t es = dtype_size(c->dt);
    // an inference pass recomputes nothing: there is no backward
    ModelPlanOptions o = {.training = !inference, .reuse = true,
                          .fuse = core->cfg.pointwise == CORE_POINTWISE_FUSED,
                          .checkpoint_segments = inference ? 0 : core->cfg.checkpoint_segments};
    TRY(model_plan_make(g, n, es, &o, &c->plan));
    if (inference != c->plan_infer) {  // the other plan's arena, at its exact size; the
        DEV_FREE(c, c->arena, c->arena_cap);  // peaks restart (core_infer)
        c->arena_cap = 0;
        c->peak = c->bytes;
        c->device_used_peak = 0;
        c->plan_infer = inference;
    }
    TRY(grow(c, &c->arena, &c->arena_cap, c->plan.arena_bytes, 1));
    for (int t = 1; t < MODEL_MAX_TENSORS; t++) {
        size_t a = c->plan.act_off[t], d = c->plan.dact_off[t];
        c->act[t] = a == MODEL_PLAN_NONE ? NULL : (void *)((char *)c->arena + a);
        c->dact[t] = d == MODEL_PLAN_NONE ? NULL : (void *)((char *)c->arena + d);
    }
    if (c->staged) TRY(grow(c, &c->act[0], &c->x0_cap, in_elems(core, n), es));
    return 0;
}

// Staging slot i holds n images (and n labels when `labels`): grown, never shrunk, when the
// first batch that needs it arrives (an upload of a host batch, a graph's static input).
// Both streams are drained before a buffer is replaced: an upload or a step may still read
// the old one. Never called inside a capture.
static int stage_reserve(Core *core, int i, int n, bool labels)
{
    CudaCore *c = cu(core);
    bool grows = in_elems(core, n) > c->in_cap[i] || (labels && (size_t)n > c->lab_cap[i]);
    if (!grows) return 0;
    CUDA_TRY(cudaStreamSynchronize(c->s));
    CUDA_TRY(cudaStreamSynchronize(c->cs));
    TRY(grow(c, (void **)&c->in_stage[i], &c->in_cap[i], in_elems(core, n), sizeof(float)));
    if (labels) TRY(grow(c, (void **)&c->lab_stage[i], &c->lab_cap[i], (size_t)n, sizeof(int32_t)));
    return 0;
}

static void *weight(const Core *core, const ModelOp *op);
static int sample_device_used(CudaCore *c);
static ChanGeom geom(const Core *core, int t, int n);

// Buffers for n samples of the current image size (reallocated only when they grow) and
// conv plans for exactly that shape. Plans are made again for a new (n, size), and after
// core_conv_cache_clear (a new cache generation).
static int prepare_pass(Core *core, int n, bool inference)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    int size = g->shapes[0].h;
    unsigned generation = conv_cache_generation();
    if (n == c->cur_n && size == c->cur_size && generation == c->plan_generation &&
        inference == c->plan_infer)
        return 0;
    CUDA_TRY(cudaStreamSynchronize(c->s));
    CUDA_TRY(cudaStreamSynchronize(c->cs));
    c->cur_n = 0;  // until everything below succeeds
    c->cur_size = 0;
    c->replans++;
    if (alloc_activations(core, n, inference) != 0) {
        char why[1024];
        ErrorKind kind = error_kind();
        snprintf(why, sizeof why, "%s", error_message());
        free_activations(core);
        error_restore(kind, why);
        return error_wrap("buffers for a batch of %d at %dx%d", n, size, size);
    }
    size_t ws_need = 0, scratch_need = (size_t)n;  // the loss's per-sample values
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_BN) {
            size_t need = cuda_bn_scratch_floats(geom(core, op->in, n));
            if (need > scratch_need) scratch_need = need;
        }
        if (op->kind == OP_CONV && op->bias) {  // its gradient's reduction shares the scratch
            size_t need = cuda_conv_bias_scratch_floats(geom(core, op->out, n));
            if (need > scratch_need) scratch_need = need;
        }
        if (op->kind != OP_CONV) continue;
        ConvShape shape = model_conv_shape(g, op, n);
        const CoreConfig *cfg = &core->cfg;
        ConvKey key = conv_key_make(c->device, &shape, c->dt, c->nhwc, cfg->precision, cfg->conv_algo,
                                    cfg->deterministic, cfg->workspace_limit);
        key.forward_only = inference;  // core_infer's plan: no backward to select or tune
        // Candidate trials run on this step's own buffers: nothing holds data yet (both
        // streams are idle), and the filter gradient goes to scratch, never to the
        // gradients (a new shape may come between accumulated micro-batches).
        // A first convolution reading the caller's images in place has no buffer of ours to
        // try candidates on (the batch itself must not be overwritten): NULL makes
        // conv_plan_set use a transient one on a cache miss.
        ConvTrialBuffers trial;
        trial.x = op->in > 0 || c->staged ? c->act[op->in] : NULL;
        trial.y = c->act[op->out];
        trial.w = weight(core, op);
        trial.dw = c->gc;
        TRY(conv_plan_set(&c->plans[i], c->dnn, &key, &trial, &c->tune));
        const ConvPlan *p = &c->plans[i];
        size_t need = p->ws_fwd > p->ws_bwd_data ? p->ws_fwd : p->ws_bwd_data;
        if (p->ws_bwd_filter > need) need = p->ws_bwd_filter;
        if (need > ws_need) ws_need = need;
    }
    TRY(grow(c, (void **)&c->scratch, &c->scratch_cap, scratch_need, sizeof(float)));
    if (ws_need > c->ws_size) {
        DEV_FREE(c, c->ws, c->ws_size);
        c->ws_size = 0;
        TRY(dev_alloc(c, &c->ws, ws_need));
        c->ws_size = ws_need;
    }
    c->cur_n = n;
    c->cur_size = size;
    c->plan_generation = generation;
    return sample_device_used(c);
}

// The training plan's buffers (core_step, core_eval, core_loss_grad).
static int prepare(Core *core, int n) { return prepare_pass(core, n, false); }

static ChanGeom geom(const Core *core, int t, int n)
{
    ModelShape s = core->graph.shapes[t];
    ChanGeom g = {n, s.c, s.h * s.w, cu((Core *)core)->nhwc};
    return g;
}

// Copies a host batch (its labels too when `labels`) into staging slot i on the upload
// stream, ordered before the compute stream's next work; the slot is free once the step
// that last used it is done.
static int stage_host_batch(Core *core, const CoreBatch *b, int i, bool labels)
{
    CudaCore *c = cu(core);
    TRY(stage_reserve(core, i, b->n, labels));
    CUDA_TRY(cudaStreamWaitEvent(c->cs, c->consumed[i], 0));
    CUDA_TRY(cudaMemcpyAsync(c->in_stage[i], b->images, in_elems(core, b->n) * sizeof(float),
                             cudaMemcpyHostToDevice, c->cs));
    if (labels)
        CUDA_TRY(cudaMemcpyAsync(c->lab_stage[i], b->labels, (size_t)b->n * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, c->cs));
    CUDA_TRY(cudaEventRecord(c->copied[i], c->cs));
    CUDA_TRY(cudaStreamWaitEvent(c->s, c->copied[i], 0));
    return 0;
}

// Makes the fp32 NCHW images at src tensor 0: converted (type, layout) into act[0] when
// staged, else used where they are.
static int set_input(Core *core, const float *src, int n)
{
    CudaCore *c = cu(core);
    if (c->staged) {
        TRY(cuda_convert_input(src, c->act[0], c->dt, geom(core, 0, n), c->s));
        c->x0 = c->act[0];
    } else {
        c->x0 = src;
    }
    return 0;
}

// Puts the batch on the device (via the upload stream for host memory) as tensor 0, and
// its labels when the pass reads them (`labels`: a serving forward uploads none).
static int upload(Core *core, const CoreBatch *b, bool labels)
{
    CudaCore *c = cu(core);
    c->slot = c->next_slot;
    c->next_slot ^= 1;
    int i = c->slot;
    const float *src = b->images;
    c->labels = labels ? b->labels : NULL;
    if (b->memory == CORE_MEMORY_HOST) {
        TRY(stage_host_batch(core, b, i, labels));
        src = c->in_stage[i];
        c->labels = labels ? c->lab_stage[i] : NULL;
    }
    return set_input(core, src, b->n);
}

// Marks the batch's device copies as consumed; for host batches, waits until the
// upload has read the caller's buffers so that they can be reused at once.
static int release_batch(Core *core, const CoreBatch *b)
{
    CudaCore *c = cu(core);
    CUDA_TRY(cudaEventRecord(c->consumed[c->slot], c->s));
    if (b->memory == CORE_MEMORY_HOST) CUDA_TRY(cudaEventSynchronize(c->copied[c->slot]));
    return 0;
}

static void *weight(const Core *core, const ModelOp *op)
{
    CudaCore *c = cu((Core *)core);
    if (c->staged) return (char *)c->wc + op->w_off * dtype_size(c->dt);
    return c->params + op->w_off;
}

// The compute-type (and, for NHWC, KRSC) copies of conv and linear weights.
static int cast_weights(Core *core)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    if (!c->staged) return 0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_CONV)
            TRY(cuda_cast_filter(c->params + op->w_off, weight(core, op), c->dt, op->cout, op->cin,
                                 op->k * op->k, c->nhwc, c->s));
        else if (op->kind == OP_LINEAR)
            TRY(cuda_cast(c->params + op->w_off, weight(core, op), c->dt,
                          (size_t)op->cout * op->cin, c->s));
    }
    return 0;
}

static const void *tensor(const Core *core, int t)
{
    CudaCore *c = cu((Core *)core);
    return t == 0 ? c->x0 : c->act[t];
}

static cublasComputeType_t gemm_compute(const Core *core)
{
    return core->cfg.precision == CORE_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                      : CUBLAS_COMPUTE_32F;
}

// Ops first..end-1 forward (only those the plan recomputes when recompute_only).
static int forward_ops(Core *core, int n, FwdMode mode, int first, int end, bool recompute_only)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    cudaDataType ct = dtype_cuda(c->dt);
    const float one = 1.0f, zero = 0.0f;
    for (int i = first; i < end; i++) {
        const ModelOp *op = &g->ops[i];
        const ModelPlanOp *po = &c->plan.ops[i];
        const void *x = tensor(core, op->in);
        void *y = c->act[op->out];
        ChanGeom gi = geom(core, op->in, n);
        size_t count = (size_t)n * model_tensor_size(g, op->in);
        if (po->fused_away || (recompute_only && !po->recompute)) continue;  // fused: the op
                                                                             // before wrote it
        switch (op->kind) {
        case OP_CONV:
            TRY(conv_forward(&c->plans[i], c->dnn, x, weight(core, op), y, c->ws, c->ws_size));
            if (op->bias)  // fp32 bias onto the compute-type output, in its layout
                TRY(cuda_conv_bias_add(y, c->params + op->b_off, c->dt, geom(core, op->out, n), c->s));
            break;
        case OP_BN: {
            float *gamma = c->params + op->w_off, *beta = c->params + op->b_off;
            float *mean = c->stats + op->stat_off, *var = c->stats + op->stat_off + op->cin;
            if (mode == FWD_INFER)
                TRY((po->relu_fused ? cuda_bn_relu_fwd_infer : cuda_bn_fwd_infer)(
                    x, y, c->dt, gi, gamma, beta, mean, var, c->s));
            else
                TRY((po->relu_fused ? cuda_bn_relu_fwd_train : cuda_bn_fwd_train)(
                    x, y, c->dt, gi, gamma, beta, c->saved + op->save_off,
                    c->saved + op->save_off + op->cin, mode == FWD_TRAIN ? mean : NULL,
                    mode == FWD_TRAIN ? var : NULL, c->scratch, c->s));
            break;
        }
        case OP_RELU: TRY(cuda_relu_fwd(x, y, c->dt, count, c->s)); break;
        case OP_ADD:
            TRY((po->relu_fused ? cuda_add_relu_fwd : cuda_add_fwd)(x, tensor(core, op->in2), y, c->dt,
                                                                    count, c->s));
            break;
        case OP_GAP: TRY(cuda_gap_fwd(x, y, c->dt, gi, c->s)); break;
        case OP_LINEAR:
            // Row-major y (n, M) = x (n, K) W^T: column-major y^T = W^T' x^T.
            CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, op->cout, n, op->cin, &one,
                                    weight(core, op), ct, op->cin, x, ct, op->cin, &zero, y, ct,
                                    op->cout, gemm_compute(core), CUBLAS_GEMM_DEFAULT));
            TRY(cuda_bias_add(y, c->params + op->b_off, c->dt, n, op->cout, c->s));
            break;
        }
    }
    return 0;
}

// ---- activation checkpointing (CoreConfig.checkpoint_segments) ----------------------

// Every activation view back at its forward bytes (after a backward that recomputed).
static void views_forward(CudaCore *c)
{
    for (int t = 1; t < MODEL_MAX_TENSORS; t++)
        if (c->plan.rec_off[t] != MODEL_PLAN_NONE)
            c->act[t] = c->plan.act_off[t] == MODEL_PLAN_NONE ? NULL
                                                              : (void *)((char *)c->arena + c->plan.act_off[t]);
}

// Before the backward of op `last`, the last op of a checkpointed segment: the segment's
// recomputed tensors move to their recomputed bytes and its ops run forward again in
// training mode without touching the running statistics, as in core_cpu.c. Device work
// only (no host synchronisation), so a captured step (cuda_graph) records it as it is.
static int recompute_segment(Core *core, int n, int last)
{
    CudaCore *c = cu(core);
    int first = c->plan.ops[last].segment_first;
    for (int j = first; j <= last; j++) {
        int t = core->graph.ops[j].out;
        if (c->plan.rec_off[t] != MODEL_PLAN_NONE) c->act[t] = (void *)((char *)c->arena + c->plan.rec_off[t]);
    }
    return forward_ops(core, n, FWD_TRAIN_NO_STATS, first, last + 1, true);
}

// The whole forward, every activation at its forward bytes.
static int forward(Core *core, int n, FwdMode mode)
{
    views_forward(cu(core));
    return forward_ops(core, n, mode, 0, core->graph.n_ops, false);
}

static int backward(Core *core, int n, bool accum_params)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    cudaDataType ct = dtype_cuda(c->dt);
    const float one = 1.0f;
    for (int i = g->n_ops - 1; i >= 0; i--) {
        const ModelOp *op = &g->ops[i];
        const ModelPlanOp *po = &c->plan.ops[i];
        if (po->recompute_before) TRY(recompute_segment(core, n, i));
        const void *x = tensor(core, op->in);
        const void *dy = c->dact[op->out];
        void *dx = op->in_grad ? c->dact[op->in] : NULL;
        ChanGeom gi = geom(core, op->in, n);
        size_t count = (size_t)n * model_tensor_size(g, op->in);
        switch (op->kind) {
        case OP_CONV: {
            const ConvPlan *p = &c->plans[i];
            if (op->bias)  // before dx may reuse dy's bytes
                TRY(cuda_conv_bias_grad(dy, c->grads + op->b_off, accum_params, c->dt,
                                        geom(core, op->out, n), c->scratch, c->s));
            if (dx)
                TRY(conv_backward_data(p, c->dnn, weight(core, op), dy, dx, op->in_accum, c->ws,
                                       c->ws_size));
            if (c->staged) {
                TRY(conv_backward_filter(p, c->dnn, x, dy, c->gc, false, c->ws, c->ws_size));
                TRY(cuda_gather_filter_grad(c->gc, c->dt, c->grads + op->w_off, op->cout, op->cin,
                                            op->k * op->k, c->nhwc, accum_params, c->s));
            } else {
                TRY(conv_backward_filter(p, c->dnn, x, dy, c->grads + op->w_off, accum_params,
                                         c->ws, c->ws_size));
            }
            break;
        }
        case OP_BN:
            if (po->relu_fused)  // y: the fused ReLU's output, the same bytes as this op's
                TRY(cuda_bn_relu_bwd(x, c->act[op->out], dy, dx, op->in_accum, c->dt, gi,
                                     c->params + op->w_off, c->saved + op->save_off,
                                     c->saved + op->save_off + op->cin, c->grads + op->w_off,
                                     c->grads + op->b_off, accum_params, c->scratch, c->s));
            else
                TRY(cuda_bn_bwd(x, dy, dx, op->in_accum, c->dt, gi, c->params + op->w_off,
                                c->saved + op->save_off, c->saved + op->save_off + op->cin,
                                c->grads + op->w_off, c->grads + op->b_off, accum_params,
                                c->scratch, c->s));
            break;
        case OP_RELU:
            // Fused into the BN before it: dact[in] is dact[out], masked by that BN's backward.
            if (dx && !po->bwd_fused)
                TRY(cuda_relu_bwd(c->act[op->out], dy, dx, op->in_accum, c->dt, count, c->s));
            break;
        case OP_ADD:  // an aliased input gradient already is dy: nothing to copy
            if (dx && !po->in_alias) TRY(cuda_copy_grad(dy, dx, op->in_accum, c->dt, count, c->s));
            if (!po->in2_alias)
                TRY(cuda_copy_grad(dy, c->dact[op->in2], op->in2_accum, c->dt, count, c->s));
            break;
        case OP_GAP:
            if (dx) TRY(cuda_gap_bwd(dy, dx, op->in_accum, c->dt, gi, c->s));
            break;
        case OP_LINEAR: {
            int m = op->cout, k = op->cin;
            if (dx) {  // dx (n, K) = dy (n, M) W (M, K)
                const float beta = op->in_accum ? 1.0f : 0.0f;
                CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &one,
                                        weight(core, op), ct, k, dy, ct, m, &beta, dx, ct, k,
                                        gemm_compute(core), CUBLAS_GEMM_DEFAULT));
            }
            // dW (M, K) = dy^T x, straight into the fp32 gradient.
            const float beta = accum_params ? 1.0f : 0.0f;
            CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &one, x, ct, k, dy,
                                    ct, m, &beta, c->grads + op->w_off, CUDA_R_32F, k,
                                    gemm_compute(core), CUBLAS_GEMM_DEFAULT));
            TRY(cuda_bias_grad(dy, c->grads + op->b_off, accum_params, c->dt, n, m, c->s));
            break;
        }
        }
        if (core_grad_hook_armed(core) && (op->kind == OP_CONV || op->kind == OP_BN ||
                                           op->kind == OP_LINEAR)) {
            if (!c->grad_ready[i])
                CUDA_TRY(cudaEventCreateWithFlags(&c->grad_ready[i], cudaEventDisableTiming));
            CUDA_TRY(cudaEventRecord(c->grad_ready[i], c->s));
            TRY(core_report_grads_ready(core, i, c->grads, (void *)c->grad_ready[i], (void *)c->s));
        }
    }
    views_forward(c);
    return 0;
}

static int read_scalars(CudaCore *c)
{
    CUDA_TRY(cudaMemcpyAsync(c->hsc, c->dsc, sizeof *c->hsc, cudaMemcpyDeviceToHost, c->s));
    CUDA_TRY(cudaStreamSynchronize(c->s));
    return 0;
}

// Clears the device's loss and accuracy sums when a read-back window starts.
static int start_loss_window(CudaCore *c)
{
    if (c->loss_count > 0) return 0;
    CUDA_TRY(cudaMemsetAsync(&c->dsc->loss_sum, 0, sizeof(float), c->s));
    CUDA_TRY(cudaMemsetAsync(&c->dsc->train_correct, 0, sizeof(int), c->s));
    c->window_samples = 0;
    return 0;
}

// The device work of forward, loss and backward of n samples of tensor 0 and c->labels:
// the weight casts, zero-grad, forward, softmax cross-entropy and backward. It never
// synchronises with the host, so a graph step captures it as it is.
static int forward_backward_work(Core *core, int n, bool accumulate, float loss_weight)
{
    CudaCore *c = cu(core);
    const CoreConfig *cfg = &core->cfg;
    const ModelGraph *g = &core->graph;
    size_t np = g->n_params;
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    bool memset_mode = cfg->zero_grad == CORE_ZERO_GRAD_MEMSET;
    TRY(cast_weights(core));
    if (memset_mode && !accumulate) CUDA_TRY(cudaMemsetAsync(c->grads, 0, np * sizeof(float), c->s));
    TRY(forward(core, n, FWD_TRAIN));
    TRY(cuda_softmax_ce(c->act[g->logits], c->dt, c->labels, n, g->shapes[g->logits].c,
                        fp16 ? &c->dsc->scale : NULL, loss_weight, c->dact[g->logits], c->scratch, &c->dsc->loss_sum,
                        &c->dsc->train_correct, c->s));
    TRY(backward(core, n, memset_mode || accumulate));
    return 0;
}

// Forward, loss and backward of one (micro-)batch; gradients replace those held or, when
// accumulate, are added to them (of loss_weight x the mean loss). Loss and accuracy join
// the read-back window.
static int cuda_forward_backward(Core *core, const CoreBatch *b, bool accumulate, float loss_weight)
{
    CudaCore *c = cu(core);
    CUDA_TRY(cudaSetDevice(c->device));
    TRY(prepare(core, b->n));
    TRY(upload(core, b, true));
    TRY(start_loss_window(c));
    TRY(forward_backward_work(core, b->n, accumulate, loss_weight));
    TRY(release_batch(core, b));
    c->loss_count++;
    c->window_samples += b->n;
    return 0;
}

// The device work of the update: the GradScaler's unscale and inf/nan check, clipping,
// SGD at lr (or at *lr_dev, read on the device, when not NULL) and the scaler update.
// It never synchronises with the host, so a graph step captures it as it is.
static int update_work(Core *core, float lr, const float *lr_dev)
{
    CudaCore *c = cu(core);
    const CoreConfig *cfg = &core->cfg;
    size_t np = core->graph.n_params;
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    bool clip = cfg->optim.clip_norm > 0.0f;
    if (fp16) TRY(cuda_unscale_check(c->grads, np, &c->dsc->scale, &c->dsc->found_inf, c->s));
    if (clip) TRY(cuda_sumsq(c->grads, np, &c->dsc->sumsq, c->s));
    TRY(cuda_sgd(c->params, c->grads, c->mom, np, lr, lr_dev, cfg->optim.momentum,
                 cfg->optim.weight_decay, clip ? &c->dsc->sumsq : NULL, cfg->optim.clip_norm,
                 fp16 ? &c->dsc->found_inf : NULL, c->s));
    if (fp16) TRY(cuda_scaler_update(c->dsc, cfg->scaler, c->s));
    return 0;
}

// The loss read-back when it is due (every step, or every readback_interval steps): the
// one host synchronisation of a training step.
static int read_back_if_due(Core *core, CoreStepResult *r)
{
    CudaCore *c = cu(core);
    const CoreConfig *cfg = &core->cfg;
    if (cfg->readback == CORE_READBACK_EVERY_STEP || c->loss_count >= cfg->readback_interval) {
        TRY(read_scalars(c));
        r->loss = c->hsc->loss_sum / (float)c->loss_count;
        r->loss_steps = c->loss_count;
        r->accuracy = (float)((double)c->hsc->train_correct / (double)c->window_samples);
        r->loss_ready = true;
        c->loss_count = 0;
    }
    return 0;
}

// The update: the before_update hook (DDP's reduced gradients, ordered on the compute
// stream), the GradScaler's inf/nan check, clipping, SGD, the scaler and the read-back.
static int cuda_update(Core *core, float lr, CoreStepResult *r)
{
    CudaCore *c = cu(core);
    size_t np = core->graph.n_params;
    CUDA_TRY(cudaSetDevice(c->device));
    TRY(core_report_before_update(core, c->grads, (void *)c->s));
    if (c->fault_pending) {  // one step only, even if the launch below fails
        c->fault_pending = false;
        TRY(cuda_set_value(c->grads + np / 2, c->fault_value, c->s));
    }
    TRY(update_work(core, lr, NULL));
    return read_back_if_due(core, r);
}

// ---- cuda_graph: the training step captured once per shape and replayed -----------------
//
// graph_step runs a core_step of a cuda_graph core:
// - prepare (buffers, conv plans) as always, outside any capture; a step whose prepare
//   made new plans (a new batch or image size, core_conv_cache_clear, an eval of another
//   batch size in between) or whose buffers moved drops the graph: its kernels hold the
//   old addresses and algorithms;
// - the first step of a shape runs eagerly (cudnn.benchmark's autotuning and every lazy
//   library set-up happen there, never inside a capture), as does a step with an injected
//   fault (core_inject_grad_fault);
// - the next one captures: input conversion, weight casts, zero-grad, forward, loss,
//   backward, unscale + inf check, clipping, SGD and the scaler update, all on the compute
//   stream in cudaStreamCaptureModeThreadLocal (a capture-unsafe call from this thread,
//   e.g. cudaMalloc or a synchronisation, fails the capture: an error, nothing ran);
// - every step, captured or replayed, first puts its batch where the graph reads it,
//   outside the graph: a host batch through the upload stream into staging slot 0, a
//   device batch by one device-to-device copy (PyTorch's static_input.copy_(batch));
//   then the LR into the device scalar SGD reads (a kernel argument of cuda_set_value,
//   so no host buffer has to outlive the call), the loss window's reset when one starts,
//   cudaGraphLaunch, and the read-back when due (read_back_if_due), all outside the graph.
// cuBLAS runs on the workspace the core hands it (cublasSetWorkspace, after
// cublasSetStream, which would reset it), so a capture allocates nothing.

static void graph_drop(StepGraph *sg)
{
    if (sg->exec) cudaGraphExecDestroy(sg->exec);
    sg->exec = NULL;
}

// The key of the current shape (see STEP_GRAPH_KEY_MAX); returns its length. Every buffer
// the captured step reads or writes must be in it: a buffer added to CudaCore (a memory
// plan's arena, a new scratch) belongs here too, or a replay could use freed memory.
static int graph_key(Core *core, uintptr_t *key)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    const uintptr_t fixed[] = {
        (uintptr_t)c->cur_n, (uintptr_t)c->cur_size, (uintptr_t)c->plan_generation,
        (uintptr_t)g->n_tensors, (uintptr_t)c->params, (uintptr_t)c->grads, (uintptr_t)c->mom,
        (uintptr_t)c->stats, (uintptr_t)c->saved, (uintptr_t)c->scratch,
        (uintptr_t)c->scratch_cap, (uintptr_t)c->wc, (uintptr_t)c->gc, (uintptr_t)c->ws,
        (uintptr_t)c->ws_size, (uintptr_t)c->dsc, (uintptr_t)c->in_stage[0],
        (uintptr_t)c->lab_stage[0], (uintptr_t)c->blas_ws, (uintptr_t)c->arena,
        (uintptr_t)c->arena_cap, (uintptr_t)c->x0_cap,
    };
    int k = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) key[k++] = fixed[i];
    for (int t = 0; t < g->n_tensors; t++) {
        key[k++] = (uintptr_t)c->act[t];
        key[k++] = (uintptr_t)c->dact[t];
    }
    return k;
}

// Puts the batch (its labels too when `labels`) where the captured step reads it (staging
// slot 0, reserved by the caller before it computed the graph's key), outside the graph.
static int stage_static_batch(Core *core, const CoreBatch *b, bool labels)
{
    CudaCore *c = cu(core);
    c->slot = 0;
    if (b->memory == CORE_MEMORY_HOST) {
        TRY(stage_host_batch(core, b, 0, labels));
    } else {
        CUDA_TRY(cudaMemcpyAsync(c->in_stage[0], b->images, in_elems(core, b->n) * sizeof(float),
                                 cudaMemcpyDeviceToDevice, c->s));
        if (labels)
            CUDA_TRY(cudaMemcpyAsync(c->lab_stage[0], b->labels, (size_t)b->n * sizeof(int32_t),
                                     cudaMemcpyDeviceToDevice, c->s));
    }
    c->labels = labels ? c->lab_stage[0] : NULL;
    return 0;
}

// What a graph step captures (see above): the LR comes from the device scalar.
static int graph_step_work(Core *core, int n)
{
    CudaCore *c = cu(core);
    TRY(set_input(core, c->in_stage[0], n));
    TRY(forward_backward_work(core, n, false, 1.0f));
    return update_work(core, 0.0f, &c->dsc->lr);
}

// Captures the step of n samples into c->graph.exec. On failure nothing has run (a capture
// only records) and no graph is kept.
static int graph_capture(Core *core, int n)
{
    CudaCore *c = cu(core);
    StepGraph *sg = &c->graph;
    double t0 = clock_seconds();
    CUDA_TRY(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    int rc = graph_step_work(core, n);
    cudaGraph_t graph = NULL;
    cudaError_t end = cudaStreamEndCapture(c->s, &graph);  // always: leaves capture mode
    if (rc == 0 && end != cudaSuccess)
        rc = check_cuda_failed(end, __FILE__, __LINE__, "cudaStreamEndCapture");
    if (rc == 0) {
        cudaError_t e = cudaGraphInstantiate(&sg->exec, graph, 0);
        if (e != cudaSuccess) {
            sg->exec = NULL;
            rc = check_cuda_failed(e, __FILE__, __LINE__, "cudaGraphInstantiate");
        }
    }
    if (graph) cudaGraphDestroy(graph);
    if (rc != 0) {
        (void)cudaGetLastError();  // a failed capture's error is not sticky
        return error_wrap("capturing the training step (batch %d, %dx%d) as a CUDA graph; nothing "
                          "ran (without cuda_graph the step runs op by op)", n, c->cur_size,
                          c->cur_size);
    }
    sg->captures++;
    sg->capture_ms += 1e3 * (clock_seconds() - t0);
    return 0;
}

static int graph_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r)
{
    CudaCore *c = cu(core);
    StepGraph *sg = &c->graph;
    if (core->hooks.ready)  // core_set_grad_hooks refuses them; never replay around hooks
        return error_set(ERROR_BAD_USAGE, "cuda_graph: gradient hooks are set");
    CUDA_TRY(cudaSetDevice(c->device));
    int n0 = c->cur_n, size0 = c->cur_size;
    unsigned generation0 = c->plan_generation, replans0 = c->replans;
    TRY(prepare(core, b->n));
    TRY(stage_reserve(core, 0, b->n, true));  // the graph's static input, before its key
    bool replanned = c->cur_n != n0 || c->cur_size != size0 || c->plan_generation != generation0 ||
                     c->replans != replans0;
    uintptr_t key[STEP_GRAPH_KEY_MAX];
    int len = graph_key(core, key);
    if (replanned || len != sg->key_len || memcmp(key, sg->key, (size_t)len * sizeof key[0]) != 0) {
        graph_drop(sg);
        memcpy(sg->key, key, (size_t)len * sizeof key[0]);
        sg->key_len = len;
        sg->eager_done = false;
    }
    if (!sg->eager_done || c->fault_pending) {
        TRY(cuda_forward_backward(core, b, false, 1.0f));
        TRY(cuda_update(core, lr, r));
        sg->eager_done = true;
        sg->eager_steps++;
        return 0;
    }
    TRY(stage_static_batch(core, b, true));
    int rc = start_loss_window(c);
    if (rc == 0) rc = cuda_set_value(&c->dsc->lr, lr, c->s);
    if (rc == 0 && !sg->exec) rc = graph_capture(core, b->n);
    if (rc == 0) {
        cudaError_t e = cudaGraphLaunch(sg->exec, c->s);
        if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "cudaGraphLaunch");
    }
    // Even after a failure: the caller may reuse a host batch once this returns.
    if (release_batch(core, b) != 0 && rc == 0) rc = -1;
    TRY(rc);
    sg->replays++;
    c->loss_count++;
    c->window_samples += b->n;
    return read_back_if_due(core, r);
}

static int cuda_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r)
{
    if (core->cfg.cuda_graph) return graph_step(core, b, lr, r);
    TRY(cuda_forward_backward(core, b, false, 1.0f));
    return cuda_update(core, lr, r);
}

static int cuda_eval(Core *core, const CoreBatch *b, CoreEvalResult *r)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    CUDA_TRY(cudaSetDevice(c->device));
    TRY(prepare(core, b->n));
    TRY(upload(core, b, true));
    TRY(cast_weights(core));
    CUDA_TRY(cudaMemsetAsync(&c->dsc->eval_loss, 0, sizeof(float), c->s));
    CUDA_TRY(cudaMemsetAsync(&c->dsc->eval_correct, 0, sizeof(int), c->s));
    TRY(forward(core, b->n, FWD_INFER));
    TRY(cuda_softmax_ce(c->act[g->logits], c->dt, c->labels, b->n, g->shapes[g->logits].c, NULL,
                        1.0f, NULL, c->scratch, &c->dsc->eval_loss, &c->dsc->eval_correct, c->s));
    TRY(release_batch(core, b));
    TRY(read_scalars(c));
    r->loss = c->hsc->eval_loss;
    r->accuracy = (float)c->hsc->eval_correct / (float)b->n;
    r->n = b->n;
    return 0;
}

// ---- core_infer: the eval forward on the plan of its grad mode, eager or replayed ---------
//
// The device work (infer_work) never synchronises: the input conversion, the weight casts,
// the forward with BN's running statistics, the loss and accuracy sums when the batch has
// labels, and the fp32 copy of the logits when the pass is not fp32. With cuda_graph it is
// captured as the training step is (graph_step): the first call of each key runs eagerly,
// the next captures, the rest replay, with the batch copied into staging slot 0 first. The
// key is the training step's (every buffer, the shape) plus the re-plan count (a change of
// mode re-plans), the mode, whether there are labels, and the fp32 logits buffer.

static int infer_work(Core *core, int n, bool labels)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    int classes = g->shapes[g->logits].c;
    TRY(cast_weights(core));
    if (labels) {
        CUDA_TRY(cudaMemsetAsync(&c->dsc->eval_loss, 0, sizeof(float), c->s));
        CUDA_TRY(cudaMemsetAsync(&c->dsc->eval_correct, 0, sizeof(int), c->s));
    }
    TRY(forward(core, n, FWD_INFER));
    if (labels)
        TRY(cuda_softmax_ce(c->act[g->logits], c->dt, c->labels, n, classes, NULL, 1.0f, NULL,
                            c->scratch, &c->dsc->eval_loss, &c->dsc->eval_correct, c->s));
    if (c->dt != DT_F32) {
        ChanGeom lg = {n, classes, 1, false};  // (n, classes): the same in either layout
        TRY(cuda_convert_output(c->act[g->logits], c->logits32, c->dt, lg, c->s));
    }
    return 0;
}

static int infer_graph_key(Core *core, CoreGradMode grad, bool labels, uintptr_t *key)
{
    CudaCore *c = cu(core);
    int k = graph_key(core, key);
    key[k++] = (uintptr_t)c->replans << 2 | (uintptr_t)(grad == CORE_GRAD_OFF) << 1 | labels;
    key[k++] = (uintptr_t)c->logits32;
    return k;
}

// Captures infer_work of n samples (tensor 0 from staging slot 0) into sg->exec.
static int infer_graph_capture(Core *core, StepGraph *sg, int n, bool labels)
{
    CudaCore *c = cu(core);
    double t0 = clock_seconds();
    CUDA_TRY(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    int rc = set_input(core, c->in_stage[0], n);
    if (rc == 0) rc = infer_work(core, n, labels);
    cudaGraph_t graph = NULL;
    cudaError_t end = cudaStreamEndCapture(c->s, &graph);  // always: leaves capture mode
    if (rc == 0 && end != cudaSuccess)
        rc = check_cuda_failed(end, __FILE__, __LINE__, "cudaStreamEndCapture");
    if (rc == 0) {
        cudaError_t e = cudaGraphInstantiate(&sg->exec, graph, 0);
        if (e != cudaSuccess) {
            sg->exec = NULL;
            rc = check_cuda_failed(e, __FILE__, __LINE__, "cudaGraphInstantiate");
        }
    }
    if (graph) cudaGraphDestroy(graph);
    if (rc != 0) {
        (void)cudaGetLastError();
        return error_wrap("capturing the inference forward (batch %d, %dx%d) as a CUDA graph; "
                          "nothing ran", n, c->cur_size, c->cur_size);
    }
    sg->captures++;
    sg->capture_ms += 1e3 * (clock_seconds() - t0);
    return 0;
}

// The batch on the device and infer_work queued: eagerly, or as a graph capture/replay.
static int infer_queue(Core *core, const CoreBatch *b, CoreGradMode grad, bool labels)
{
    CudaCore *c = cu(core);
    StepGraph *sg = &c->infer_graph;
    if (!core->cfg.cuda_graph) {
        TRY(upload(core, b, labels));
        int rc = infer_work(core, b->n, labels);
        if (release_batch(core, b) != 0 && rc == 0) rc = -1;
        return rc;
    }
    TRY(stage_reserve(core, 0, b->n, labels));  // the graph's static input, before its key
    uintptr_t key[STEP_GRAPH_KEY_MAX];
    int len = infer_graph_key(core, grad, labels, key);
    if (len != sg->key_len || memcmp(key, sg->key, (size_t)len * sizeof key[0]) != 0) {
        graph_drop(sg);
        memcpy(sg->key, key, (size_t)len * sizeof key[0]);
        sg->key_len = len;
        sg->eager_done = false;
    }
    if (!sg->eager_done) {  // plans and every lazy library set-up, never inside a capture
        TRY(upload(core, b, labels));
        int rc = infer_work(core, b->n, labels);
        if (release_batch(core, b) != 0 && rc == 0) rc = -1;
        TRY(rc);
        sg->eager_done = true;
        sg->eager_steps++;
        return 0;
    }
    TRY(stage_static_batch(core, b, labels));
    int rc = sg->exec ? 0 : infer_graph_capture(core, sg, b->n, labels);
    if (rc == 0) {
        cudaError_t e = cudaGraphLaunch(sg->exec, c->s);
        if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "cudaGraphLaunch");
    }
    if (release_batch(core, b) != 0 && rc == 0) rc = -1;
    TRY(rc);
    sg->replays++;
    return 0;
}

static int cuda_infer(Core *core, const CoreBatch *b, CoreGradMode grad, float *logits,
                      CoreEvalResult *r)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    int classes = g->shapes[g->logits].c;
    bool labels = b->labels != NULL && r != NULL;
    CUDA_TRY(cudaSetDevice(c->device));
    TRY(prepare_pass(core, b->n, grad == CORE_GRAD_OFF));
    size_t count = (size_t)b->n * classes;
    if (c->dt != DT_F32) TRY(grow(c, (void **)&c->logits32, &c->logits32_cap, count, sizeof(float)));
    TRY(infer_queue(core, b, grad, labels));
    if (logits) {
        const void *src = c->dt == DT_F32 ? c->act[g->logits] : (const void *)c->logits32;
        CUDA_TRY(cudaMemcpyAsync(logits, src, count * sizeof(float), cudaMemcpyDeviceToHost, c->s));
    }
    if (labels) TRY(read_scalars(c));  // synchronises
    else if (logits) CUDA_TRY(cudaStreamSynchronize(c->s));
    if (!r) return 0;
    *r = (CoreEvalResult){.loss = NAN, .accuracy = NAN, .n = b->n};
    if (labels) {
        r->loss = c->hsc->eval_loss;
        r->accuracy = (float)c->hsc->eval_correct / (float)b->n;
    }
    return 0;
}

static int cuda_loss_grad(Core *core, const CoreBatch *b, float *loss, float *grad)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    bool fp16 = core->cfg.precision == CORE_PRECISION_FP16;
    CUDA_TRY(cudaSetDevice(c->device));
    TRY(prepare(core, b->n));
    TRY(upload(core, b, true));
    TRY(cast_weights(core));
    CUDA_TRY(cudaMemsetAsync(&c->dsc->eval_loss, 0, sizeof(float), c->s));
    TRY(forward(core, b->n, FWD_TRAIN_NO_STATS));
    TRY(cuda_softmax_ce(c->act[g->logits], c->dt, c->labels, b->n, g->shapes[g->logits].c,
                        fp16 ? &c->dsc->scale : NULL, 1.0f, grad ? c->dact[g->logits] : NULL,
                        c->scratch, &c->dsc->eval_loss, NULL, c->s));
    if (grad) {
        TRY(backward(core, b->n, false));
        if (fp16) TRY(cuda_unscale_check(c->grads, g->n_params, &c->dsc->scale, &c->dsc->probe_inf, c->s));
        CUDA_TRY(cudaMemcpyAsync(grad, c->grads, g->n_params * sizeof(float),
                                 cudaMemcpyDeviceToHost, c->s));
    }
    TRY(release_batch(core, b));
    TRY(read_scalars(c));
    if (loss) *loss = c->hsc->eval_loss;
    return 0;
}

static int cuda_sync(Core *core)
{
    CUDA_TRY(cudaSetDevice(cu(core)->device));
    CUDA_TRY(cudaStreamSynchronize(cu(core)->s));
    return 0;
}

// The current plan's convolutions: how many, how many tuned, and whether TF32 may run in
// any of them (fp32 data with a math type other than FMA) or in the GEMMs.
static void plans_in_effect(Core *core, CoreStats *st)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    bool linear = false;
    for (int i = 0; i < g->n_ops; i++) {
        if (g->ops[i].kind == OP_LINEAR) linear = true;
        if (g->ops[i].kind != OP_CONV || c->cur_n == 0) continue;
        const ConvPlan *p = &c->plans[i];
        st->conv_shapes++;
        if (p->key.policy == CORE_CONV_ALGO_AUTOTUNE) st->conv_shapes_tuned++;
        bool tf32 = p->algos.fwd_math != CUDNN_FMA_MATH;
        if (!p->key.forward_only)
            tf32 = tf32 || p->algos.bwd_data_math != CUDNN_FMA_MATH || p->algos.bwd_filter_math != CUDNN_FMA_MATH;
        if (c->dt == DT_F32 && tf32) st->tf32_allowed = true;
    }
    if (linear && gemm_compute(core) == CUBLAS_COMPUTE_32F_FAST_TF32) st->tf32_allowed = true;
}

static int cuda_stats(Core *core, CoreStats *st)
{
    CudaCore *c = cu(core);
    CUDA_TRY(cudaSetDevice(c->device));
    TRY(read_scalars(c));
    TRY(sample_device_used(c));
    st->peak_bytes = c->peak;
    st->activation_bytes = c->cur_n ? c->plan.arena_bytes : 0;
    st->fused_ops = c->cur_n ? core_plan_fused_ops(&core->graph, &c->plan) : 0;
    st->checkpointed_segments = c->cur_n ? c->plan.checkpointed_segments : 0;
    st->device_used_bytes = c->device_used_peak;
    st->skipped_steps = c->hsc->skipped;
    st->loss_scale = core->cfg.precision == CORE_PRECISION_FP16 ? c->hsc->scale : 1.0f;
    st->growth_tracker = c->hsc->growth_tracker;
    st->autotune_ms = c->tune.tune_ms;
    st->algo_cache_hits = c->tune.hits;
    st->algo_cache_misses = c->tune.misses;
    st->graph_captures = c->graph.captures + c->infer_graph.captures;
    st->graph_replays = c->graph.replays + c->infer_graph.replays;
    st->eager_steps = c->graph.eager_steps + c->infer_graph.eager_steps;
    st->capture_ms = c->graph.capture_ms + c->infer_graph.capture_ms;
    st->layout_in_effect = c->nhwc ? CORE_LAYOUT_NHWC : CORE_LAYOUT_NCHW;
    st->activation_type = c->dt == DT_F16 ? CORE_DTYPE_FP16 : c->dt == DT_BF16 ? CORE_DTYPE_BF16 : CORE_DTYPE_FP32;
    plans_in_effect(core, st);
    return 0;
}

static int cuda_params_get(Core *core, float *dst)
{
    CudaCore *c = cu(core);
    CUDA_TRY(cudaSetDevice(c->device));
    CUDA_TRY(cudaMemcpyAsync(dst, c->params, core->graph.n_params * sizeof(float),
                             cudaMemcpyDeviceToHost, c->s));
    CUDA_TRY(cudaStreamSynchronize(c->s));
    return 0;
}

static int cuda_params_set(Core *core, const float *src)
{
    CudaCore *c = cu(core);
    size_t bytes = core->graph.n_params * sizeof(float);
    CUDA_TRY(cudaSetDevice(c->device));
    CUDA_TRY(cudaMemcpyAsync(c->params, src, bytes, cudaMemcpyHostToDevice, c->s));
    CUDA_TRY(cudaMemsetAsync(c->mom, 0, bytes, c->s));
    CUDA_TRY(cudaStreamSynchronize(c->s));
    return 0;
}

static int cuda_inject(Core *core, float value)
{
    cu(core)->fault_pending = true;
    cu(core)->fault_value = value;
    return 0;
}

static void cuda_destroy(Core *core)
{
    CudaCore *c = cu(core);
    if (!c) return;
    const ModelGraph *g = &core->graph;
    cudaSetDevice(c->device);
    if (c->s) cudaStreamSynchronize(c->s);
    if (c->cs) cudaStreamSynchronize(c->cs);
    graph_drop(&c->graph);  // before the buffers its kernels point to
    graph_drop(&c->infer_graph);
    DEV_FREE(c, c->logits32, c->logits32_cap * sizeof(float));
    c->logits32_cap = 0;
    free_activations(core);
    size_t np = g->n_params;
    DEV_FREE(c, c->params, np * sizeof(float));
    DEV_FREE(c, c->grads, np * sizeof(float));
    DEV_FREE(c, c->mom, np * sizeof(float));
    DEV_FREE(c, c->stats, g->n_stats * sizeof(float));
    DEV_FREE(c, c->saved, g->n_saved * sizeof(float));
    DEV_FREE(c, c->scratch, c->scratch_cap * sizeof(float));
    c->scratch_cap = 0;
    DEV_FREE(c, c->wc, 0);
    DEV_FREE(c, c->gc, 0);
    DEV_FREE(c, c->ws, c->ws_size);
    if (c->blas) cublasDestroy(c->blas);  // before its workspace goes
    c->blas = NULL;
    DEV_FREE(c, c->blas_ws, blas_workspace_bytes(c->device));
    DEV_FREE(c, c->dsc, sizeof(DevScalars));
    if (c->hsc) cudaFreeHost(c->hsc);
    for (int i = 0; i < g->n_ops; i++) conv_plan_destroy(&c->plans[i]);
    for (int i = 0; i < MODEL_MAX_OPS; i++)
        if (c->grad_ready[i]) cudaEventDestroy(c->grad_ready[i]);
    for (int i = 0; i < 2; i++) {
        if (c->copied[i]) cudaEventDestroy(c->copied[i]);
        if (c->consumed[i]) cudaEventDestroy(c->consumed[i]);
    }
    if (c->dnn) cudnnDestroy(c->dnn);
    if (c->blas) cublasDestroy(c->blas);
    if (c->s) cudaStreamDestroy(c->s);
    if (c->cs) cudaStreamDestroy(c->cs);
    free(c);
    core->impl = NULL;
}

// One entry per distinct convolution shape of the current plans, in model order.
static int cuda_conv_algos(Core *core, CoreConvAlgoInfo *out, int max)
{
    CudaCore *c = cu(core);
    const ModelGraph *g = &core->graph;
    int count = 0;
    if (c->cur_n == 0) return 0;
    for (int i = 0; i < g->n_ops; i++) {
        if (g->ops[i].kind != OP_CONV) continue;
        const ConvPlan *p = &c->plans[i];
        const ConvKey *k = &p->key;
        const bool bwd = !k->forward_only;
        CoreConvAlgoInfo info = {k->n, k->c, k->h, k->w, k->k, k->r, k->stride, k->pad, 1,
                                 conv_algo_name(CONV_PASS_FWD, p->algos.fwd),
                                 bwd ? conv_algo_name(CONV_PASS_BWD_DATA, p->algos.bwd_data) : "none",
                                 bwd ? conv_algo_name(CONV_PASS_BWD_FILTER, p->algos.bwd_filter) : "none",
                                 conv_math_name(p->algos.fwd_math),
                                 bwd ? conv_math_name(p->algos.bwd_data_math) : "none",
                                 bwd ? conv_math_name(p->algos.bwd_filter_math) : "none"};
        int same = -1;
        for (int j = 0; j < count && same < 0; j++)
            if (out[j].c == info.c && out[j].h == info.h && out[j].w == info.w && out[j].k == info.k &&
                out[j].r == info.r && out[j].stride == info.stride && out[j].pad == info.pad &&
                out[j].fwd == info.fwd && out[j].bwd_data == info.bwd_data &&
                out[j].bwd_filter == info.bwd_filter && out[j].fwd_math == info.fwd_math &&
                out[j].bwd_data_math == info.bwd_data_math &&
                out[j].bwd_filter_math == info.bwd_filter_math)
                same = j;
        if (same >= 0) out[same].layers++;
        else if (count < max) out[count++] = info;
    }
    return count;
}

static float *cuda_buffers(Core *core, void **stream)
{
    *stream = (void *)cu(core)->s;
    return cu(core)->stats;
}

static const CoreOps cuda_ops = {
    .step = cuda_step, .eval = cuda_eval, .loss_grad = cuda_loss_grad, .sync = cuda_sync,
    .stats = cuda_stats, .params_get = cuda_params_get, .params_set = cuda_params_set,
    .inject = cuda_inject, .conv_algos = cuda_conv_algos, .destroy = cuda_destroy,
    .forward_backward = cuda_forward_backward, .update = cuda_update, .buffers = cuda_buffers,
    .infer = cuda_infer,
};

static int cuda_init_state(Core *core)
{
    CudaCore *c = cu(core);
    const CoreConfig *cfg = &core->cfg;
    const ModelGraph *g = &core->graph;
    size_t np = g->n_params;
    CUDA_TRY(cudaSetDevice(c->device));
    CUDA_TRY(cudaFree(0));  // the context exists before the baseline of used memory
    size_t total = 0;
    CUDA_TRY(cudaMemGetInfo(&c->free_at_create, &total));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
    CUBLAS_TRY(cublasCreate(&c->blas));
    CUBLAS_TRY(cublasSetStream(c->blas, c->s));
    size_t blas_ws = blas_workspace_bytes(c->device);
    TRY(dev_alloc(c, &c->blas_ws, blas_ws));
    CUBLAS_TRY(cublasSetWorkspace(c->blas, c->blas_ws, blas_ws));
    CUDNN_TRY(cudnnCreate(&c->dnn));
    CUDNN_TRY(cudnnSetStream(c->dnn, c->s));
    for (int i = 0; i < 2; i++) {
        CUDA_TRY(cudaEventCreateWithFlags(&c->copied[i], cudaEventDisableTiming));
        CUDA_TRY(cudaEventCreateWithFlags(&c->consumed[i], cudaEventDisableTiming));
    }
    c->dt = cfg->precision == CORE_PRECISION_FP16 ? DT_F16
          : cfg->precision == CORE_PRECISION_BF16 ? DT_BF16 : DT_F32;
    c->nhwc = cfg->layout == CORE_LAYOUT_NHWC && cfg->model.kind == CORE_MODEL_RESNET;
    c->staged = c->dt != DT_F32 || c->nhwc;

    size_t max_filter = 1;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_CONV && (size_t)op->cout * op->cin * op->k * op->k > max_filter)
            max_filter = (size_t)op->cout * op->cin * op->k * op->k;
    }
    TRY(DEV_ALLOC(c, c->params, np * sizeof(float)));
    TRY(DEV_ALLOC(c, c->grads, np * sizeof(float)));
    TRY(DEV_ALLOC(c, c->mom, np * sizeof(float)));
    TRY(DEV_ALLOC(c, c->stats, g->n_stats * sizeof(float)));
    TRY(DEV_ALLOC(c, c->saved, g->n_saved * sizeof(float)));
    if (c->staged) TRY(DEV_ALLOC(c, c->wc, np * dtype_size(c->dt)));
    TRY(DEV_ALLOC(c, c->gc, max_filter * dtype_size(c->dt)));
    TRY(DEV_ALLOC(c, c->dsc, sizeof(DevScalars)));
    CUDA_TRY(cudaMallocHost((void **)&c->hsc, sizeof(DevScalars)));

    float *hp = (float *)malloc(np * sizeof(float));
    float *hs = (float *)malloc((g->n_stats ? g->n_stats : 1) * sizeof(float));
    if (!hp || !hs) {
        free(hp); free(hs);
        return error_set(ERROR_OUT_OF_MEMORY, "malloc: out of memory (host)");
    }
    model_init(g, cfg->seed, hp, hs);
    cudaError_t e1 = cudaMemcpy(c->params, hp, np * sizeof(float), cudaMemcpyHostToDevice);
    cudaError_t e2 = cudaMemcpy(c->stats, hs, g->n_stats * sizeof(float), cudaMemcpyHostToDevice);
    free(hp);
    free(hs);
    CUDA_TRY(e1);
    CUDA_TRY(e2);
    CUDA_TRY(cudaMemset(c->mom, 0, np * sizeof(float)));
    memset(c->hsc, 0, sizeof *c->hsc);
    c->hsc->scale = cfg->scaler.init_scale;
    CUDA_TRY(cudaMemcpy(c->dsc, c->hsc, sizeof *c->hsc, cudaMemcpyHostToDevice));
    // Pageable cudaMemcpy may return before its DMA lands; the non-blocking stream does
    // not order against it, so wait here once.
    CUDA_TRY(cudaDeviceSynchronize());
    // No plan yet: each kind of pass plans its buffers and cuDNN algorithms when its first
    // batch arrives (prepare_pass), so a core that only infers never selects, tunes or
    // reserves anything for a backward pass.
    return sample_device_used(c);
}

extern "C" int core_cuda_init(Core *core)
{
    CudaCore *c = (CudaCore *)calloc(1, sizeof *c);
    if (!c) return error_set(ERROR_OUT_OF_MEMORY, "calloc(CudaCore): out of memory");
    core->impl = c;
    core->ops = &cuda_ops;
    c->device = core->cfg.device;
    return cuda_init_state(core);  // on failure core_create calls cuda_destroy
}
