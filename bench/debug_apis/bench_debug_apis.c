// bench_debug_apis.c: the tuning guide's "Disable debugging APIs" (torch.autograd.detect_anomaly,
// torch.autograd.profiler.profile / emit_nvtx, gradcheck: "make sure to disable them for
// regular training"). Whole training steps of each core preset on the practice driver (the
// CUDA backend with a GPU, the fast CPU backend without), the debugging API on (baseline:
// what a run that leaves it on pays) against off (tuned: no hooks at all). Wall clock over
// the timed steps, ending in core_sync.
//   debug_anomaly/{on,off}: anomaly detection. After every op's backward its parameter
//     gradients are scanned for NaN/Inf and the answer waited for (CUDA: a scan kernel on the
//     core's stream, its flag copied back, cudaStreamSynchronize per op; CPU: a scan of the
//     range), so that a non-finite value fails the step at once, naming the op's range.
//     Counter ops_checked (per step; > 0 for `on`, else the row fails).
//   debug_profiler/{on,off}: per-op profiling events (CUDA: cudaEventRecord on the core's
//     stream per op and at the update, read after the step; CPU: clock_gettime). Counter
//     events_per_step.
// Neither changes a number: the update after 3 steps must be bit-identical (the driver's
// check, tolerance 0), and --practice_selftest=frozen|half_lr|drop_step fails the off rows.
#include <stdio.h>

#include "bench/debug_apis/debug_hooks.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"

static const PracticeVariant variants[] = {
    {"on", HARNESS_BASELINE, NULL, NULL},
    {"off", HARNESS_TUNED, NULL, NULL},
};

// The driver names each core's variant (the check's baseline core included): `on` is the baseline.
static bool is_on(const PracticeVariant *v) { return v->role == HARNESS_BASELINE; }

static int core_created(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                        const PracticeVariant *v)
{
    (void)st;
    DebugMode mode = is_on(v) ? *(const DebugMode *)ctx : DEBUG_OFF;
    return debug_hooks_install(core, mode, cfg->backend == CORE_BACKEND_CUDA);
}

static void finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                   const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)cfg, (void)o;
    DebugMode mode = *(const DebugMode *)ctx;
    bool on = is_on(v);
    DebugCounts c = on ? debug_hooks_counts(core) : (DebugCounts){0};
    double steps = c.steps > 0 ? (double)c.steps : 1.0;
    if (mode == DEBUG_ANOMALY) {
        harness_counter(st, "ops_checked", c.ops_checked / steps, HARNESS_COUNTER_PLAIN);
    } else {
        harness_counter(st, "events_per_step", c.events / steps, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "profiled_ms_per_step", c.events_read ? c.profiled_ms / steps : 0.0,
                        HARNESS_COUNTER_PLAIN);
    }
    int64_t work = mode == DEBUG_ANOMALY ? c.ops_checked : c.events;
    if (on && (c.steps == 0 || work == 0)) {
        char msg[200];
        snprintf(msg, sizeof msg, "the debugging API was not in effect: %lld steps, %lld %s",
                 (long long)c.steps, (long long)work, mode == DEBUG_ANOMALY ? "ops checked" : "events");
        harness_fail(st, msg);
    }
}

static const DebugMode anomaly_mode = DEBUG_ANOMALY, profiler_mode = DEBUG_PROFILER;
static const PracticeHooks anomaly_hooks = {core_created, NULL, finish, (void *)&anomaly_mode};
static const PracticeHooks profiler_hooks = {core_created, NULL, finish, (void *)&profiler_mode};

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    // tiny, mlp, small: a CPU steps through them in seconds; a GPU too.
    static Practice anomaly = {
        .name = "debug_anomaly", .variants = variants, .variant_count = 2,
        .presets = "tiny,mlp,small", .batches = "0", .mode = PRACTICE_THROUGHPUT, .steps = 10,
        .min_time = 0.5, .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.0 /* bit-identical */,
        .check_steps = 3, .hooks = &anomaly_hooks,
        .label = "torch.autograd.detect_anomaly: every op's gradients scanned for nan/inf and "
                 "waited for (on) vs off"};
    static Practice profiler = {
        .name = "debug_profiler", .variants = variants, .variant_count = 2,
        .presets = "tiny,mlp,small", .batches = "0", .mode = PRACTICE_THROUGHPUT, .steps = 10,
        .min_time = 0.5, .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.0 /* bit-identical */,
        .check_steps = 3, .hooks = &profiler_hooks,
        .label = "torch.autograd.profiler.profile: a timestamp (CPU) or CUDA event per op, read "
                 "after the step (on) vs off"};
    practice_register(&anomaly);
    practice_register(&profiler);
    return harness_run();
}
