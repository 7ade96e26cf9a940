// core_internal.h: the backends' interface (not part of the public API): a Core holds the
// config, the op graph and a table of backend functions (CoreOps) that a backend fills in;
// a backend reports its gradients to the hooks through the inline functions below. It
// declares nothing of core.c, so the line runs one way: core.c -> the backends
// (core_backends.h) -> this interface.
#ifndef CORE_INTERNAL_H
#define CORE_INTERNAL_H

#include "kernels/core.h"
#include "kernels/model.h"
#include "kernels/model_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CoreOps {
    int (*step)(Core *core, const CoreBatch *batch, float lr, CoreStepResult *result);
    int (*eval)(Core *core, const CoreBatch *batch, CoreEvalResult *result);
    int (*loss_grad)(Core *core, const CoreBatch *batch, float *loss, float *grad);
    int (*sync)(Core *core);
    int (*stats)(Core *core, CoreStats *stats);
    int (*params_get)(Core *core, float *dst);
    int (*params_set)(Core *core, const float *src);
    int (*inject)(Core *core, float value);
    int (*conv_algos)(Core *core, CoreConvAlgoInfo *out, int max); // NULL: no convolutions
    void (*destroy)(Core *core);
    // The split step (NULL: the backend has none): core_forward_backward, core_apply_update.
    // loss_weight: the gradient is that of loss_weight x the mean loss (1: core_step's).
    int (*forward_backward)(Core *core, const CoreBatch *batch, bool accumulate, float loss_weight);
    int (*update)(Core *core, float lr, CoreStepResult *result);
    // core_buffers: the BN running statistics and the stream they are used on (CPU: NULL).
    float *(*buffers)(Core *core, void **stream);
    // core_infer: an eval-mode forward on the plan of `grad` (never NULL).
    int (*infer)(Core *core, const CoreBatch *batch, CoreGradMode grad, float *logits,
                 CoreEvalResult *result);
} CoreOps;

struct Core {
    CoreConfig cfg;
    CoreBackend backend;   // CPU or CUDA, never AUTO
    ModelGraph graph;
    const CoreOps *ops;
    void *impl;            // backend state
    int step;              // next step index
    CoreGradHooks hooks;   // core_set_grad_hooks; hooks.ready == NULL: none
    bool hooks_armed;      // inside a training step's backward (not core_loss_grad)
    bool grads_pending;    // a core_forward_backward succeeded since the last update
};

// The pointwise pairs a memory plan of graph g runs as one op (CoreStats.fused_ops).
static inline int core_plan_fused_ops(const ModelGraph *g, const ModelPlan *p)
{
    int fused = 0;
    for (int i = 0; i < g->n_ops; i++) fused += p->ops[i].relu_fused;
    return fused;
}

// The flat parameter range [offset, offset + count) of one op (count 0: no parameters).
static inline size_t op_param_count(const ModelOp *op)
{
    switch (op->kind) {
    case OP_CONV: return (size_t)op->cout * op->cin * op->k * op->k + (op->bias ? op->cout : 0);
    case OP_BN: return 2 * (size_t)op->cin;
    case OP_LINEAR: return (size_t)op->cout * op->cin + (size_t)op->cout;
    case OP_LAYERNORM: return 2 * (size_t)op->cin;
    case OP_EMBED: return ((size_t)op->cin + op->rows) * op->cout;  // token and position tables
    default: return 0;
    }
}

// Backends call these: whether a gradients-ready hook wants op `op_index`'s gradients
// now, and the report itself (event/stream: CUDA's, NULL on the CPU). Inline here, so
// that a backend needs nothing of core.c (which calls the backends: core_backends.h).
static inline bool core_grad_hook_armed(const Core *core) { return core->hooks_armed && core->hooks.ready; }

static inline int core_report_grads_ready(Core *core, int op_index, float *grads, void *event,
                                          void *stream)
{
    if (!core_grad_hook_armed(core)) return 0;
    const ModelOp *op = &core->graph.ops[op_index];
    CoreGradReady ready = {.offset = op->w_off, .count = op_param_count(op), .grads = grads,
                           .event = event, .stream = stream};
    if (ready.count == 0) return 0;
    return core->hooks.ready(core->hooks.user, &ready);
}

static inline int core_report_before_update(Core *core, float *grads, void *stream)
{
    if (!core->hooks.before_update) return 0;
    return core->hooks.before_update(core->hooks.user, grads, core->graph.n_params, stream);
}

#ifdef __cplusplus
}
#endif
#endif
