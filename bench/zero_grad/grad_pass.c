// grad_pass.c: the zero_grad micro benchmarks' work on the CPU (the GPU's is in
// grad_pass_cuda.cu): the fast CPU layers' own weight-gradient calls.
#include "bench/zero_grad/grad_pass.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/layers_cpu_fast.h"
#include "kernels/model.h"
#include "kernels/rng.h"

struct GradPass {
    GradPassCuda *cuda;  // the GPU's, when on the GPU
    ModelGraph graph;
    int n;
    CpuWorkspace ws;
    float *acts, *dacts, *grads;  // the largest activation, its gradient; all gradients
    size_t act_floats;
};

int grad_pass_create(const CoreModelConfig *model, int n, bool gpu, GradPass **out)
{
    *out = NULL;
    GradPass *p = calloc(1, sizeof *p);
    if (!p) return error_set(ERROR_OUT_OF_MEMORY, "grad_pass: out of memory");
    if (model_build(model, &p->graph) != 0) {
        free(p);
        return -1;
    }
    p->n = n;
    if (gpu) {
        if (grad_pass_cuda_create(model, n, &p->cuda) != 0) {
            free(p);
            return -1;
        }
        *out = p;
        return 0;
    }
    const ModelGraph *g = &p->graph;
    ConvShape convs[MODEL_MAX_OPS];
    int nconv = 0;
    for (int i = 0; i < g->n_ops; i++) {
        if (g->ops[i].kind == OP_CONV) convs[nconv++] = model_conv_shape(g, &g->ops[i], n);
        for (int t = 0; t < 2; t++) {
            size_t size = (size_t)n * model_tensor_size(g, t ? g->ops[i].out : g->ops[i].in);
            if (size > p->act_floats) p->act_floats = size;
        }
    }
    cpu_fast_init();
    p->acts = malloc(p->act_floats * sizeof(float));
    p->dacts = malloc(p->act_floats * sizeof(float));
    p->grads = malloc(g->n_params * sizeof(float));
    if (!p->acts || !p->dacts || !p->grads || cpu_workspace_init(&p->ws, convs, nconv, core_cpu_threads()) != 0) {
        grad_pass_free(p);
        return error_set(ERROR_OUT_OF_MEMORY, "grad_pass: out of memory (host)");
    }
    Rng r = {7};
    for (size_t i = 0; i < p->act_floats; i++) {
        p->acts[i] = rng_normal_float(&r);
        p->dacts[i] = rng_normal_float(&r);
    }
    memset(p->grads, 0, g->n_params * sizeof(float));
    *out = p;
    return 0;
}

int grad_pass_tensors(const GradPass *p)
{
    int count = 0;
    for (int i = 0; i < p->graph.n_ops; i++) {
        ModelOpKind k = p->graph.ops[i].kind;
        count += k == OP_CONV ? 1 : k == OP_BN || k == OP_LINEAR ? 2 : 0;
    }
    return count;
}

size_t grad_pass_floats(const GradPass *p) { return p->graph.n_params; }

int grad_pass_zero(GradPass *p, bool per_tensor, double *seconds)
{
    if (p->cuda) return grad_pass_cuda_zero(p->cuda, per_tensor, seconds);
    const ModelGraph *g = &p->graph;
    double t0 = clock_seconds();
    if (!per_tensor) {
        memset(p->grads, 0, g->n_params * sizeof(float));
    } else {
        for (int i = 0; i < g->n_ops; i++) {
            const ModelOp *op = &g->ops[i];
            if (op->kind == OP_CONV)
                memset(p->grads + op->w_off, 0, (size_t)op->cout * op->cin * op->k * op->k * sizeof(float));
            else if (op->kind == OP_LINEAR)
                memset(p->grads + op->w_off, 0, (size_t)op->cout * op->cin * sizeof(float));
            if (op->kind == OP_BN) memset(p->grads + op->w_off, 0, (size_t)op->cin * sizeof(float));
            if (op->kind == OP_BN) memset(p->grads + op->b_off, 0, (size_t)op->cin * sizeof(float));
            if (op->kind == OP_LINEAR) memset(p->grads + op->b_off, 0, (size_t)op->cout * sizeof(float));
        }
    }
    *seconds = clock_seconds() - t0;
    return 0;
}

int grad_pass_weights(GradPass *p, bool accumulate, double *seconds)
{
    if (p->cuda) return grad_pass_cuda_weights(p->cuda, accumulate, seconds);
    const ModelGraph *g = &p->graph;
    double t0 = clock_seconds();
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_CONV) {
            ConvShape s = model_conv_shape(g, op, p->n);
            conv_bwd_fast(&p->ws, &s, p->acts, p->dacts, NULL, NULL, false, p->grads + op->w_off, accumulate);
        } else if (op->kind == OP_LINEAR) {
            linear_bwd_fast(&p->ws, p->n, op->cin, op->cout, p->acts, NULL, p->dacts, NULL, false,
                            p->grads + op->w_off, p->grads + op->b_off, accumulate);
        }
    }
    *seconds = clock_seconds() - t0;
    return 0;
}

void grad_pass_free(GradPass *p)
{
    if (!p) return;
    grad_pass_cuda_free(p->cuda);
    cpu_workspace_free(&p->ws);
    free(p->acts);
    free(p->dacts);
    free(p->grads);
    free(p);
}
