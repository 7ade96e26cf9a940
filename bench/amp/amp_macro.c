// amp_macro.c: the amp practice's training rows, as hooks of the practice driver (the
// driver trains, times and checks; these add what mixed precision needs): the loss scale
// an fp16 macro run ends at (amp/*, amp_nhwc/*, amp_tf32/*, amp_strict/*); parity with fp32
// (amp_parity/*: the tuned run fails when it misses the target the baseline reached or its
// best accuracy is off by more than PARITY_TOLERANCE); GradScaler in action (amp_scaler/*:
// the norm each clipping order clips at, how often, and the loss scale, skipped steps and
// clipped norm of every step as curves); and one GradScaler pass against the step
// (amp_scaler_cost/*).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/amp/amp_practice.h"
#include "bench/amp/amp_scaler.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"

#define SCALER_PASS_REPS 51     // GradScaler passes timed (median)

typedef enum { CLIP_NONE, CLIP_AFTER_UNSCALE, CLIP_SCALED } ClipOrder;

// One run's state (runs are sequential; core_created resets it).
typedef struct ScalerRun {
    ClipOrder clip;
    bool fp16;
    float scale;            // the scale the next step's gradients carry
    double norm_seen;       // the norm the last step's clipping compared with CLIP_NORM
    bool norm_finite;
    double norm_sum;
    int norm_count, clipped;
    int skipped;
} ScalerRun;

// The baseline's outcome for a preset, batch and seed (a time-to-accuracy repetition trains
// from its own seed: the driver's rule), trained for the first tuned run that needs it
// (practice_train_to_target), so that every tuned run is compared with the baseline from its
// own seed whatever the order of the runs (random interleaving, a filter without the
// baseline).
typedef struct ParityEntry {
    char key[96];
    PracticeOutcome outcome;
} ParityEntry;

#define PARITY_ENTRIES 64 // kept outcomes; beyond them the oldest is trained again if needed

typedef struct AmpHooksCtx {
    bool clip_variants;     // amp_scaler: install the clipping hook
    ScalerRun run;
    const Practice *practice; // amp_parity: its baseline is trained from it
    ParityEntry parity[PARITY_ENTRIES];
    int parity_count; // entries made (the next goes to parity_count % PARITY_ENTRIES)
} AmpHooksCtx;

static AmpHooksCtx parity_ctx;  // amp_parity's (amp_parity_bind gives it its practice)

static int grads_ready(void *user, const CoreGradReady *ready)
{
    (void)user;
    (void)ready;
    return 0;
}

// After backward, before the core's inf/nan check, unscaling, clipping and SGD: the
// gradients still carry the loss scale. Measures the norm each order clips at; in the
// mistaken order, clips the scaled gradients here as clip_grad_norm_ would.
static int before_update(void *user, float *grads, size_t count, void *stream)
{
    ScalerRun *r = user;
    double norm = 0.0;
    TRY(amp_grad_norm(grads, count, stream, &norm));
    r->norm_finite = isfinite(norm);
    if (r->clip == CLIP_SCALED) {
        r->norm_seen = norm;
        // as clip_grad_norm_: an inf norm gives coefficient 0, and inf * 0 = nan, which
        // the core's inf/nan check then finds (the step is skipped)
        float coef = amp_clip_coef(norm, CLIP_NORM);
        if (!(coef >= 1.0f)) TRY(amp_grad_scale(grads, count, coef, stream));
    } else {
        r->norm_seen = norm / r->scale;  // what the core's clip measures after unscaling (exact: a power of 2)
    }
    return 0;
}

static int hooks_core_created(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                              const PracticeVariant *v)
{
    (void)v;
    (void)st;
    AmpHooksCtx *h = ctx;
    ScalerRun *r = &h->run;
    memset(r, 0, sizeof *r);
    r->fp16 = cfg->precision == CORE_PRECISION_FP16;
    r->scale = r->fp16 ? cfg->scaler.init_scale : 1.0f;
    if (!h->clip_variants) return 0;
    r->clip = cfg->optim.clip_norm > 0.0f ? CLIP_AFTER_UNSCALE : CLIP_SCALED;
    CoreGradHooks hooks = {grads_ready, before_update, r};
    return core_set_grad_hooks(core, &hooks);
}

static int hooks_after_step(void *ctx, HarnessState *st, Core *core, int step, int64_t images,
                            double seconds, const CoreStepResult *res)
{
    (void)res;
    AmpHooksCtx *h = ctx;
    ScalerRun *r = &h->run;
    if (!r->fp16) return 0;
    CoreStats cs;
    TRY(core_stats(core, &cs));
    harness_curve_point(st, "loss_scale", step + 1, images, seconds, cs.loss_scale);
    harness_curve_point(st, "skipped_steps", step + 1, images, seconds, cs.skipped_steps);
    bool skipped = cs.skipped_steps > r->skipped;
    r->skipped = cs.skipped_steps;
    r->scale = cs.loss_scale;
    if (h->clip_variants && r->norm_finite && !skipped) {
        harness_curve_point(st, "clip_norm_seen", step + 1, images, seconds, r->norm_seen);
        r->norm_sum += r->norm_seen;
        r->norm_count++;
        r->clipped += r->norm_seen > CLIP_NORM;
    }
    return 0;
}

static void parity_key(const CoreConfig *cfg, HarnessState *st, char *key, size_t size)
{
    snprintf(key, size, "%s/%d/%llu", harness_axis_str(st, "preset"), cfg->batch_size,
             (unsigned long long)cfg->seed);
}

// The baseline outcome kept under key, or NULL.
static const PracticeOutcome *parity_kept(const AmpHooksCtx *h, const char *key)
{
    int kept = h->parity_count < PARITY_ENTRIES ? h->parity_count : PARITY_ENTRIES;
    for (int i = 0; i < kept; i++)
        if (strcmp(h->parity[i].key, key) == 0) return &h->parity[i].outcome;
    return NULL;
}

// Keeps a baseline outcome under key (the oldest entry gives way).
static void parity_keep(AmpHooksCtx *h, const char *key, const PracticeOutcome *o)
{
    ParityEntry *e = &h->parity[h->parity_count % PARITY_ENTRIES];
    e->outcome = *o;
    snprintf(e->key, sizeof e->key, "%s", key);
    h->parity_count++;
}

// The baseline's outcome for this run's preset, batch and seed: the baseline row's own when
// it ran first, else trained here (then kept), or NULL with the run failed.
static const PracticeOutcome *parity_baseline(AmpHooksCtx *h, HarnessState *st, const CoreConfig *cfg)
{
    char key[96];
    parity_key(cfg, st, key, sizeof key);
    const PracticeOutcome *kept = parity_kept(h, key);
    if (kept) return kept;
    const Practice *p = h->practice;
    const PracticeVariant *base = NULL;
    for (int i = 0; p && i < p->variant_count && !base; i++)
        if (p->variants[i].role == HARNESS_BASELINE) base = &p->variants[i];
    CoreConfig bc;
    if (!base) {
        harness_fail(st, "amp_parity: no baseline to compare with (no practice bound)");
        return NULL;
    }
    if (practice_config(st, cfg->backend, base->change, &bc) != 0) {
        practice_fail_or_skip(st, "the fp32 baseline's config for parity");
        return NULL;
    }
    bc.seed = cfg->seed;  // the tuned run's repetition: the same weights, task and data order
    PracticeOutcome o;
    if (practice_train_to_target(p, base, &bc, &o) != 0) {
        practice_fail_or_skip(st, "training the fp32 baseline for parity");
        return NULL;
    }
    parity_keep(h, key, &o);
    return parity_kept(h, key);
}

static void parity_finish(AmpHooksCtx *h, HarnessState *st, const CoreConfig *cfg,
                          const PracticeVariant *v, const PracticeOutcome *o)
{
    if (v->role == HARNESS_BASELINE) {  // its own run is the baseline of this key's tuned rows
        char key[96];
        parity_key(cfg, st, key, sizeof key);
        if (!parity_kept(h, key)) parity_keep(h, key, o);
        return;
    }
    const PracticeOutcome *base = parity_baseline(h, st, cfg);
    if (!base) return;
    double diff = fabs(o->best_accuracy - base->best_accuracy);
    harness_counter(st, "baseline_steps", (double)base->steps, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "accuracy_diff", diff, HARNESS_COUNTER_PLAIN);
    bool wrong = (base->reached && !o->reached) || !(diff <= PARITY_TOLERANCE);
    harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
    if (wrong) {
        char msg[256];
        snprintf(msg, sizeof msg, "no parity with fp32: best held-out accuracy %.3f vs %.3f (tolerance %.2f), "
                 "target %.2f %s", o->best_accuracy, base->best_accuracy, PARITY_TOLERANCE, PARITY_TARGET,
                 o->reached ? "reached" : "missed");
        harness_fail(st, msg);
    }
}

void amp_parity_bind(const Practice *parity) { parity_ctx.practice = parity; }

static void hooks_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                         const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)core;
    AmpHooksCtx *h = ctx;
    ScalerRun *r = &h->run;
    if (r->fp16) {
        harness_counter(st, "skipped_steps", r->skipped, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "final_loss_scale", r->scale, HARNESS_COUNTER_PLAIN);
    }
    if (h->clip_variants) {
        harness_counter(st, "clip_norm", CLIP_NORM, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "mean_norm_seen", r->norm_count ? r->norm_sum / r->norm_count : 0.0,
                        HARNESS_COUNTER_PLAIN);
        harness_counter(st, "clipped_fraction", r->norm_count ? (double)r->clipped / r->norm_count : 0.0,
                        HARNESS_COUNTER_PLAIN);
    } else {
        parity_finish(h, st, cfg, v, o);
    }
}

// amp_scaler_cost: one GradScaler pass over this core's gradients against its step.
static void cost_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                        const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)v;
    double pass = 0.0;
    bool gpu = cfg->backend == CORE_BACKEND_CUDA;
    if (amp_scaler_pass_seconds(core_param_count(core), gpu, SCALER_PASS_REPS, &pass) != 0) {
        practice_fail_or_skip(st, "timing the GradScaler pass");
        return;
    }
    double step = o->steps ? o->seconds / o->steps : 0.0;
    harness_counter(st, "scaler_pass_ms", 1e3 * pass, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "scaler_share_of_step", step > 0 ? pass / step : 0.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "gradients", (double)core_param_count(core), HARNESS_COUNTER_PLAIN);
}

// amp, amp_nhwc, amp_tf32: the loss scale an fp16 run ended at (the driver counts its skipped
// steps, skipped_steps, and fails a run that skips more than GradScaler's start-up explains:
// a skipped step skips the SGD update, which makes it cheaper).
static void macro_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                         const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)core;
    (void)v;
    if (cfg->precision == CORE_PRECISION_FP16)
        harness_counter(st, "final_loss_scale", o->stats.loss_scale, HARNESS_COUNTER_PLAIN);
}

// amp_backoff_growth: each fp16 core's 2nd step overflows (an inf in its gradients before
// GradScaler's check), so that the scale backs off inside the check's steps. One count per
// core: cores are made one after another (the check's, then the timed one), each reusing
// the oldest slot.
enum { BACKOFF_STEP = 2, BACKOFF_SLOTS = 8 };
static int backoff_calls[BACKOFF_SLOTS], backoff_next;

static int backoff_before_update(void *user, float *grads, size_t count, void *stream)
{
    int *calls = user;
    if (++*calls != BACKOFF_STEP || count == 0) return 0;
    return amp_grad_scale(grads, 1, INFINITY, stream);  // inf, or nan from a 0: an overflow either way
}

static int backoff_core_created(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                                const PracticeVariant *v)
{
    (void)v;
    (void)ctx;
    (void)st;
    if (cfg->precision != CORE_PRECISION_FP16) return 0;
    int *calls = &backoff_calls[backoff_next++ % BACKOFF_SLOTS];
    *calls = 0;
    CoreGradHooks hooks = {grads_ready, backoff_before_update, calls};
    return core_set_grad_hooks(core, &hooks);
}

// One context per practice (runs are sequential; core_created resets its run).
static AmpHooksCtx scaler_ctx = {.clip_variants = true};
const PracticeHooks amp_macro_hooks = {NULL, NULL, macro_finish, NULL};
const PracticeHooks amp_parity_hooks = {hooks_core_created, hooks_after_step, hooks_finish, &parity_ctx};
const PracticeHooks amp_scaler_hooks = {hooks_core_created, hooks_after_step, hooks_finish, &scaler_ctx};
const PracticeHooks amp_scaler_cost_hooks = {NULL, NULL, cost_finish, NULL};
const PracticeHooks amp_backoff_hooks = {backoff_core_created, NULL, macro_finish, NULL};
