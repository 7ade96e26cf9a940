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
// This file: the backend's creation, state and queries; the buffers and plans are in
// core_cuda_buffers.cu, the step in core_cuda_step.cu, CUDA graphs in core_cuda_graph.cu.
#include <stdlib.h>
#include <string.h>

#include "kernels/core_backends.h"
#include "kernels/cuda/core_cuda.cuh"

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
    if (c->mom_sq) CUDA_TRY(cudaMemsetAsync(c->mom_sq, 0, bytes, c->s));
    CUDA_TRY(cudaMemsetAsync(&c->dsc->adamw_t, 0, sizeof c->dsc->adamw_t, c->s));  // a fresh AdamW
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
    DEV_FREE(c, c->mom_sq, np * sizeof(float));
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
    if (cfg->optim.optimizer == CORE_OPTIM_ADAMW) TRY(DEV_ALLOC(c, c->mom_sq, np * sizeof(float)));
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
    if (c->mom_sq) CUDA_TRY(cudaMemset(c->mom_sq, 0, np * sizeof(float)));
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
