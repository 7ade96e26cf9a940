// practice_run.c: the practice driver's runs (practice_internal.h). Throughput: the check
// against the baseline first (practice_check.c; a tuned run that fails it is not timed),
// then untimed warm-up steps (fp16: until GradScaler's start-up is over), timed iterations
// of steps ending in core_sync, and the counters (images_per_second, step_ms, wrong, skipped
// steps against what GradScaler explains, check_*). Time to accuracy: one run on synthetic
// batches until the held-out target or the step budget, with its curves, repetition k of
// an instance from the preset's seed + k. Both call the practice's hooks.
#include "bench/driver/practice_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"
#include "kernels/error.h"

// The variant the check compares with (NULL: the practice has none).
static const PracticeVariant *baseline_of(const Practice *p)
{
    for (int i = 0; i < p->variant_count; i++)
        if (p->variants[i].role == HARNESS_BASELINE) return &p->variants[i];
    return NULL;
}

// The micro-batches of one optimizer step of variant v (1: no accumulation).
static int micro_of(const Practice *p, const PracticeVariant *v)
{
    int k = p->micro_batches ? p->micro_batches[v - p->variants] : 1;
    return k > 1 ? k : 1;
}

// ---- counters and labels ----------------------------------------------------------------------

// The counters and label every run gets from its core (cs: its counters at the run's end).
static void core_counters(HarnessState *st, Core *core, const CoreStats *cs, const CoreConfig *cfg,
                          const char *extra)
{
    harness_counter(st, "peak_mib", cs->peak_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "device_used_mib", cs->device_used_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "batch", cfg->batch_size, HARNESS_COUNTER_PLAIN);
    char algos[1536], label[2300];
    if (core_conv_algo_summary(core, algos, sizeof algos) != 0) snprintf(algos, sizeof algos, "?");
    const CoreModelConfig *m = &cfg->model;
    if (m->kind == CORE_MODEL_GPT)  // images_per_second counts its sequences
        snprintf(label, sizeof label, "%s backend %s, batch %d sequences of %d tokens, %s attention; %s",
                 core_backend_name(cs->backend), core_precision_name(cfg->precision), cfg->batch_size,
                 m->seq_len, core_attention_name(m->attention), extra);
    else
        snprintf(label, sizeof label, "%s backend %s, batch %d, %dx%d; %s; conv algorithms: %s",
                 core_backend_name(cs->backend), core_precision_name(cfg->precision), cfg->batch_size,
                 m->image_size, m->image_size, extra, algos);
    harness_set_label(st, label);
}

bool practice_in_effect(HarnessState *st, const CoreConfig *cfg, const CoreStats *cs)
{
    char why[256];
    bool ok = core_config_in_effect(cfg, cs, why, sizeof why) == 0;
    harness_counter(st, "in_effect", ok, HARNESS_COUNTER_PLAIN);
    if (!ok) {
        char msg[320];
        snprintf(msg, sizeof msg, "the practice was not in effect: %s", why);
        harness_fail(st, msg);
    }
    return ok;
}

// ---- throughput ---------------------------------------------------------------------------------

// The check's figures as counters (every run of a checked row carries them).
static void check_counters(HarnessState *st, const Practice *p, const CheckResult *check, bool wrong)
{
    harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_rel_diff", check->rel, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_tolerance", p->tolerance, HARNESS_COUNTER_PLAIN);  // 0: bit for bit
    harness_counter(st, "check_worst_tensor_rel_diff", check->worst_rel, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_baseline_moved", check->base_moved, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_skipped_steps", check->skipped + check->skipped_after, HARNESS_COUNTER_PLAIN);
}

// The check of tuned variant v (config cfg, its source opened) against the baseline: *wrong
// and the message when it failed. 0, or -1 with the error set.
static int check_variant(HarnessState *st, const Practice *p, const PracticeVariant *v, const CoreConfig *cfg,
                         const PracticeSource *src, Selftest selftest, CheckResult *check, bool *wrong,
                         char *msg, size_t size)
{
    const PracticeVariant *base = baseline_of(p);
    int k = p->check_steps > 0 ? p->check_steps : 3;
    CoreConfig bc = *cfg;
    TRY(practice_config(st, cfg->backend, base->change, &bc));
    // the data's shape is the source's (a dataset sets its classes and channels) for both
    bc.model.in_channels = cfg->model.in_channels;
    bc.model.num_classes = cfg->model.num_classes;
    bc.model.image_size = cfg->model.image_size;
    CheckBatches cb;
    TRY(practice_check_batches_take(src, cfg, k, &cb));
    CheckPlan plan = {st, p, base, v, &bc, cfg, micro_of(p, base), micro_of(p, v), k, selftest};
    int rc = practice_check_against_baseline(&plan, &cb, check);
    practice_check_batches_free(&cb);
    TRY(rc);
    *wrong = practice_check_failed(p->tolerance, check, k, msg, size);
    check_counters(st, p, check, *wrong);
    return 0;
}

// What the warm-up did: its steps, the skips GradScaler's start-up took (those no growth of
// the scale at the step before explains), and all its skips.
typedef struct WarmUp {
    int taken, startup, skipped;
} WarmUp;

// Untimed warm-up: module loading, cuBLAS/cuDNN set-up and plans, first touch; with fp16 it
// goes on until `warmup` steps in a row have had no skip but the one a growth explains, so
// that GradScaler's start-up (every step skipped while the scale comes down from init_scale)
// is never timed. 1 done, 0 (the run failed with the reason) or -1 (error set).
static int warm_up(HarnessState *st, Core *core, const CoreConfig *cfg, const PracticeSource *src, int warmup,
                   int micro, Selftest selftest, float *scratch, int *driver_skipped, WarmUp *w)
{
    bool fp16 = cfg->precision == CORE_PRECISION_FP16, grew = false;
    int max = practice_startup_skips_max(cfg), settled = 0;
    *w = (WarmUp){0};
    CoreStats cs = {0};
    if (fp16) TRY(core_stats(core, &cs));
    while (fp16 ? settled < warmup : w->taken < warmup) {
        if (w->startup > max) {
            char msg[300];
            snprintf(msg, sizeof msg, "GradScaler's start-up: %d steps skipped (overflow) before %d in a row "
                     "updated; halving the scale from %g down to 1 explains at most %d", w->startup, warmup,
                     (double)cfg->scaler.init_scale, max);
            harness_fail(st, msg);
            return 0;
        }
        CoreBatch b;
        int rc = src->next(src->ctx, &b);
        if (rc == 0) rc = src->next(src->ctx, &b);  // an epoch ended: the next one
        if (rc < 0) return -1;
        int before = cs.skipped_steps + *driver_skipped;
        float scale = cs.loss_scale;
        TRY(practice_run_step(core, cfg, &b, micro, selftest, scratch, driver_skipped));
        w->taken++;
        if (fp16) TRY(core_stats(core, &cs));
        bool skip = cs.skipped_steps + *driver_skipped > before;
        w->skipped += skip;
        if (skip && !grew) {  // not a grown scale's one overflow: the start-up goes on
            w->startup++;
            settled = 0;
        } else {
            settled++;
        }
        grew = !skip && cs.loss_scale > scale;
    }
    TRY(core_sync(core));
    return 1;
}

// A throughput row's run, prepared once: its batches' source opened, a tuned variant
// checked against the baseline, its core made and warmed up. On a CPU backend with the
// driver's synthetic batches the harness keeps it between the runs of the instance
// (harness_keep), so that the row's later repetitions time steps and nothing else, as
// the PyTorch side's do (docs/statistics.md, "What a repetition is"). Elsewhere each run
// prepares its own: on CUDA device_used_bytes counts from a core's creation (another
// kept core would count in it), and a loader's workers must not stay behind another
// row's repetitions.
typedef struct ThroughputRun {
    Synthetic synthetic;      // the driver's sources' state (src.ctx points into here)
    Images images;
    PracticeSource src;
    bool opened, own_synthetic;
    CoreConfig cfg;           // the run's config as prepared (self-test, the source's shape)
    Core *core;
    float *scratch;           // the self-test skip_all's copy of the parameters
    Selftest selftest;
    int micro;
    bool checked;             // a tuned row, checked against the baseline (check: its figures)
    CheckResult check;
    WarmUp w;
    int driver_skipped;       // over the core's life, as its CoreStats
    int64_t timed_steps;      // over every run of the core
} ThroughputRun;

static void throughput_run_free(void *obj)
{
    ThroughputRun *r = obj;
    if (!r) return;
    core_free(r->core);
    free(r->scratch);
    if (r->opened) r->src.close(r->src.ctx);
    free(r);
}

// A new run of p: its batches (the practice's own source, JPEGs through the loader with
// --data=images or a practice on images, else synthetic ones) and config. NULL when out of
// memory (the error set).
static ThroughputRun *throughput_run_new(const Practice *p, const CoreConfig *cfg)
{
    ThroughputRun *r = calloc(1, sizeof *r);
    if (!r) {
        error_set(ERROR_OUT_OF_MEMORY, "out of memory (host)");
        return NULL;
    }
    int steps = p->steps > 0 ? p->steps : 10;
    if (p->source) {
        r->src = *p->source;
    } else if (!practice_uses_synthetic(p)) {
        r->images = (Images){.steps = steps, .dataset_preset = p->dataset_preset};
        r->src = practice_images_source(&r->images);
    } else {
        // on a CPU a timed iteration is one step: nothing is queued to wait for at its end,
        // and a repetition of short steps is PRACTICE_CPU_MIN_TIME long, not a whole epoch
        if (cfg->backend != CORE_BACKEND_CUDA) steps = 1;
        r->synthetic = (Synthetic){.steps = steps};
        r->src = practice_synthetic_source(&r->synthetic);
        r->own_synthetic = true;
    }
    r->cfg = *cfg;
    return r;
}

// Prepares r for variant v: 1 ready; 0 the run ended (failed or skipped, with the reason).
static int throughput_run_prepare(HarnessState *st, const Practice *p, const PracticeVariant *v,
                                  ThroughputRun *r)
{
    int warmup = p->warmup_steps > 0 ? p->warmup_steps : 3;
    const PracticeVariant *base = baseline_of(p);
    // every variant but the baseline: a tuned one, or a reference (measured, no speedup claimed)
    bool checked = p->check == PRACTICE_CHECK_PARAMS && v->role != HARNESS_BASELINE && base;
    if (practice_training_selftest_mode(&r->selftest) != 0) {
        practice_fail_or_skip(st, "the self-test");
        return 0;
    }
    if (!checked) r->selftest = SELFTEST_NONE;  // the self-test breaks what a check must catch
    practice_selftest_config(r->selftest, &r->cfg);
    if (r->src.open(r->src.ctx, &r->cfg, v->source_arg) != 0) {
        practice_fail_or_skip(st, "preparing the batches");
        return 0;
    }
    r->opened = true;
    // The check first, on cores of its own made as this run's, on this run's first batches.
    if (checked) {
        char msg[600] = "";
        bool wrong = false;
        if (check_variant(st, p, v, &r->cfg, &r->src, r->selftest, &r->check, &wrong, msg, sizeof msg) != 0) {
            practice_fail_or_skip(st, "checking against the baseline");
            return 0;
        }
        if (wrong) {  // a wrong answer is not timed
            harness_fail(st, msg);
            return 0;
        }
        r->checked = true;
    }
    r->micro = micro_of(p, v);
    int made = practice_make_core(st, p, v, &r->cfg, r->micro, r->selftest, &r->core);
    if (made == 0 && r->selftest == SELFTEST_SKIP_ALL &&  // where the driver puts parameters back
        !(r->scratch = malloc(core_param_count(r->core) * sizeof(float))))
        made = error_set(ERROR_OUT_OF_MEMORY, "self-test: out of memory (host)");
    if (made != 0) {
        practice_fail_or_skip(st, "creating the core");
        return 0;
    }
    int rc = warm_up(st, r->core, &r->cfg, &r->src, warmup, r->micro, r->selftest, r->scratch,
                     &r->driver_skipped, &r->w);
    if (rc < 0) practice_fail_or_skip(st, "warm-up");
    return rc > 0;
}

void practice_run_throughput(HarnessState *st, const Practice *p, const PracticeVariant *v,
                             const CoreConfig *cfg)
{
    ThroughputRun *r = harness_take_kept(st);
    bool first = !r;
    if (first) {
        if (!(r = throughput_run_new(p, cfg))) {
            practice_fail_or_skip(st, "preparing the run");
            return;
        }
        if (!throughput_run_prepare(st, p, v, r)) {
            throughput_run_free(r);
            return;
        }
    } else if (r->checked) {
        check_counters(st, p, &r->check, false);
    }
    const CoreConfig *rc_cfg = &r->cfg;
    const PracticeSource *src = &r->src;
    bool fp16 = rc_cfg->precision == CORE_PRECISION_FP16;
    int rc = 0;
    CoreBatch b;
    if (src->start) src->start(src->ctx);
    int64_t steps = 0, images = 0;
    double t0 = clock_seconds();
    while (rc >= 0 && harness_keep_running(st)) {
        while ((rc = src->next(src->ctx, &b)) > 0) {
            if (practice_run_step(r->core, rc_cfg, &b, r->micro, r->selftest, r->scratch, &r->driver_skipped) != 0) {
                rc = -1;
                break;
            }
            steps++;
            images += b.n;
        }
        if (rc >= 0 && core_sync(r->core) != 0) rc = -1;
    }
    double seconds = clock_seconds() - t0;
    r->timed_steps += steps;
    CoreStats cs;
    bool ok = false;
    if (rc >= 0 && core_stats(r->core, &cs) != 0) rc = -1;
    if (rc < 0) {
        practice_fail_or_skip(st, "training");
    } else {
        // A run that skips steps does less work and looks faster: after the start-up (in the
        // warm-up), only an overflow after a growth is explained. Over the core's life: its
        // warm-up and every run's timed steps.
        const WarmUp *w = &r->w;
        int64_t taken = w->taken + r->timed_steps;
        int skipped = cs.skipped_steps + r->driver_skipped;
        int64_t explained = w->startup + practice_growth_skips_max(rc_cfg, taken - w->startup);
        harness_set_items_processed(st, images);
        harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
        harness_counter(st, "step_ms", steps ? 1e3 * seconds / steps : 0, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "wrong", 0, HARNESS_COUNTER_PLAIN);
        if (fp16 || skipped > 0) {
            harness_counter(st, "skipped_steps", skipped, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "skipped_steps_explained", (double)explained, HARNESS_COUNTER_PLAIN);
        }
        if (src->report) src->report(src->ctx, st, seconds, steps);
        char extra[360], micro_text[96] = "", warm_text[96] = "";
        if (r->micro > 1)
            snprintf(micro_text, sizeof micro_text, "; each step %d accumulated micro-batches of %d",
                     r->micro, rc_cfg->batch_size / r->micro);
        if (fp16)
            snprintf(warm_text, sizeof warm_text, " (fp16: until %d in a row updated; %d skipped)",
                     p->warmup_steps > 0 ? p->warmup_steps : 3, w->skipped);
        snprintf(extra, sizeof extra, "%d untimed warm-up steps%s%s%s%s", w->taken, warm_text, micro_text,
                 p->label ? "; " : "", p->label ? p->label : "");
        core_counters(st, r->core, &cs, rc_cfg, extra);
        if (skipped > explained) {
            char msg[400];
            snprintf(msg, sizeof msg, "skipped %d of %lld steps (warm-up and timed; overflow): GradScaler's "
                     "start-up explains the %d of the warm-up, growth every %d updating steps %lld more",
                     skipped, (long long)taken, w->startup, fp16 ? rc_cfg->scaler.growth_interval : 0,
                     (long long)(explained - w->startup));
            harness_fail(st, msg);
        } else if (practice_in_effect(st, rc_cfg, &cs)) {
            ok = true;
            if (p->hooks && p->hooks->finish) {
                PracticeOutcome o = {.steps = steps, .seconds = seconds, .stats = cs, .first = first};
                p->hooks->finish(p->hooks->ctx, st, r->core, rc_cfg, v, &o);
                ok = !harness_run_failed(st);
            }
        }
    }
    if (ok && r->own_synthetic && cs.backend != CORE_BACKEND_CUDA) harness_keep(st, r, throughput_run_free);
    else throughput_run_free(r);
}

// ---- time to accuracy --------------------------------------------------------------------------

// The runs so far of one time-to-accuracy instance: variant v of p at one preset and batch.
typedef struct SeedRuns {
    const Practice *p;
    const PracticeVariant *v;
    char *preset;
    int64_t batch;
    uint64_t runs;
} SeedRuns;

// How many runs of this instance came before this one (the repetition index k, from 0),
// counted per instance so that repetition k of every variant at a preset and batch is the
// k-th whatever the interleaving. 0, or -1 with the error set (out of memory).
static int repetition_index(HarnessState *st, const Practice *p, const PracticeVariant *v, uint64_t *k)
{
    static SeedRuns *runs;
    static size_t count, capacity;
    const char *preset = harness_axis_str(st, "preset");
    int64_t batch = harness_axis_int(st, "batch");
    for (size_t i = 0; i < count; i++)
        if (runs[i].p == p && runs[i].v == v && runs[i].batch == batch && strcmp(runs[i].preset, preset) == 0) {
            *k = runs[i].runs++;
            return 0;
        }
    if (count == capacity) {
        size_t grown = capacity ? 2 * capacity : 16;
        SeedRuns *more = realloc(runs, grown * sizeof *runs);
        if (!more) return error_set(ERROR_OUT_OF_MEMORY, "time to accuracy: out of memory (host)");
        runs = more;
        capacity = grown;
    }
    char *name = strdup(preset);
    if (!name) return error_set(ERROR_OUT_OF_MEMORY, "time to accuracy: out of memory (host)");
    runs[count++] = (SeedRuns){p, v, name, batch, 1};
    *k = 0;
    return 0;
}

// Held-out accuracy on the synthetic batches no step trains on.
static int held_out_accuracy(Core *core, const SynthTask *task, float *images, int32_t *labels,
                             double *accuracy)
{
    double correct = 0.0;
    for (int e = 0; e < EVAL_BATCHES; e++) {
        synth_batch(task, HELD_OUT_INDEX + (uint64_t)e, EVAL_BATCH, images, labels);
        CoreBatch b = {.images = images, .labels = labels, .n = EVAL_BATCH, .memory = CORE_MEMORY_HOST};
        CoreEvalResult r;
        TRY(core_eval(core, &b, &r));
        correct += (double)r.accuracy * EVAL_BATCH;
    }
    *accuracy = correct / (EVAL_BATCHES * EVAL_BATCH);
    return 0;
}

// Trains core (variant v's, on cfg) to p's target: steps on the synthetic batches until the
// held-out target, divergence or the step budget, evaluating every eval_every steps. With st,
// the curves and the practice's after_step hook; without, nothing but the outcome (o: steps,
// training seconds, reached, diverged, final and best accuracy). 0 or -1.
static int train_to_target(HarnessState *st, const Practice *p, const PracticeVariant *v, const CoreConfig *cfg,
                           Core *core, PracticeOutcome *o)
{
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    int n = cfg->batch_size > EVAL_BATCH ? cfg->batch_size : EVAL_BATCH;
    size_t img = (size_t)n * m->in_channels * m->image_size * m->image_size;
    float *images = malloc(img * sizeof(float));
    int32_t *labels = malloc((size_t)n * sizeof(int32_t));
    if (!images || !labels) {
        free(images);
        free(labels);
        return error_set(ERROR_OUT_OF_MEMORY, "time to accuracy: out of memory (host)");
    }
    int eval_every = p->eval_every > 0 ? p->eval_every : 10, rc = 0, step;
    int64_t images_seen = 0;
    *o = (PracticeOutcome){0};
    for (step = 0; step < p->max_steps && rc == 0 && !o->reached && !o->diverged; step++) {
        synth_batch(&task, (uint64_t)step, cfg->batch_size, images, labels);  // not timed
        CoreBatch b = {.images = images, .labels = labels, .n = cfg->batch_size, .memory = CORE_MEMORY_HOST};
        CoreStepResult r;
        double t0 = clock_seconds();
        rc = practice_step(core, m->in_channels, &b, micro_of(p, v), &r);
        bool eval = (step + 1) % eval_every == 0 || step + 1 == p->max_steps;
        if (rc == 0 && eval) rc = core_sync(core);
        o->seconds += clock_seconds() - t0;
        if (rc != 0) break;
        images_seen += b.n;
        if (r.loss_ready && !isfinite(r.loss)) o->diverged = true;
        if (st && r.loss_ready) harness_curve_point(st, "train_loss", step + 1, images_seen, o->seconds, r.loss);
        if (st && p->hooks && p->hooks->after_step &&
            p->hooks->after_step(p->hooks->ctx, st, core, step, images_seen, o->seconds, &r) != 0) {
            rc = -1;
            break;
        }
        if (!eval || o->diverged) continue;
        rc = held_out_accuracy(core, &task, images, labels, &o->final_accuracy);
        if (rc != 0) break;
        if (o->final_accuracy > o->best_accuracy) o->best_accuracy = o->final_accuracy;
        if (st)
            harness_curve_point(st, "heldout_accuracy", step + 1, images_seen, o->seconds, o->final_accuracy);
        o->reached = o->final_accuracy >= p->target_accuracy;
    }
    o->steps = step;
    free(images);
    free(labels);
    return rc;
}

int practice_train_to_target(const Practice *p, const PracticeVariant *v, const CoreConfig *cfg, PracticeOutcome *o)
{
    Core *core = NULL;
    CoreConfig core_cfg;
    TRY(practice_core_config(cfg, micro_of(p, v), &core_cfg));
    TRY(core_create(&core_cfg, &core));
    int rc = train_to_target(NULL, p, v, cfg, core, o);
    if (rc == 0) rc = core_stats(core, &o->stats);
    core_free(core);
    return rc;
}

void practice_run_time_to_accuracy(HarnessState *st, const Practice *p, const PracticeVariant *v,
                                   const CoreConfig *variant_cfg)
{
    // A convergence time measured k times from one seed is one sample of the seed's
    // variance, timed k times: repetition k trains from the preset's seed + k (weights,
    // synthetic task and data order), the same k for every variant of the instance.
    CoreConfig run = *variant_cfg;
    const CoreConfig *cfg = &run;
    uint64_t k = 0;
    if (repetition_index(st, p, v, &k) != 0) {
        practice_fail_or_skip(st, "the repetition's seed");
        return;
    }
    run.seed += k;
    Core *core = NULL;
    if (practice_make_core(st, p, v, cfg, micro_of(p, v), SELFTEST_NONE, &core) != 0) {
        practice_fail_or_skip(st, "creating the core");
        return;
    }
    int rc = 0;
    PracticeOutcome o = {0};
    while (rc == 0 && harness_keep_running(st)) {
        rc = train_to_target(st, p, v, cfg, core, &o);
        harness_set_iteration_time(st, o.seconds);
    }
    if (rc == 0 && core_stats(core, &o.stats) != 0) rc = -1;
    if (rc != 0) {
        practice_fail_or_skip(st, "training to the target");
    } else {
        harness_counter(st, "seed", (double)cfg->seed, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "reached_target", o.reached, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "target_accuracy", p->target_accuracy, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "diverged", o.diverged, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "steps", (double)o.steps, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "images_seen", (double)o.steps * cfg->batch_size, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "train_seconds", o.seconds, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "final_accuracy", o.final_accuracy, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "best_accuracy", o.best_accuracy, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "peak_lr", core_lr_at(&cfg->optim, cfg->batch_size, cfg->optim.warmup_steps),
                        HARNESS_COUNTER_PLAIN);
        char extra[256];
        int at = snprintf(extra, sizeof extra, "seed %llu (the preset's + %llu); ", (unsigned long long)cfg->seed,
                          (unsigned long long)k);
        char *tail = extra + at;
        size_t room = sizeof extra - (size_t)at;
        if (o.reached)
            snprintf(tail, room, "reached %.2f held-out accuracy after %lld steps", p->target_accuracy,
                     (long long)o.steps);
        else if (o.diverged)
            snprintf(tail, room, "diverged (loss not finite) at step %lld", (long long)o.steps);
        else
            snprintf(tail, room, "missed %.2f held-out accuracy in %d steps (best %.3f)",
                     p->target_accuracy, p->max_steps, o.best_accuracy);
        core_counters(st, core, &o.stats, cfg, extra);
        if (practice_in_effect(st, cfg, &o.stats) && p->hooks && p->hooks->finish)
            p->hooks->finish(p->hooks->ctx, st, core, cfg, v, &o);
    }
    core_free(core);
}
