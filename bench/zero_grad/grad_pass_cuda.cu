// grad_pass_cuda.cu: the zero_grad micro benchmarks' work on the GPU (grad_pass.h):
// cudaMemsetAsync per gradient tensor or over the flat buffer, and every layer's
// weight-gradient pass - cuDNN backward-filter with the core's algorithm choice, cuBLAS
// for linear layers, strict fp32 - with beta = 1 or 0, timed with CUDA events from a cold
// L2 (flushed before every timed pass: in a training step other layers run in between).
#include "bench/zero_grad/grad_pass.h"

#include <stdlib.h>
#include <string.h>

#include "bench/driver/gpu_timing.h"
#include "kernels/check.h"
#include "kernels/conv_cudnn.cuh"
#include "kernels/model.h"

struct GradPassCuda {
    ModelGraph graph;
    int n;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    GpuTimer timer;
    L2Flusher flusher;
    float *acts, *dacts, *grads;
    void *ws;
    size_t ws_size;
    ConvPlan plans[MODEL_MAX_OPS];
};

extern "C" void grad_pass_cuda_free(GradPassCuda *p)
{
    if (!p) return;
    if (p->stream) cudaStreamSynchronize(p->stream);
    for (int i = 0; i < p->graph.n_ops; i++) conv_plan_destroy(&p->plans[i]);
    cudaFree(p->acts);
    cudaFree(p->dacts);
    cudaFree(p->grads);
    cudaFree(p->ws);
    gpu_timer_destroy(&p->timer);
    l2_flusher_destroy(&p->flusher);
    if (p->dnn) cudnnDestroy(p->dnn);
    if (p->blas) cublasDestroy(p->blas);
    if (p->stream) cudaStreamDestroy(p->stream);
    free(p);
}

static int setup(GradPassCuda *p)
{
    const ModelGraph *g = &p->graph;
    size_t act = 1;
    for (int t = 0; t < g->n_tensors; t++) {
        size_t s = (size_t)p->n * model_tensor_size(g, t);
        if (s > act) act = s;
    }
    CUDA_TRY(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
    CUBLAS_TRY(cublasCreate(&p->blas));
    CUBLAS_TRY(cublasSetStream(p->blas, p->stream));
    CUDNN_TRY(cudnnCreate(&p->dnn));
    CUDNN_TRY(cudnnSetStream(p->dnn, p->stream));
    TRY(gpu_timer_create(&p->timer));
    TRY(l2_flusher_create(&p->flusher));
    CUDA_TRY(cudaMalloc((void **)&p->acts, act * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&p->dacts, act * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&p->grads, g->n_params * sizeof(float)));
    CUDA_TRY(cudaMemset(p->acts, 0, act * sizeof(float)));
    CUDA_TRY(cudaMemset(p->dacts, 0, act * sizeof(float)));
    size_t ws_need = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind != OP_CONV) continue;
        int device = 0;
        CUDA_TRY(cudaGetDevice(&device));
        ConvShape shape = model_conv_shape(g, op, p->n);
        ConvKey key = conv_key_make(device, &shape, DT_F32, false, CORE_PRECISION_FP32_STRICT,
                                    CORE_CONV_ALGO_HEURISTIC, false, (size_t)256 << 20);
        ConvTrialBuffers trial = {p->acts, p->dacts, p->grads + op->w_off, p->grads + op->w_off};
        ConvTuneStats stats = {0.0, 0, 0};
        TRY(conv_plan_set(&p->plans[i], p->dnn, &key, &trial, &stats));
        if (p->plans[i].ws_bwd_filter > ws_need) ws_need = p->plans[i].ws_bwd_filter;
    }
    if (ws_need) CUDA_TRY(cudaMalloc(&p->ws, ws_need));
    p->ws_size = ws_need;
    return 0;
}

extern "C" int grad_pass_cuda_create(const CoreModelConfig *model, int n, GradPassCuda **out)
{
    *out = NULL;
    GradPassCuda *p = (GradPassCuda *)calloc(1, sizeof *p);
    if (!p) return error_set(ERROR_OUT_OF_MEMORY, "grad_pass: out of memory");
    p->n = n;
    if (model_build(model, &p->graph) != 0 || setup(p) != 0) {
        grad_pass_cuda_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

extern "C" int grad_pass_cuda_zero(GradPassCuda *p, bool per_tensor, double *seconds)
{
    const ModelGraph *g = &p->graph;
    TRY(gpu_timer_start_cold(&p->timer, &p->flusher, p->stream));
    if (!per_tensor) {
        CUDA_TRY(cudaMemsetAsync(p->grads, 0, g->n_params * sizeof(float), p->stream));
    } else {
        for (int i = 0; i < g->n_ops; i++) {
            const ModelOp *op = &g->ops[i];
            size_t w = op->kind == OP_CONV ? (size_t)op->cout * op->cin * op->k * op->k
                     : op->kind == OP_LINEAR ? (size_t)op->cout * op->cin
                     : op->kind == OP_BN ? (size_t)op->cin : 0;
            size_t b = op->kind == OP_LINEAR ? (size_t)op->cout : op->kind == OP_BN ? (size_t)op->cin : 0;
            if (w) CUDA_TRY(cudaMemsetAsync(p->grads + op->w_off, 0, w * sizeof(float), p->stream));
            if (b) CUDA_TRY(cudaMemsetAsync(p->grads + op->b_off, 0, b * sizeof(float), p->stream));
        }
    }
    return gpu_timer_stop(&p->timer, p->stream, seconds);
}

extern "C" int grad_pass_cuda_weights(GradPassCuda *p, bool accumulate, double *seconds)
{
    const ModelGraph *g = &p->graph;
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    TRY(gpu_timer_start_cold(&p->timer, &p->flusher, p->stream));
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_CONV) {
            TRY(conv_backward_filter(&p->plans[i], p->dnn, p->acts, p->dacts, p->grads + op->w_off,
                                     accumulate, p->ws, p->ws_size));
        } else if (op->kind == OP_LINEAR) {
            // dW (M, K) = dy^T x, row-major: column-major dW^T (K, M) = x^T dy
            CUBLAS_TRY(cublasSgemm(p->blas, CUBLAS_OP_N, CUBLAS_OP_T, op->cin, op->cout, p->n, &one,
                                   p->acts, op->cin, p->dacts, op->cout, &beta, p->grads + op->w_off,
                                   op->cin));
        }
    }
    return gpu_timer_stop(&p->timer, p->stream, seconds);
}
