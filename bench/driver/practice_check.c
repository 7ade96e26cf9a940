// practice_check.c: the practice driver's check of every tuned variant against its
// baseline (practice_internal.h): both from the same seed on the same synthetic batches
// (variants with different parameter sets: the parameters of Practice.shared_params, the
// tuned run starting from the baseline's values of them), the tuned run's update
// (parameters after k steps minus at the start) compared with the baseline's in relative L2; GradScaler's skipped-step rule (the start-up explains at
// most log2(init_scale) skips before an update, then a rerun from the settled scale must
// skip nothing); the --practice_selftest breakage (a frozen update, every step an
// overflow) that the check must catch; and the verdict as a failure message.
#include "bench/driver/practice_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/error.h"

// GradScaler starts at init_scale (65536), far above what fp16 gradients usually bear, and
// halves it on every overflow: each of its first log2(init_scale) halvings (down to a scale
// of 1, below which scaling no longer explains an overflow) may cost one skipped step, but
// a run in which no step updated is never its start-up. After that, each growth (every
// growth_interval clean steps) may overflow once. Anything beyond is a run that does not
// train, and does less work than one that does.
static int startup_halvings(const AmpScalerConfig *sc)
{
    int halvings = 0;
    if (sc->backoff_factor > 0.0f && sc->backoff_factor < 1.0f)
        for (double s = sc->init_scale; s > 1.0 && halvings < 1000; s *= sc->backoff_factor) halvings++;
    return halvings;
}

int practice_skips_explained(const CoreConfig *cfg, int64_t steps)
{
    if (cfg->precision != CORE_PRECISION_FP16 || steps <= 0) return 0;
    const AmpScalerConfig *sc = &cfg->scaler;
    int64_t startup = startup_halvings(sc);
    if (startup > steps - 1) startup = steps - 1;
    int64_t growths = sc->growth_interval > 0 ? steps / sc->growth_interval : 0;
    return (int)(startup + growths);
}

int practice_step(Core *core, int in_channels, const CoreBatch *b, int micro_batches,
                  CoreStepResult *result)
{
    if (micro_batches <= 1) return core_step(core, b, result);
    if (micro_batches > b->n)
        return error_set(ERROR_BAD_USAGE, "gradient accumulation: %d micro-batches of a batch of %d images",
                         micro_batches, b->n);
    size_t sample = (size_t)in_channels * core_image_size(core) * core_image_size(core);
    CoreStepResult r;
    int done = 0;
    for (int i = 0; i < micro_batches; i++) {
        int part = b->n / micro_batches + (i < b->n % micro_batches);
        CoreBatch mb = {b->images + (size_t)done * sample, b->labels + done, part, b->memory};
        // loss / K: the K gradients add up to the whole batch's mean gradient
        TRY(core_forward_backward_weighted(core, &mb, i > 0, (float)part / (float)b->n));
        done += part;
    }
    TRY(core_apply_update(core, b->n, &r));
    if (result) *result = r;
    return 0;
}

int practice_core_config(const CoreConfig *cfg, int micro, CoreConfig *core_cfg)
{
    *core_cfg = *cfg;
    if (micro <= 1) return 0;
    if (cfg->batch_size % micro != 0)
        return error_set(ERROR_BAD_USAGE, "gradient accumulation: a batch of %d images does not split "
                         "into %d equal micro-batches", cfg->batch_size, micro);
    core_cfg->batch_size = cfg->batch_size / micro;
    return 0;
}

// One training step; under SELFTEST_SKIP_ALL an overflow: fp16 gets an inf in its gradients
// (the core's own GradScaler skips the step, backs off and counts it); the other precisions
// have no scaler, so the driver drops the update itself (the parameters go back to what
// `scratch` held) and counts it in *driver_skipped.
int practice_run_step(Core *core, const CoreConfig *cfg, const CoreBatch *b, int micro,
                      Selftest selftest, float *scratch, int *driver_skipped)
{
    int ch = cfg->model.in_channels;
    if (selftest != SELFTEST_SKIP_ALL) return practice_step(core, ch, b, micro, NULL);
    if (cfg->precision == CORE_PRECISION_FP16) {
        TRY(core_inject_grad_fault(core, INFINITY));
        return practice_step(core, ch, b, micro, NULL);
    }
    size_t n = core_param_count(core);
    TRY(core_params_get(core, scratch, n));
    TRY(practice_step(core, ch, b, micro, NULL));
    TRY(core_params_set(core, scratch, n));
    (*driver_skipped)++;
    return 0;
}

// One run of the check: the parameters at the start and after k steps on the synthetic
// batches 0..k-1 from the seed's init (each step in `micro` micro-batches), and the steps
// it skipped.
typedef struct CheckRun {
    float *before, *after;
    size_t count;
    int skipped;
} CheckRun;

static void check_run_free(CheckRun *r)
{
    free(r->before);
    free(r->after);
    *r = (CheckRun){0};
}

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

// With `shared` (Practice.shared_params), out holds the shared parameters alone; a run
// with `start` begins from those values of them.
static int check_run(const CoreConfig *cfg, int micro, int k, Selftest selftest,
                     size_t (*shared)(const CoreConfig *, size_t *), const float *start, CheckRun *out)
{
    *out = (CheckRun){0};
    Core *core = NULL;
    CoreConfig core_cfg;
    TRY(practice_core_config(cfg, micro, &core_cfg));
    TRY(core_create(&core_cfg, &core));
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    size_t img = (size_t)cfg->batch_size * m->in_channels * m->image_size * m->image_size;
    float *images = malloc(img * sizeof(float));
    int32_t *labels = malloc((size_t)cfg->batch_size * sizeof(int32_t));
    out->count = core_param_count(core);
    out->before = malloc(out->count * sizeof(float));
    out->after = malloc(out->count * sizeof(float));
    int rc = images && labels && out->before && out->after
                 ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    size_t *index = NULL, shared_count = 0;
    if (rc == 0 && shared) rc = shared_index(shared, cfg, out->count, &index, &shared_count);
    if (rc == 0 && start) rc = set_shared(core, start, index, shared_count, out->after);
    if (rc == 0) rc = core_params_get(core, out->before, out->count);
    int driver_skipped = 0;
    for (int s = 0; s < k && rc == 0; s++) {
        synth_batch(&task, (uint64_t)s, cfg->batch_size, images, labels);
        CoreBatch b = {images, labels, cfg->batch_size, CORE_MEMORY_HOST};
        rc = practice_run_step(core, cfg, &b, micro, selftest, out->after, &driver_skipped);
    }
    CoreStats cs;
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
    if (rc == 0 && selftest == SELFTEST_FROZEN) memcpy(out->after, out->before, out->count * sizeof(float));
    free(images);
    free(labels);
    core_free(core);
    if (rc != 0) check_run_free(out);
    return rc;
}

// fp16: the steps GradScaler's start-up skips before its first update, on the check's
// batches from cfg's init_scale, trying at most `limit` steps; *updated: whether one did.
static int startup_skips(const CoreConfig *cfg, int micro, int limit, Selftest selftest, int *leading,
                         bool *updated)
{
    *leading = 0;
    *updated = false;
    Core *core = NULL;
    CoreConfig core_cfg;
    TRY(practice_core_config(cfg, micro, &core_cfg));
    TRY(core_create(&core_cfg, &core));
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    size_t img = (size_t)cfg->batch_size * m->in_channels * m->image_size * m->image_size;
    float *images = malloc(img * sizeof(float));
    int32_t *labels = malloc((size_t)cfg->batch_size * sizeof(int32_t));
    int rc = images && labels ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    int unused = 0;
    for (int s = 0; s < limit && rc == 0 && !*updated; s++) {
        synth_batch(&task, (uint64_t)s, cfg->batch_size, images, labels);
        CoreBatch b = {images, labels, cfg->batch_size, CORE_MEMORY_HOST};
        CoreStats cs;
        rc = practice_run_step(core, cfg, &b, micro, selftest, NULL, &unused);
        if (rc == 0) rc = core_stats(core, &cs);
        if (rc == 0 && cs.skipped_steps > *leading) (*leading)++;
        else if (rc == 0) *updated = true;
    }
    free(images);
    free(labels);
    core_free(core);
    return rc;
}

// Relative L2 of the tuned run's update against the baseline's (each from its own start):
// the parameters move ~1e-3 of themselves in k steps, so only the update shows a variant
// that trains too little, not at all, or in the wrong direction.
static void compare_updates(const CheckRun *base, const CheckRun *tuned, CheckResult *r)
{
    double num = 0.0, den = 0.0, p0 = 0.0;
    for (size_t i = 0; i < base->count; i++) {
        double ub = (double)base->after[i] - base->before[i];
        double ut = (double)tuned->after[i] - tuned->before[i];
        num += (ut - ub) * (ut - ub);
        den += ub * ub;
        p0 += (double)base->before[i] * base->before[i];
    }
    // a baseline that did not move vouches for nothing: any difference is infinite
    r->rel = den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0.0;
    r->base_moved = p0 > 0 ? sqrt(den / p0) : sqrt(den);
    r->identical = memcmp(base->before, tuned->before, base->count * sizeof(float)) == 0 &&
                   memcmp(base->after, tuned->after, base->count * sizeof(float)) == 0;
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

// Compares the tuned config with the baseline's after k steps from the same seed. An fp16
// run whose steps overflowed is GradScaler's start-up when it updates within log2(init_scale)
// steps from the start: it is then run again from the scale its start-up settled at (a power
// of 2: the same maths), so that its update is compared step for step, and that run must
// skip nothing. 0 or -1.
int practice_check_against_baseline(const CoreConfig *base, int base_micro, const CoreConfig *tuned,
                                    int tuned_micro, int k, Selftest selftest,
                                    size_t (*shared)(const CoreConfig *, size_t *), CheckResult *r)
{
    *r = (CheckResult){0};
    CheckRun b = {0}, t = {0};
    if (shared && shared(base, NULL) != shared(tuned, NULL))
        return error_set(ERROR_BAD_USAGE, "check: the variants share different numbers of parameters");
    TRY(check_run(base, base_micro, k, SELFTEST_NONE, shared, NULL, &b));
    const float *start = shared ? b.before : NULL;  // the tuned run from the baseline's start
    int rc = check_run(tuned, tuned_micro, k, selftest, shared, start, &t);
    if (rc == 0 && b.count != t.count)
        rc = error_set(ERROR_BAD_USAGE, "check: the variants have different parameter counts");
    if (rc == 0) {
        r->skipped = t.skipped;
        r->steps = k;
        r->allowed = 0;  // without GradScaler no skipped step is explained
        r->scaled = tuned->precision == CORE_PRECISION_FP16;
    }
    if (rc == 0 && tuned->precision == CORE_PRECISION_FP16 && t.skipped > 0) {
        int halvings = startup_halvings(&tuned->scaler), leading = 0;
        bool updated = false;
        rc = startup_skips(tuned, tuned_micro, halvings + 1, selftest, &leading, &updated);
        r->allowed = halvings;
        if (rc == 0 && !updated) {  // no update within the start-up: every step skipped
            r->skipped = leading;
            r->steps = leading;
        } else if (rc == 0) {
            CoreConfig settled = *tuned;
            for (int i = 0; i < leading; i++) settled.scaler.init_scale *= settled.scaler.backoff_factor;
            r->settled_scale = settled.scaler.init_scale;
            r->skipped = leading;
            r->steps = leading + 1;
            check_run_free(&t);
            rc = check_run(&settled, tuned_micro, k, selftest, shared, start, &t);
            if (rc == 0) r->skipped_after = t.skipped;
        }
    }
    if (rc == 0) compare_updates(&b, &t, r);
    check_run_free(&b);
    check_run_free(&t);
    return rc;
}

// The check's verdict as a failure message; false when the tuned run passed.
bool practice_check_failed(double tolerance, const CheckResult *r, int k, char *msg, size_t size)
{
    if (r->skipped > r->allowed && r->scaled) {
        snprintf(msg, size, "the check's run skipped %d of %d steps (overflow); GradScaler's start-up "
                 "explains at most %d before an update", r->skipped, r->steps, r->allowed);
        return true;
    }
    if (r->skipped > r->allowed) {
        snprintf(msg, size, "the check's run skipped %d of %d steps (overflow); without GradScaler "
                 "none is explained", r->skipped, r->steps);
        return true;
    }
    if (r->skipped_after > 0) {
        snprintf(msg, size, "after GradScaler's start-up (%d skipped steps) the check's run, started "
                 "at the settled scale %g, still skipped %d of %d steps", r->skipped, r->settled_scale,
                 r->skipped_after, k);
        return true;
    }
    bool wrong = tolerance > 0 ? !(r->rel <= tolerance) : !r->identical;
    if (wrong) {
        char tol[48];
        if (tolerance > 0) snprintf(tol, sizeof tol, "tolerance %g", tolerance);
        else snprintf(tol, sizeof tol, "bit-identical wanted");
        snprintf(msg, size, "parameters differ from the baseline's after %d steps: the update differs "
                 "by %.3g of the baseline's update (relative L2; %s; the baseline moved %.3g of its "
                 "parameters)", k, r->rel, tol, r->base_moved);
    }
    return wrong;
}
