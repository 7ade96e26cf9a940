// test_model_plan.c: the memory plan of kernels/model/model_plan.c, checked by an independent
// simulation of the pass it plans. The checker walks the ops (forward, loss, backward) as
// the backends run them under the plan's flags, keeps every activation and gradient at its
// planned bytes, and marks a value clobbered when another write lands on its bytes; it
// fails when a clobbered value is read again, when an op's write lands on a value the same
// op reads (except the in-place forms the kernels allow: a ReLU or add forward over an
// input, a ReLU or BN backward writing dx over dy without accumulating, with exactly the
// same bytes), or when a value lies outside the arena. With activation checkpointing it also
// runs each checkpointed segment's recompute just before that segment's backward, as the
// backends do, and backward reads the recomputed values. Every preset, fused and separate,
// training and eval, reused and keep-everything, checkpointed or not, fp16 and fp32 sizes. It also prints the
// resnet18 figures of the README (planned bytes against keep-everything and against what
// PyTorch's autograd saves), and checks a core's plan per (batch, image size).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/model.h"
#include "kernels/model_plan.h"

enum { NOT_WRITTEN, INTACT, CLOBBERED };

typedef struct Sim {
    const ModelGraph *g;
    const ModelPlan *p;
    int state[3 * MODEL_MAX_TENSORS];
    char why[256];
} Sim;

static int A(int t) { return t; }
static int D(int t) { return MODEL_MAX_TENSORS + t; }
static int R(int t) { return 2 * MODEL_MAX_TENSORS + t; }  // recomputed (checkpointing)
// The activation value backward reads: the recomputed one where the plan has it.
static int S(const Sim *s, int t) { return t > 0 && s->p->rec_off[t] != MODEL_PLAN_NONE ? R(t) : A(t); }

static size_t off_of(const Sim *s, int v)
{
    int t = v % MODEL_MAX_TENSORS;
    if (v >= 2 * MODEL_MAX_TENSORS) return s->p->rec_off[t];
    return v < MODEL_MAX_TENSORS ? s->p->act_off[t] : s->p->dact_off[t];
}

static size_t size_of(const Sim *s, int v) { return s->p->tensor_bytes[v % MODEL_MAX_TENSORS]; }

static bool overlap(const Sim *s, int a, int b)
{
    return off_of(s, a) < off_of(s, b) + size_of(s, b) && off_of(s, b) < off_of(s, a) + size_of(s, a);
}

static bool same_bytes(const Sim *s, int a, int b)
{
    return off_of(s, a) == off_of(s, b) && size_of(s, a) == size_of(s, b);
}

static bool reject(Sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool reject(Sim *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    return false;
}

static const char *name(int v)
{
    static char buf[4][32];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s[%d]",
             v < MODEL_MAX_TENSORS ? "act" : v < 2 * MODEL_MAX_TENSORS ? "grad" : "rec",
             v % MODEL_MAX_TENSORS);
    return buf[k];
}

static bool placed(Sim *s, int v)
{
    if (off_of(s, v) == MODEL_PLAN_NONE) return reject(s, "%s has no place", name(v));
    if (off_of(s, v) % MODEL_PLAN_ALIGN) return reject(s, "%s is not aligned", name(v));
    if (off_of(s, v) + size_of(s, v) > s->p->arena_bytes) return reject(s, "%s outside the arena", name(v));
    return true;
}

static bool reads(Sim *s, const int *in, int n_in, int op)
{
    for (int k = 0; k < n_in; k++) {
        if (in[k] == A(0)) continue;  // the batch, outside the arena
        if (s->state[in[k]] != INTACT)
            return reject(s, "op %d reads %s, which is %s", op, name(in[k]),
                        s->state[in[k]] == NOT_WRITTEN ? "not written" : "overwritten");
    }
    return true;
}

// A write (or accumulation) of v by an op that reads in[]; `inplace` is the input the
// kernel may overwrite (-1: none).
static bool writes(Sim *s, int v, bool accum, const int *in, int n_in, int inplace, int op)
{
    if (!placed(s, v)) return false;
    if (accum && s->state[v] != INTACT) return reject(s, "op %d accumulates into %s, which is not intact", op, name(v));
    if (!accum && s->state[v] != NOT_WRITTEN) return reject(s, "op %d writes %s twice", op, name(v));
    for (int k = 0; k < n_in; k++) {
        if (in[k] == A(0) || in[k] == v || !overlap(s, v, in[k])) continue;
        if (accum || in[k] != inplace || !same_bytes(s, v, in[k]))
            return reject(s, "op %d writes %s over %s, which it reads", op, name(v), name(in[k]));
    }
    for (int w = 1; w < 3 * MODEL_MAX_TENSORS; w++)
        if (w != v && w % MODEL_MAX_TENSORS != 0 && s->state[w] == INTACT && overlap(s, v, w))
            s->state[w] = CLOBBERED;
    s->state[v] = INTACT;
    return true;
}

static bool view(Sim *s, int v, int from, int op)
{
    if (!placed(s, v)) return false;
    if (!same_bytes(s, v, from)) return reject(s, "op %d: %s is not %s's bytes", op, name(v), name(from));
    if (s->state[from] != INTACT) return reject(s, "op %d passes on %s, which is not intact", op, name(from));
    s->state[v] = INTACT;
    return true;
}

// Forward op i: of the forward pass, or of a checkpointed segment's recompute (its values
// the recomputed ones, its inputs those backward reads).
static bool forward_op(Sim *s, int i, bool recompute)
{
    const ModelGraph *g = s->g;
    const ModelOp *op = &g->ops[i];
    const ModelPlanOp *po = &s->p->ops[i];
    if (po->fused_away) {
        if (i == 0 || !s->p->ops[i - 1].relu_fused || op->kind != OP_RELU)
            return reject(s, "op %d fused away without a fused op before it", i);
        return true;
    }
    int x = recompute ? S(s, op->in) : A(op->in), out = recompute ? R(op->out) : A(op->out);
    int in[2] = {op->in > 0 ? x : A(0), op->in2 > 0 ? (recompute ? S(s, op->in2) : A(op->in2)) : A(0)};
    if (recompute && s->p->rec_off[op->out] == MODEL_PLAN_NONE)
        return reject(s, "op %d is recomputed into no place", i);
    if (!reads(s, in, 2, i)) return false;
    bool elementwise = op->kind == OP_RELU || op->kind == OP_ADD;
    int inplace = -1;
    if (elementwise) inplace = op->in > 0 && same_bytes(s, out, in[0]) ? in[0] : in[1];
    if (!writes(s, out, false, in, 2, inplace, i)) return false;
    if (op->kind == OP_ATTN &&  // what its backward reads: probabilities or log-sum-exp
        !writes(s, recompute ? R(op->aux) : A(op->aux), false, in, 2, -1, i))
        return false;
    if (po->relu_fused) {
        if (i + 1 >= g->n_ops || g->ops[i + 1].kind != OP_RELU || g->ops[i + 1].in != op->out ||
            !s->p->ops[i + 1].fused_away)
            return reject(s, "op %d fuses a ReLU that is not there", i);
        int next = g->ops[i + 1].out;
        if (!view(s, recompute ? R(next) : A(next), out, i)) return false;
    }
    return true;
}

static bool forward(Sim *s)
{
    const ModelGraph *g = s->g;
    for (int i = 0; i < g->n_ops; i++)
        if (!forward_op(s, i, false)) return false;
    int logits = A(g->logits);
    return reads(s, &logits, 1, g->n_ops);
}

static bool backward(Sim *s)
{
    const ModelGraph *g = s->g;
    int logits[1] = {A(g->logits)};
    if (!writes(s, D(g->logits), false, logits, 1, -1, g->n_ops)) return false;
    for (int i = g->n_ops - 1; i >= 0; i--) {
        const ModelOp *op = &g->ops[i];
        const ModelPlanOp *po = &s->p->ops[i];
        if (po->recompute_before)  // the segment's recompute, as the backends run it
            for (int j = po->segment_first; j <= i; j++)
                if (s->p->ops[j].recompute && !forward_op(s, j, true)) return false;
        bool dx = op->in_grad && op->in > 0;
        int in[4] = {D(op->out), A(0), A(0), A(0)};
        int n_in = 1, inplace = -1;
        switch (op->kind) {
        case OP_CONV:
        case OP_LINEAR:
            in[1] = S(s, op->in); n_in = 2;
            break;
        case OP_BN:
            in[1] = S(s, op->in); n_in = 2;
            if (po->relu_fused) in[n_in++] = S(s, g->ops[i + 1].out);
            inplace = D(op->out);
            break;
        case OP_RELU:
            if (po->bwd_fused) {
                if (i == 0 || g->ops[i - 1].kind != OP_BN || !s->p->ops[i - 1].relu_fused || op->in_accum)
                    return reject(s, "op %d: ReLU backward fused into no BN", i);
                if (!view(s, D(op->in), D(op->out), i)) return false;
                continue;
            }
            in[1] = S(s, op->out); n_in = 2;
            inplace = D(op->out);
            break;
        case OP_ADD:
            if (!reads(s, in, 1, i)) return false;
            for (int k = 0; k < 2; k++) {
                int t = k == 0 ? op->in : op->in2;
                bool alias = k == 0 ? po->in_alias : po->in2_alias;
                bool accum = k == 0 ? op->in_accum : op->in2_accum;
                if (t <= 0 || (k == 0 && !dx)) continue;
                if (alias && accum) return reject(s, "op %d aliases an accumulating gradient", i);
                if (alias ? !view(s, D(t), D(op->out), i)
                          : !writes(s, D(t), accum, in, 1, -1, i))
                    return false;
            }
            continue;
        case OP_GAP: break;
        case OP_EMBED: break;  // reads the batch's tokens and dy
        case OP_LAYERNORM:
        case OP_GELU:
            in[1] = S(s, op->in); n_in = 2;
            inplace = D(op->out);
            break;
        case OP_ATTN:
            in[1] = S(s, op->in); in[2] = S(s, op->aux); n_in = 3;
            if (op->fused) in[n_in++] = S(s, op->out);
            break;
        }
        if (!reads(s, in, n_in, i)) return false;
        if (dx && !writes(s, D(op->in), op->in_accum, in, n_in, op->in_accum ? -1 : inplace, i))
            return false;
    }
    return true;
}

// True when the plan is safe for its pass; else false with the reason in why.
static bool plan_valid(const ModelGraph *g, const ModelPlan *p, char *why, size_t size)
{
    Sim *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->g = g;
    s->p = p;
    bool ok = forward(s) && (!p->options.training || backward(s));
    // (keep-everything with checkpointing also keeps the recomputed values: more bytes)
    if (ok && p->arena_bytes > p->keep_all_bytes && (p->options.reuse || !p->checkpointed_segments))
        ok = reject(s, "arena larger than keeping everything");
    if (ok && p->live_peak_bytes > p->arena_bytes) ok = reject(s, "arena below the live peak");
    snprintf(why, size, "%s", s->why);
    free(s);
    return ok;
}

// A preset's graph; "NAME:fused": a gpt preset with the fused attention.
static void build(const char *preset, ModelGraph *g)
{
    CoreConfig cfg;
    char name[64];
    snprintf(name, sizeof name, "%s", preset);
    char *form = strchr(name, ':');
    if (form) *form++ = '\0';
    assert_int_equal(core_config_preset(&cfg, name), 0);
    if (form) cfg.model.attention = CORE_ATTENTION_FUSED;
    assert_int_equal(model_build(&cfg.model, g), 0);
}

static const char *presets[] = {"tiny", "mlp", "small", "medium", "resnet18", "gpt-tiny", "gpt-tiny:fused",
                                "gpt-mini"};

static void test_every_plan_is_safe(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    for (size_t k = 0; k < sizeof presets / sizeof presets[0]; k++) {
        build(presets[k], g);
        for (int mode = 0; mode < 24; mode++) {  // checkpointing: none, 2 segments, every unit
            static const int segments[3] = {0, 2, CORE_CHECKPOINT_EACH_UNIT};
            ModelPlanOptions o = {.training = mode & 1, .reuse = mode & 2, .fuse = mode & 4,
                                  .checkpoint_segments = segments[mode / 8]};
            for (int n = 1; n <= 64; n *= 4)
                for (size_t es = 2; es <= 4; es += 2) {
                    char why[256];
                    if (model_plan_make(g, n, es, &o, p) != 0) fail_msg("%s", error_message());
                    if (!plan_valid(g, p, why, sizeof why))
                        fail_msg("%s n=%d elem=%zu training=%d reuse=%d fuse=%d segments=%d: %s",
                                 presets[k], n, es, o.training, o.reuse, o.fuse, o.checkpoint_segments, why);
                    if (!o.reuse)
                        assert_true(p->arena_bytes == p->keep_all_bytes || o.fuse || !o.training ||
                                    p->checkpointed_segments > 0);
                    if (o.training && o.checkpoint_segments > 1 && k != 1) {  // ResNets, GPTs:
                        assert_true(p->checkpointed_segments > 0);  // something to checkpoint
                        int recomputed = 0;                         // and to recompute
                        for (int i = 0; i < g->n_ops; i++) recomputed += p->ops[i].recompute;
                        assert_true(recomputed > 0);
                    }
                }
        }
    }
    free(p);
    free(g);
}

// The checker itself can fail: plans broken on purpose are caught.
static void test_checker_catches_broken_plans(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    build("tiny", g);
    ModelPlanOptions o = {.training = true, .reuse = true, .fuse = false};
    char why[256];
    assert_int_equal(model_plan_make(g, 4, 4, &o, p), 0);
    assert_true(plan_valid(g, p, why, sizeof why));
    // The loss's gradient on the stem conv's output, which the stem BN reads in backward.
    ModelPlan broken = *p;
    broken.dact_off[g->logits] = broken.act_off[g->ops[0].out];
    assert_false(plan_valid(g, &broken, why, sizeof why));
    print_message("caught: %s\n", why);
    // A BN's input gradient over its input, which its backward reads.
    broken = *p;
    int bn = g->ops[1].kind == OP_BN ? 1 : -1;
    assert_int_equal(bn, 1);
    broken.dact_off[g->ops[bn].in] = broken.act_off[g->ops[bn].in];
    assert_false(plan_valid(g, &broken, why, sizeof why));
    print_message("caught: %s\n", why);
    // Every gradient on one buffer.
    broken = *p;
    for (int t = 1; t < g->n_tensors; t++) broken.dact_off[t] = 0;
    assert_false(plan_valid(g, &broken, why, sizeof why));
    print_message("caught: %s\n", why);
    // Checkpointing: the first block's recomputed conv output over the stem's output, the
    // kept boundary that conv reads.
    o.checkpoint_segments = CORE_CHECKPOINT_EACH_UNIT;
    assert_int_equal(model_plan_make(g, 4, 4, &o, p), 0);
    assert_true(plan_valid(g, p, why, sizeof why));
    int first[8];
    assert_true(model_plan_units(g, first, 8) >= 3);
    int kept = g->ops[first[1] - 1].out, conv = first[1];
    assert_true(p->ops[conv].recompute);
    broken = *p;
    broken.rec_off[g->ops[conv].out] = broken.act_off[kept];
    assert_false(plan_valid(g, &broken, why, sizeof why));
    print_message("caught: %s\n", why);
    // ... and a recompute that is never run: backward reads values nobody wrote.
    broken = *p;
    for (int i = 0; i < g->n_ops; i++) broken.ops[i].recompute_before = false;
    assert_false(plan_valid(g, &broken, why, sizeof why));
    print_message("caught: %s\n", why);
    free(p);
    free(g);
}

// Reuse and aliasing do what they claim on the ResNets: in-place ReLUs, aliased add
// gradients, and well under the keep-everything bytes.
static void test_resnet_plans_reuse(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    build("small", g);
    ModelPlanOptions o = {.training = true, .reuse = true, .fuse = false};
    assert_int_equal(model_plan_make(g, 8, 4, &o, p), 0);
    int relus = 0, inplace = 0, adds = 0, aliased = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_RELU) {
            relus++;
            inplace += p->act_off[op->out] == p->act_off[op->in];
        }
        if (op->kind == OP_ADD) {
            adds++;
            aliased += p->ops[i].in_alias;
            assert_false(p->ops[i].in2_alias && op->in2_accum);
        }
    }
    assert_int_equal(inplace, relus);  // nothing reads a ReLU's input after it
    assert_int_equal(aliased, adds);   // the residual branch's gradient is never a copy
    assert_true(p->arena_bytes < p->keep_all_bytes / 2);
    free(p);
    free(g);
}

// Fusion: each BN or add followed by a ReLU of its own output takes it; the fused pass
// needs no more bytes than the separate one.
static void test_fusion_flags(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p), *q = malloc(sizeof *q);
    assert_non_null(g);
    assert_non_null(p);
    assert_non_null(q);
    build("small", g);
    ModelPlanOptions sep = {.training = true, .reuse = true, .fuse = false};
    ModelPlanOptions fused = {.training = true, .reuse = true, .fuse = true};
    assert_int_equal(model_plan_make(g, 8, 4, &sep, p), 0);
    assert_int_equal(model_plan_make(g, 8, 4, &fused, q), 0);
    int relus = 0, fused_away = 0;
    for (int i = 0; i < g->n_ops; i++) {
        assert_false(p->ops[i].relu_fused || p->ops[i].fused_away || p->ops[i].bwd_fused);
        if (g->ops[i].kind == OP_RELU) relus++;
        fused_away += q->ops[i].fused_away;
        if (q->ops[i].bwd_fused) assert_int_equal(g->ops[i - 1].kind, OP_BN);
    }
    assert_int_equal(fused_away, relus);  // every ReLU of the ResNet follows a BN or an add
    assert_true(q->arena_bytes <= p->arena_bytes);
    free(q);
    free(p);
    free(g);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    build("tiny", g);
    ModelPlanOptions o = {.training = true, .reuse = true};
    assert_int_equal(model_plan_make(g, 0, 4, &o, p), -1);
    assert_int_equal(model_plan_make(g, 4, 0, &o, p), -1);
    assert_int_equal(model_plan_make(g, 1 << 30, (size_t)1 << 40, &o, p), -1);
    free(p);
    free(g);
}

// What PyTorch's autograd holds when backward starts, for the same graph (torchvision's
// ResNet with ReLU(inplace=True)): the tensors saved for backward (a conv's or linear's
// input, a BN's input, a ReLU's output, which is its input's storage) and the logits and
// their gradient, each counted once. Backward then frees saved tensors as it goes while
// holding one or two gradients at a time, so this is close to its activation peak.
static size_t autograd_saved_bytes(const ModelGraph *g, int n, size_t elem)
{
    bool saved[MODEL_MAX_TENSORS] = {false};
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_CONV || op->kind == OP_LINEAR || op->kind == OP_BN) saved[op->in] = true;
        if (op->kind == OP_RELU) saved[op->out] = true;
    }
    size_t bytes = 2 * model_tensor_size(g, g->logits);
    for (int t = 1; t < g->n_tensors; t++)
        if (saved[t] && t != g->logits) bytes += model_tensor_size(g, t);
    return bytes * (size_t)n * elem;
}

// The README's figures: resnet18 at batch 128 and 256, fp16 and fp32 activations.
static void test_resnet18_figures(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    build("resnet18", g);
    print_message("resnet18 activations + gradients, MiB: keep-everything / planned (separate) / "
                  "planned (fused) / live floor / eval / PyTorch autograd's saved set\n");
    for (int n = 128; n <= 256; n *= 2)
        for (size_t es = 2; es <= 4; es += 2) {
            ModelPlanOptions o = {.training = true, .reuse = true, .fuse = false};
            assert_int_equal(model_plan_make(g, n, es, &o, p), 0);
            double keep = p->keep_all_bytes / 1048576.0, planned = p->arena_bytes / 1048576.0;
            double floor = p->live_peak_bytes / 1048576.0;
            o.fuse = true;
            assert_int_equal(model_plan_make(g, n, es, &o, p), 0);
            double fused = p->arena_bytes / 1048576.0;
            o.training = false;
            assert_int_equal(model_plan_make(g, n, es, &o, p), 0);
            double eval = p->arena_bytes / 1048576.0;
            double torch = autograd_saved_bytes(g, n, es) / 1048576.0;
            print_message("  batch %3d %s: %8.1f / %8.1f / %8.1f / %8.1f / %7.1f / %8.1f  (planned = "
                          "%.2fx keep-everything, %.3fx the floor, %.3fx autograd's saved set)\n", n,
                          es == 2 ? "fp16" : "fp32", keep, planned, fused, floor, eval, torch,
                          planned / keep, planned / floor, planned / torch);
            assert_true(planned < 0.6 * keep);
            assert_true(planned <= 1.1 * torch);  // the target, for activations
        }
    free(p);
    free(g);
}

// Through a core: a plan per (batch, image size), the arena only grows; activation_bytes
// follows the current shape, peak_bytes the largest arena.
static void step_at(Core *core, int n, int size, CoreStats *st)
{
    assert_int_equal(core_set_image_size(core, size), 0);
    size_t count = (size_t)n * 3 * size * size;
    float *images = calloc(count, sizeof(float));
    int32_t *labels = calloc((size_t)n, sizeof(int32_t));
    assert_non_null(images);
    assert_non_null(labels);
    CoreBatch b = {.images = images, .labels = labels, .n = n, .memory = CORE_MEMORY_HOST};
    assert_int_equal(core_step(core, &b, NULL), 0);
    assert_int_equal(core_stats(core, st), 0);
    free(images);
    free(labels);
}

static void test_core_plans_per_shape(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.batch_size = 4;
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), 0);
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    ModelPlanOptions o = {.training = true, .reuse = true, .fuse = false};
    CoreStats small, large, again;
    step_at(core, 4, 16, &small);
    build("tiny", g);
    assert_int_equal(model_plan_make(g, 4, sizeof(float), &o, p), 0);
    assert_int_equal(small.activation_bytes, p->arena_bytes);
    step_at(core, 8, 24, &large);
    assert_true(large.activation_bytes > small.activation_bytes);
    assert_true(large.peak_bytes > small.peak_bytes);
    step_at(core, 4, 16, &again);
    assert_int_equal(again.activation_bytes, small.activation_bytes);
    assert_int_equal(again.peak_bytes, large.peak_bytes);  // kept, not reallocated
    core_free(core);
    free(p);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_plan_is_safe),
        cmocka_unit_test(test_checker_catches_broken_plans),
        cmocka_unit_test(test_resnet_plans_reuse),
        cmocka_unit_test(test_fusion_flags),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_resnet18_figures),
        cmocka_unit_test(test_core_plans_per_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
