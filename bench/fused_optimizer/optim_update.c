// optim_update.c: the optimizer updates of bench_fused_optimizer on the CPU (the GPU's are in
// optim_update_cuda.cu): per tensor, one threaded call per parameter tensor (the fast CPU
// backend's pool, as its own SGD update); multi-tensor, one threaded call over the flat
// buffers. Both run the same span functions, so every element gets the same arithmetic.
#include "bench/fused_optimizer/optim_update.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"
#include "kernels/cpu_pool.h"
#include "kernels/error.h"
#include "kernels/model.h"
#include "kernels/rng.h"

#define SPAN_MIN 16384  // floats per pool task at least (smaller ranges run on this thread)

struct OptimUpdate {
    OptimKind kind;
    OptimHyper hyper;
    OptimCuda *cuda;  // the GPU's, when on the GPU
    OptimTensor tensors[2 * MODEL_MAX_OPS];
    int n_tensors;
    size_t floats;
    int step;  // updates taken (AdamW's t - 1)
    float *start, *params, *grads, *state;  // host; state: SGD's buffer, AdamW's m then v
};

int optim_model_tensors(const CoreModelConfig *model, OptimTensor *out, int max)
{
    ModelGraph *g = malloc(sizeof *g);
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "optimizer: out of memory (host)");
    if (model_build(model, g) != 0) {
        free(g);
        return -1;
    }
    int n = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        size_t w = op->kind == OP_CONV ? (size_t)op->cout * op->cin * op->k * op->k
                 : op->kind == OP_LINEAR ? (size_t)op->cout * op->cin
                 : op->kind == OP_BN ? (size_t)op->cin : 0;
        size_t b = op->kind == OP_LINEAR ? (size_t)op->cout : op->kind == OP_BN ? (size_t)op->cin
                 : op->kind == OP_CONV && op->bias ? (size_t)op->cout : 0;
        OptimTensor t[2] = {{op->w_off, w}, {op->b_off, b}};
        for (int j = 0; j < 2; j++) {
            if (t[j].count == 0) continue;
            if (out && n < max) out[n] = t[j];
            n++;
        }
    }
    free(g);
    return n;
}

void optim_sgd_span(float *p, const float *g, float *buf, size_t lo, size_t hi, float lr,
                    float momentum, float wd)
{
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i] + wd * p[i];
        buf[i] = momentum * buf[i] + gi;
        p[i] -= lr * buf[i];
    }
}

AdamwStep optim_adamw_step_of(const OptimHyper *h, int step)
{
    double t = step + 1;
    return (AdamwStep){
        .decay = (float)(1.0 - (double)h->lr * h->weight_decay), .beta1 = h->beta1, .beta2 = h->beta2,
        .step_size = (float)(h->lr / (1.0 - pow(h->beta1, t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(h->beta2, t)), .eps = h->eps};
}

void optim_adamw_span(float *p, const float *g, float *m, float *v, size_t lo, size_t hi,
                      const AdamwStep *s)
{
    const float w1 = 1.0f - s->beta1, w2 = 1.0f - s->beta2;
    for (size_t i = lo; i < hi; i++) {
        float pi = p[i] * s->decay;       // param.mul_(1 - lr * weight_decay)
        float mi = m[i] + w1 * (g[i] - m[i]);  // exp_avg.lerp_(grad, 1 - beta1)
        float vi = v[i] * s->beta2 + w2 * g[i] * g[i];  // exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2)
        float denom = sqrtf(vi) / s->bc2_sqrt + s->eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - s->step_size * (mi / denom);  // param.addcdiv_(exp_avg, denom, -step_size)
    }
}

// ---- the CPU ways -------------------------------------------------------------------------------

typedef struct SpanJob {
    const OptimUpdate *u;
    size_t lo, hi;
    int tasks;
    AdamwStep adamw;
} SpanJob;

static void span_task(void *arg, int t)
{
    const SpanJob *j = arg;
    const OptimUpdate *u = j->u;
    size_t n = j->hi - j->lo;
    size_t lo = j->lo + n * t / j->tasks, hi = j->lo + n * (t + 1) / j->tasks;
    if (u->kind == OPTIM_SGD)
        optim_sgd_span(u->params, u->grads, u->state, lo, hi, u->hyper.lr, u->hyper.momentum,
                       u->hyper.weight_decay);
    else
        optim_adamw_span(u->params, u->grads, u->state, u->state + u->floats, lo, hi, &j->adamw);
}

// One threaded call over [lo, hi).
static void update_range(const OptimUpdate *u, size_t lo, size_t hi, const AdamwStep *s)
{
    int threads = core_cpu_threads();
    size_t tasks = (hi - lo) / SPAN_MIN;
    if (tasks < 1) tasks = 1;
    if (tasks > (size_t)threads) tasks = (size_t)threads;
    SpanJob j = {u, lo, hi, (int)tasks, *s};
    cpu_pool_run(threads, j.tasks, span_task, &j);
}

int optim_update_step(OptimUpdate *u, bool multi_tensor, bool skip_last, double *seconds,
                      int *launches)
{
    int n = u->n_tensors - (skip_last ? 1 : 0);
    if (u->cuda) {
        TRY(optim_cuda_step(u->cuda, u->kind, &u->hyper, u->step, u->tensors, n, multi_tensor,
                            seconds, launches));
        u->step++;
        return 0;
    }
    AdamwStep s = optim_adamw_step_of(&u->hyper, u->step);
    double t0 = clock_seconds();
    if (multi_tensor) {  // the tensors are contiguous in the flat order: one range
        const OptimTensor *last = &u->tensors[n - 1];
        update_range(u, 0, n > 0 ? last->offset + last->count : 0, &s);
        *launches = 1;
    } else {
        for (int i = 0; i < n; i++) update_range(u, u->tensors[i].offset, u->tensors[i].offset + u->tensors[i].count, &s);
        *launches = n;
    }
    *seconds = clock_seconds() - t0;
    u->step++;
    return 0;
}

// ---- life ---------------------------------------------------------------------------------------

static size_t state_per_param(OptimKind kind) { return kind == OPTIM_ADAMW ? 2 : 1; }

int optim_update_create(const CoreModelConfig *model, uint64_t seed, OptimKind kind,
                        const OptimHyper *hyper, bool gpu, OptimUpdate **out)
{
    *out = NULL;
    OptimUpdate *u = calloc(1, sizeof *u);
    ModelGraph *g = malloc(sizeof *g);
    if (!u || !g) {
        free(u);
        free(g);
        return error_set(ERROR_OUT_OF_MEMORY, "optimizer: out of memory (host)");
    }
    u->kind = kind;
    u->hyper = *hyper;
    int rc = model_build(model, g);
    if (rc == 0) {
        u->floats = g->n_params;
        u->n_tensors = optim_model_tensors(model, u->tensors, 2 * MODEL_MAX_OPS);
        if (u->n_tensors < 0) rc = -1;
        else if (u->n_tensors < 1 || u->n_tensors > 2 * MODEL_MAX_OPS)
            rc = error_set(ERROR_BAD_USAGE, "optimizer: %d parameter tensors", u->n_tensors);
        // multi-tensor's one range on the CPU: the tensors tile the flat order
        size_t at = 0;
        for (int i = 0; rc == 0 && i < u->n_tensors; at += u->tensors[i].count, i++)
            if (u->tensors[i].offset != at)
                rc = error_set(ERROR_BAD_USAGE, "optimizer: tensor %d at %zu, not %zu", i, u->tensors[i].offset, at);
        if (rc == 0 && at != u->floats)
            rc = error_set(ERROR_BAD_USAGE, "optimizer: the tensors do not cover the parameters");
    }
    size_t nstate = u->floats * state_per_param(kind);
    float *stats = NULL;
    if (rc == 0) {
        u->start = malloc(u->floats * sizeof(float));
        u->params = malloc(u->floats * sizeof(float));
        u->grads = malloc(u->floats * sizeof(float));
        u->state = calloc(nstate, sizeof(float));
        stats = malloc((g->n_stats ? g->n_stats : 1) * sizeof(float));
        if (!u->start || !u->params || !u->grads || !u->state || !stats)
            rc = error_set(ERROR_OUT_OF_MEMORY, "optimizer: out of memory (host)");
    }
    if (rc == 0) {
        model_init(g, seed, u->start, stats);
        memcpy(u->params, u->start, u->floats * sizeof(float));
        Rng r = {seed ^ 0x9e3779b97f4a7c15ull};
        for (size_t i = 0; i < u->floats; i++) u->grads[i] = 1e-2f * rng_normal_float(&r);
        if (gpu) rc = optim_cuda_create(u->start, u->grads, u->floats, (int)state_per_param(kind), &u->cuda);
    }
    free(stats);
    free(g);
    if (rc != 0) {
        optim_update_free(u);
        return -1;
    }
    *out = u;
    return 0;
}

int optim_update_reset(OptimUpdate *u)
{
    u->step = 0;
    if (u->cuda) return optim_cuda_reset(u->cuda, u->start);
    memcpy(u->params, u->start, u->floats * sizeof(float));
    memset(u->state, 0, u->floats * state_per_param(u->kind) * sizeof(float));
    return 0;
}

int optim_update_read(OptimUpdate *u, float *params, float *state)
{
    if (u->cuda) return optim_cuda_read(u->cuda, params, state);
    memcpy(params, u->params, u->floats * sizeof(float));
    memcpy(state, u->state, u->floats * state_per_param(u->kind) * sizeof(float));
    return 0;
}

int optim_update_tensors(const OptimUpdate *u) { return u->n_tensors; }
size_t optim_update_floats(const OptimUpdate *u) { return u->floats; }
size_t optim_update_state_floats(const OptimUpdate *u) { return u->floats * state_per_param(u->kind); }

void optim_update_free(OptimUpdate *u)
{
    if (!u) return;
    optim_cuda_free(u->cuda);
    free(u->start);
    free(u->params);
    free(u->grads);
    free(u->state);
    free(u);
}
