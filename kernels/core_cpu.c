// core_cpu.c: the CPU reference backend: the same model, loss, GradScaler logic,
// clipping and SGD as the CUDA backend, in plain fp32 C. Precisions other than fp32
// compute in fp32 here; FP16 still runs the full loss-scaling path (scale, inf/nan
// check, unscale, skip, update), so the GradScaler can be tested without a GPU.
// Layout NHWC only changes GPU storage and is ignored here.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/core_internal.h"
#include "kernels/layers_cpu.h"

typedef struct CpuCore {
    float *params, *grads, *mom, *stats, *saved, *col;
    float *act[MODEL_MAX_TENSORS], *dact[MODEL_MAX_TENSORS];
    const float *input;
    int cap_n;
    AmpScaler scaler;
    int skipped;
    bool fault_pending;
    float fault_value;
    double loss_accum;
    int loss_count;
    long correct_accum, samples_accum;
    size_t bytes, peak;
} CpuCore;

typedef enum { FWD_TRAIN, FWD_TRAIN_NO_STATS, FWD_INFER } FwdMode;

static CpuCore *cpu(Core *core) { return (CpuCore *)core->impl; }

static float *cpu_alloc(CpuCore *c, size_t count)
{
    float *p = calloc(count ? count : 1, sizeof(float));
    if (!p) { check_fail(__FILE__, __LINE__, "calloc", "out of memory"); return NULL; }
    c->bytes += count * sizeof(float);
    if (c->bytes > c->peak) c->peak = c->bytes;
    return p;
}

static void free_activations(CpuCore *c, const ModelGraph *g)
{
    for (int t = 0; t < g->n_tensors; t++) {
        if (c->act[t]) c->bytes -= 2 * (size_t)c->cap_n * model_tensor_size(g, t) * sizeof(float);
        free(c->act[t]); free(c->dact[t]);
        c->act[t] = c->dact[t] = NULL;
    }
    c->cap_n = 0;
}

// Activations and their gradients for n samples; reallocated only when n grows.
static int ensure_capacity(Core *core, int n)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    if (n <= c->cap_n) return 0;
    free_activations(c, g);
    for (int t = 1; t < g->n_tensors; t++) {
        size_t count = (size_t)n * model_tensor_size(g, t);
        if (!(c->act[t] = cpu_alloc(c, count)) || !(c->dact[t] = cpu_alloc(c, count))) {
            c->cap_n = n;
            free_activations(c, g);
            return -1;
        }
    }
    c->cap_n = n;
    return 0;
}

static const float *tensor(CpuCore *c, int t) { return t == 0 ? c->input : c->act[t]; }

static ConvShape conv_shape(const ModelGraph *g, const ModelOp *op, int n)
{
    ModelShape in = g->shapes[op->in], out = g->shapes[op->out];
    return (ConvShape){n, in.c, in.h, in.w, op->cout, op->k, op->stride, op->pad, out.h, out.w};
}

static void forward(Core *core, int n, FwdMode mode)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        const float *x = tensor(c, op->in);
        float *y = c->act[op->out];
        ModelShape s = g->shapes[op->in];
        int hw = s.h * s.w;
        size_t count = (size_t)n * model_tensor_size(g, op->in);
        switch (op->kind) {
        case OP_CONV: {
            ConvShape cs = conv_shape(g, op, n);
            conv_fwd_cpu(&cs, x, c->params + op->w_off, y, c->col);
            break;
        }
        case OP_BN:
            if (mode == FWD_INFER)
                bn_fwd_infer_cpu(n, s.c, hw, x, c->params + op->w_off, c->params + op->b_off,
                                 c->stats + op->stat_off, c->stats + op->stat_off + s.c, y);
            else
                bn_fwd_train_cpu(n, s.c, hw, x, c->params + op->w_off, c->params + op->b_off, y,
                                 c->saved + op->save_off, c->saved + op->save_off + s.c,
                                 mode == FWD_TRAIN ? c->stats + op->stat_off : NULL,
                                 mode == FWD_TRAIN ? c->stats + op->stat_off + s.c : NULL);
            break;
        case OP_RELU: relu_fwd_cpu(count, x, y); break;
        case OP_ADD: add_fwd_cpu(count, x, tensor(c, op->in2), y); break;
        case OP_GAP: gap_fwd_cpu(n, s.c, hw, x, y); break;
        case OP_LINEAR:
            linear_fwd_cpu(n, op->cin, op->cout, x, c->params + op->w_off,
                           c->params + op->b_off, y);
            break;
        }
    }
}

// Gradients of all parameters into c->grads (added when accum_params, else written).
static void backward(Core *core, int n, bool accum_params)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    for (int i = g->n_ops - 1; i >= 0; i--) {
        const ModelOp *op = &g->ops[i];
        const float *x = tensor(c, op->in), *dy = c->dact[op->out];
        float *dx = op->in_grad ? c->dact[op->in] : NULL;
        ModelShape s = g->shapes[op->in];
        int hw = s.h * s.w;
        size_t count = (size_t)n * model_tensor_size(g, op->in);
        switch (op->kind) {
        case OP_CONV: {
            ConvShape cs = conv_shape(g, op, n);
            if (dx) conv_bwd_data_cpu(&cs, dy, c->params + op->w_off, dx, op->in_accum, c->col);
            conv_bwd_filter_cpu(&cs, x, dy, c->grads + op->w_off, accum_params, c->col);
            break;
        }
        case OP_BN:
            bn_bwd_cpu(n, s.c, hw, x, dy, c->params + op->w_off, c->saved + op->save_off,
                       c->saved + op->save_off + s.c, dx, op->in_accum, c->grads + op->w_off,
                       c->grads + op->b_off, accum_params);
            break;
        case OP_RELU: if (dx) relu_bwd_cpu(count, c->act[op->out], dy, dx, op->in_accum); break;
        case OP_ADD:
            if (dx) copy_grad_cpu(count, dy, dx, op->in_accum);
            copy_grad_cpu(count, dy, c->dact[op->in2], op->in2_accum);
            break;
        case OP_GAP: if (dx) gap_bwd_cpu(n, s.c, hw, dy, dx, op->in_accum); break;
        case OP_LINEAR:
            linear_bwd_cpu(n, op->cin, op->cout, x, c->params + op->w_off, dy, dx, op->in_accum,
                           c->grads + op->w_off, c->grads + op->b_off, accum_params);
            break;
        }
    }
}

static int cpu_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r)
{
    CpuCore *c = cpu(core);
    const CoreConfig *cfg = &core->cfg;
    const ModelGraph *g = &core->graph;
    size_t np = g->n_params;
    TRY(ensure_capacity(core, b->n));
    c->input = b->images;
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    bool memset_mode = cfg->zero_grad == CORE_ZERO_GRAD_MEMSET;
    if (memset_mode) memset(c->grads, 0, np * sizeof(float));

    forward(core, b->n, FWD_TRAIN);
    float scale = fp16 ? c->scaler.scale : 1.0f;
    int correct = 0;
    double loss = softmax_ce_cpu(b->n, g->shapes[g->logits].c, c->act[g->logits], b->labels,
                                 scale, c->dact[g->logits], &correct) / b->n;
    backward(core, b->n, memset_mode);
    if (c->fault_pending) { c->grads[np / 2] = c->fault_value; c->fault_pending = false; }

    bool found_inf = false;
    if (fp16) {  // GradScaler.unscale_: multiply by 1/scale, note any inf/nan
        float inv = (float)(1.0 / (double)scale);
        for (size_t i = 0; i < np; i++) {
            c->grads[i] *= inv;
            if (!isfinite(c->grads[i])) found_inf = true;
        }
    }
    if (cfg->optim.clip_norm > 0.0f && !found_inf) {  // clip_grad_norm_ after unscaling
        double sq = 0.0;
        for (size_t i = 0; i < np; i++) sq += (double)c->grads[i] * c->grads[i];
        float coef = cfg->optim.clip_norm / ((float)sqrt(sq) + 1e-6f);
        if (coef > 1.0f) coef = 1.0f;
        for (size_t i = 0; i < np; i++) c->grads[i] *= coef;
    }
    if (!found_inf) {  // SGD: g += wd*w; buf = m*buf + g; w -= lr*buf
        float m = cfg->optim.momentum, wd = cfg->optim.weight_decay;
        for (size_t i = 0; i < np; i++) {
            float gi = c->grads[i] + wd * c->params[i];
            c->mom[i] = m * c->mom[i] + gi;
            c->params[i] -= lr * c->mom[i];
        }
    }
    if (fp16) {
        amp_scaler_update(&c->scaler, &cfg->scaler, found_inf);
        c->skipped += found_inf;
    }

    c->loss_accum += loss;
    c->loss_count++;
    c->correct_accum += correct;
    c->samples_accum += b->n;
    bool ready = cfg->readback == CORE_READBACK_EVERY_STEP || c->loss_count >= cfg->readback_interval;
    if (ready) {
        r->loss = (float)(c->loss_accum / c->loss_count);
        r->loss_steps = c->loss_count;
        r->accuracy = (float)((double)c->correct_accum / (double)c->samples_accum);
        r->loss_ready = true;
        c->loss_accum = 0.0;
        c->loss_count = 0;
        c->correct_accum = c->samples_accum = 0;
    }
    return 0;
}

static int cpu_eval(Core *core, const CoreBatch *b, CoreEvalResult *r)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    TRY(ensure_capacity(core, b->n));
    c->input = b->images;
    forward(core, b->n, FWD_INFER);
    int correct = 0;
    double loss = softmax_ce_cpu(b->n, g->shapes[g->logits].c, c->act[g->logits], b->labels,
                                 1.0f, NULL, &correct);
    r->loss = (float)(loss / b->n);
    r->accuracy = (float)correct / b->n;
    r->n = b->n;
    return 0;
}

static int cpu_loss_grad(Core *core, const CoreBatch *b, float *loss, float *grad)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    TRY(ensure_capacity(core, b->n));
    c->input = b->images;
    forward(core, b->n, FWD_TRAIN_NO_STATS);
    double l = softmax_ce_cpu(b->n, g->shapes[g->logits].c, c->act[g->logits], b->labels,
                              1.0f, c->dact[g->logits], NULL);
    if (loss) *loss = (float)(l / b->n);
    if (grad) {
        backward(core, b->n, false);
        memcpy(grad, c->grads, g->n_params * sizeof(float));
    }
    return 0;
}

static int cpu_sync(Core *core) { (void)core; return 0; }

static int cpu_stats(Core *core, CoreStats *s)
{
    CpuCore *c = cpu(core);
    s->peak_bytes = c->peak;
    s->skipped_steps = c->skipped;
    s->loss_scale = core->cfg.precision == CORE_PRECISION_FP16 ? c->scaler.scale : 1.0f;
    s->growth_tracker = c->scaler.growth_tracker;
    return 0;
}

static int cpu_params_get(Core *core, float *dst)
{
    memcpy(dst, cpu(core)->params, core->graph.n_params * sizeof(float));
    return 0;
}

static int cpu_params_set(Core *core, const float *src)
{
    CpuCore *c = cpu(core);
    memcpy(c->params, src, core->graph.n_params * sizeof(float));
    memset(c->mom, 0, core->graph.n_params * sizeof(float));
    return 0;
}

static int cpu_inject(Core *core, float value)
{
    cpu(core)->fault_pending = true;
    cpu(core)->fault_value = value;
    return 0;
}

static void cpu_destroy(Core *core)
{
    CpuCore *c = cpu(core);
    if (!c) return;
    free_activations(c, &core->graph);
    free(c->params); free(c->grads); free(c->mom); free(c->stats); free(c->saved); free(c->col);
    free(c);
    core->impl = NULL;
}

static const CoreOps cpu_ops = {
    .step = cpu_step, .eval = cpu_eval, .loss_grad = cpu_loss_grad, .sync = cpu_sync,
    .stats = cpu_stats, .params_get = cpu_params_get, .params_set = cpu_params_set,
    .inject = cpu_inject, .destroy = cpu_destroy,
};

int core_cpu_init(Core *core)
{
    CpuCore *c = calloc(1, sizeof *c);
    if (!c) return check_fail(__FILE__, __LINE__, "calloc(CpuCore)", "out of memory");
    core->impl = c;
    core->ops = &cpu_ops;
    const ModelGraph *g = &core->graph;
    if (!(c->params = cpu_alloc(c, g->n_params)) || !(c->grads = cpu_alloc(c, g->n_params)) ||
        !(c->mom = cpu_alloc(c, g->n_params)) || !(c->stats = cpu_alloc(c, g->n_stats)) ||
        !(c->saved = cpu_alloc(c, g->n_saved)) || !(c->col = cpu_alloc(c, g->max_col)))
        return -1;
    model_init(g, core->cfg.seed, c->params, c->stats);
    amp_scaler_init(&c->scaler, &core->cfg.scaler);
    return ensure_capacity(core, core->cfg.batch_size);
}
