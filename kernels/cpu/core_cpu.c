// core_cpu.c: the two CPU backends: the same model, loss, GradScaler logic, clipping
// and SGD as the CUDA backend, in fp32. One driver (op loop, GradScaler, clipping, SGD)
// over a table of layer functions chosen at creation: CORE_BACKEND_CPU_REF runs the
// plain-C reference of layers_cpu.c on one thread (the tests' oracle);
// CORE_BACKEND_CPU runs layers_cpu_fast.c (OpenBLAS, OpenMP threads, SIMD) on
// core_cpu_threads() threads. Precisions other than fp32 compute in fp32 here; FP16
// still runs the full loss-scaling path (scale, inf/nan check, unscale, skip, update),
// so the GradScaler can be tested without a GPU.
// Activations and their gradients are views into one arena laid out by the memory plan
// (kernels/model_plan.h): the fast backend reuses and aliases buffers by liveness and,
// with CORE_POINTWISE_FUSED, fuses BN+ReLU and add+ReLU in its loops; the reference keeps
// every tensor in its own buffer and every op separate, as it always has.
// Layout NHWC only changes GPU storage and is ignored here.
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/adamw.h"
#include "kernels/check.h"
#include "kernels/conv_bias_cpu.h"
#include "kernels/core_backends.h"
#include "kernels/core_internal.h"
#include "kernels/cpu/core_cpu_gpt.h"
#include "kernels/cpu_pool.h"
#include "kernels/layers_cpu.h"
#include "kernels/layers_cpu_fast.h"
#include "kernels/model_plan.h"

// The layer functions of one CPU backend; the reference's are adapters below.
typedef struct CpuLayers {
    void (*conv_fwd)(const CpuWorkspace *ws, const ConvShape *s, const float *x,
                     const float *w, const float *bias, float *y);  // bias: NULL for none
    void (*conv_bwd)(const CpuWorkspace *ws, const ConvShape *s, const float *x,
                     const float *dy, const float *w, float *dx, bool accum_dx, float *dw,
                     bool accum_dw);
    void (*bn_fwd_train)(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                         const float *gamma, const float *beta, float *y, float *save_mean,
                         float *save_invstd, float *running_mean, float *running_var);
    void (*bn_fwd_infer)(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                         const float *gamma, const float *beta, const float *running_mean,
                         const float *running_var, float *y);
    void (*bn_bwd)(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                   const float *dy, const float *gamma, const float *save_mean,
                   const float *save_invstd, float *dx, bool accum_dx, float *dgamma,
                   float *dbeta, bool accum_param);
    // Fused pointwise forms (NULL: the backend never fuses; its plan keeps ops separate).
    void (*bn_relu_fwd_train)(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                              const float *gamma, const float *beta, float *y, float *save_mean,
                              float *save_invstd, float *running_mean, float *running_var);
    void (*bn_relu_fwd_infer)(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                              const float *gamma, const float *beta, const float *running_mean,
                              const float *running_var, float *y);
    void (*bn_relu_bwd)(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                        const float *y, const float *dy, const float *gamma,
                        const float *save_mean, const float *save_invstd, float *dx,
                        bool accum_dx, float *dgamma, float *dbeta, bool accum_param);
    void (*add_relu_fwd)(const CpuWorkspace *ws, size_t count, const float *a, const float *b,
                         float *y);
    void (*relu_fwd)(const CpuWorkspace *ws, size_t count, const float *x, float *y);
    void (*relu_bwd)(const CpuWorkspace *ws, size_t count, const float *y, const float *dy,
                     float *dx, bool accum);
    void (*add_fwd)(const CpuWorkspace *ws, size_t count, const float *a, const float *b,
                    float *y);
    void (*copy_grad)(const CpuWorkspace *ws, size_t count, const float *dy, float *dx,
                      bool accum);
    void (*gap_fwd)(const CpuWorkspace *ws, int n, int c, int hw, const float *x, float *y);
    void (*gap_bwd)(const CpuWorkspace *ws, int n, int c, int hw, const float *dy, float *dx,
                    bool accum);
    void (*linear_fwd)(const CpuWorkspace *ws, int n, int k, int m, const float *x,
                       const float *w, const float *b, float *y);
    void (*linear_bwd)(const CpuWorkspace *ws, int n, int k, int m, const float *x,
                       const float *w, const float *dy, float *dx, bool accum_dx, float *dw,
                       float *db, bool accum_param);
    void (*sgd)(const CpuWorkspace *ws, size_t count, float *params, const float *grads,
                float *mom, float lr, float momentum, float weight_decay);
    void (*adamw)(const CpuWorkspace *ws, size_t count, float *params, const float *grads,
                  float *m, float *v, const AdamwCoeffs *k);
} CpuLayers;

// ---- the reference table: layers_cpu.c on one thread; region 0 is its im2col buffer

// The reference adds a bias in a pass of its own (the oracle keeps every step separate).
static void ref_conv_fwd(const CpuWorkspace *ws, const ConvShape *s, const float *x,
                         const float *w, const float *bias, float *y)
{
    conv_fwd_cpu(s, x, w, y, cpu_workspace_region(ws, 0));
    if (bias) conv_bias_fwd_cpu(s->n, s->k, s->p * s->q, bias, y);
}

static void ref_conv_bwd(const CpuWorkspace *ws, const ConvShape *s, const float *x,
                         const float *dy, const float *w, float *dx, bool accum_dx, float *dw,
                         bool accum_dw)
{
    if (dx) conv_bwd_data_cpu(s, dy, w, dx, accum_dx, cpu_workspace_region(ws, 0));
    conv_bwd_filter_cpu(s, x, dy, dw, accum_dw, cpu_workspace_region(ws, 0));
}

static void ref_bn_fwd_train(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, float *y, float *save_mean,
                             float *save_invstd, float *running_mean, float *running_var)
{
    (void)ws;
    bn_fwd_train_cpu(n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                     running_var);
}

static void ref_bn_fwd_infer(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, const float *running_mean,
                             const float *running_var, float *y)
{
    (void)ws;
    bn_fwd_infer_cpu(n, c, hw, x, gamma, beta, running_mean, running_var, y);
}

static void ref_bn_bwd(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                       const float *dy, const float *gamma, const float *save_mean,
                       const float *save_invstd, float *dx, bool accum_dx, float *dgamma,
                       float *dbeta, bool accum_param)
{
    (void)ws;
    bn_bwd_cpu(n, c, hw, x, dy, gamma, save_mean, save_invstd, dx, accum_dx, dgamma, dbeta,
               accum_param);
}

static void ref_relu_fwd(const CpuWorkspace *ws, size_t count, const float *x, float *y)
{
    (void)ws; relu_fwd_cpu(count, x, y);
}

static void ref_relu_bwd(const CpuWorkspace *ws, size_t count, const float *y, const float *dy,
                         float *dx, bool accum)
{
    (void)ws; relu_bwd_cpu(count, y, dy, dx, accum);
}

static void ref_add_fwd(const CpuWorkspace *ws, size_t count, const float *a, const float *b,
                        float *y)
{
    (void)ws; add_fwd_cpu(count, a, b, y);
}

static void ref_copy_grad(const CpuWorkspace *ws, size_t count, const float *dy, float *dx,
                          bool accum)
{
    (void)ws; copy_grad_cpu(count, dy, dx, accum);
}

static void ref_gap_fwd(const CpuWorkspace *ws, int n, int c, int hw, const float *x, float *y)
{
    (void)ws; gap_fwd_cpu(n, c, hw, x, y);
}

static void ref_gap_bwd(const CpuWorkspace *ws, int n, int c, int hw, const float *dy,
                        float *dx, bool accum)
{
    (void)ws; gap_bwd_cpu(n, c, hw, dy, dx, accum);
}

static void ref_linear_fwd(const CpuWorkspace *ws, int n, int k, int m, const float *x,
                           const float *w, const float *b, float *y)
{
    (void)ws;
    linear_fwd_cpu(n, k, m, x, w, b, y);
}

static void ref_linear_bwd(const CpuWorkspace *ws, int n, int k, int m, const float *x,
                           const float *w, const float *dy, float *dx, bool accum_dx,
                           float *dw, float *db, bool accum_param)
{
    (void)ws;
    linear_bwd_cpu(n, k, m, x, w, dy, dx, accum_dx, dw, db, accum_param);
}

// SGD: g += wd*w; buf = m*buf + g; w -= lr*buf (torch.optim.SGD without dampening).
static void ref_sgd(const CpuWorkspace *ws, size_t np, float *params, const float *grads,
                    float *mom, float lr, float m, float wd)
{
    (void)ws;
    for (size_t i = 0; i < np; i++) {
        float gi = grads[i] + wd * params[i];
        mom[i] = m * mom[i] + gi;
        params[i] -= lr * mom[i];
    }
}

// AdamW, torch.optim.AdamW's single-tensor update (kernels/adamw.h has the scalars): the
// same per-element arithmetic as bench/fused_optimizer's optim_adamw_span, whose per-tensor
// and multi-tensor kernels are checked against this formula too; tests/test_adamw.c checks
// this loop against a double-precision replay and bit for bit against optim_adamw_span.
static void ref_adamw(const CpuWorkspace *ws, size_t np, float *p, const float *g, float *m,
                      float *v, const AdamwCoeffs *k)
{
    (void)ws;
    const float w1 = 1.0f - k->beta1, w2 = 1.0f - k->beta2;
    for (size_t i = 0; i < np; i++) {
        p[i] *= k->decay;                               // param.mul_(1 - lr * wd)
        m[i] = m[i] + w1 * (g[i] - m[i]);               // exp_avg.lerp_(grad, 1 - beta1)
        v[i] = k->beta2 * v[i] + w2 * g[i] * g[i];      // exp_avg_sq.mul_(b2).addcmul_(...)
        float denom = sqrtf(v[i]) / k->bc2_sqrt + k->eps;
        p[i] -= k->step_size * (m[i] / denom);          // param.addcdiv_(m, denom, -step)
    }
}

// The reference keeps every op separate and every tensor in its own buffer (its plan has
// no reuse and no fusion): the oracle runs exactly as it always has.
static const CpuLayers ref_layers = {
    ref_conv_fwd, ref_conv_bwd, ref_bn_fwd_train, ref_bn_fwd_infer, ref_bn_bwd,
    NULL, NULL, NULL, NULL,
    ref_relu_fwd, ref_relu_bwd, ref_add_fwd, ref_copy_grad, ref_gap_fwd, ref_gap_bwd,
    ref_linear_fwd, ref_linear_bwd, ref_sgd, ref_adamw,
};

static const CpuLayers fast_layers = {
    conv_fwd_fast, conv_bwd_fast, bn_fwd_train_fast, bn_fwd_infer_fast, bn_bwd_fast,
    bn_relu_fwd_train_fast, bn_relu_fwd_infer_fast, bn_relu_bwd_fast, add_relu_fwd_fast,
    relu_fwd_fast, relu_bwd_fast, add_fwd_fast, copy_grad_fast, gap_fwd_fast, gap_bwd_fast,
    linear_fwd_fast, linear_bwd_fast, sgd_update_fast, adamw_update_fast,
};

// ---- threads: one process-wide setting, like torch.set_num_threads ------------------

static int cpu_threads_setting; // 0: the default (online cores); read and written atomically

void core_cpu_set_threads(int n) { __atomic_store_n(&cpu_threads_setting, n > 0 ? n : 0, __ATOMIC_RELAXED); }

// The default: the CPUs this process may run on (taskset, cgroup cpusets), as PyTorch
// counts them (it counts physical cores where SMT doubles the logical ones).
int core_cpu_threads(void)
{
    int n = __atomic_load_n(&cpu_threads_setting, __ATOMIC_RELAXED);
    if (n > 0) return n;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

const char *core_cpu_kernels(void)
{
    static _Thread_local char buf[160];
    snprintf(buf, sizeof buf, "%s / %s loops", cpu_fast_blas(), cpu_fast_isa());
    return buf;
}

// ---- the driver ------------------------------------------------------------------------

typedef struct CpuCore {
    const CpuLayers *layers;
    bool fast;             // CORE_BACKEND_CPU: threads follow cfg.cpu_threads, else
                           // core_cpu_threads(); cfg.cpu_affinity binds them
    int threads_wanted;    // cfg.cpu_threads (0: core_cpu_threads())
    uint64_t affinity;     // cfg.cpu_affinity
    bool bound;            // this core bound the compute threads (cpu_pool_bind)
    CpuWorkspace ws;       // threads and per-thread scratch (im2col, weight-gradient parts)
    float *params, *grads, *mom, *stats, *saved;
    float *mom_sq;         // AdamW's exp_avg_sq (mom is its exp_avg); NULL under SGD
    int adamw_t;           // AdamW updates applied (a skipped fp16 step is none)
    ModelPlan plan;        // where activations and gradients live (model_plan.h)
    int plan_n, plan_size; // the (batch, image size) of plan; 0: none yet
    bool plan_infer;       // plan is core_infer's inference plan (CORE_GRAD_OFF), else the
                           // training plan
    float *arena;          // the plan's arena; it only grows
    size_t arena_cap;      // bytes of arena
    float *act[MODEL_MAX_TENSORS], *dact[MODEL_MAX_TENSORS]; // views into arena (NULL: none)
    int ws_image_size;     // the image size the workspace was laid out for
    const float *input;
    const int32_t *tokens; // a GPT batch's
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

// A buffer larger than the machine's physical memory is refused before asking for it
// (the allocator may promise virtual memory it cannot back, or complain loudly), with the
// sizes in the message.
static float *cpu_alloc(CpuCore *c, size_t count)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && count > (size_t)pages / sizeof(float) * (size_t)page) {
        error_set(ERROR_OUT_OF_MEMORY, "out of memory: a buffer of %.1f GiB, more than this "
                  "machine's %.1f GiB", (double)count * sizeof(float) / (1 << 30),
                  (double)pages * (double)page / (1 << 30));
        return NULL;
    }
    float *p = calloc(count ? count : 1, sizeof(float));
    if (!p) { error_set(ERROR_OUT_OF_MEMORY, "calloc: out of memory"); return NULL; }
    c->bytes += count * sizeof(float);
    if (c->bytes > c->peak) c->peak = c->bytes;
    return p;
}

static void free_activations(CpuCore *c)
{
    c->bytes -= c->arena_cap;
    free(c->arena);
    c->arena = NULL;
    c->arena_cap = 0;
    c->plan_n = c->plan_size = 0;
    memset(c->act, 0, sizeof c->act);
    memset(c->dact, 0, sizeof c->dact);
}

// The memory plan for n samples of the current image size, made once per (n, size, kind:
// training or inference); the arena is reallocated only when a plan needs more than it
// holds, or at its exact size when the kind changes (the peak restarts there: core_infer).
static int ensure_capacity(Core *core, int n, bool inference)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    if (n == c->plan_n && g->shapes[0].h == c->plan_size && inference == c->plan_infer) return 0;
    // an inference pass recomputes nothing: there is no backward
    ModelPlanOptions o = {.training = !inference, .reuse = c->fast,
                          .fuse = c->fast && core->cfg.pointwise == CORE_POINTWISE_FUSED,
                          .checkpoint_segments = inference ? 0 : core->cfg.checkpoint_segments};
    if (inference != c->plan_infer) {
        free_activations(c);
        c->peak = c->bytes;
        c->plan_infer = inference;
    }
    c->plan_n = c->plan_size = 0;  // until everything below succeeds
    TRY(model_plan_make(g, n, sizeof(float), &o, &c->plan));
    if (c->plan.arena_bytes > c->arena_cap) {
        free_activations(c);
        size_t floats = c->plan.arena_bytes / sizeof(float);
        if (!(c->arena = cpu_alloc(c, floats))) return -1;
        c->arena_cap = floats * sizeof(float);
    }
    for (int t = 0; t < MODEL_MAX_TENSORS; t++) {
        size_t a = c->plan.act_off[t], d = c->plan.dact_off[t];
        c->act[t] = a == MODEL_PLAN_NONE ? NULL : (float *)((char *)c->arena + a);
        c->dact[t] = d == MODEL_PLAN_NONE ? NULL : (float *)((char *)c->arena + d);
    }
    c->plan_n = n;
    c->plan_size = g->shapes[0].h;
    return 0;
}

static const float *tensor(CpuCore *c, int t) { return t == 0 ? c->input : c->act[t]; }

// The fast backend's compute threads where cfg.cpu_affinity asks, before every pass (another
// core may have bound them elsewhere since; no system call when they are there already).
static int bind_threads(CpuCore *c)
{
    if (!c->fast) return 0;
    if (cpu_pool_bind(c->affinity) != 0)
        return error_set(ERROR_BAD_USAGE, "cpu_affinity 0x%llx: cannot bind the compute threads: %s",
                         (unsigned long long)c->affinity, strerror(errno));
    c->bound |= c->affinity != 0;
    return 0;
}

// Scratch for the thread count in force now (it may change between calls).
static int ensure_workspace(CpuCore *c, const ModelGraph *g)
{
    TRY(bind_threads(c));
    int threads = !c->fast ? 1 : c->threads_wanted > 0 ? c->threads_wanted : core_cpu_threads();
    // Scratch is laid out per convolution shape (chunks of images, not monotone in the
    // size): a new image size gets its own.
    if (c->ws.scratch && c->ws.threads == threads && g->shapes[0].h == c->ws_image_size) return 0;
    c->bytes -= cpu_workspace_bytes(&c->ws);
    cpu_workspace_free(&c->ws);
    ConvShape convs[MODEL_MAX_OPS];
    int count = 0;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].kind == OP_CONV) convs[count++] = model_conv_shape(g, &g->ops[i], 1);
    TRY(cpu_workspace_init(&c->ws, convs, count, threads));
    c->ws_image_size = g->shapes[0].h;
    c->bytes += cpu_workspace_bytes(&c->ws);
    if (c->bytes > c->peak) c->peak = c->bytes;
    return 0;
}

// Buffers for a pass of n on the thread count in force: the training plan, or core_infer's
// inference plan.
static int prepare_pass(Core *core, int n, bool inference)
{
    TRY(ensure_capacity(core, n, inference));
    return ensure_workspace(cpu(core), &core->graph);
}

// Its gradient: the sum of dy over N, H, W (=|+= by accum).
static void conv_bias_bwd(CpuCore *c, const ModelGraph *g, const ModelOp *op, int n, bool accum)
{
    ModelShape o = g->shapes[op->out];
    const float *dy = c->dact[op->out];
    float *db = c->grads + op->b_off;
    if (c->fast) conv_bias_bwd_fast(&c->ws, n, o.c, o.h * o.w, dy, db, accum);
    else conv_bias_bwd_cpu(n, o.c, o.h * o.w, dy, db, accum);
}

static int prepare(Core *core, int n) { return prepare_pass(core, n, false); }

// The loss's rows: one per sample, or one per token of a GPT's sequences.
static int logit_rows(const ModelGraph *g, int n)
{
    return n * g->shapes[g->logits].h * g->shapes[g->logits].w;
}

// Ops first..end-1 forward (only those the plan recomputes when recompute_only).
static void forward_ops(Core *core, int n, FwdMode mode, int first, int end, bool recompute_only)
{
    CpuCore *c = cpu(core);
    const CpuLayers *L = c->layers;
    const CpuWorkspace *ws = &c->ws;
    const ModelGraph *g = &core->graph;
    for (int i = first; i < end; i++) {
        const ModelOp *op = &g->ops[i];
        const ModelPlanOp *po = &c->plan.ops[i];
        const float *x = tensor(c, op->in);
        float *y = c->act[op->out];
        ModelShape s = g->shapes[op->in];
        int hw = s.h * s.w;
        size_t count = (size_t)n * model_tensor_size(g, op->in);
        if (po->fused_away || (recompute_only && !po->recompute)) continue;  // fused: the op
                                                                             // before wrote it
        if (cpu_gpt_op(op)) {
            GptOpIo io = {.tokens = c->tokens, .x = x, .y = y,
                          .aux = op->kind == OP_ATTN ? c->act[op->aux] : NULL};
            cpu_gpt_forward(c->fast, ws, op, n, c->params, &io);
            continue;
        }
        switch (op->kind) {
        case OP_CONV: {
            ConvShape cs = model_conv_shape(g, op, n);
            // a bias (CoreModelConfig.conv_bias): inside the fast convolution's GEMMs
            L->conv_fwd(ws, &cs, x, c->params + op->w_off, op->bias ? c->params + op->b_off : NULL, y);
            break;
        }
        case OP_BN:
            if (mode == FWD_INFER)
                (po->relu_fused ? L->bn_relu_fwd_infer : L->bn_fwd_infer)(
                    ws, n, s.c, hw, x, c->params + op->w_off, c->params + op->b_off,
                    c->stats + op->stat_off, c->stats + op->stat_off + s.c, y);
            else
                (po->relu_fused ? L->bn_relu_fwd_train : L->bn_fwd_train)(
                    ws, n, s.c, hw, x, c->params + op->w_off, c->params + op->b_off, y,
                    c->saved + op->save_off, c->saved + op->save_off + s.c,
                    mode == FWD_TRAIN ? c->stats + op->stat_off : NULL,
                    mode == FWD_TRAIN ? c->stats + op->stat_off + s.c : NULL);
            break;
        case OP_RELU: L->relu_fwd(ws, count, x, y); break;
        case OP_ADD:
            (po->relu_fused ? L->add_relu_fwd : L->add_fwd)(ws, count, x, tensor(c, op->in2), y);
            break;
        case OP_GAP: L->gap_fwd(ws, n, s.c, hw, x, y); break;
        case OP_LINEAR:  // every row of every sample (a GPT's tokens)
            L->linear_fwd(ws, n * op->rows, op->cin, op->cout, x, c->params + op->w_off,
                          c->params + op->b_off, y);
            break;
        default: break;
        }
    }
}

// ---- activation checkpointing (CoreConfig.checkpoint_segments) ----------------------

// Every activation view back at its forward bytes (after a backward that recomputed).
static void views_forward(CpuCore *c)
{
    for (int t = 1; t < MODEL_MAX_TENSORS; t++)
        if (c->plan.rec_off[t] != MODEL_PLAN_NONE)
            c->act[t] = c->plan.act_off[t] == MODEL_PLAN_NONE ? NULL
                                                              : (float *)((char *)c->arena + c->plan.act_off[t]);
}

// Before the backward of op `last`, the last op of a checkpointed segment: the segment's
// recomputed tensors (an attention's aux tensor with its output) move to their recomputed
// bytes and its ops run forward again in training mode without touching the running
// statistics (the batch statistics come out the same: same input, same kernels), as
// torch.utils.checkpoint reruns the segment.
static void recompute_segment(Core *core, int n, int last)
{
    CpuCore *c = cpu(core);
    int first = c->plan.ops[last].segment_first;
    for (int j = first; j <= last; j++)
        for (int q = 0, t = core->graph.ops[j].out; q < 2; q++, t = core->graph.ops[j].aux)
            if (t > 0 && c->plan.rec_off[t] != MODEL_PLAN_NONE)  // aux: -1 but for attention
                c->act[t] = (float *)((char *)c->arena + c->plan.rec_off[t]);
    forward_ops(core, n, FWD_TRAIN_NO_STATS, first, last + 1, true);
}

// The whole forward, every activation at its forward bytes.
static void forward(Core *core, int n, FwdMode mode)
{
    views_forward(cpu(core));
    forward_ops(core, n, mode, 0, core->graph.n_ops, false);
}

// Gradients of all parameters into c->grads (added when accum_params, else written);
// each op's are reported to the gradients-ready hook as soon as they are final.
static int backward(Core *core, int n, bool accum_params)
{
    CpuCore *c = cpu(core);
    const CpuLayers *L = c->layers;
    const CpuWorkspace *ws = &c->ws;
    const ModelGraph *g = &core->graph;
    for (int i = g->n_ops - 1; i >= 0; i--) {
        const ModelOp *op = &g->ops[i];
        const ModelPlanOp *po = &c->plan.ops[i];
        if (po->recompute_before) recompute_segment(core, n, i);
        const float *x = tensor(c, op->in), *dy = c->dact[op->out];
        float *dx = op->in_grad ? c->dact[op->in] : NULL;
        ModelShape s = g->shapes[op->in];
        int hw = s.h * s.w;
        size_t count = (size_t)n * model_tensor_size(g, op->in);
        if (cpu_gpt_op(op)) {
            GptOpIo io = {.tokens = c->tokens, .x = x, .y = c->act[op->out],
                          .aux = op->kind == OP_ATTN ? c->act[op->aux] : NULL, .dy = dy, .dx = dx};
            cpu_gpt_backward(c->fast, ws, op, n, c->params, &io, c->grads, accum_params);
            TRY(core_report_grads_ready(core, i, c->grads, NULL, NULL));
            continue;
        }
        switch (op->kind) {
        case OP_CONV: {
            ConvShape cs = model_conv_shape(g, op, n);
            if (op->bias) conv_bias_bwd(c, g, op, n, accum_params);  // before dx may reuse dy
            L->conv_bwd(ws, &cs, x, dy, c->params + op->w_off, dx, op->in_accum,
                        c->grads + op->w_off, accum_params);
            break;
        }
        case OP_BN:
            if (po->relu_fused)  // y: the fused ReLU's output, the same bytes as this op's
                L->bn_relu_bwd(ws, n, s.c, hw, x, c->act[op->out], dy, c->params + op->w_off,
                               c->saved + op->save_off, c->saved + op->save_off + s.c, dx,
                               op->in_accum, c->grads + op->w_off, c->grads + op->b_off,
                               accum_params);
            else
                L->bn_bwd(ws, n, s.c, hw, x, dy, c->params + op->w_off, c->saved + op->save_off,
                          c->saved + op->save_off + s.c, dx, op->in_accum, c->grads + op->w_off,
                          c->grads + op->b_off, accum_params);
            break;
        case OP_RELU:
            // Fused into the BN before it: dact[in] is dact[out], masked by that BN's backward.
            if (dx && !po->bwd_fused) L->relu_bwd(ws, count, c->act[op->out], dy, dx, op->in_accum);
            break;
        case OP_ADD:  // an aliased input gradient already is dy: nothing to copy
            if (dx && !po->in_alias) L->copy_grad(ws, count, dy, dx, op->in_accum);
            if (!po->in2_alias) L->copy_grad(ws, count, dy, c->dact[op->in2], op->in2_accum);
            break;
        case OP_GAP: if (dx) L->gap_bwd(ws, n, s.c, hw, dy, dx, op->in_accum); break;
        case OP_LINEAR:
            L->linear_bwd(ws, n * op->rows, op->cin, op->cout, x, c->params + op->w_off, dy, dx,
                          op->in_accum, c->grads + op->w_off, c->grads + op->b_off, accum_params);
            break;
        default: break;
        }
        TRY(core_report_grads_ready(core, i, c->grads, NULL, NULL));
    }
    views_forward(c);
    return 0;
}

// Forward, loss and backward of one (micro-)batch; gradients replace those held or, when
// accumulate, are added to them (of loss_weight x the mean loss). Loss and accuracy join
// the read-back window.
static int cpu_forward_backward(Core *core, const CoreBatch *b, bool accumulate, float loss_weight)
{
    CpuCore *c = cpu(core);
    const CoreConfig *cfg = &core->cfg;
    const ModelGraph *g = &core->graph;
    size_t np = g->n_params;
    TRY(prepare(core, b->n));
    c->input = b->images;
    c->tokens = b->tokens;
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    bool memset_mode = cfg->zero_grad == CORE_ZERO_GRAD_MEMSET;
    if (memset_mode && !accumulate) memset(c->grads, 0, np * sizeof(float));

    forward(core, b->n, FWD_TRAIN);
    float scale = (fp16 ? c->scaler.scale : 1.0f) * loss_weight;
    int correct = 0;
    int rows = logit_rows(g, b->n);
    double loss = softmax_ce_cpu(rows, g->shapes[g->logits].c, c->act[g->logits], b->labels,
                                 scale, c->dact[g->logits], &correct) / rows;
    TRY(backward(core, b->n, memset_mode || accumulate));
    c->loss_accum += loss;
    c->loss_count++;
    c->correct_accum += correct;
    c->samples_accum += rows;
    return 0;
}

// The update: the before_update hook (DDP's reduced gradients), the GradScaler's inf/nan
// check, clipping, SGD or AdamW, the scaler's update and the loss read-back.
static int cpu_update(Core *core, float lr, CoreStepResult *r)
{
    CpuCore *c = cpu(core);
    const CoreConfig *cfg = &core->cfg;
    size_t np = core->graph.n_params;
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    float scale = fp16 ? c->scaler.scale : 1.0f;
    TRY(core_report_before_update(core, c->grads, NULL));
    if (c->fault_pending) {  // one step only, whatever happens next
        c->fault_pending = false;
        c->grads[np / 2] = c->fault_value;
    }

    bool found_inf = false;
    if (fp16) found_inf = amp_unscale_check(c->grads, np, scale);
    if (cfg->optim.clip_norm > 0.0f && !found_inf) {  // clip_grad_norm_ after unscaling
        double sq = 0.0;
        for (size_t i = 0; i < np; i++) sq += (double)c->grads[i] * c->grads[i];
        float coef = cfg->optim.clip_norm / ((float)sqrt(sq) + 1e-6f);
        if (coef > 1.0f) coef = 1.0f;
        for (size_t i = 0; i < np; i++) c->grads[i] *= coef;
    }
    const CoreOptimConfig *o = &cfg->optim;
    if (!found_inf && o->optimizer == CORE_OPTIM_ADAMW) {
        AdamwCoeffs k = adamw_coeffs(lr, o->weight_decay, o->beta1, o->beta2, o->eps, ++c->adamw_t);
        c->layers->adamw(&c->ws, np, c->params, c->grads, c->mom, c->mom_sq, &k);
    } else if (!found_inf) {
        c->layers->sgd(&c->ws, np, c->params, c->grads, c->mom, lr, o->momentum, o->weight_decay);
    }
    if (fp16) {
        amp_scaler_update(&c->scaler, &cfg->scaler, found_inf);
        c->skipped += found_inf;
    }

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

static int cpu_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r)
{
    TRY(cpu_forward_backward(core, b, false, 1.0f));
    return cpu_update(core, lr, r);
}

static int cpu_eval(Core *core, const CoreBatch *b, CoreEvalResult *r)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    TRY(prepare(core, b->n));
    c->input = b->images;
    c->tokens = b->tokens;
    forward(core, b->n, FWD_INFER);
    int correct = 0, rows = logit_rows(g, b->n);
    double loss = softmax_ce_cpu(rows, g->shapes[g->logits].c, c->act[g->logits], b->labels,
                                 1.0f, NULL, &correct);
    r->loss = (float)(loss / rows);
    r->accuracy = (float)correct / rows;
    r->n = b->n;
    return 0;
}

// core_infer: the eval forward on the plan of `grad`; the loss only with labels.
static int cpu_infer(Core *core, const CoreBatch *b, CoreGradMode grad, float *logits,
                     CoreEvalResult *r)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    TRY(prepare_pass(core, b->n, grad == CORE_GRAD_OFF));
    c->input = b->images;
    c->tokens = b->tokens;
    forward(core, b->n, FWD_INFER);
    int classes = g->shapes[g->logits].c, rows = logit_rows(g, b->n);
    if (logits) memcpy(logits, c->act[g->logits], (size_t)rows * classes * sizeof(float));
    if (!r) return 0;
    *r = (CoreEvalResult){.loss = NAN, .accuracy = NAN, .n = b->n};
    if (b->labels) {
        int correct = 0;
        double loss = softmax_ce_cpu(rows, classes, c->act[g->logits], b->labels, 1.0f, NULL,
                                     &correct);
        r->loss = (float)(loss / rows);
        r->accuracy = (float)correct / rows;
    }
    return 0;
}

static int cpu_loss_grad(Core *core, const CoreBatch *b, float *loss, float *grad)
{
    CpuCore *c = cpu(core);
    const ModelGraph *g = &core->graph;
    TRY(prepare(core, b->n));
    c->input = b->images;
    c->tokens = b->tokens;
    forward(core, b->n, FWD_TRAIN_NO_STATS);
    int rows = logit_rows(g, b->n);
    double l = softmax_ce_cpu(rows, g->shapes[g->logits].c, c->act[g->logits], b->labels,
                              1.0f, c->dact[g->logits], NULL);
    if (loss) *loss = (float)(l / rows);
    if (grad) {
        TRY(backward(core, b->n, false));
        memcpy(grad, c->grads, g->n_params * sizeof(float));
    }
    return 0;
}

static int cpu_sync(Core *core) { (void)core; return 0; }

static int cpu_stats(Core *core, CoreStats *s)
{
    CpuCore *c = cpu(core);
    s->peak_bytes = c->peak;
    s->activation_bytes = c->plan_n ? c->plan.arena_bytes : 0;
    s->fused_ops = c->plan_n ? core_plan_fused_ops(&core->graph, &c->plan) : 0;
    s->checkpointed_segments = c->plan_n ? c->plan.checkpointed_segments : 0;
    s->skipped_steps = c->skipped;
    s->loss_scale = core->cfg.precision == CORE_PRECISION_FP16 ? c->scaler.scale : 1.0f;
    s->growth_tracker = c->scaler.growth_tracker;
    s->layout_in_effect = CORE_LAYOUT_NCHW;  // fp32 NCHW whatever the config asks
    s->activation_type = CORE_DTYPE_FP32;
    s->conv_biases_fused = c->fast ? s->conv_biases : 0;  // inside conv_fwd_fast's GEMMs
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
    if (c->mom_sq) memset(c->mom_sq, 0, core->graph.n_params * sizeof(float));
    c->adamw_t = 0;
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
    if (c->bound) cpu_pool_bind(0);  // the threads go back where the process may run
    free_activations(c);
    cpu_workspace_free(&c->ws);
    free(c->params); free(c->grads); free(c->mom); free(c->mom_sq); free(c->stats); free(c->saved);
    free(c);
    core->impl = NULL;
}

static float *cpu_buffers(Core *core, void **stream)
{
    *stream = NULL;
    return cpu(core)->stats;
}

static const CoreOps cpu_ops = {
    .step = cpu_step, .eval = cpu_eval, .loss_grad = cpu_loss_grad, .sync = cpu_sync,
    .stats = cpu_stats, .params_get = cpu_params_get, .params_set = cpu_params_set,
    .inject = cpu_inject, .destroy = cpu_destroy,
    .forward_backward = cpu_forward_backward, .update = cpu_update, .buffers = cpu_buffers,
    .infer = cpu_infer,
};

int core_cpu_init(Core *core)
{
    CpuCore *c = calloc(1, sizeof *c);
    if (!c) return error_set(ERROR_OUT_OF_MEMORY, "calloc(CpuCore): out of memory");
    core->impl = c;
    core->ops = &cpu_ops;
    c->fast = core->backend == CORE_BACKEND_CPU;
    c->threads_wanted = core->cfg.cpu_threads;
    c->affinity = core->cfg.cpu_affinity;
    c->layers = c->fast ? &fast_layers : &ref_layers;
    if (c->fast) cpu_fast_init();
    const ModelGraph *g = &core->graph;
    if (!(c->params = cpu_alloc(c, g->n_params)) || !(c->grads = cpu_alloc(c, g->n_params)) ||
        !(c->mom = cpu_alloc(c, g->n_params)) || !(c->stats = cpu_alloc(c, g->n_stats)) ||
        !(c->saved = cpu_alloc(c, g->n_saved)))
        return -1;
    if (core->cfg.optim.optimizer == CORE_OPTIM_ADAMW && !(c->mom_sq = cpu_alloc(c, g->n_params)))
        return -1;
    model_init(g, core->cfg.seed, c->params, c->stats);
    amp_scaler_init(&c->scaler, &core->cfg.scaler);
    return 0;  // no plan yet: each kind of pass plans when its first batch arrives
}
