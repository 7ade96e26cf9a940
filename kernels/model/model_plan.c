// model_plan.c: the liveness plan of model_plan.h. Three passes over the timeline's events
// (which value each op reads, writes, accumulates into or passes on): lifetimes of the
// values, their assignment to buffers (in place, aliased, or new), then offsets for the
// buffers. Values are activations A(t) = t, gradients D(t) = MODEL_MAX_TENSORS + t and, with
// checkpointing, recomputed activations R(t) = 2 * MODEL_MAX_TENSORS + t: a tensor of a
// checkpointed segment is two values, its forward one (dead once the forward has read it)
// and the one recomputed just before the segment's backward (what backward reads).
#include "kernels/model_plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"

#define N_VALUES (3 * MODEL_MAX_TENSORS)
#define MAX_EVENTS (24 * MODEL_MAX_OPS + 8)

static int act_value(int t) { return t; }
static int grad_value(int t) { return MODEL_MAX_TENSORS + t; }
static int rec_value(int t) { return 2 * MODEL_MAX_TENSORS + t; }

typedef enum {
    EV_READ,   // value read
    EV_WRITE,  // a new value written; `from`: the input it may overwrite in place (or -1)
    EV_ACCUM,  // added into an existing value (its old content is read, then replaced)
    EV_VIEW,   // a new value that is `from`'s bytes, always (a fused ReLU)
    EV_ALIAS,  // a new value that is `from`'s bytes when that is safe, else a copy of it
} EventKind;

typedef struct Event {
    EventKind kind;
    int time, value, from;
    int op, slot;  // EV_ALIAS: the add op and which input (1: in, 2: in2)
} Event;

typedef struct Timeline {
    Event ev[MAX_EVENTS];
    int count, end;  // events; last time
    bool rec[MODEL_MAX_TENSORS]; // checkpointing: backward reads R(t), not A(t)
} Timeline;

static void push(Timeline *tl, EventKind kind, int time, int value, int from, int op, int slot)
{
    if (tl->count < MAX_EVENTS)
        tl->ev[tl->count++] = (Event){kind, time, value, from, op, slot};
}

bool model_plan_fusable(const ModelGraph *g, int i)
{
    if (i < 0 || i + 1 >= g->n_ops) return false;
    const ModelOp *op = &g->ops[i], *next = &g->ops[i + 1];
    if ((op->kind != OP_BN && op->kind != OP_ADD) || next->kind != OP_RELU || next->in != op->out ||
        op->out == g->logits)
        return false;
    for (int j = 0; j < g->n_ops; j++)
        if (j != i + 1 && (g->ops[j].in == op->out || g->ops[j].in2 == op->out)) return false;
    return true;
}

// The input gradient write of a backward op: a plain write (maybe in place over dy) or an
// accumulation.
static void grad_write(Timeline *tl, int time, int in, bool accum, int inplace)
{
    if (accum) push(tl, EV_ACCUM, time, grad_value(in), -1, -1, 0);
    else push(tl, EV_WRITE, time, grad_value(in), inplace, -1, 0);
}

// The activation value of tensor t that backward (and a recompute) reads.
static int saved_value(const Timeline *tl, int t) { return tl->rec[t] ? rec_value(t) : act_value(t); }

// The events of op i's forward at `time`; a recompute reads and writes the recomputed values.
static void op_forward_events(const ModelGraph *g, const ModelPlan *p, Timeline *tl, int i,
                              int time, bool recompute)
{
    const ModelOp *op = &g->ops[i];
    const ModelPlanOp *po = &p->ops[i];
    int in = op->in > 0 ? (recompute ? saved_value(tl, op->in) : act_value(op->in)) : -1;
    if (in >= 0) push(tl, EV_READ, time, in, -1, -1, 0);
    if (op->in2 > 0)
        push(tl, EV_READ, time, recompute ? saved_value(tl, op->in2) : act_value(op->in2), -1, -1, 0);
    int inplace = (op->kind == OP_RELU || op->kind == OP_ADD) ? in : -1;
    int out = recompute ? rec_value(op->out) : act_value(op->out);
    push(tl, EV_WRITE, time, out, inplace, -1, 0);
    if (op->kind == OP_ATTN)  // what its backward reads besides in and out
        push(tl, EV_WRITE, time, recompute ? rec_value(op->aux) : act_value(op->aux), -1, -1, 0);
    if (po->relu_fused) {
        int next = g->ops[i + 1].out;
        push(tl, EV_VIEW, time, recompute ? rec_value(next) : act_value(next), out, -1, 0);
    }
}

static void forward_events(const ModelGraph *g, const ModelPlan *p, Timeline *tl)
{
    for (int i = 0; i < g->n_ops; i++)  // a fused-away op: the op before wrote its output
        if (!p->ops[i].fused_away) op_forward_events(g, p, tl, i, i, false);
}

static void backward_events(const ModelGraph *g, const ModelPlan *p, Timeline *tl)
{
    int time = g->n_ops;  // the loss's; each recomputed op and each backward op takes the next
    for (int i = g->n_ops - 1; i >= 0; i--) {
        const ModelOp *op = &g->ops[i];
        const ModelPlanOp *po = &p->ops[i];
        if (po->recompute_before)
            for (int j = po->segment_first; j <= i; j++)
                if (p->ops[j].recompute) op_forward_events(g, p, tl, j, ++time, true);
        int dy = grad_value(op->out);
        time++;
        bool dx = op->in_grad && op->in > 0;
        switch (op->kind) {
        case OP_CONV:
        case OP_LINEAR:
            if (op->in > 0) push(tl, EV_READ, time, saved_value(tl, op->in), -1, -1, 0);
            push(tl, EV_READ, time, dy, -1, -1, 0);
            if (dx) grad_write(tl, time, op->in, op->in_accum, -1);
            break;
        case OP_BN:
            if (op->in > 0) push(tl, EV_READ, time, saved_value(tl, op->in), -1, -1, 0);
            if (po->relu_fused) push(tl, EV_READ, time, saved_value(tl, g->ops[i + 1].out), -1, -1, 0);
            push(tl, EV_READ, time, dy, -1, -1, 0);
            if (dx) grad_write(tl, time, op->in, op->in_accum, dy);
            break;
        case OP_RELU:
            if (po->bwd_fused) {  // the BN before it applies the mask: same gradient
                push(tl, EV_VIEW, time, grad_value(op->in), dy, -1, 0);
                break;
            }
            push(tl, EV_READ, time, saved_value(tl, op->out), -1, -1, 0);
            push(tl, EV_READ, time, dy, -1, -1, 0);
            if (dx) grad_write(tl, time, op->in, op->in_accum, dy);
            break;
        case OP_ADD:
            push(tl, EV_READ, time, dy, -1, -1, 0);
            if (dx) {
                if (op->in_accum) push(tl, EV_ACCUM, time, grad_value(op->in), -1, -1, 0);
                else push(tl, EV_ALIAS, time, grad_value(op->in), dy, i, 1);
            }
            if (op->in2 > 0) {
                if (op->in2_accum) push(tl, EV_ACCUM, time, grad_value(op->in2), -1, -1, 0);
                else push(tl, EV_ALIAS, time, grad_value(op->in2), dy, i, 2);
            }
            break;
        case OP_GAP:
            push(tl, EV_READ, time, dy, -1, -1, 0);
            if (dx) grad_write(tl, time, op->in, op->in_accum, -1);
            break;
        case OP_EMBED:  // the tokens are not in the arena; no input gradient
            push(tl, EV_READ, time, dy, -1, -1, 0);
            break;
        case OP_LAYERNORM:  // row by row: dx may overwrite dy
        case OP_GELU:
            push(tl, EV_READ, time, saved_value(tl, op->in), -1, -1, 0);
            push(tl, EV_READ, time, dy, -1, -1, 0);
            if (dx) grad_write(tl, time, op->in, op->in_accum, dy);
            break;
        case OP_ATTN:  // fused: its output too (D = rowsum(dy * y))
            push(tl, EV_READ, time, saved_value(tl, op->in), -1, -1, 0);
            push(tl, EV_READ, time, saved_value(tl, op->aux), -1, -1, 0);
            if (op->fused) push(tl, EV_READ, time, saved_value(tl, op->out), -1, -1, 0);
            push(tl, EV_READ, time, dy, -1, -1, 0);
            if (dx) grad_write(tl, time, op->in, op->in_accum, -1);
            break;
        }
    }
}

// ---- checkpointing: units, segments and what each segment recomputes ------------------

// The op that writes each tensor (-1: none, the input).
static void producers(const ModelGraph *g, int *prod)
{
    for (int t = 0; t < MODEL_MAX_TENSORS; t++) prod[t] = -1;
    for (int i = 0; i < g->n_ops; i++) {
        prod[g->ops[i].out] = i;
        if (g->ops[i].kind == OP_ATTN) prod[g->ops[i].aux] = i;
    }
}

// Whether a cut before op k is safe: every op from k on reads, of the values made before
// k, only ops[k - 1]'s output (a sequential model's boundary: nothing else crosses it).
static bool safe_cut(const ModelGraph *g, const int *prod, int k)
{
    for (int j = k; j < g->n_ops; j++) {
        int ins[2] = {g->ops[j].in, g->ops[j].in2};
        for (int q = 0; q < 2; q++)
            if (ins[q] > 0 && prod[ins[q]] < k && ins[q] != g->ops[k - 1].out) return false;
    }
    return true;
}

// Whether op i closes a module: a ReLU (a CNN's stem, layer or residual block), the
// embedding, or a residual add after a GELU since the unit began at `start` (a transformer
// block's second add, closing its MLP; its first add, after attention, does not).
static bool closes_module(const ModelGraph *g, int start, int i)
{
    ModelOpKind kind = g->ops[i].kind;
    if (kind == OP_RELU || kind == OP_EMBED) return true;
    if (kind != OP_ADD) return false;
    for (int j = start; j < i; j++)
        if (g->ops[j].kind == OP_GELU) return true;
    return false;
}

int model_plan_units(const ModelGraph *g, int *first, int max)
{
    int prod[MODEL_MAX_TENSORS], count = 0, start = 0;
    producers(g, prod);
    for (int k = 0; k < g->n_ops; k++) {
        bool cut = k == 0 || (closes_module(g, start, k - 1) && safe_cut(g, prod, k));
        if (cut) {
            if (count < max) first[count] = k;
            count++;
            start = k;
        }
    }
    return count;
}

// Marks what checkpointed segment [a, b) recomputes: walking back from its last op, a value
// made inside the segment (other than the segment's output, which is kept) is recomputed
// when its backward or an op recomputed after it reads it; rec[t]: backward reads R(t).
static void plan_segment(const ModelGraph *g, ModelPlan *p, const int *prod, int a, int b, bool *rec)
{
    int kept = g->ops[b - 1].out;
    bool need[MODEL_MAX_TENSORS] = {false};
#define INTERIOR(t) ((t) > 0 && prod[(t)] >= a && prod[(t)] < b && (t) != kept)
#define NEED(t) do { if (INTERIOR(t)) need[(t)] = true; } while (0)
    for (int j = b - 1; j >= a; j--) {
        const ModelOp *op = &g->ops[j];
        ModelPlanOp *po = &p->ops[j];
        // what its backward reads (the embedding: the batch's tokens, not in the arena)
        if (op->kind == OP_CONV || op->kind == OP_LINEAR || op->kind == OP_BN ||
            op->kind == OP_LAYERNORM || op->kind == OP_GELU || op->kind == OP_ATTN)
            NEED(op->in);
        if (op->kind == OP_BN && po->relu_fused) NEED(g->ops[j + 1].out);
        if (op->kind == OP_RELU && !po->bwd_fused) NEED(op->out);
        if (op->kind == OP_ATTN) {  // probabilities or log-sum-exp; fused: its output too
            NEED(op->aux);
            if (op->fused) NEED(op->out);
        }
        if (po->fused_away) continue;  // the op before computes it
        int view = po->relu_fused ? g->ops[j + 1].out : -1;
        int aux = op->kind == OP_ATTN ? op->aux : -1;  // written with the output
        bool needed = (INTERIOR(op->out) && need[op->out]) || (view > 0 && INTERIOR(view) && need[view]) ||
                      (aux > 0 && INTERIOR(aux) && need[aux]);
        if (!needed || op->out == kept || view == kept) continue;
        po->recompute = true;
        rec[op->out] = true;
        if (view > 0) rec[view] = true;
        if (aux > 0) rec[aux] = true;  // a recompute writes both (op_forward_events)
        NEED(op->in);
        if (op->in2 > 0) NEED(op->in2);
    }
#undef NEED
#undef INTERIOR
    p->ops[b - 1].recompute_before = true;
    p->ops[b - 1].segment_first = a;
    p->checkpointed_segments++;
}

// checkpoint_sequential(units, k): k - 1 segments of units / k units each are checkpointed,
// the rest runs plainly.
static void plan_checkpoint(const ModelGraph *g, ModelPlan *p, bool *rec)
{
    int first[MODEL_MAX_OPS + 1], prod[MODEL_MAX_TENSORS];
    int units = model_plan_units(g, first, MODEL_MAX_OPS);
    int k = p->options.checkpoint_segments < units ? p->options.checkpoint_segments : units;
    if (!p->options.training || k <= 1) return;
    producers(g, prod);
    int size = units / k;
    for (int s = 0; s < k - 1; s++)
        plan_segment(g, p, prod, first[s * size], first[(s + 1) * size], rec);
}

static void timeline_make(const ModelGraph *g, const ModelPlan *p, Timeline *tl)
{
    tl->count = 0;
    forward_events(g, p, tl);
    int f = g->n_ops;
    push(tl, EV_READ, f, act_value(g->logits), -1, -1, 0);
    if (p->options.training) {
        push(tl, EV_WRITE, f, grad_value(g->logits), -1, -1, 0);
        backward_events(g, p, tl);
        tl->end = tl->ev[tl->count - 1].time;
    } else {
        tl->end = f;
    }
}

// The planner's working state.
typedef struct Planner {
    const Timeline *tl;
    int birth[N_VALUES], death[N_VALUES];  // -1: the value does not occur
    int buf[N_VALUES];                     // buffer of each value, -1: none
    int n_bufs;
    size_t buf_size[N_VALUES];             // aligned bytes
    int buf_birth[N_VALUES], buf_death[N_VALUES];
    size_t buf_off[N_VALUES];
} Planner;

static size_t align_up(size_t x) { return (x + MODEL_PLAN_ALIGN - 1) / MODEL_PLAN_ALIGN * MODEL_PLAN_ALIGN; }

static size_t value_bytes(const ModelPlan *p, int v) { return p->tensor_bytes[v % MODEL_MAX_TENSORS]; }

static void lifetimes(Planner *pl)
{
    for (int v = 0; v < N_VALUES; v++) pl->birth[v] = pl->death[v] = -1;
    for (int e = 0; e < pl->tl->count; e++) {
        const Event *ev = &pl->tl->ev[e];
        if (pl->birth[ev->value] < 0) pl->birth[ev->value] = ev->time;
        if (ev->time > pl->death[ev->value]) pl->death[ev->value] = ev->time;
    }
}

// Whether value v may take the bytes of `from` (in buffer b) at `time`: in place (v written
// over `from`, its last read being this op's), or as an alias (v is from's content).
static bool can_share(const Planner *pl, const ModelPlan *p, int b, int v, int from, int time,
                      bool inplace)
{
    const Timeline *tl = pl->tl;
    if (value_bytes(p, v) != value_bytes(p, from)) return false;
    for (int w = 0; w < N_VALUES; w++) {
        if (pl->buf[w] != b || w == v) continue;
        if (inplace) {
            if (w == from ? pl->death[w] > time : pl->death[w] >= time) return false;
            continue;
        }
        // An alias: no write to v while another value of b still has readers, and no
        // write to another value of b while v still has readers.
        for (int e = 0; e < tl->count; e++) {
            const Event *ev = &tl->ev[e];
            if (ev->kind != EV_ACCUM && ev->kind != EV_WRITE) continue;
            if (ev->value == v && ev->time > time && pl->death[w] >= ev->time) return false;
            if (ev->value == w && ev->time > time && pl->death[v] >= ev->time) return false;
        }
    }
    return true;
}

static void new_buffer(Planner *pl, int v) { pl->buf[v] = pl->n_bufs++; }

static int assign_buffers(Planner *pl, ModelPlan *p)
{
    bool reuse = p->options.reuse;
    for (int v = 0; v < N_VALUES; v++) pl->buf[v] = -1;
    pl->n_bufs = 0;
    for (int e = 0; e < pl->tl->count; e++) {
        const Event *ev = &pl->tl->ev[e];
        int v = ev->value, from = ev->from;
        if (ev->kind == EV_READ || ev->kind == EV_ACCUM) {
            if (pl->buf[v] < 0)
                return error_set(ERROR_BAD_USAGE, "model_plan: value %d used before it is written", v);
            continue;
        }
        if (pl->buf[v] >= 0) return error_set(ERROR_BAD_USAGE, "model_plan: value %d written twice", v);
        int b = from >= 0 ? pl->buf[from] : -1;
        switch (ev->kind) {
        case EV_WRITE:
            if (reuse && b >= 0 && can_share(pl, p, b, v, from, ev->time, true)) pl->buf[v] = b;
            else new_buffer(pl, v);
            break;
        case EV_VIEW:
            if (b < 0 || !can_share(pl, p, b, v, from, ev->time, false))
                return error_set(ERROR_BAD_USAGE, "model_plan: fused value %d cannot share %d", v, from);
            pl->buf[v] = b;
            break;
        case EV_ALIAS:
            if (reuse && b >= 0 && can_share(pl, p, b, v, from, ev->time, false)) {
                pl->buf[v] = b;
                if (ev->slot == 1) p->ops[ev->op].in_alias = true;
                else p->ops[ev->op].in2_alias = true;
            } else {
                new_buffer(pl, v);
            }
            break;
        default: break;
        }
    }
    for (int b = 0; b < pl->n_bufs; b++) {
        pl->buf_size[b] = 0;
        pl->buf_birth[b] = reuse ? pl->tl->end + 1 : 0;
        pl->buf_death[b] = reuse ? -1 : pl->tl->end;
    }
    for (int v = 0; v < N_VALUES; v++) {
        int b = pl->buf[v];
        if (b < 0) continue;
        size_t bytes = align_up(value_bytes(p, v));
        if (bytes > pl->buf_size[b]) pl->buf_size[b] = bytes;
        if (pl->birth[v] < pl->buf_birth[b]) pl->buf_birth[b] = pl->birth[v];
        if (pl->death[v] > pl->buf_death[b]) pl->buf_death[b] = pl->death[v];
    }
    return 0;
}

static bool lives_overlap(const Planner *pl, int a, int b)
{
    return pl->buf_birth[a] <= pl->buf_death[b] && pl->buf_birth[b] <= pl->buf_death[a];
}

// Whether buffer a goes before buffer b: larger first, then earlier born, then by number.
static bool placed_before(const Planner *pl, int a, int b)
{
    if (pl->buf_size[a] != pl->buf_size[b]) return pl->buf_size[a] > pl->buf_size[b];
    if (pl->buf_birth[a] != pl->buf_birth[b]) return pl->buf_birth[a] < pl->buf_birth[b];
    return a < b;
}

// Offsets: largest buffer first, each at the lowest offset clear of every placed buffer
// whose lifetime overlaps its own.
static size_t place_buffers(Planner *pl)
{
    int order[N_VALUES], placed[N_VALUES], n_placed = 0;
    for (int b = 0; b < pl->n_bufs; b++) {  // insertion sort: a few hundred buffers
        int k = b;
        for (; k > 0 && placed_before(pl, b, order[k - 1]); k--) order[k] = order[k - 1];
        order[k] = b;
    }
    size_t arena = 0;
    for (int k = 0; k < pl->n_bufs; k++) {
        int b = order[k];
        size_t off = 0;
        bool moved = true;
        while (moved) {  // bump past every conflict until none is left (at most n passes)
            moved = false;
            for (int j = 0; j < n_placed; j++) {
                int o = placed[j];
                if (!lives_overlap(pl, b, o)) continue;
                if (off < pl->buf_off[o] + pl->buf_size[o] && pl->buf_off[o] < off + pl->buf_size[b]) {
                    off = pl->buf_off[o] + pl->buf_size[o];
                    moved = true;
                }
            }
        }
        pl->buf_off[b] = off;
        placed[n_placed++] = b;
        if (off + pl->buf_size[b] > arena) arena = off + pl->buf_size[b];
    }
    return arena;
}

static size_t live_peak(const Planner *pl)
{
    size_t peak = 0;
    for (int t = 0; t <= pl->tl->end; t++) {
        size_t live = 0;
        for (int b = 0; b < pl->n_bufs; b++)
            if (pl->buf_birth[b] <= t && t <= pl->buf_death[b]) live += pl->buf_size[b];
        if (live > peak) peak = live;
    }
    return peak;
}

int model_plan_make(const ModelGraph *g, int n, size_t elem_size, const ModelPlanOptions *o,
                    ModelPlan *p)
{
    if (n <= 0 || elem_size == 0)
        return error_set(ERROR_BAD_USAGE, "model_plan: batch %d and element size %zu must be > 0",
                         n, elem_size);
    if (o->checkpoint_segments < 0)
        return error_set(ERROR_BAD_USAGE, "model_plan: checkpoint_segments %d must be >= 0",
                         o->checkpoint_segments);
    memset(p, 0, sizeof *p);
    p->options = *o;
    p->n = n;
    p->elem_size = elem_size;
    for (int t = 0; t < MODEL_MAX_TENSORS; t++)
        p->act_off[t] = p->dact_off[t] = p->rec_off[t] = MODEL_PLAN_NONE;
    bool no_grad[MODEL_MAX_TENSORS] = {false};  // attention's aux tensors have no gradient
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].kind == OP_ATTN) no_grad[g->ops[i].aux] = true;
    for (int t = 1; t < g->n_tensors; t++) {
        size_t elems = model_tensor_size(g, t);
        if (elems > SIZE_MAX / 4 / elem_size / (size_t)n)
            return error_set(ERROR_BAD_USAGE, "model_plan: tensor %d too large for a batch of %d", t, n);
        p->tensor_bytes[t] = elems * (size_t)n * elem_size;
        p->keep_all_bytes += (no_grad[t] ? 1 : 2) * align_up(p->tensor_bytes[t]);
    }
    if (o->fuse)
        for (int i = 0; i < g->n_ops; i++)
            if (model_plan_fusable(g, i)) {
                p->ops[i].relu_fused = true;
                p->ops[i + 1].fused_away = true;
                p->ops[i + 1].bwd_fused = g->ops[i].kind == OP_BN;
                i++;
            }

    Timeline *tl = malloc(sizeof *tl);
    Planner *pl = malloc(sizeof *pl);
    if (!tl || !pl) {
        free(tl); free(pl);
        return error_set(ERROR_OUT_OF_MEMORY, "model_plan: out of memory");
    }
    memset(tl->rec, 0, sizeof tl->rec);
    plan_checkpoint(g, p, tl->rec);
    timeline_make(g, p, tl);
    pl->tl = tl;
    lifetimes(pl);
    int rc = assign_buffers(pl, p);
    if (rc == 0) {
        p->arena_bytes = place_buffers(pl);
        p->live_peak_bytes = live_peak(pl);
        for (int t = 1; t < g->n_tensors; t++) {
            if (pl->buf[act_value(t)] >= 0) p->act_off[t] = pl->buf_off[pl->buf[act_value(t)]];
            if (pl->buf[grad_value(t)] >= 0) p->dact_off[t] = pl->buf_off[pl->buf[grad_value(t)]];
            if (pl->buf[rec_value(t)] >= 0) p->rec_off[t] = pl->buf_off[pl->buf[rec_value(t)]];
        }
    }
    free(tl);
    free(pl);
    return rc;
}
