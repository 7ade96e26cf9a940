// practice_check.c: the practice driver's check of every tuned variant against its baseline
// (practice_internal.h). Both runs are the timed configuration: their cores made as the
// timed run's (practice_make_core: the micro-batch, the practice's hooks), their steps taken
// as its steps, on the run's own first k batches: the tuned run reads them as the timed run
// does (device-resident on the GPU), the baseline their host copies (the core's own upload,
// an independent path) (variants with different parameter sets: the parameters of Practice.shared_params,
// the tuned run starting from the baseline's values of them). An accumulating variant is
// compared with the exact reference of accumulation (practice_reference_step). GradScaler's
// skipped-step rule: its start-up (every skip no growth explains, while the scale settles:
// at most log2(init_scale) halvings in all) is taken out by running again from the settled
// scale; after it, one overflow per growth, a step the baseline then leaves out. The update
// comparison and the verdict are practice_compare.c's.
#include "bench/driver/practice_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/error.h"

// ---- GradScaler's rule ---------------------------------------------------------------------------

// GradScaler starts at init_scale (65536), far above what fp16 gradients usually bear, and
// halves it on every overflow: each of its first log2(init_scale) halvings (down to a scale
// of 1, below which scaling no longer explains an overflow) may cost one skipped step. After
// that, each growth (every growth_interval clean steps) may overflow once. Anything beyond
// is a run that does not train, and does less work than one that does.
static int startup_halvings(const AmpScalerConfig *sc)
{
    int halvings = 0;
    if (sc->backoff_factor > 0.0f && sc->backoff_factor < 1.0f)
        for (double s = sc->init_scale; s > 1.0 && halvings < 1000; s *= sc->backoff_factor) halvings++;
    return halvings;
}

int practice_startup_skips_max(const CoreConfig *cfg)
{
    return cfg->precision == CORE_PRECISION_FP16 ? startup_halvings(&cfg->scaler) : 0;
}

int64_t practice_growth_skips_max(const CoreConfig *cfg, int64_t clean_steps)
{
    if (cfg->precision != CORE_PRECISION_FP16 || cfg->scaler.growth_interval <= 0 || clean_steps <= 0) return 0;
    return clean_steps / cfg->scaler.growth_interval;
}

// ---- shared parameters ---------------------------------------------------------------------------

// Practice.shared_params: the shared parameters' indices in cfg's order (malloc'd into
// *index) and their count.
static int shared_index(size_t (*shared)(const CoreConfig *, size_t *), const CoreConfig *cfg,
                        size_t total, size_t **index, size_t *count)
{
    *count = shared(cfg, NULL);
    *index = malloc((*count ? *count : 1) * sizeof **index);
    if (!*index) return error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    if (shared(cfg, *index) != *count) goto bad;
    for (size_t i = 0; i < *count; i++)
        if ((*index)[i] >= total) goto bad;
    return 0;
bad:
    free(*index);
    *index = NULL;
    return error_set(ERROR_BAD_USAGE, "check: the practice's shared parameters do not fit its model");
}

// Keeps the shared parameters of v (in their common order), in place.
static void keep_shared(float *v, const size_t *index, size_t count, float *tmp)
{
    for (size_t i = 0; i < count; i++) tmp[i] = v[index[i]];
    memcpy(v, tmp, count * sizeof *v);
}

// Sets the shared parameters of core to start (in their common order).
static int set_shared(Core *core, const float *start, const size_t *index, size_t count, float *tmp)
{
    TRY(core_params_get(core, tmp, core_param_count(core)));
    for (size_t i = 0; i < count; i++) tmp[index[i]] = start[i];
    return core_params_set(core, tmp, core_param_count(core));
}

// ---- one run ------------------------------------------------------------------------------------------

static void check_run_free(CheckRun *r)
{
    free(r->before);
    free(r->after);
    *r = (CheckRun){0};
}

// What a run's steps did, step by step: skipped (an overflow) or not, and whether the loss
// scale grew after it.
typedef struct StepLog {
    bool skipped[CHECK_MAX_STEPS], grew[CHECK_MAX_STEPS];
} StepLog;

// How one run of the check is made.
typedef struct RunSpec {
    const PracticeVariant *variant;
    const CoreConfig *cfg;
    int micro;           // micro-batches of each step (the variant's)
    int reference_micro; // > 1: each step the exact reference of that many micro-batches
    Selftest selftest;
    const float *start;  // with shared parameters: their values at the start (NULL: the seed's)
    const bool *leave_out; // steps not taken (NULL: none)
    bool host_batches;   // the batches' host copies (the baseline) rather than the run's own
} RunSpec;

// The parameters at the start and after the steps on cb's batches (with shared parameters:
// those alone), the steps skipped, and (log != NULL) what each step did.
static int check_run(const CheckPlan *plan, const RunSpec *rs, const CheckBatches *cb, CheckRun *out,
                     StepLog *log)
{
    *out = (CheckRun){0};
    if (log) *log = (StepLog){0};
    size_t (*shared)(const CoreConfig *, size_t *) = plan->p->shared_params;
    const CoreConfig *cfg = rs->cfg;
    Core *core = NULL;
    TRY(practice_make_core(plan->st, plan->p, rs->variant, cfg, rs->micro, rs->selftest, &core));
    out->count = core_param_count(core);
    out->before = malloc(out->count * sizeof(float));
    out->after = malloc(out->count * sizeof(float));
    double *sum = NULL;
    float *part = NULL;
    if (rs->reference_micro > 1) {
        sum = malloc(out->count * sizeof *sum);
        part = malloc(out->count * sizeof *part);
    }
    int rc = out->before && out->after && (rs->reference_micro <= 1 || (sum && part))
                 ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    size_t *index = NULL, shared_count = 0;
    if (rc == 0 && shared) rc = shared_index(shared, cfg, out->count, &index, &shared_count);
    if (rc == 0 && rs->start) rc = set_shared(core, rs->start, index, shared_count, out->after);
    if (rc == 0) rc = core_params_get(core, out->before, out->count);
    int driver_skipped = 0, dropped = rs->selftest == SELFTEST_DROP_STEP ? cb->k / 2 : -1;
    CoreStats cs = {0};
    if (rc == 0 && log) rc = core_stats(core, &cs);
    for (int s = 0; s < cb->k && rc == 0; s++) {
        if ((rs->leave_out && rs->leave_out[s]) || s == dropped) continue;  // the step not taken
        int skipped0 = cs.skipped_steps + driver_skipped;
        float scale0 = cs.loss_scale;
        const CoreBatch *b = rs->host_batches ? &cb->host[s] : &cb->b[s];
        if (rs->reference_micro > 1)
            rc = practice_reference_step(core, cfg->model.in_channels, b, rs->reference_micro, sum, part);
        else
            rc = practice_run_step(core, cfg, b, rs->micro, rs->selftest, out->after, &driver_skipped);
        if (rc == 0 && log) rc = core_stats(core, &cs);
        if (rc == 0 && log) {
            log->skipped[s] = cs.skipped_steps + driver_skipped > skipped0;
            log->grew[s] = !log->skipped[s] && cs.loss_scale > scale0;
        }
    }
    if (rc == 0) rc = core_stats(core, &cs);
    if (rc == 0) rc = core_params_get(core, out->after, out->count);
    if (rc == 0) out->skipped = cs.skipped_steps + driver_skipped;
    if (rc == 0 && shared) {
        float *tmp = malloc((shared_count ? shared_count : 1) * sizeof(float));
        if (!tmp) rc = error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
        if (tmp) {
            keep_shared(out->before, index, shared_count, tmp);
            keep_shared(out->after, index, shared_count, tmp);
            out->count = shared_count;
        }
        free(tmp);
    }
    free(index);
    free(sum);
    free(part);
    if (rc == 0 && rs->selftest == SELFTEST_FROZEN) memcpy(out->after, out->before, out->count * sizeof(float));
    core_free(core);
    if (rc != 0) check_run_free(out);
    return rc;
}

// The skips of a run that no growth of the scale at the step before explains, the first of
// them (1-based; 0: none), and the skips in all.
static int unexplained_skips(const StepLog *log, int k, int *first, int *all)
{
    int n = 0;
    *first = 0;
    *all = 0;
    for (int s = 0; s < k; s++) {
        if (!log->skipped[s]) continue;
        (*all)++;
        if (s > 0 && log->grew[s - 1]) continue;  // a grown scale may overflow once
        if (n++ == 0) *first = s + 1;
    }
    return n;
}

// ---- the check ------------------------------------------------------------------------------------------

// The tuned run, from the scale GradScaler's start-up settles at on these batches: run again,
// halving the initial scale once per skip no growth explains, until a run has none (at most
// log2(init_scale) halvings in all; fp16 only, other precisions explain no skip).
static int tuned_settled(const CheckPlan *plan, const CheckBatches *cb, const float *start, CheckRun *t,
                         StepLog *log, CheckResult *r)
{
    const CoreConfig *tuned = plan->tuned;
    bool fp16 = tuned->precision == CORE_PRECISION_FP16;
    CoreConfig settled = *tuned;
    RunSpec rs = {plan->tuned_variant, &settled, plan->tuned_micro, 0, plan->selftest, start, NULL, false};
    int k = cb->k, halvings = 0, max = startup_halvings(&tuned->scaler);
    r->scaled = fp16;
    r->steps = k;
    TRY(check_run(plan, &rs, cb, t, log));
    if (!fp16) {
        r->skipped = t->skipped;  // without GradScaler no skip is explained
        return 0;
    }
    r->allowed = max;
    for (;;) {
        int first = 0, all = 0, u = unexplained_skips(log, k, &first, &all);
        if (u == 0 || halvings + u > max) {
            r->skipped = halvings;
            r->skipped_after = all;
            r->skipped_unexplained = u;
            r->first_unexplained = first;
            if (u > 0 && halvings + u > max) {  // the start-up would need more halvings than it has
                r->skipped = halvings + u;
                r->steps = halvings + k;
                r->skipped_unexplained = 0;
            }
            r->settled_scale = halvings > 0 ? settled.scaler.init_scale : 0.0;
            return 0;
        }
        halvings += u;
        for (int i = 0; i < u; i++) settled.scaler.init_scale *= settled.scaler.backoff_factor;
        check_run_free(t);
        TRY(check_run(plan, &rs, cb, t, log));
    }
}

int practice_check_against_baseline(const CheckPlan *plan, const CheckBatches *cb, CheckResult *r)
{
    *r = (CheckResult){0};
    size_t (*shared)(const CoreConfig *, size_t *) = plan->p->shared_params;
    if (shared && shared(plan->base, NULL) != shared(plan->tuned, NULL))
        return error_set(ERROR_BAD_USAGE, "check: the variants share different numbers of parameters");
    // the baseline; for an accumulating variant, the exact reference of its micro-batches
    int reference = plan->tuned_micro > 1 && plan->base_micro <= 1 ? plan->tuned_micro : 0;
    RunSpec bs = {plan->base_variant, plan->base, plan->base_micro, reference, SELFTEST_NONE, NULL, NULL, true};
    CheckRun b = {0}, t = {0};
    StepLog log;
    TRY(check_run(plan, &bs, cb, &b, NULL));
    const float *start = shared ? b.before : NULL;  // the tuned run from the baseline's start
    int rc = tuned_settled(plan, cb, start, &t, &log, r);
    if (rc == 0 && b.count != t.count)
        rc = error_set(ERROR_BAD_USAGE, "check: the variants have different parameter counts");
    // the steps the tuned run skipped for a growth: the baseline leaves them out too
    if (rc == 0 && r->skipped_after > 0 && r->skipped_unexplained == 0) {
        bs.leave_out = log.skipped;
        check_run_free(&b);
        rc = check_run(plan, &bs, cb, &b, NULL);
    }
    if (rc == 0) rc = practice_compare_updates(plan->p, plan->tuned, &b, &t, r);
    check_run_free(&b);
    check_run_free(&t);
    return rc;
}
