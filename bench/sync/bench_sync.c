// bench_sync.c: the sync practice, avoiding needless CPU-GPU synchronisation: .item(),
// .cpu(), nonzero() and print make the host wait until the device has finished everything
// queued, so it cannot queue the next step's work while the device runs this one.
// Macro (sync/*): training steps of the core (CUDA) reading the loss back every step, as
//   `loss.item()` in the loop does (baseline), against deferred reads every 10 or 100 steps
//   and one read per run of SYNC_RUN_STEPS steps (the core sums the losses on the device);
//   from launch-bound (tiny, batch 8) to compute-bound (resnet18, batch 256). The losses
//   each tuned variant reads must equal the means of the baseline's over the same steps.
//   Speedups over the baseline are the summary's (scripts/stats.py, from the repetitions of
//   both rows): a figure taken from "the baseline that ran last" in this process would be
//   another repetition's, or none, under random interleaving.
// Micro (sync_micro/*): steps of L small kernels on one stream with nothing at the end of
//   each step, a stream synchronize, a scalar copied back (.item()), a count read back to
//   size the next launch (nonzero), or 1000 values copied back and formatted (print).
//   Overhead per step against the sync-free steps measured in the same run, and the GPU's
//   idle fraction (1 - kernel time / wall time, kernel time from CUDA events).
// Micro (sync_hidden_alloc/*, sync_hidden_copy/*): the syncs nobody asked for: a
//   cudaMalloc/cudaFree in every step against a buffer allocated once, and a small copy
//   from pageable memory against the same copy from pinned memory.
// Without a GPU every run is skipped with the reason: a sync only exists with a device.
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "bench/sync/sync_losses.h"
#include "bench/sync/sync_micro.h"
#include "kernels/error.h"

#define SYNC_RUN_STEPS 200 // training steps per timed run; the at_end variant reads once per run
#define SYNC_MICRO_STEPS 64

// ---- macro: the loss read-back cadence on the practice driver -------------------------------------

static void read_every_step(CoreConfig *c) { c->readback = CORE_READBACK_EVERY_STEP; }
static void read_every_10(CoreConfig *c)
{
    c->readback = CORE_READBACK_DEFERRED;
    c->readback_interval = 10;
}
static void read_every_100(CoreConfig *c)
{
    c->readback = CORE_READBACK_DEFERRED;
    c->readback_interval = 100;
}
static void read_at_end(CoreConfig *c)
{
    c->readback = CORE_READBACK_DEFERRED;
    c->readback_interval = SYNC_RUN_STEPS;
}

static const PracticeVariant macro_variants[] = {
    {"every_step", HARNESS_BASELINE, read_every_step, NULL},
    {"every_10", HARNESS_TUNED, read_every_10, NULL},
    {"every_100", HARNESS_TUNED, read_every_100, NULL},
    {"at_end", HARNESS_TUNED, read_at_end, NULL},
};

// After a run: the read cadence, its step time and, for a tuned run, the check of the
// losses it reads against the every-step baseline's (both recomputed here, untimed).
static void finish_run(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                       const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)core;
    (void)ctx;
    int interval = cfg->readback == CORE_READBACK_DEFERRED ? cfg->readback_interval : 1;
    harness_counter(st, "reads_per_step", 1.0 / interval, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "loss_reads", (double)(o->steps / interval), HARNESS_COUNTER_PLAIN);
    if (v->role == HARNESS_BASELINE) return;
    CoreConfig baseline = *cfg;
    read_every_step(&baseline);
    LossComparison cmp;
    if (sync_losses_check(&baseline, cfg, &cmp) != 0) {
        practice_fail_or_skip(st, "checking the losses read against the baseline's");
        return;
    }
    harness_counter(st, "loss_reads_checked", cmp.compared, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "loss_max_rel_diff", cmp.max_rel, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong", cmp.mismatched > 0, HARNESS_COUNTER_PLAIN);
    if (cmp.mismatched > 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "%d of %d losses read differ from the every-step baseline's means "
                 "(largest relative difference %.3g, tolerance %g)", cmp.mismatched, cmp.compared,
                 cmp.max_rel, SYNC_LOSS_TOLERANCE);
        harness_fail(st, msg);
    }
}

static const PracticeHooks macro_hooks = {.finish = finish_run, .ctx = NULL};

// ---- micro: what a sync costs a stream of small kernels ---------------------------------------------

static void bench_micro(HarnessState *st, void *user)
{
    const SyncVariant v = *(const SyncVariant *)user;
    if (practice_skip_without_gpu(st)) return;
    int kernels = (int)harness_axis_int(st, "kernels");
    SyncMicro m;
    SyncMicroResult r, none;
    // untimed warm-up of both: module load, first launches, the pinned buffer's first use
    if (sync_micro_create(&m, kernels, SYNC_MICRO_STEPS) != 0 || sync_micro_run(&m, SYNC_NONE, &none) != 0 ||
        sync_micro_run(&m, v, &r) != 0) {
        practice_fail_or_skip(st, "setting up");
        sync_micro_free(&m);
        return;
    }
    double wall = 0, kernel = 0, none_wall = 0;
    int64_t runs = 0, wrong = 0, text = 0;
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {
        // the sync-free steps of the same instance, interleaved, for the overhead
        rc = sync_micro_run(&m, SYNC_NONE, &none);
        if (rc == 0) rc = sync_micro_run(&m, v, &r);
        if (rc != 0) break;
        harness_set_iteration_time(st, r.wall_seconds);
        wall += r.wall_seconds;
        kernel += r.kernel_seconds;
        none_wall += none.wall_seconds;
        wrong += r.wrong_counts;
        text += r.text_bytes;
        runs++;
    }
    int32_t count = 0;
    if (rc == 0) rc = sync_micro_read_count(&m, &count);
    sync_micro_free(&m);
    if (rc != 0) {
        practice_fail_or_skip(st, "the steps");
        return;
    }
    double steps = (double)runs * SYNC_MICRO_STEPS;
    harness_counter(st, "step_us", steps > 0 ? 1e6 * wall / steps : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "none_step_us", steps > 0 ? 1e6 * none_wall / steps : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "overhead_us", steps > 0 ? 1e6 * (wall - none_wall) / steps : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "kernel_us_per_step", steps > 0 ? 1e6 * kernel / steps : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "gpu_idle_fraction", wall > 0 ? 1.0 - kernel / wall : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong_counts", (double)wrong, HARNESS_COUNTER_PLAIN);
    if (v == SYNC_PRINT) harness_counter(st, "printed_bytes_per_step", steps > 0 ? text / steps : 0,
                                         HARNESS_COUNTER_PLAIN);
    char label[400];
    snprintf(label, sizeof label, "%d steps of %d kernels over %d floats (in L2 throughout: warm), wall "
             "clock to a stream synchronize; kernel time from CUDA events around each step's kernels "
             "(so gpu_idle_fraction is the idle time between steps: gaps inside a step count as busy)",
             SYNC_MICRO_STEPS, kernels, SYNC_MICRO_ELEMENTS);
    harness_set_label(st, label);
    if (wrong || count != SYNC_MICRO_ELEMENTS / 2) {
        char msg[160];
        snprintf(msg, sizeof msg, "the count kernel gave %d (want %d); %lld counts read back were wrong",
                 (int)count, SYNC_MICRO_ELEMENTS / 2, (long long)wrong);
        harness_fail(st, msg);
    }
}

static const SyncVariant micro_variants[SYNC_VARIANT_COUNT] = {
    SYNC_NONE, SYNC_STREAM_SYNC, SYNC_ITEM, SYNC_NONZERO, SYNC_PRINT,
    SYNC_MALLOC_FREE, SYNC_CACHED_ALLOC, SYNC_PAGEABLE_COPY, SYNC_PINNED_COPY};

static void register_micro(const char *practice, const char *variant, HarnessRole role, SyncVariant v)
{
    harness_register(&(HarnessSpec){
        .practice = practice, .variant = variant, .role = role, .timing = HARNESS_TIMING_MANUAL,
        .fn = bench_micro, .user = (void *)&micro_variants[v], .axes = {{"kernels", "4,16,64"}},
        .unit = HARNESS_US, .min_time = 0.2, .cache = HARNESS_CACHE_WARM, .gpu_only = true});
}

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    static Practice macro = {
        .name = "sync", .variants = macro_variants, .variant_count = 4,
        .presets = "tiny,small,resnet18", .batches = "8,0", .mode = PRACTICE_THROUGHPUT,
        .gpu_only = true, .steps = SYNC_RUN_STEPS, .min_time = 0.5, .check = PRACTICE_CHECK_NONE,
        .hooks = &macro_hooks,
        .label = "loss read back every step (.item()) vs every 10 or 100 steps vs once per 200 steps "
                 "(one read per timed run); tuned reads checked against the baseline's means"};
    practice_register(&macro);
    register_micro("sync_micro", "item", HARNESS_BASELINE, SYNC_ITEM);
    register_micro("sync_micro", "none", HARNESS_TUNED, SYNC_NONE);
    register_micro("sync_micro", "stream_sync", HARNESS_REFERENCE, SYNC_STREAM_SYNC);
    register_micro("sync_micro", "nonzero", HARNESS_REFERENCE, SYNC_NONZERO);
    register_micro("sync_micro", "print", HARNESS_REFERENCE, SYNC_PRINT);
    register_micro("sync_hidden_alloc", "malloc_free", HARNESS_BASELINE, SYNC_MALLOC_FREE);
    register_micro("sync_hidden_alloc", "cached", HARNESS_TUNED, SYNC_CACHED_ALLOC);
    register_micro("sync_hidden_copy", "pageable_copy", HARNESS_BASELINE, SYNC_PAGEABLE_COPY);
    register_micro("sync_hidden_copy", "pinned_copy", HARNESS_TUNED, SYNC_PINNED_COPY);
    return harness_run();
}
