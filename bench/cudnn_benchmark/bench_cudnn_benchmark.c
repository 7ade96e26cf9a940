// bench_cudnn_benchmark.c: the cuDNN autotuner, torch.backends.cudnn.benchmark = True,
// on fixed and on changing input shapes. The core's two convolution policies: cuDNN's
// heuristics (baseline, benchmark = False) and autotuning (tuned: cudnnFind times the
// candidates the first time a shape is met, and the winner is cached per shape).
// Macro, fixed shape (cudnn_benchmark/*): training steps of each preset after the
//   tuning is done (the practice driver: warm-up, steps ending in core_sync, the
//   update after 3 steps checked against the heuristic run's within CHECK_TOLERANCE).
// Tuning cost (cudnn_benchmark_tuning/*): with an empty algorithm cache, the first step
//   (planning included) and the steady step after it, per policy; the tuned row also
//   measures the heuristic policy in the same process and reports the break-even number
//   of steps: (its planning cost - the heuristic's) / (heuristic step - tuned step).
// Dynamic shapes (cudnn_benchmark_dynamic/*): N steps whose image size is drawn from K
//   sizes (K = 1, 4, 16, or 0: every step a new size), with the last batch of every epoch
//   smaller, from an empty cache; cumulative time against step goes to the .curves.csv.
//   cudnn_benchmark_dynamic_cpu/fast_cpu runs the same schedule on the fast CPU backend
//   (no cuDNN: what changing sizes costs the core itself; it runs without a GPU).
// Micro, heuristic regret (cudnn_benchmark_regret/*): for each convolution shape of a
//   preset and each pass, every algorithm cuDNN offers timed with CUDA events; the time of
//   the heuristics' pick (baseline), of Find's pick (tuned), of the fastest engine
//   configuration of the backend API (tuned: engine_search) and of the fastest legacy
//   algorithm (reference).
// PyTorch's autotuner searches cuDNN's engine configurations (the backend/graph API); the
// core's autotune uses the legacy cudnnFind interface, which ranks at most ~8 algorithms
// per pass. engine_search measures what the wider search would find, per convolution.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cudnn_benchmark/cudnn_regret.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/model.h"

#define WARMUP_STEPS 3
// Relative L2 of the update after 3 steps, autotuned vs heuristic algorithms (of the
// heuristic run's update). Other algorithms sum in other orders (Winograd and FFT also round
// their transforms, in TF32 where fp32 allows it): fp32 order alone moves the update by 5e-4
// (small, 3 steps: fast CPU vs reference, measured), transforms by more; a frozen update is
// 1, half the learning rate 0.5, the first of 3 steps skipped ~0.5 (measured: tiny 0.49,
// small 0.51).
#define CHECK_TOLERANCE 5e-2
#define MAX_SHAPES 32

// ---- the two policies -----------------------------------------------------------------------

static void use_heuristic(CoreConfig *c) { c->conv_algo = CORE_CONV_ALGO_HEURISTIC; }
static void use_autotune(CoreConfig *c) { c->conv_algo = CORE_CONV_ALGO_AUTOTUNE; }

static const PracticeVariant fixed_variants[] = {
    {"heuristic", HARNESS_BASELINE, use_heuristic, NULL},
    {"autotune", HARNESS_TUNED, use_autotune, NULL},
};

typedef struct Variant { const char *name; CoreConvAlgo policy; } Variant;
static const Variant heuristic = {"heuristic", CORE_CONV_ALGO_HEURISTIC};
static const Variant autotune = {"autotune", CORE_CONV_ALGO_AUTOTUNE};

// The config change that sets `policy`.
static PracticeChange use_policy(CoreConvAlgo policy)
{
    return policy == CORE_CONV_ALGO_AUTOTUNE ? use_autotune : use_heuristic;
}

// One training step at size x size with n images.
static int step_at(Core *core, const PracticeBatch *b, int size, int n)
{
    TRY(core_set_image_size(core, size));
    CoreBatch batch = practice_batch_view(b, n);
    TRY(core_step(core, &batch, NULL));
    return core_sync(core);
}

// A core for cfg, warmed up at its own shape (module loading, handles, first touch), with
// the algorithm cache emptied afterwards: the next step of a shape plans it from scratch.
static int warm_core(const CoreConfig *cfg, const PracticeBatch *b, Core **out)
{
    TRY(core_create(cfg, out));
    for (int i = 0; i < WARMUP_STEPS; i++) {
        if (step_at(*out, b, cfg->model.image_size, cfg->batch_size) != 0) {
            core_free(*out);
            *out = NULL;
            return -1;
        }
    }
    core_conv_cache_clear();
    return 0;
}

// ---- tuning cost and break-even ------------------------------------------------------------

typedef struct Fixed {
    double first_ms;    // the first step with an empty cache: planning included
    double step_ms;     // mean of the steady steps after it
    double plan_ms;     // first_ms - step_ms: what planning the shape cost
    double autotune_ms; // of which timing candidates (the core's own count)
    CoreStats stats;    // the core's counters at the end (what ran: practice_in_effect)
} Fixed;

static int measure_fixed(CoreConfig cfg, CoreConvAlgo policy, int steps, Fixed *f)
{
    cfg.conv_algo = policy;
    PracticeBatch b;
    TRY(practice_batch_make(&b, &cfg, cfg.model.image_size));
    Core *core = NULL;
    int rc = warm_core(&cfg, &b, &core);
    CoreStats s0, s1;
    double t0 = 0, t1 = 0, t2 = 0;
    if (rc == 0) rc = core_stats(core, &s0);
    if (rc == 0) {
        t0 = clock_seconds();
        rc = step_at(core, &b, cfg.model.image_size, cfg.batch_size);
        t1 = clock_seconds();
    }
    for (int i = 0; i < steps && rc == 0; i++) rc = step_at(core, &b, cfg.model.image_size, cfg.batch_size);
    t2 = clock_seconds();
    if (rc == 0) rc = core_stats(core, &s1);
    if (rc == 0) {
        f->first_ms = 1e3 * (t1 - t0);
        f->step_ms = 1e3 * (t2 - t1) / steps;
        f->plan_ms = f->first_ms - f->step_ms;
        f->autotune_ms = s1.autotune_ms - s0.autotune_ms;
        f->stats = s1;
    }
    core_free(core);
    practice_batch_free(&b);
    return rc;
}

static void bench_tuning(HarnessState *st, void *user)
{
    const Variant *v = user;
    CoreConfig cfg;
    if (!practice_run_config(st, true, use_policy(v->policy), &cfg)) return;
    int steps = (int)harness_option_int_value("fixed_steps");
    Fixed mine = {0}, base = {0};
    bool tuned = v->policy == CORE_CONV_ALGO_AUTOTUNE;
    while (harness_keep_running(st)) {
        if ((tuned && measure_fixed(cfg, CORE_CONV_ALGO_HEURISTIC, steps, &base) != 0) ||
            measure_fixed(cfg, v->policy, steps, &mine) != 0) {
            practice_fail_or_skip(st, "timing the first and the steady steps");
            return;
        }
        harness_set_iteration_time(st, mine.first_ms * 1e-3);
    }
    if (!practice_in_effect(st, &cfg, &mine.stats)) return;
    harness_counter(st, "first_step_ms", mine.first_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "step_ms", mine.step_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "plan_ms", mine.plan_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "autotune_ms", mine.autotune_ms, HARNESS_COUNTER_PLAIN);
    char label[400];
    int used = snprintf(label, sizeof label, "%s: first step with an empty algorithm cache (time), "
                        "then %d steady steps; batch %d, %dx%d", v->name, steps, cfg.batch_size,
                        cfg.model.image_size, cfg.model.image_size);
    if (tuned) {
        double cost = mine.plan_ms - base.plan_ms, saving = base.step_ms - mine.step_ms;
        harness_counter(st, "heuristic_step_ms", base.step_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "heuristic_plan_ms", base.plan_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "tuning_cost_ms", cost, HARNESS_COUNTER_PLAIN);
        double steps_even = practice_break_even(st, cost, saving);
        if (steps_even >= 0) {
            snprintf(label + used, sizeof label - used, "; tuning %.1f ms pays back after %.0f steps "
                     "(%.3f ms saved per step)", cost, ceil(steps_even), saving);
        } else {
            snprintf(label + used, sizeof label - used, "; never pays back: autotuned steps are "
                     "not faster (%.3f ms per step)", -saving);
        }
    }
    harness_set_label(st, label);
}

// ---- dynamic shapes ----------------------------------------------------------------------------

// The steps' sizes and batch counts: sizes drawn from K evenly spaced ones between
// 4/7 of the preset's size and its size (128..224 for resnet18), widened upwards when
// there are more sizes than pixels in that range; K = 0: every step a size of its own.
// Every epoch_steps-th step is the epoch's last batch, a third of the batch.
typedef struct Schedule { int steps, *size, *n, lo, hi, k, max_size; } Schedule;

static void schedule_free(Schedule *s)
{
    free(s->size);
    free(s->n);
    s->size = s->n = NULL;
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

static int schedule_make(Schedule *s, int image_size, int batch, int k, int steps, int epoch_steps)
{
    int count = k > 0 ? k : steps;
    *s = (Schedule){steps, malloc((size_t)steps * sizeof(int)), malloc((size_t)steps * sizeof(int)),
                    image_size * 4 / 7, image_size, k, image_size};
    int *sizes = malloc((size_t)count * sizeof(int));
    if (!s->size || !s->n || !sizes) {
        free(sizes);
        schedule_free(s);
        return error_set(ERROR_OUT_OF_MEMORY, "schedule: out of memory");
    }
    if (s->lo < 1) s->lo = 1;
    if (count == 1) s->lo = image_size;
    if (count - 1 > s->hi - s->lo) s->hi = s->lo + count - 1;
    s->max_size = s->hi;
    for (int j = 0; j < count; j++)
        sizes[j] = count == 1 ? image_size : s->lo + (int)lround((double)j * (s->hi - s->lo) / (count - 1));
    uint64_t rng = 12345;
    if (k == 0)  // a permutation: no size comes twice
        for (int j = count - 1; j > 0; j--) {
            int r = (int)(lcg(&rng) % (uint64_t)(j + 1)), t = sizes[j];
            sizes[j] = sizes[r];
            sizes[r] = t;
        }
    for (int i = 0; i < steps; i++) {
        s->size[i] = k == 0 ? sizes[i] : sizes[lcg(&rng) % (uint64_t)count];
        bool last = epoch_steps > 0 && (i + 1) % epoch_steps == 0;
        s->n[i] = last ? (batch / 3 > 0 ? batch / 3 : 1) : batch;
    }
    free(sizes);
    return 0;
}

// Distinct (n, size) pairs of the schedule.
static int schedule_shapes(const Schedule *s)
{
    int distinct = 0;
    for (int i = 0; i < s->steps; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = s->size[j] == s->size[i] && s->n[j] == s->n[i];
        distinct += !seen;
    }
    return distinct;
}

static void run_dynamic(HarnessState *st, CoreBackend backend, CoreConvAlgo policy, const char *what)
{
    CoreConfig cfg;
    if (practice_config(st, backend, use_policy(policy), &cfg) != 0) {
        practice_fail_or_skip(st, "the config");
        return;
    }
    if (cfg.model.kind != CORE_MODEL_RESNET) {
        harness_skip(st, "the MLP's first layer fixes its input size (and it has no convolutions)");
        return;
    }
    int64_t k = harness_axis_int(st, "sizes");
    int steps = (int)harness_option_int_value("dynamic_steps");
    if (k < 0 || k > 4096) {
        harness_fail(st, "sizes must be 0 (every step a new size) or 1..4096");
        return;
    }
    Schedule s;
    PracticeBatch b = {0};
    if (schedule_make(&s, cfg.model.image_size, cfg.batch_size, (int)k, steps,
                      (int)harness_option_int_value("epoch_steps")) != 0 ||
        practice_batch_make(&b, &cfg, s.max_size) != 0) {
        practice_fail_or_skip(st, "preparing the batches");
        schedule_free(&s);
        return;
    }
    int rc = 0;
    double total_ms = 0.0, late_ms = 0.0, autotune_ms = 0.0;
    int64_t images = 0;
    CoreStats last_stats = {0};
    while (rc == 0 && harness_keep_running(st)) {
        Core *core = NULL;
        if (warm_core(&cfg, &b, &core) != 0) {
            rc = -1;
            break;
        }
        CoreStats s0, s1;
        rc = core_stats(core, &s0);
        double t0 = clock_seconds(), prev = t0;
        total_ms = late_ms = 0.0;
        images = 0;
        for (int i = 0; i < s.steps && rc == 0; i++) {
            rc = step_at(core, &b, s.size[i], s.n[i]);
            double now = clock_seconds();
            images += s.n[i];
            if (i >= s.steps / 2) late_ms += 1e3 * (now - prev);
            harness_curve_point(st, "cumulative_ms", i + 1, images, now - t0, 1e3 * (now - t0));
            harness_curve_point(st, "step_ms", i + 1, images, now - t0, 1e3 * (now - prev));
            prev = now;
        }
        total_ms = 1e3 * (prev - t0);
        if (rc == 0) rc = core_stats(core, &s1);
        if (rc == 0) autotune_ms = s1.autotune_ms - s0.autotune_ms;
        last_stats = s1;
        core_free(core);
        harness_set_iteration_time(st, total_ms * 1e-3);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "training with changing sizes");
    } else if (practice_in_effect(st, &cfg, &last_stats)) {
        int late = s.steps - s.steps / 2;
        harness_counter(st, "steps", s.steps, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "shapes", schedule_shapes(&s), HARNESS_COUNTER_PLAIN);
        harness_counter(st, "total_ms", total_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "step_ms", total_ms / s.steps, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "late_step_ms", late ? late_ms / late : 0.0, HARNESS_COUNTER_PLAIN);
        if (backend == CORE_BACKEND_CUDA)  // the CPU has no algorithms to time
            harness_counter(st, "autotune_ms", autotune_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
        char label[400], last[80] = "";
        int epoch = (int)harness_option_int_value("epoch_steps");
        if (epoch > 0)
            snprintf(last, sizeof last, " with a last batch of %d every %d steps",
                     cfg.batch_size / 3 > 0 ? cfg.batch_size / 3 : 1, epoch);
        snprintf(label, sizeof label, "%s: %d steps%s, sizes %s %d..%d (%d distinct (batch, "
                 "size) shapes), batch %d%s; %s backend", what, s.steps,
                 backend == CORE_BACKEND_CUDA ? " from an empty algorithm cache" : "",
                 k == 0 ? "all different," : k == 1 ? "fixed," : "drawn from", s.lo, s.hi,
                 schedule_shapes(&s), cfg.batch_size, last, core_backend_name(backend));
        harness_set_label(st, label);
    }
    schedule_free(&s);
    practice_batch_free(&b);
}

static void bench_dynamic(HarnessState *st, void *user)
{
    const Variant *v = user;
    CoreBackend backend;
    if (!practice_backend(st, true, &backend)) return;
    run_dynamic(st, backend, v->policy, v->name);
}

static void bench_dynamic_cpu(HarnessState *st, void *user)
{
    (void)user;
    run_dynamic(st, CORE_BACKEND_CPU, CORE_CONV_ALGO_HEURISTIC, "fast CPU backend (no cuDNN)");
}

// ---- heuristic regret ---------------------------------------------------------------------------

typedef enum { PICK_HEURISTIC, PICK_FIND, PICK_FASTEST, PICK_ENGINE_SEARCH } Pick;
static const Pick picks[] = {PICK_HEURISTIC, PICK_FIND, PICK_FASTEST, PICK_ENGINE_SEARCH};

// The distinct convolution shapes of a preset at batch n, in model order.
static int conv_shapes(const CoreConfig *cfg, int n, ConvShape *out, int max)
{
    ModelGraph *g = malloc(sizeof *g);
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "conv shapes: out of memory");
    int count = 0;
    if (model_build(&cfg->model, g) != 0) {
        free(g);
        return -1;
    }
    for (int i = 0; i < g->n_ops; i++) {
        if (g->ops[i].kind != OP_CONV) continue;
        ConvShape s = model_conv_shape(g, &g->ops[i], n);
        bool seen = false;
        for (int j = 0; j < count && !seen; j++) seen = memcmp(&out[j], &s, sizeof s) == 0;
        if (!seen && count < max) out[count++] = s;
    }
    free(g);
    return count;
}

static int parse_pass(const char *name, ConvPass *pass)
{
    if (strcmp(name, "fwd") == 0) *pass = CONV_PASS_FWD;
    else if (strcmp(name, "bwd_data") == 0) *pass = CONV_PASS_BWD_DATA;
    else if (strcmp(name, "bwd_filter") == 0) *pass = CONV_PASS_BWD_FILTER;
    else return error_set(ERROR_BAD_USAGE, "pass '%s': fwd, bwd_data or bwd_filter", name);
    return 0;
}

static void bench_regret(HarnessState *st, void *user)
{
    const Pick which = *(const Pick *)user;
    CoreConfig cfg;
    if (!practice_run_config(st, true, use_heuristic, &cfg)) return;
    ConvPass pass = CONV_PASS_FWD;
    ConvShape shapes[MAX_SHAPES];
    int count = -1;
    if (parse_pass(harness_axis_str(st, "pass"), &pass) != 0 ||
        (count = conv_shapes(&cfg, cfg.batch_size, shapes, MAX_SHAPES)) < 0) {
        practice_fail_or_skip(st, "the config");
        return;
    }
    int64_t conv = harness_axis_int(st, "conv");
    if (conv < 0 || conv >= count) {
        char why[160];
        snprintf(why, sizeof why, "preset %s has %d convolution shape%s (conv 0..%d)",
                 harness_axis_str(st, "preset"), count, count == 1 ? "" : "s", count - 1);
        harness_skip(st, why);
        return;
    }
    const ConvShape *s = &shapes[conv];
    int reps = (int)harness_option_int_value("regret_reps");
    int engine_limit = (int)harness_option_int_value("engine_limit");
    size_t limit = cfg.workspace_limit ? cfg.workspace_limit : (size_t)256 << 20;
    RegretResult r;
    bool engines = which == PICK_ENGINE_SEARCH;
    while (harness_keep_running(st)) {
        if (regret_measure(s, pass, cfg.precision, limit, reps, engines, engine_limit, &r) != 0) {
            practice_fail_or_skip(st, "timing the algorithms");
            return;
        }
        if (engines && r.engine_error[0]) {
            char msg[400];
            snprintf(msg, sizeof msg, "the engine-configuration search: %s", r.engine_error);
            harness_fail(st, msg);
            return;
        }
        int at = which == PICK_HEURISTIC ? r.heuristic : which == PICK_FIND ? r.find : r.fastest;
        harness_set_iteration_time(st, (engines ? r.engine_ms : r.algos[at].ms) * 1e-3);
    }
    const RegretAlgo *h = &r.algos[r.heuristic], *f = &r.algos[r.find], *best = &r.algos[r.fastest];
    harness_counter(st, "offered", r.offered, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "timed", r.count, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "heuristic_ms", h->ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "find_ms", f->ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "fastest_ms", best->ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "regret", h->ms / best->ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "find_regret", f->ms / best->ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "find_search_ms", r.find_search_ms, HARNESS_COUNTER_PLAIN);
    if (engines) {
        harness_counter(st, "engine_ms", r.engine_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "engine_configs", r.engine_offered, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "engine_timed", r.engine_timed, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "engine_limit", engine_limit, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "engine_search_ms", r.engine_search_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "engine_vs_find", f->ms / r.engine_ms, HARNESS_COUNTER_PLAIN);
    }
    char label[1200];
    int used = snprintf(label, sizeof label, "conv %dx%dx%dx%d>%d k%d s%d, %s, fp32 NCHW, CUDA "
                        "events, %d calls each: heuristics pick %s/%s, Find %s/%s, fastest %s/%s; all:",
                        s->n, s->c, s->h, s->w, s->k, s->r, s->stride, conv_pass_name(pass), reps,
                        conv_algo_name(pass, h->algo), conv_math_name(h->math),
                        conv_algo_name(pass, f->algo), conv_math_name(f->math),
                        conv_algo_name(pass, best->algo), conv_math_name(best->math));
    if (engines && used > 0 && (size_t)used < sizeof label)
        used += snprintf(label + used, sizeof label - used, "; engine search: %d of %d configurations "
                         "ran (%s%d plans), fastest engine %lld %.3f ms, search %.0f ms (Find "
                         "%.0f ms); legacy", r.engine_timed, r.engine_offered,
                         engine_limit ? "the first " : "no limit: ",
                         engine_limit ? engine_limit : r.engine_offered,
                         r.engine_index, r.engine_ms, r.engine_search_ms, r.find_search_ms);
    for (int i = 0; i < r.count && used > 0 && (size_t)used < sizeof label; i++) {
        const RegretAlgo *a = &r.algos[i];
        used += snprintf(label + used, sizeof label - used, " %s/%s %.3f ms", conv_algo_name(pass, a->algo),
                         conv_math_name(a->math), a->ms);
    }
    harness_set_label(st, label);
}

// ---- registration ----------------------------------------------------------------------------

static void register_custom(const char *practice, const char *variant, HarnessRole role,
                            HarnessTiming timing, HarnessFn fn, const void *user,
                            const HarnessAxis *axes, HarnessUnit unit)
{
    HarnessSpec spec = {.practice = practice, .variant = variant, .role = role, .timing = timing,
                        .fn = fn, .user = (void *)user, .unit = unit, .iterations = 1,
                        // the regret micro times each algorithm on warm caches, as cudnnFind does
                        .cache = timing == HARNESS_TIMING_CUDA_EVENTS ? HARNESS_CACHE_WARM
                                                                      : HARNESS_CACHE_UNSTATED,
                        // cuDNN's: every family but the fast CPU backend's reference
                        .gpu_only = fn != bench_dynamic_cpu};
    harness_register_axes(&spec, axes);
}

int main(int argc, char **argv)
{
    harness_option_int("fixed_steps", 20, 1, 100000, NULL,
                       "cudnn_benchmark_tuning: steady steps timed after the first one");
    harness_option_int("dynamic_steps", 32, 1, 100000, NULL,
                       "cudnn_benchmark_dynamic: training steps per run (with --harness_axis=sizes=0, "
                       "every one a size of its own)");
    harness_option_int("epoch_steps", 8, 0, 100000, NULL,
                       "cudnn_benchmark_dynamic: every N-th step is an epoch's smaller last batch "
                       "(a third of the batch); 0: none");
    harness_option_int("regret_reps", 5, 1, 10000, NULL,
                       "cudnn_benchmark_regret: timed calls of every algorithm (after one untimed)");
    harness_option_int("engine_limit", 10, 0, 100000, NULL,
                       "cudnn_benchmark_regret/engine_search: engine configurations timed per "
                       "convolution, the first that make plans (PyTorch's "
                       "torch.backends.cudnn.benchmark_limit, 10 by default); 0: every one");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    // The GPU-only parts skip with their reason on a CPU; their presets there are the
    // GPU's, so that the listing shows what a GPU runs.
    static const char *presets = "tiny,small,medium,resnet18";
    static Practice fixed = {
        .name = "cudnn_benchmark", .variants = fixed_variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .gpu_only = true, .steps = 10, .min_time = 0.5,
        .check = PRACTICE_CHECK_PARAMS, .tolerance = CHECK_TOLERANCE, .check_steps = 3,
        .label = "cuDNN heuristics vs autotuned (cudnnFind) algorithms; steps after tuning"};
    fixed.presets = presets;
    practice_register(&fixed);

    const HarnessAxis tuning_axes[] = {{"preset", presets, true}, {"batch", "0", false}, {NULL, NULL, false}};
    register_custom("cudnn_benchmark_tuning", "heuristic", HARNESS_BASELINE, HARNESS_TIMING_MANUAL,
                    bench_tuning, &heuristic, tuning_axes, HARNESS_MS);
    register_custom("cudnn_benchmark_tuning", "autotune", HARNESS_TUNED, HARNESS_TIMING_MANUAL,
                    bench_tuning, &autotune, tuning_axes, HARNESS_MS);

    const HarnessAxis dynamic_axes[] = {{"preset", "small,resnet18", true}, {"batch", "0", false},
                                        {"sizes", "1,4,16,0", false}, {NULL, NULL, false}};
    register_custom("cudnn_benchmark_dynamic", "heuristic", HARNESS_BASELINE, HARNESS_TIMING_MANUAL,
                    bench_dynamic, &heuristic, dynamic_axes, HARNESS_MS);
    register_custom("cudnn_benchmark_dynamic", "autotune", HARNESS_TUNED, HARNESS_TIMING_MANUAL,
                    bench_dynamic, &autotune, dynamic_axes, HARNESS_MS);
    const HarnessAxis cpu_axes[] = {{"preset", "tiny", true}, {"batch", "0", false},
                                    {"sizes", "1,4,16,0", false}, {NULL, NULL, false}};
    register_custom("cudnn_benchmark_dynamic_cpu", "fast_cpu", HARNESS_REFERENCE, HARNESS_TIMING_MANUAL,
                    bench_dynamic_cpu, NULL, cpu_axes, HARNESS_MS);

    const HarnessAxis regret_axes[] = {{"preset", "small,resnet18", true}, {"batch", "0", false},
                                       {"pass", "fwd,bwd_data,bwd_filter", true},
                                       {"conv", "0:10:+1", false}, {NULL, NULL, false}};
    register_custom("cudnn_benchmark_regret", "heuristic", HARNESS_BASELINE, HARNESS_TIMING_CUDA_EVENTS,
                    bench_regret, &picks[0], regret_axes, HARNESS_US);
    register_custom("cudnn_benchmark_regret", "find", HARNESS_TUNED, HARNESS_TIMING_CUDA_EVENTS,
                    bench_regret, &picks[1], regret_axes, HARNESS_US);
    register_custom("cudnn_benchmark_regret", "fastest", HARNESS_REFERENCE, HARNESS_TIMING_CUDA_EVENTS,
                    bench_regret, &picks[2], regret_axes, HARNESS_US);
    register_custom("cudnn_benchmark_regret", "engine_search", HARNESS_TUNED, HARNESS_TIMING_CUDA_EVENTS,
                    bench_regret, &picks[3], regret_axes, HARNESS_US);
    return harness_run();
}
