// core_cuda_graph.cu: CUDA graphs in the CUDA backend (CoreConfig.cuda_graph): the training
// step captured once per shape and replayed, and core_infer's forward, eager or replayed.
#include <string.h>

#include "kernels/cuda/core_cuda.cuh"

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

void graph_drop(StepGraph *sg)
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
        (uintptr_t)c->arena_cap, (uintptr_t)c->x0_cap, (uintptr_t)c->mom_sq,
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

int graph_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r)
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

int cuda_infer(Core *core, const CoreBatch *b, CoreGradMode grad, float *logits,
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
