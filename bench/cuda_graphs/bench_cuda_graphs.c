// bench_cuda_graphs.c: CUDA graphs (torch.cuda.graphs / torch.cuda.CUDAGraph), the whole
// training step captured once and replayed with cudaGraphLaunch, against launching it op
// by op (eager). The core's cuda_graph field (kernels/core.h): the first step of a shape
// runs eagerly (plans, autotuning), the next one is captured, the rest replay; the batch
// is copied into the graph's static input outside the graph (a device batch by one
// device-to-device copy, PyTorch's static_input.copy_()), the learning rate is read from
// device memory. Both variants read the loss back every READBACK_INTERVAL steps
// (deferred), so that the only difference between them is how the step is launched.
// Macro (cuda_graphs/*): training steps of each preset, eager (baseline) vs graph (tuned),
//   through the practice driver (same batches, same steps); the update after 5 steps (one
//   eager, one captured, three replayed) must agree with eager's within CHECK_TOLERANCE; the graph row fails unless exactly one capture happened and every
//   timed step was a replay. The win is largest where the step is launch-bound (tiny,
//   mlp, small: many small kernels) and small where the GPU is busy (resnet18).
// Capture cost (cuda_graphs_capture/*): a fresh core's first step (eager: plans), its
//   second (the graph row's capture + instantiate + first replay) and the steady step
//   after them; the graph row measures eager in the same process too and reports the
//   break-even: (its second step - eager's second step) / (eager step - graph step).
// Dynamic shapes (cuda_graphs_dynamic/*): the image size cycles through 3 sizes (the
//   preset's, 3/4 and 1/2 of it), changing every `every` steps: every new shape is one
//   eager step and one capture before any replay, so small `every` shows the re-capture
//   cost (every=1: the graph core never replays). The graph row checks its update over the
//   schedule against an eager run's (deterministic cuDNN, CHECK_TOLERANCE).
// GPU only: without a usable CUDA device every row skips, naming why.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/check.h"
#include "kernels/clock.h"

#define READBACK_INTERVAL 10
// Relative L2 of the update after the check's steps, graph vs eager (of eager's update). The
// kernels are the same ones in the same order, but the benchmarks keep cuDNN's default
// (non-deterministic) algorithms, whose atomics sum in another order run to run: fp32 order
// alone moves the update by 1e-6 (tiny) to 1.9e-3 (small, batch 32) in 5 steps (fast CPU vs
// reference, measured), 5x below this; a frozen update is 1, a stale input or learning rate
// a whole step's share (> 0.1). tests/test_core_graph.c checks bit-for-bit equality with
// deterministic cuDNN.
#define CHECK_TOLERANCE 1e-2
#define CHECK_STEPS 5
#define DYNAMIC_SIZES 3

// ---- the two variants ----------------------------------------------------------------------

static void deferred_readback(CoreConfig *c)
{
    c->readback = CORE_READBACK_DEFERRED;
    c->readback_interval = READBACK_INTERVAL;
}
static void use_eager(CoreConfig *c) { deferred_readback(c); c->cuda_graph = false; }
static void use_graph(CoreConfig *c) { deferred_readback(c); c->cuda_graph = true; }

static const PracticeVariant steps_variants[] = {
    {"eager", HARNESS_BASELINE, use_eager, NULL},
    {"graph", HARNESS_TUNED, use_graph, NULL},
};

// The core's graph counters as the row's counters.
static void graph_counters(HarnessState *st, const CoreStats *s)
{
    harness_counter(st, "graph_captures", s->graph_captures, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "graph_replays", s->graph_replays, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "eager_steps", s->eager_steps, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "capture_ms", s->capture_ms, HARNESS_COUNTER_PLAIN);
}

// The graph counters of a run; for the graph variant, a check that it really replayed.
static void steps_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                         const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)core;
    (void)v;
    const CoreStats *s = &o->stats;
    graph_counters(st, s);
    if (!cfg->cuda_graph) return;
    // One shape: one eager step and one capture (both in the warm-up), then replays only.
    if (s->graph_captures != 1 || s->graph_replays < o->steps) {
        char msg[200];
        snprintf(msg, sizeof msg, "the graph variant did not replay its step: %d captures, %d "
                 "replays for %lld timed steps", s->graph_captures, s->graph_replays,
                 (long long)o->steps);
        harness_fail(st, msg);
    }
}

static const PracticeHooks steps_hooks = {.finish = steps_finish};

static int step(Core *core, const PracticeBatch *b, int size)
{
    TRY(core_set_image_size(core, size));
    CoreBatch batch = practice_batch_view(b, b->n);
    return core_step(core, &batch, NULL);
}

// ---- capture cost and break-even ---------------------------------------------------------------

typedef struct Phases {
    double first_ms;   // a fresh core's first step (eager either way: plans)
    double second_ms;  // its second (graph: capture + instantiate + the first replay)
    double step_ms;    // mean of the steady steps after them
    double capture_ms; // the core's own count: stream capture + instantiate
} Phases;

static int measure_phases(CoreConfig cfg, bool graph, int steps, const PracticeBatch *b, Phases *p)
{
    cfg.cuda_graph = graph;
    Core *core = NULL;
    TRY(core_create(&cfg, &core));
    int size = cfg.model.image_size;
    double t0 = clock_seconds();
    int rc = step(core, b, size);
    if (rc == 0) rc = core_sync(core);
    double t1 = clock_seconds();
    if (rc == 0) rc = step(core, b, size);
    if (rc == 0) rc = core_sync(core);
    double t2 = clock_seconds();
    for (int i = 0; i < steps && rc == 0; i++) rc = step(core, b, size);
    if (rc == 0) rc = core_sync(core);
    double t3 = clock_seconds();
    CoreStats s;
    if (rc == 0) rc = core_stats(core, &s);
    if (rc == 0 && graph && s.graph_captures != 1)
        rc = error_set(ERROR_LIBRARY, "capture cost: %d captures where one was expected", s.graph_captures);
    if (rc == 0) *p = (Phases){1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2) / steps, s.capture_ms};
    core_free(core);
    return rc;
}

static void bench_capture(HarnessState *st, void *user)
{
    bool graph = user != NULL;
    CoreConfig cfg;
    if (!practice_run_config(st, true, use_eager, &cfg)) return;
    int steps = (int)harness_option_int_value("capture_steps");
    PracticeBatch b;
    if (practice_batch_make(&b, &cfg, cfg.model.image_size) != 0) {
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    Phases mine = {0}, eager = {0};
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {
        if (graph) rc = measure_phases(cfg, false, steps, &b, &eager);
        if (rc == 0) rc = measure_phases(cfg, graph, steps, &b, &mine);
        harness_set_iteration_time(st, mine.second_ms * 1e-3);
    }
    practice_batch_free(&b);
    if (rc != 0) {
        practice_fail_or_skip(st, "timing the first, second and steady steps");
        return;
    }
    harness_counter(st, "first_step_ms", mine.first_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "second_step_ms", mine.second_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "step_ms", mine.step_ms, HARNESS_COUNTER_PLAIN);
    char label[400];
    int used = snprintf(label, sizeof label, "%s: a fresh core's second step (time; graph: capture "
                        "+ instantiate + first replay), then %d steady steps; batch %d, %dx%d, "
                        "device-resident batch", graph ? "graph" : "eager", steps, cfg.batch_size,
                        cfg.model.image_size, cfg.model.image_size);
    if (graph) {
        double cost = mine.second_ms - eager.second_ms, saving = eager.step_ms - mine.step_ms;
        harness_counter(st, "capture_ms", mine.capture_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "eager_step_ms", eager.step_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "capture_cost_ms", cost, HARNESS_COUNTER_PLAIN);
        double even = practice_break_even(st, cost, saving);
        if (even >= 0) {
            snprintf(label + used, sizeof label - used, "; capturing costs %.2f ms more than an "
                     "eager step (%.2f ms of it capture + instantiate) and pays back after %.0f "
                     "steps (%.3f ms saved per step)", cost, mine.capture_ms, ceil(even), saving);
        } else {
            snprintf(label + used, sizeof label - used, "; never pays back: replayed steps are "
                     "not faster (%.3f ms slower per step)", -saving);
        }
    }
    harness_set_label(st, label);
}

// ---- dynamic shapes ------------------------------------------------------------------------------

// The image size of step i: the preset's, 3/4 and 1/2 of it in turn, `every` steps each.
static int dynamic_size(int image_size, int every, int i)
{
    static const int num[DYNAMIC_SIZES] = {4, 3, 2};
    int s = image_size * num[(i / every) % DYNAMIC_SIZES] / 4;
    return s > 0 ? s : 1;
}

// `steps` steps of the schedule on a fresh core, after `warmup` steps at the preset's size;
// the time of the schedule (one synchronisation, at its end), the core's counters over it
// and, when params is not NULL, the parameters after it.
static int run_schedule(const CoreConfig *cfg, const PracticeBatch *b, int every, int steps,
                        int warmup, double *ms, CoreStats *delta, float *params, size_t count)
{
    Core *core = NULL;
    TRY(core_create(cfg, &core));
    int size = cfg->model.image_size, rc = 0;
    for (int i = 0; i < warmup && rc == 0; i++) rc = step(core, b, size);
    CoreStats s0, s1;
    if (rc == 0) rc = core_sync(core);
    if (rc == 0) rc = core_stats(core, &s0);
    double t0 = clock_seconds();
    for (int i = 0; i < steps && rc == 0; i++) rc = step(core, b, dynamic_size(size, every, i));
    if (rc == 0) rc = core_sync(core);
    *ms = 1e3 * (clock_seconds() - t0);
    if (rc == 0) rc = core_stats(core, &s1);
    if (rc == 0) {
        *delta = s1;
        delta->graph_captures -= s0.graph_captures;
        delta->graph_replays -= s0.graph_replays;
        delta->eager_steps -= s0.eager_steps;
        delta->capture_ms -= s0.capture_ms;
    }
    if (rc == 0 && params) rc = core_params_get(core, params, count);
    core_free(core);
    return rc;
}

// Graph vs eager over the schedule, both with deterministic cuDNN: relative L2 of the update
// (the parameters after it minus the seed's initial ones; practice_update_rel_diff). 0 or -1.
static int check_schedule(CoreConfig cfg, const PracticeBatch *b, int every, int steps, int warmup,
                          double *rel)
{
    cfg.deterministic = true;
    Core *probe = NULL;
    TRY(core_create(&cfg, &probe));
    size_t count = core_param_count(probe);
    float *e = malloc(count * sizeof(float)), *g = malloc(count * sizeof(float)),
          *init = malloc(count * sizeof(float));
    int rc = e && g && init ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    if (rc == 0) rc = core_params_get(probe, init, count);  // the same seed: every run's start
    core_free(probe);
    double ms = 0.0;
    CoreStats unused;
    cfg.cuda_graph = false;
    if (rc == 0) rc = run_schedule(&cfg, b, every, steps, warmup, &ms, &unused, e, count);
    cfg.cuda_graph = true;
    if (rc == 0) rc = run_schedule(&cfg, b, every, steps, warmup, &ms, &unused, g, count);
    if (rc == 0) *rel = practice_update_rel_diff(init, e, g, count);
    free(e);
    free(g);
    free(init);
    return rc;
}

static void bench_dynamic(HarnessState *st, void *user)
{
    bool graph = user != NULL;
    CoreConfig cfg;
    if (!practice_run_config(st, true, graph ? use_graph : use_eager, &cfg)) return;
    if (cfg.model.kind != CORE_MODEL_RESNET) {
        harness_skip(st, "the MLP's first layer fixes its input size");
        return;
    }
    int64_t every = harness_axis_int(st, "every");
    if (every < 1 || every > 100000) {
        harness_fail(st, "every must be 1..100000 (steps per image size)");
        return;
    }
    int steps = (int)harness_option_int_value("dynamic_steps"), warmup = 3;
    PracticeBatch b;
    if (practice_batch_make(&b, &cfg, cfg.model.image_size) != 0) {
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    double rel = 0.0, ms = 0.0;
    CoreStats delta = {0};
    int rc = graph ? check_schedule(cfg, &b, (int)every, steps, warmup, &rel) : 0;
    if (rc != 0) {
        practice_fail_or_skip(st, "checking against eager");
        practice_batch_free(&b);
        return;
    }
    while (rc == 0 && harness_keep_running(st)) {
        rc = run_schedule(&cfg, &b, (int)every, steps, warmup, &ms, &delta, NULL, 0);
        harness_set_iteration_time(st, ms * 1e-3);
    }
    practice_batch_free(&b);
    if (rc != 0) {
        practice_fail_or_skip(st, "training with changing sizes");
        return;
    }
    int size = cfg.model.image_size;
    harness_counter(st, "steps", steps, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "step_ms", ms / steps, HARNESS_COUNTER_PLAIN);
    graph_counters(st, &delta);
    harness_counter(st, "images_per_second", (double)steps * cfg.batch_size, HARNESS_COUNTER_RATE);
    if (graph) {
        harness_counter(st, "check_rel_diff", rel, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "check_tolerance", CHECK_TOLERANCE, HARNESS_COUNTER_PLAIN);
    }
    char label[400];
    snprintf(label, sizeof label, "%s: %d steps, image size %d/%d/%d in turn, %lld steps each "
             "(after %d warm-up steps at %d); batch %d, device-resident", graph ? "graph" : "eager",
             steps, dynamic_size(size, 1, 0), dynamic_size(size, 1, 1), dynamic_size(size, 1, 2),
             (long long)every, warmup, size, cfg.batch_size);
    harness_set_label(st, label);
    if (graph && !(rel <= CHECK_TOLERANCE)) {
        char msg[200];
        snprintf(msg, sizeof msg, "the update over the schedule differs from eager's by %.3g of "
                 "eager's update (relative L2, tolerance %g)", rel, CHECK_TOLERANCE);
        harness_fail(st, msg);
    }
}

// ---- registration ----------------------------------------------------------------------------

static void register_custom(const char *practice, const char *variant, HarnessRole role,
                            HarnessFn fn, const void *user, const HarnessAxis *axes)
{
    HarnessSpec spec = {.practice = practice, .variant = variant, .role = role,
                        .timing = HARNESS_TIMING_MANUAL, .fn = fn, .user = (void *)user,
                        .unit = HARNESS_MS, .iterations = 1, .gpu_only = true};
    harness_register_axes(&spec, axes);
}

int main(int argc, char **argv)
{
    harness_option_int("capture_steps", 20, 1, 100000, NULL,
                       "cuda_graphs_capture: steady steps timed after the first two");
    harness_option_int("dynamic_steps", 24, 1, 100000, NULL,
                       "cuda_graphs_dynamic: training steps per run (the image size changes every "
                       "`every` steps, the axis)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    // GPU only: without a GPU every row skips with the reason, over the GPU's presets.
    static const char *presets = "tiny,mlp,small,resnet18";
    static Practice steps = {
        .name = "cuda_graphs", .variants = steps_variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .gpu_only = true, .warmup_steps = 3, .steps = 20,
        .min_time = 0.5, .check = PRACTICE_CHECK_PARAMS, .tolerance = CHECK_TOLERANCE,
        .check_steps = CHECK_STEPS, .hooks = &steps_hooks,
        .label = "steps launched op by op vs one CUDA graph replay each; loss read back every "
                 "10 steps in both"};
    steps.presets = presets;
    practice_register(&steps);

    static const int graph_flag = 1;
    const HarnessAxis capture_axes[] = {{"preset", presets, true}, {"batch", "0", false}, {NULL, NULL, false}};
    register_custom("cuda_graphs_capture", "eager", HARNESS_BASELINE, bench_capture, NULL, capture_axes);
    register_custom("cuda_graphs_capture", "graph", HARNESS_TUNED, bench_capture, &graph_flag, capture_axes);

    const HarnessAxis dynamic_axes[] = {{"preset", "tiny,small,resnet18", true}, {"batch", "0", false},
                                        {"every", "1,2,4,16", false}, {NULL, NULL, false}};
    register_custom("cuda_graphs_dynamic", "eager", HARNESS_BASELINE, bench_dynamic, NULL, dynamic_axes);
    register_custom("cuda_graphs_dynamic", "graph", HARNESS_TUNED, bench_dynamic, &graph_flag, dynamic_axes);
    return harness_run();
}
