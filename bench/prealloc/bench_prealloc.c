// bench_prealloc.c: the tuning guide's "preallocate memory in case of variable input length":
// before training on inputs whose shape varies, run one forward and backward (no optimizer
// step) on a batch of the largest shape, so that the allocator reserves the largest buffers
// up front instead of growing them (and fragmenting) as larger shapes arrive.
// The core's counterpart: each new (batch, image size) is planned when its first batch
// arrives; the memory plan's arena (activations and their gradients) and the other buffers
// are reallocated when a plan needs more than they hold, never shrunk (kernels/core.h,
// core_set_image_size; docs/memory-plan.md). The CUDA backend frees and cudaMallocs them
// (no caching allocator), after draining its streams.
// prealloc/* (ResNet presets; the MLP takes one size only): a fresh core per timed
//   iteration (its creation untimed) trained over the same seeded schedule of image sizes
//   (--prealloc_sizes evenly spaced from half the preset's size to its size, shuffled, with
//   repeats), wall clock up to the last step's core_sync: grow (baseline: shapes met as they
//   come) vs preallocated (tuned: core_loss_grad at the largest size first, untimed and
//   reported apart as prealloc_ms, with the break-even against grow's schedule measured in
//   the same row). The preallocated row checks, before timing, that its parameters and BN
//   running statistics after the schedule are grow's bit for bit (the preallocation must not
//   change training); --practice_selftest (any mode) makes its preallocation a training step
//   instead, which the check must catch.
// Fast CPU backend without a GPU, CUDA with one (deterministic cuDNN in both variants there,
// so that the two runs are comparable bit for bit).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "bench/prealloc/prealloc_run.h"
#include "kernels/error.h"

#define SCHEDULE_SEED 35
#define MIB (1024.0 * 1024.0)

typedef struct Variant { const char *name; bool tuned; } Variant;
static const Variant grow_variant = {"grow", false};
static const Variant preallocated_variant = {"preallocated", true};

// What a row keeps between its runs (harness_keep): the batch, the schedule and the check.
typedef struct Row {
    CoreConfig cfg;
    PracticeBatch batch;
    PreallocSchedule schedule;
    PreallocResult probe;       // this variant's probe run (arena growths, peak)
    PreallocResult grow_probe;  // the preallocated row: grow's probe run, the check's baseline
    bool identical;             // the preallocated row: parameters and buffers bit for bit
    bool broken;                // --practice_selftest: the broken preallocation
    int64_t iterations;         // the preallocated row: timed iterations so far (grow's
                                // untimed run goes before the timed one in even ones, after
                                // it in odd ones, so that neither always follows the other)
} Row;

static void row_free(void *obj)
{
    Row *r = obj;
    if (!r) return;
    practice_batch_free(&r->batch);
    prealloc_schedule_free(&r->schedule);
    free(r->probe.params);
    free(r->probe.buffers);
    free(r->grow_probe.params);
    free(r->grow_probe.buffers);
    free(r);
}

static void deterministic_on_gpu(CoreConfig *c) { c->deterministic = c->backend == CORE_BACKEND_CUDA; }

static PreallocMode tuned_mode(const Row *r) { return r->broken ? PREALLOC_BROKEN : PREALLOC_RESERVED; }

// The check: one probe run of each variant, their parameters and BN running statistics after
// the schedule compared bit for bit.
static int check_row(Row *r)
{
    size_t np = 0, nb = 0;
    TRY(prealloc_counts(&r->cfg, &np, &nb));
    PreallocResult *g = &r->grow_probe, *t = &r->probe;
    g->params = malloc(np * sizeof(float));
    t->params = malloc(np * sizeof(float));
    g->buffers = malloc((nb ? nb : 1) * sizeof(float));
    t->buffers = malloc((nb ? nb : 1) * sizeof(float));
    if (!g->params || !t->params || !g->buffers || !t->buffers)
        return error_set(ERROR_OUT_OF_MEMORY, "the check: out of memory (host)");
    TRY(prealloc_run(&r->cfg, &r->batch, &r->schedule, PREALLOC_GROW, true, g));
    TRY(prealloc_run(&r->cfg, &r->batch, &r->schedule, tuned_mode(r), true, t));
    r->identical = memcmp(g->params, t->params, np * sizeof(float)) == 0 &&
                   memcmp(g->buffers, t->buffers, nb * sizeof(float)) == 0 &&
                   g->stats.steps == t->stats.steps;
    return 0;
}

// The row's batch, schedule and probe runs (the check in the preallocated row); NULL when
// the run has ended (skipped or failed, naming why).
static Row *row_make(HarnessState *st, bool tuned)
{
    Row *r = calloc(1, sizeof *r);
    if (!r) {
        harness_fail(st, "out of memory (host)");
        return NULL;
    }
    if (!practice_run_config(st, false, deterministic_on_gpu, &r->cfg)) {
        row_free(r);
        return NULL;
    }
    if (r->cfg.model.kind != CORE_MODEL_RESNET) {
        harness_skip(st, "the MLP's first layer fixes its input size: no variable input length");
        row_free(r);
        return NULL;
    }
    if (practice_selftest_broken(&r->broken) != 0) {
        practice_fail_or_skip(st, "--practice_selftest");
        row_free(r);
        return NULL;
    }
    int rc = prealloc_schedule_make(&r->schedule, r->cfg.model.image_size,
                                    (int)harness_option_int_value("prealloc_sizes"),
                                    (int)harness_option_int_value("prealloc_steps"), SCHEDULE_SEED);
    if (rc == 0) rc = practice_batch_make(&r->batch, &r->cfg, r->schedule.hi);
    if (rc == 0)
        rc = tuned ? check_row(r) : prealloc_run(&r->cfg, &r->batch, &r->schedule, PREALLOC_GROW, true, &r->probe);
    if (rc != 0) {
        practice_fail_or_skip(st, tuned ? "checking the preallocated run against grow's" : "the probe run");
        row_free(r);
        return NULL;
    }
    return r;
}

static void add_counters(HarnessState *st, const Row *r, const PreallocResult *last, double ms, int64_t runs)
{
    const CoreStats *s = &last->stats;
    const PreallocSchedule *sc = &r->schedule;
    harness_counter(st, "steps", sc->steps, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "shapes", sc->distinct, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "total_ms", ms / runs, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "step_ms", ms / runs / sc->steps, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "images_per_second", (double)r->cfg.batch_size * sc->steps * runs, HARNESS_COUNTER_RATE);
    harness_counter(st, "peak_mib", s->peak_bytes / MIB, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "device_used_mib", s->device_used_bytes / MIB, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "activation_mib", s->activation_bytes / MIB, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "arena_growths", r->probe.arena_growths, HARNESS_COUNTER_PLAIN);
}

static void label_row(HarnessState *st, const Row *r, const Variant *v)
{
    char label[600];
    const PreallocSchedule *s = &r->schedule;
    snprintf(label, sizeof label, "%s: a fresh core (creation untimed) over %d steps of batch %d, image "
             "sizes %d..%d (%d sizes, shuffled, seed %d, %d shape changes); wall clock to the last "
             "step's core_sync%s; %s backend%s", v->name, s->steps, r->cfg.batch_size, s->lo, s->hi,
             s->distinct, SCHEDULE_SEED, s->changes,
             v->tuned ? "; the preallocation (core_loss_grad at the largest size, no update) untimed, "
                        "timed apart as prealloc_ms" : "",
             core_backend_name(r->cfg.backend),
             r->cfg.backend == CORE_BACKEND_CUDA ? ", deterministic cuDNN" : "");
    harness_set_label(st, label);
}

static void bench_prealloc(HarnessState *st, void *user)
{
    const Variant *v = user;
    Row *r = harness_take_kept(st);
    if (!r && !(r = row_make(st, v->tuned))) return;
    if (v->tuned && !r->identical) {
        harness_counter(st, "wrong", 1, HARNESS_COUNTER_PLAIN);
        harness_fail(st, "the parameters or BN running statistics after the schedule differ from grow's "
                         "(bit for bit): the preallocation changed training");
        row_free(r);
        return;
    }
    PreallocResult last = {0}, grow = {0};
    PreallocMode mode = v->tuned ? tuned_mode(r) : PREALLOC_GROW;
    double ms = 0.0, prealloc_ms = 0.0, grow_ms = 0.0;
    int64_t runs = 0;
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {
        // the preallocated row times grow too, untimed, for its break-even
        bool grow_first = v->tuned && r->iterations % 2 == 0, grow_after = v->tuned && !grow_first;
        if (grow_first) rc = prealloc_run(&r->cfg, &r->batch, &r->schedule, PREALLOC_GROW, false, &grow);
        if (rc == 0) rc = prealloc_run(&r->cfg, &r->batch, &r->schedule, mode, false, &last);
        if (rc == 0 && grow_after) rc = prealloc_run(&r->cfg, &r->batch, &r->schedule, PREALLOC_GROW, false, &grow);
        r->iterations++;
        harness_set_iteration_time(st, last.schedule_ms * 1e-3);
        ms += last.schedule_ms;
        prealloc_ms += last.prealloc_ms;
        grow_ms += grow.schedule_ms;
        runs++;
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "training over the schedule");
        row_free(r);
        return;
    }
    if (!practice_in_effect(st, &r->cfg, &last.stats)) {
        row_free(r);
        return;
    }
    add_counters(st, r, &last, ms, runs);
    if (v->tuned) {
        harness_counter(st, "wrong", 0, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "prealloc_ms", prealloc_ms / runs, HARNESS_COUNTER_PLAIN);
        practice_break_even(st, prealloc_ms / runs, (grow_ms - ms) / runs / r->schedule.steps);
    }
    label_row(st, r, v);
    harness_keep(st, r, row_free);
}

int main(int argc, char **argv)
{
    harness_option_int("prealloc_steps", 32, 1, 100000, NULL,
                       "prealloc: training steps of the schedule (a fresh core each timed run)");
    harness_option_int("prealloc_sizes", 16, 1, 4096, NULL,
                       "prealloc: distinct image sizes of the schedule, evenly spaced from half the "
                       "preset's size to its size (at most one per pixel of that range)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    // small's schedule takes over a minute on a 2-core CPU (32 steps at batch 128): a GPU's preset
    const char *presets = practice_on_gpu() ? "tiny,small" : "tiny";
    const HarnessAxis axes[] = {{"preset", presets, true}, {"batch", "0", false}, {NULL, NULL, false}};
    HarnessSpec spec = {.practice = "prealloc", .role = HARNESS_BASELINE, .timing = HARNESS_TIMING_MANUAL,
                        .fn = bench_prealloc, .unit = HARNESS_MS, .min_time = 0.5};
    spec.variant = grow_variant.name;
    spec.user = (void *)&grow_variant;
    harness_register_axes(&spec, axes);
    spec.variant = preallocated_variant.name;
    spec.role = HARNESS_TUNED;
    spec.user = (void *)&preallocated_variant;
    harness_register_axes(&spec, axes);
    return harness_run();
}
