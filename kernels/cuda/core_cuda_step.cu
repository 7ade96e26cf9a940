// core_cuda_step.cu: the CUDA backend's step: the forward and backward over the ops (cuDNN
// convolutions, cuBLAS GEMMs, our kernels), activation checkpointing's recomputation,
// the loss, the update (GradScaler, clipping, SGD) and the loss read-back; core_step,
// core_eval and core_loss_grad run eagerly here (a cuda_graph step: core_cuda_graph.cu).
#include "kernels/cuda/core_cuda.cuh"

static const void *tensor(const Core *core, int t)
{
    CudaCore *c = cu((Core *)core);
    return t == 0 ? c->x0 : c->act[t];
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
        default:  // the transformer's ops: core_create refuses gpt models on CUDA for now
            return error_set(ERROR_BAD_USAGE, "cuda: op kind %d not on this backend", (int)op->kind);
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
int forward(Core *core, int n, FwdMode mode)
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
        default:
            return error_set(ERROR_BAD_USAGE, "cuda: op kind %d not on this backend", (int)op->kind);
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

int read_scalars(CudaCore *c)
{
    CUDA_TRY(cudaMemcpyAsync(c->hsc, c->dsc, sizeof *c->hsc, cudaMemcpyDeviceToHost, c->s));
    CUDA_TRY(cudaStreamSynchronize(c->s));
    return 0;
}

// Clears the device's loss and accuracy sums when a read-back window starts.
int start_loss_window(CudaCore *c)
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
int forward_backward_work(Core *core, int n, bool accumulate, float loss_weight)
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
int cuda_forward_backward(Core *core, const CoreBatch *b, bool accumulate, float loss_weight)
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
// SGD or AdamW at lr (or at *lr_dev, read on the device, when not NULL) and the scaler update.
// It never synchronises with the host, so a graph step captures it as it is.
int update_work(Core *core, float lr, const float *lr_dev)
{
    CudaCore *c = cu(core);
    const CoreConfig *cfg = &core->cfg;
    size_t np = core->graph.n_params;
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    bool clip = cfg->optim.clip_norm > 0.0f;
    if (fp16) TRY(cuda_unscale_check(c->grads, np, &c->dsc->scale, &c->dsc->found_inf, c->s));
    if (clip) TRY(cuda_sumsq(c->grads, np, &c->dsc->sumsq, c->s));
    if (cfg->optim.optimizer == CORE_OPTIM_ADAMW)
        TRY(cuda_adamw(c->params, c->grads, c->mom, c->mom_sq, np, lr, lr_dev, &cfg->optim,
                       clip ? &c->dsc->sumsq : NULL, fp16 ? &c->dsc->found_inf : NULL, c->dsc,
                       c->s));
    else
        TRY(cuda_sgd(c->params, c->grads, c->mom, np, lr, lr_dev, cfg->optim.momentum,
                     cfg->optim.weight_decay, clip ? &c->dsc->sumsq : NULL,
                     cfg->optim.clip_norm, fp16 ? &c->dsc->found_inf : NULL, c->s));
    if (fp16) TRY(cuda_scaler_update(c->dsc, cfg->scaler, c->s));
    return 0;
}

// The loss read-back when it is due (every step, or every readback_interval steps): the
// one host synchronisation of a training step.
int read_back_if_due(Core *core, CoreStepResult *r)
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
int cuda_update(Core *core, float lr, CoreStepResult *r)
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

int cuda_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r)
{
    if (core->cfg.cuda_graph) return graph_step(core, b, lr, r);
    TRY(cuda_forward_backward(core, b, false, 1.0f));
    return cuda_update(core, lr, r);
}

int cuda_eval(Core *core, const CoreBatch *b, CoreEvalResult *r)
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

int cuda_loss_grad(Core *core, const CoreBatch *b, float *loss, float *grad)
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
