// practice_compare.c: how the practice driver's check compares a tuned run's update with
// the baseline's (practice_internal.h): relative L2 over all parameters, and over every
// parameter tensor alone (a tensor group that carries a small share of the update, such as
// the BN parameters, could be wholly wrong inside one global figure); the floor below which
// the baseline's own update vouches for nothing; the verdict as a failure message; and the
// logits of two inference forwards (practice_compare_logits).
#include "bench/driver/practice_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/error.h"
#include "kernels/model.h"

// The parameter tensors of a model, as PyTorch holds them: a conv's weight and bias, a BN's
// gamma and beta, a linear's weight and bias (model.h's flat order).
typedef struct Tensors {
    int count;
    int op[2 * MODEL_MAX_OPS];
    const char *what[2 * MODEL_MAX_OPS];
    const char *kind[2 * MODEL_MAX_OPS];
    int *of;  // the tensor of each flat parameter
} Tensors;

static void mark(Tensors *t, int op, const char *kind, const char *what, size_t off, size_t n)
{
    for (size_t j = 0; j < n; j++) t->of[off + j] = t->count;
    t->op[t->count] = op;
    t->kind[t->count] = kind;
    t->what[t->count] = what;
    t->count++;
}

static int tensors_of(const CoreConfig *cfg, Tensors *t)
{
    ModelGraph *g = malloc(sizeof *g);
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    if (model_build(&cfg->model, g) != 0) {
        free(g);
        return -1;
    }
    t->count = 0;
    t->of = malloc((g->n_params ? g->n_params : 1) * sizeof *t->of);
    if (!t->of) {
        free(g);
        return error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    }
    for (size_t j = 0; j < g->n_params; j++) t->of[j] = -1;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_CONV) {
            mark(t, i, "conv", "weight", op->w_off, (size_t)op->cout * op->cin * op->k * op->k);
            if (op->bias) mark(t, i, "conv", "bias", op->b_off, (size_t)op->cout);
        } else if (op->kind == OP_BN) {
            mark(t, i, "bn", "gamma", op->w_off, (size_t)op->cin);
            mark(t, i, "bn", "beta", op->b_off, (size_t)op->cin);
        } else if (op->kind == OP_LINEAR) {
            mark(t, i, "linear", "weight", op->w_off, (size_t)op->cout * op->cin);
            mark(t, i, "linear", "bias", op->b_off, (size_t)op->cout);
        } else if (op->kind == OP_LAYERNORM) {
            mark(t, i, "layernorm", "gamma", op->w_off, (size_t)op->cin);
            mark(t, i, "layernorm", "beta", op->b_off, (size_t)op->cin);
        } else if (op->kind == OP_EMBED) {
            mark(t, i, "embedding", "tokens", op->w_off, (size_t)op->cin * op->cout);
            mark(t, i, "embedding", "positions", op->b_off, (size_t)op->rows * op->cout);
        }
    }
    for (size_t j = 0; j < g->n_params; j++)
        if (t->of[j] < 0) t->of[j] = t->count;  // none of the above (none today): counted globally only
    free(g);
    return 0;
}

// The tensor of each compared element: of the flat parameters, or with shared parameters of
// those (in their common order), into *of (malloc'd, count elements).
static int compared_tensors(const Practice *p, const CoreConfig *cfg, Tensors *t, size_t count, int **of)
{
    *of = NULL;
    TRY(tensors_of(cfg, t));
    if (!p || !p->shared_params) {
        *of = t->of;
        return 0;
    }
    size_t n = p->shared_params(cfg, NULL);
    size_t *index = malloc((n ? n : 1) * sizeof *index);
    int *shared = malloc((count ? count : 1) * sizeof *shared);
    int rc = index && shared ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    if (rc == 0 && (n != count || p->shared_params(cfg, index) != n))
        rc = error_set(ERROR_BAD_USAGE, "check: the practice's shared parameters do not fit its model");
    for (size_t i = 0; rc == 0 && i < count; i++) shared[i] = t->of[index[i]];
    free(index);
    free(t->of);
    t->of = NULL;
    if (rc != 0) {
        free(shared);
        return rc;
    }
    *of = shared;
    return 0;
}

int practice_compare_updates(const Practice *p, const CoreConfig *tuned, const CheckRun *base,
                             const CheckRun *t, CheckResult *r)
{
    Tensors tensors = {0};
    int *of = NULL;
    TRY(compared_tensors(p, tuned, &tensors, base->count, &of));
    double *num = calloc((size_t)tensors.count + 1, sizeof *num), *den = calloc((size_t)tensors.count + 1, sizeof *den);
    if (!num || !den) {
        free(num);
        free(den);
        free(of);
        return error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    }
    double all_num = 0.0, all_den = 0.0, p0 = 0.0;
    for (size_t i = 0; i < base->count; i++) {
        double ub = (double)base->after[i] - base->before[i];
        double ut = (double)t->after[i] - t->before[i];
        double d = (ut - ub) * (ut - ub);
        num[of[i]] += d;
        den[of[i]] += ub * ub;
        all_num += d;
        all_den += ub * ub;
        p0 += (double)base->before[i] * base->before[i];
    }
    // a baseline that did not move vouches for nothing: any difference is infinite
    r->rel = all_den > 0 ? sqrt(all_num / all_den) : all_num > 0 ? INFINITY : 0.0;
    r->base_moved = p0 > 0 ? sqrt(all_den / p0) : sqrt(all_den);
    r->identical = memcmp(base->before, t->before, base->count * sizeof(float)) == 0 &&
                   memcmp(base->after, t->after, base->count * sizeof(float)) == 0;
    int worst = -1;
    r->worst_rel = 0.0;
    for (int i = 0; i < tensors.count && !(worst >= 0 && isnan(r->worst_rel)); i++) {
        double rel = den[i] > 0 ? sqrt(num[i] / den[i]) : num[i] > 0 ? INFINITY : 0.0;
        if (worst < 0 || rel > r->worst_rel || isnan(rel)) {
            worst = i;
            r->worst_rel = rel;
        }
    }
    if (worst >= 0)
        snprintf(r->worst_tensor, sizeof r->worst_tensor, "op %d %s %s", tensors.op[worst],
                 tensors.kind[worst], tensors.what[worst]);
    else
        snprintf(r->worst_tensor, sizeof r->worst_tensor, "none");
    free(num);
    free(den);
    free(of);
    return 0;
}

double practice_update_rel_diff(const float *before, const float *base_after, const float *tuned_after,
                                size_t count)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < count; i++) {
        double ub = (double)base_after[i] - before[i], ut = (double)tuned_after[i] - before[i];
        num += (ut - ub) * (ut - ub);
        den += ub * ub;
    }
    return den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0.0;
}

// The check's verdict as a failure message; false when the tuned run passed.
bool practice_check_failed(double tolerance, const CheckResult *r, int k, char *msg, size_t size)
{
    if (r->skipped > r->allowed && r->scaled) {
        snprintf(msg, size, "the check's run skipped %d of %d steps (overflow); GradScaler's start-up "
                 "explains at most %d (one per halving of the scale down to 1)", r->skipped, r->steps,
                 r->allowed);
        return true;
    }
    if (r->skipped > r->allowed) {
        snprintf(msg, size, "the check's run skipped %d of %d steps (overflow); without GradScaler "
                 "none is explained", r->skipped, r->steps);
        return true;
    }
    if (r->skipped_unexplained > 0) {
        snprintf(msg, size, "after GradScaler's start-up (%d skipped steps) the check's run%s skipped %d "
                 "of %d steps, step %d first, with no growth of the scale before it to explain it",
                 r->skipped, r->settled_scale > 0 ? ", started at the settled scale," : "",
                 r->skipped_unexplained, k, r->first_unexplained);
        return true;
    }
    if (!isfinite(r->base_moved)) {
        snprintf(msg, size, "the baseline's update after %d steps is not finite (%g of its parameters): "
                 "its batches or its training diverged, and it vouches for nothing", k, r->base_moved);
        return true;
    }
    if (!(r->base_moved >= PRACTICE_CHECK_MIN_MOVED)) {
        snprintf(msg, size, "the baseline's update after %d steps is %.3g of its parameters, below the "
                 "floor %g: a baseline that does not move vouches for nothing", k, r->base_moved,
                 PRACTICE_CHECK_MIN_MOVED);
        return true;
    }
    bool wrong = tolerance > 0 ? !(r->rel <= tolerance && r->worst_rel <= tolerance) : !r->identical;
    if (wrong) {
        char tol[48];
        if (tolerance > 0) snprintf(tol, sizeof tol, "tolerance %g", tolerance);
        else snprintf(tol, sizeof tol, "bit-identical wanted");
        snprintf(msg, size, "parameters differ from the baseline's after %d steps: the update differs "
                 "by %.3g of the baseline's update (relative L2; %s), by %.3g of its own in the worst "
                 "tensor (%s); the baseline moved %.3g of its parameters", k, r->rel, tol, r->worst_rel,
                 r->worst_tensor, r->base_moved);
    }
    return wrong;
}

void practice_compare_logits(const float *want, const float *got, int n, int classes, double *rel,
                             int *agree)
{
    double diff = 0.0, norm = 0.0;
    *agree = 0;
    for (int i = 0; i < n; i++) {
        const float *w = want + (size_t)i * classes, *g = got + (size_t)i * classes;
        int aw = 0, ag = 0;
        for (int k = 0; k < classes; k++) {
            double d = (double)g[k] - w[k];
            diff += d * d;
            norm += (double)w[k] * w[k];
            if (w[k] > w[aw]) aw = k;
            if (g[k] > g[ag]) ag = k;
        }
        *agree += aw == ag;
    }
    *rel = isfinite(diff) ? (norm > 0 ? sqrt(diff / norm) : sqrt(diff)) : INFINITY;
}
