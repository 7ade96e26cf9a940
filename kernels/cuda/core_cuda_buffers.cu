// core_cuda_buffers.cu: the CUDA backend's memory and plans: device allocations (counted
// for the peak), the memory plan's arena and the staged input, the cuDNN plans of a
// pass (prepare_pass), the batch uploads through the staging slots, and the
// compute-type weight copies.
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/core_cuda.cuh"

// Device memory the process gained since the core was created (all allocations,
// libraries' included), kept as a running maximum.
int sample_device_used(CudaCore *c)
{
    size_t free_now = 0, total = 0;
    CUDA_TRY(cudaMemGetInfo(&free_now, &total));
    if (c->free_at_create > free_now && c->free_at_create - free_now > c->device_used_peak)
        c->device_used_peak = c->free_at_create - free_now;
    return 0;
}

int dev_alloc(CudaCore *c, void **p, size_t bytes)
{
    *p = NULL;
    CUDA_TRY(cudaMalloc(p, bytes ? bytes : 1));
    c->bytes += bytes;
    if (c->bytes > c->peak) c->peak = c->bytes;
    return 0;
}

void dev_free(CudaCore *c, void **p, size_t bytes)
{
    if (!*p) return;
    cudaFree(*p);
    *p = NULL;
    c->bytes -= bytes;
}

size_t in_elems(const Core *core, int n) { return (size_t)n * model_tensor_size(&core->graph, 0); }

// Buffers are sized by what each one holds (its capacity), never by the graph: the image
// size, and so the graph's shapes, may have changed since they were allocated.
void free_activations(Core *core)
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
int grow(CudaCore *c, void **p, size_t *cap, size_t need, size_t elem)
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
int stage_reserve(Core *core, int i, int n, bool labels)
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

// Buffers for n samples of the current image size (reallocated only when they grow) and
// conv plans for exactly that shape. Plans are made again for a new (n, size), and after
// core_conv_cache_clear (a new cache generation).
int prepare_pass(Core *core, int n, bool inference)
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
int prepare(Core *core, int n) { return prepare_pass(core, n, false); }

ChanGeom geom(const Core *core, int t, int n)
{
    ModelShape s = core->graph.shapes[t];
    ChanGeom g = {n, s.c, s.h * s.w, cu((Core *)core)->nhwc};
    return g;
}

// Copies a host batch (its labels too when `labels`) into staging slot i on the upload
// stream, ordered before the compute stream's next work; the slot is free once the step
// that last used it is done.
int stage_host_batch(Core *core, const CoreBatch *b, int i, bool labels)
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
int set_input(Core *core, const float *src, int n)
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
int upload(Core *core, const CoreBatch *b, bool labels)
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
int release_batch(Core *core, const CoreBatch *b)
{
    CudaCore *c = cu(core);
    CUDA_TRY(cudaEventRecord(c->consumed[c->slot], c->s));
    if (b->memory == CORE_MEMORY_HOST) CUDA_TRY(cudaEventSynchronize(c->copied[c->slot]));
    return 0;
}

void *weight(const Core *core, const ModelOp *op)
{
    CudaCore *c = cu((Core *)core);
    if (c->staged) return (char *)c->wc + op->w_off * dtype_size(c->dt);
    return c->params + op->w_off;
}

// The compute-type (and, for NHWC, KRSC) copies of conv and linear weights.
int cast_weights(Core *core)
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

cublasComputeType_t gemm_compute(const Core *core)
{
    return core->cfg.precision == CORE_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                      : CUBLAS_COMPUTE_32F;
}
