// practice_run.c: the practice driver's runs (practice_internal.h). Throughput: the check
// against the baseline first (practice_check.c), then untimed warm-up steps, timed
// iterations of steps ending in core_sync, and the counters (images_per_second, step_ms,
// wrong, skipped steps against what GradScaler's start-up explains, check_*). Time to
// accuracy: one run on synthetic batches until the held-out target or the step budget,
// with its curves. Both call the practice's hooks.
#include "bench/driver/practice_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
    snprintf(label, sizeof label, "%s backend %s, batch %d, %dx%d; %s; conv algorithms: %s",
             core_backend_name(cs->backend), core_precision_name(cfg->precision), cfg->batch_size,
             cfg->model.image_size, cfg->model.image_size, extra, algos);
    harness_set_label(st, label);
}

// ---- the practice's own hooks ------------------------------------------------------------------

static int hooks_core_created(const Practice *p, HarnessState *st, Core *core, const CoreConfig *cfg)
{
    return p->hooks && p->hooks->core_created ? p->hooks->core_created(p->hooks->ctx, st, core, cfg) : 0;
}

// ---- throughput ---------------------------------------------------------------------------------

void practice_run_throughput(HarnessState *st, const Practice *p, const PracticeVariant *v,
                             CoreConfig *cfg, const PracticeSource *src)
{
    int warmup = p->warmup_steps > 0 ? p->warmup_steps : 3;
    int k = p->check_steps > 0 ? p->check_steps : 3;
    const PracticeVariant *base = baseline_of(p);
    bool checked = p->check == PRACTICE_CHECK_PARAMS && v->role == HARNESS_TUNED && base;
    Selftest selftest = SELFTEST_NONE;
    if (practice_selftest_mode(&selftest) != 0) {
        practice_fail_or_skip(st, "the self-test");
        return;
    }
    if (!checked) selftest = SELFTEST_NONE;  // the self-test breaks what a check must catch
    if (src->open(src->ctx, cfg, v->source_arg) != 0) {
        practice_fail_or_skip(st, "preparing the batches");
        return;
    }
    // The check first, on cores of its own: the same start and batches for both variants.
    CheckResult check = {.identical = true};
    char check_msg[400] = "";
    bool wrong = false;
    if (checked) {
        CoreConfig bc = *cfg;
        if (practice_config(st, cfg->backend, base->change, &bc) != 0 ||
            practice_check_against_baseline(&bc, micro_of(p, base), cfg, micro_of(p, v), k, selftest,
                                            p->shared_params, &check) != 0) {
            practice_fail_or_skip(st, "checking against the baseline");
            src->close(src->ctx);
            return;
        }
        double tolerance = p->tolerance_for ? p->tolerance_for(cfg) : p->tolerance;
        wrong = practice_check_failed(tolerance, &check, k, check_msg, sizeof check_msg);
    }
    Core *core = NULL;
    float *scratch = NULL;
    CoreConfig core_cfg;  // micro-batches: the core is made for one of them
    int made = practice_core_config(cfg, micro_of(p, v), &core_cfg);
    if (made == 0) made = core_create(&core_cfg, &core);
    if (made == 0) made = hooks_core_created(p, st, core, cfg);
    if (made == 0 && selftest == SELFTEST_SKIP_ALL &&  // where the driver puts parameters back
        !(scratch = malloc(core_param_count(core) * sizeof(float))))
        made = error_set(ERROR_OUT_OF_MEMORY, "self-test: out of memory (host)");
    if (made != 0) {
        practice_fail_or_skip(st, "creating the core");
        core_free(core);
        src->close(src->ctx);
        return;
    }
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    int driver_skipped = 0, micro = micro_of(p, v);
    // Untimed warm-up: module loading, cuBLAS/cuDNN set-up and plans, first touch.
    int rc = 0;
    CoreBatch b;
    for (int i = 0; i < warmup && rc >= 0; i++) {
        rc = src->next(src->ctx, &b);
        if (rc == 0) rc = src->next(src->ctx, &b);  // an epoch ended: the next one
        if (rc > 0 && practice_run_step(core, cfg, &b, micro, selftest, scratch, &driver_skipped) != 0) rc = -1;
    }
    if (rc >= 0 && core_sync(core) != 0) rc = -1;
    if (rc < 0) {
        practice_fail_or_skip(st, "warm-up");
        core_free(core);
        free(scratch);
        src->close(src->ctx);
        return;
    }
    if (src->start) src->start(src->ctx);
    int64_t steps = 0, images = 0;
    double t0 = clock_seconds();
    while (rc >= 0 && harness_keep_running(st)) {
        while ((rc = src->next(src->ctx, &b)) > 0) {
            if (practice_run_step(core, cfg, &b, micro, selftest, scratch, &driver_skipped) != 0) {
                rc = -1;
                break;
            }
            steps++;
            images += b.n;
        }
        if (rc >= 0 && core_sync(core) != 0) rc = -1;
    }
    double seconds = clock_seconds() - t0;
    CoreStats cs;
    if (rc >= 0 && core_stats(core, &cs) != 0) rc = -1;
    if (rc < 0) {
        practice_fail_or_skip(st, "training");
    } else {
        // A run that skips steps does less work and looks faster: every step it took (warm-up
        // and timed) counts against what GradScaler's start-up explains.
        int64_t taken = warmup + steps;
        int skipped = cs.skipped_steps + driver_skipped;
        int explained = practice_skips_explained(cfg, taken);
        harness_set_items_processed(st, images);
        harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
        harness_counter(st, "step_ms", steps ? 1e3 * seconds / steps : 0, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
        if (fp16 || skipped > 0) {
            harness_counter(st, "skipped_steps", skipped, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "skipped_steps_explained", explained, HARNESS_COUNTER_PLAIN);
        }
        if (checked) {
            harness_counter(st, "check_rel_diff", check.rel, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "check_baseline_moved", check.base_moved, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "check_skipped_steps", check.skipped + check.skipped_after,
                            HARNESS_COUNTER_PLAIN);
        }
        if (src->report) src->report(src->ctx, st, seconds, steps);
        char extra[256], micro_text[96] = "";
        if (micro > 1)
            snprintf(micro_text, sizeof micro_text, "; each step %d accumulated micro-batches of %d",
                     micro, core_cfg.batch_size);
        snprintf(extra, sizeof extra, "%d untimed warm-up steps%s%s%s", warmup, micro_text,
                 p->label ? "; " : "", p->label ? p->label : "");
        core_counters(st, core, &cs, cfg, extra);
        if (wrong) {
            harness_fail(st, check_msg);
        } else if (skipped > explained) {
            char msg[300];
            snprintf(msg, sizeof msg, "skipped %d of %lld steps (warm-up and timed; overflow); "
                     "GradScaler's start-up explains at most %d", skipped, (long long)taken, explained);
            harness_fail(st, msg);
        } else if (p->hooks && p->hooks->finish) {
            PracticeOutcome o = {.steps = steps, .seconds = seconds, .stats = cs};
            p->hooks->finish(p->hooks->ctx, st, core, cfg, v, &o);
        }
    }
    core_free(core);
    free(scratch);
    src->close(src->ctx);
}

// ---- time to accuracy --------------------------------------------------------------------------

// Held-out accuracy on the synthetic batches no step trains on.
static int held_out_accuracy(Core *core, const SynthTask *task, float *images, int32_t *labels,
                             double *accuracy)
{
    double correct = 0.0;
    for (int e = 0; e < EVAL_BATCHES; e++) {
        synth_batch(task, HELD_OUT_INDEX + (uint64_t)e, EVAL_BATCH, images, labels);
        CoreBatch b = {images, labels, EVAL_BATCH, CORE_MEMORY_HOST};
        CoreEvalResult r;
        TRY(core_eval(core, &b, &r));
        correct += (double)r.accuracy * EVAL_BATCH;
    }
    *accuracy = correct / (EVAL_BATCHES * EVAL_BATCH);
    return 0;
}

void practice_run_time_to_accuracy(HarnessState *st, const Practice *p, const PracticeVariant *v,
                                   const CoreConfig *cfg)
{
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    int n = cfg->batch_size > EVAL_BATCH ? cfg->batch_size : EVAL_BATCH;
    size_t img = (size_t)n * m->in_channels * m->image_size * m->image_size;
    float *images = malloc(img * sizeof(float));
    int32_t *labels = malloc((size_t)n * sizeof(int32_t));
    Core *core = NULL;
    CoreConfig core_cfg;  // micro-batches: the core is made for one of them
    if (!images || !labels) {
        error_set(ERROR_OUT_OF_MEMORY, "time to accuracy: out of memory (host)");
        practice_fail_or_skip(st, "preparing the batches");
    } else if (practice_core_config(cfg, micro_of(p, v), &core_cfg) != 0 || core_create(&core_cfg, &core) != 0 ||
               hooks_core_created(p, st, core, cfg) != 0) {
        practice_fail_or_skip(st, "creating the core");
        core_free(core);
        core = NULL;
    }
    if (!core) {
        free(images);
        free(labels);
        return;
    }
    int eval_every = p->eval_every > 0 ? p->eval_every : 10;
    int rc = 0, step = 0;
    bool reached = false, diverged = false;
    double train_s = 0.0, accuracy = 0.0, best = 0.0;
    int64_t images_seen = 0;
    while (rc == 0 && harness_keep_running(st)) {
        for (step = 0; step < p->max_steps && rc == 0 && !reached && !diverged; step++) {
            synth_batch(&task, (uint64_t)step, cfg->batch_size, images, labels);  // not timed
            CoreBatch b = {images, labels, cfg->batch_size, CORE_MEMORY_HOST};
            CoreStepResult r;
            double t0 = clock_seconds();
            rc = practice_step(core, m->in_channels, &b, micro_of(p, v), &r);
            bool eval = (step + 1) % eval_every == 0 || step + 1 == p->max_steps;
            if (rc == 0 && eval) rc = core_sync(core);
            train_s += clock_seconds() - t0;
            if (rc != 0) break;
            images_seen += b.n;
            if (r.loss_ready && !isfinite(r.loss)) diverged = true;
            if (r.loss_ready) harness_curve_point(st, "train_loss", step + 1, images_seen, train_s, r.loss);
            if (p->hooks && p->hooks->after_step &&
                p->hooks->after_step(p->hooks->ctx, st, core, step, images_seen, train_s, &r) != 0) {
                rc = -1;
                break;
            }
            if (!eval || diverged) continue;
            rc = held_out_accuracy(core, &task, images, labels, &accuracy);
            if (rc != 0) break;
            if (accuracy > best) best = accuracy;
            harness_curve_point(st, "heldout_accuracy", step + 1, images_seen, train_s, accuracy);
            reached = accuracy >= p->target_accuracy;
        }
        harness_set_iteration_time(st, train_s);
    }
    CoreStats cs;
    if (rc == 0 && core_stats(core, &cs) != 0) rc = -1;
    if (rc != 0) {
        practice_fail_or_skip(st, "training to the target");
    } else {
        harness_counter(st, "reached_target", reached, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "diverged", diverged, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "steps", step, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "images_seen", (double)images_seen, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "train_seconds", train_s, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "final_accuracy", accuracy, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "best_accuracy", best, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "peak_lr", core_lr_at(&cfg->optim, cfg->batch_size, cfg->optim.warmup_steps),
                        HARNESS_COUNTER_PLAIN);
        char extra[256];
        if (reached)
            snprintf(extra, sizeof extra, "reached %.2f held-out accuracy after %d steps", p->target_accuracy, step);
        else if (diverged)
            snprintf(extra, sizeof extra, "diverged (loss not finite) at step %d", step);
        else
            snprintf(extra, sizeof extra, "missed %.2f held-out accuracy in %d steps (best %.3f)",
                     p->target_accuracy, p->max_steps, best);
        core_counters(st, core, &cs, cfg, extra);
        if (p->hooks && p->hooks->finish) {
            PracticeOutcome o = {.steps = step, .seconds = train_s, .reached = reached, .diverged = diverged,
                                 .final_accuracy = accuracy, .best_accuracy = best, .stats = cs};
            p->hooks->finish(p->hooks->ctx, st, core, cfg, v, &o);
        }
    }
    core_free(core);
    free(images);
    free(labels);
}
