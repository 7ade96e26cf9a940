// test_practice_selftest.c: the driver's check must catch a tuned variant that does not
// train, or trains wrongly. On the CPU, bench_zero_grad and bench_fusion run with each
// --practice_selftest mode (frozen: the tuned update dropped; skip_all: every step an
// overflow; half_lr; drop_step: one checked step's update left out) fail their tuned rows and
// exit non-zero, while their baseline rows stay ok; without the switch both pass. The same
// for fp16 (the core's own GradScaler skipping every step) and bf16 against fp32, through
// practices of this test (this program, run again with the argument `practice`), which also
// show that the check runs the timed configuration (the practice's hooks, the run's own
// batches), checks every tensor alone, refuses a baseline that does not move, and that a
// timed fp16 run may skip only what GradScaler explains. And the rule of how many skipped
// steps GradScaler explains.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/model.h"
#include "tests/support.h"

// ---- the practices of this program's `practice` mode -------------------------------------------

static void fp32(CoreConfig *c) { c->precision = CORE_PRECISION_FP32; }
static void fp16(CoreConfig *c) { c->precision = CORE_PRECISION_FP16; }
static void bf16(CoreConfig *c) { c->precision = CORE_PRECISION_BF16; }
// GradScaler starting at 2^127: the scaled fp32 gradients overflow on the CPU too, until
// the scale has come down (the start-up the driver's check must take out).
static void fp16_huge_scale(CoreConfig *c) { fp16(c); c->scaler.init_scale = 0x1p127f; }

static const PracticeVariant precisions[] = {
    {"fp32", HARNESS_BASELINE, fp32, NULL},
    {"fp16", HARNESS_TUNED, fp16, NULL},
    {"bf16", HARNESS_TUNED, bf16, NULL},
    {"fp16_start_up", HARNESS_TUNED, fp16_huge_scale, NULL},
};

// ---- hooks with a count of their own per core (runs, and so cores, are sequential) ----------------

typedef struct HookCount {
    int calls;      // before_update calls so far on this core
    int overflow_at; // the call (1-based) that gets an inf; 0: every call
} HookCount;

static HookCount counts[16];
static int next_count;

static int grads_ready(void *user, const CoreGradReady *ready)
{
    (void)user;
    (void)ready;
    return 0;
}

// Writes an inf into the gradients at the chosen call (GradScaler then skips the step).
static int overflow(void *user, float *grads, size_t count, void *stream)
{
    (void)stream;
    HookCount *c = user;
    c->calls++;
    if (count && (c->overflow_at == 0 || c->calls == c->overflow_at)) grads[0] = INFINITY;
    return 0;
}

static int install_overflow(Core *core, const CoreConfig *cfg, int overflow_at)
{
    if (cfg->precision != CORE_PRECISION_FP16) return 0;
    HookCount *c = &counts[next_count++ % 16];
    *c = (HookCount){0, overflow_at};
    CoreGradHooks hooks = {grads_ready, overflow, c};
    return core_set_grad_hooks(core, &hooks);
}

// Every fp16 step of every core overflows.
static int overflow_every_step(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                               const PracticeVariant *v)
{
    (void)v;
    (void)ctx;
    (void)st;
    return install_overflow(core, cfg, 0);
}

// Each fp16 core's 5th step overflows: the check's cores take 3, the timed core's warm-up 3,
// so it is the timed core's second timed step, in a later run than its first on a CPU (a
// timed iteration is one step there, and the row's core is kept between its runs).
static int overflow_fifth_step(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                               const PracticeVariant *v)
{
    (void)v;
    (void)ctx;
    (void)st;
    return install_overflow(core, cfg, 5);
}

// The tuned variant's first basic block's two BatchNorms (gamma and beta, the 2nd and 3rd BN
// ops of tiny) do not train: a tensor group that carries 0.25% of tiny's 3-step update.
typedef struct Frozen { size_t off[2], count[2]; } Frozen;

static int freeze(void *user, float *grads, size_t count, void *stream)
{
    (void)stream;
    const Frozen *f = user;
    for (int r = 0; r < 2; r++)
        for (size_t i = f->off[r]; i < f->off[r] + f->count[r] && i < count; i++) grads[i] = 0.0f;
    return 0;
}

static int freeze_first_block_bn(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                                 const PracticeVariant *v)
{
    (void)v;
    (void)ctx;
    (void)st;
    static Frozen frozen;
    static ModelGraph g;
    if (cfg->precision != CORE_PRECISION_BF16) return 0;  // the tuned variant below
    if (model_build(&cfg->model, &g) != 0) return -1;
    int bn = 0;
    for (int i = 0; i < g.n_ops; i++) {
        if (g.ops[i].kind != OP_BN) continue;
        if (bn == 1 || bn == 2) {
            frozen.off[bn - 1] = g.ops[i].w_off;  // gamma, then beta right after it
            frozen.count[bn - 1] = 2 * (size_t)g.ops[i].cin;
        }
        bn++;
    }
    CoreGradHooks hooks = {grads_ready, freeze, &frozen};
    return core_set_grad_hooks(core, &hooks);
}

static const PracticeVariant fp16_only[] = {
    {"fp32", HARNESS_BASELINE, fp32, NULL},
    {"fp16", HARNESS_TUNED, fp16, NULL},
};
static const PracticeVariant bf16_only[] = {
    {"fp32", HARNESS_BASELINE, fp32, NULL},
    {"bf16", HARNESS_TUNED, bf16, NULL},
};

// No learning rate: the baseline does not move.
static void still_fp32(CoreConfig *c) { fp32(c); c->optim.base_lr = 0.0f; c->optim.weight_decay = 0.0f; }
static void still_bf16(CoreConfig *c) { bf16(c); c->optim.base_lr = 0.0f; c->optim.weight_decay = 0.0f; }
static const PracticeVariant still[] = {
    {"fp32", HARNESS_BASELINE, still_fp32, NULL},
    {"bf16", HARNESS_TUNED, still_bf16, NULL},
};

// A source whose batches diverge any training (images of NaN): the timed run's own.
typedef struct HugeBatches { float *images; int32_t *labels; int n, taken; } HugeBatches;
static HugeBatches huge;

static int huge_open(void *ctx, CoreConfig *cfg, const void *arg)
{
    (void)arg;
    HugeBatches *h = ctx;
    size_t floats = (size_t)cfg->batch_size * cfg->model.in_channels * cfg->model.image_size * cfg->model.image_size;
    h->n = cfg->batch_size;
    h->taken = 0;
    h->images = malloc(floats * sizeof(float));
    h->labels = calloc((size_t)h->n, sizeof(int32_t));
    if (!h->images || !h->labels) return -1;
    for (size_t i = 0; i < floats; i++) h->images[i] = NAN;
    return 0;
}

static int huge_next(void *ctx, CoreBatch *b)
{
    HugeBatches *h = ctx;
    if (h->taken++ == 4) {
        h->taken = 0;
        return 0;
    }
    *b = (CoreBatch){.images = h->images, .labels = h->labels, .n = h->n, .memory = CORE_MEMORY_HOST};
    return 1;
}

static void huge_close(void *ctx)
{
    HugeBatches *h = ctx;
    free(h->images);
    free(h->labels);
}

static const PracticeSource huge_source = {huge_open, huge_next, NULL, NULL, huge_close, &huge, true};

// As bench_amp's macro practice, on the CPU (where every precision computes in fp32 and
// fp16 still runs GradScaler's whole path), and the practices the tests below break.
static int run_practice_mode(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    static const Practice p = {
        .name = "t_amp", .variants = precisions, .variant_count = 4, .presets = "tiny", .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.1,
        .check_steps = 3};
    static const PracticeHooks every = {.core_created = overflow_every_step};
    static const PracticeHooks fifth = {.core_created = overflow_fifth_step};
    static const PracticeHooks bias = {.core_created = freeze_first_block_bn};
    static const Practice hooked = {
        .name = "t_hooked", .variants = fp16_only, .variant_count = 2, .presets = "tiny",
        .batches = "0", .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS,
        .tolerance = 0.1, .check_steps = 3, .hooks = &every};
    static const Practice timed = {
        .name = "t_timed_skip", .variants = fp16_only, .variant_count = 2, .presets = "tiny",
        .batches = "0", .mode = PRACTICE_THROUGHPUT, .steps = 10, .check = PRACTICE_CHECK_PARAMS,
        .tolerance = 0.1, .check_steps = 3, .hooks = &fifth};
    static const Practice tensor = {
        .name = "t_tensor", .variants = bf16_only, .variant_count = 2, .presets = "tiny",
        .batches = "0", .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS,
        .tolerance = 0.1, .check_steps = 3, .hooks = &bias};
    static const Practice unmoved = {
        .name = "t_still", .variants = still, .variant_count = 2, .presets = "tiny", .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.1,
        .check_steps = 3};
    static const Practice diverging = {
        .name = "t_source", .variants = bf16_only, .variant_count = 2, .presets = "tiny", .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.1,
        .check_steps = 3, .source = &huge_source};
    practice_register(&p);
    practice_register(&hooked);
    practice_register(&timed);
    practice_register(&tensor);
    practice_register(&unmoved);
    practice_register(&diverging);
    return harness_run();
}

// ---- helpers -----------------------------------------------------------------------------------

// The value of column `name` in the row of `variant` (the CSV's first such row).
static bool cell(const char *csv, const char *variant, const char *name, char *out, size_t size)
{
    int vc = test_csv_column(csv, "variant"), c = test_csv_column(csv, name);
    if (vc < 0 || c < 0) return false;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char v[64];
        if (test_csv_field(line + 1, vc, v, sizeof v) && strcmp(v, variant) == 0)
            return test_csv_field(line + 1, c, out, size);
    }
    return false;
}

static void expect_cell(const char *csv, const char *variant, const char *name, const char *want)
{
    char got[1024];
    if (!cell(csv, variant, name, got, sizeof got)) fail_msg("no %s for %s", name, variant);
    if (strstr(got, want) == NULL) fail_msg("%s %s = '%s', want it to contain '%s'", variant, name, got, want);
}

// Without the switch: every row ok and the tuned ones' update equal to the baseline's.
static void expect_passes(const char *program, const char *args, const char *const *tuned, int n_tuned)
{
    int status = -1;
    char *csv = test_bench_csv_exit(program, args, &status);
    assert_non_null(csv);
    assert_int_equal(status, 0);
    for (int i = 0; i < n_tuned; i++) {
        char rel[64] = "", moved[64] = "";
        expect_cell(csv, tuned[i], "status", "ok");
        expect_cell(csv, tuned[i], "wrong", "0");
        assert_true(cell(csv, tuned[i], "check_rel_diff", rel, sizeof rel));
        assert_true(cell(csv, tuned[i], "check_baseline_moved", moved, sizeof moved));
        printf("%s %s: update difference %s of the baseline's update; the baseline moved %s of "
               "its parameters\n", program, tuned[i], rel, moved);
        assert_true(atof(rel) == 0.0);  // the same maths on the CPU
        assert_true(atof(moved) > 0.0);
    }
    free(csv);
}

// Runs a practice of this program's `practice` mode alone; returns its CSV and exit status.
static char *practice_run(const char *practice, const char *extra, int *status)
{
    char args[512];
    snprintf(args, sizeof args, "practice --backend=cpu --benchmark_min_time=0.01 --benchmark_filter='^%s/' %s",
             practice, extra ? extra : "");
    char *csv = test_bench_csv_exit("tests/test_practice_selftest", args, status);
    assert_non_null(csv);
    char why[1024] = "";
    cell(csv, "fp16", "reason", why, sizeof why);
    if (!why[0]) cell(csv, "bf16", "reason", why, sizeof why);
    printf("%s %s: exit status %d; tuned row: %s\n", practice, extra ? extra : "", *status, why[0] ? why : "ok");
    return csv;
}

// ---- tests -------------------------------------------------------------------------------------

static const char *const zero_grad_tuned[] = {"set_to_none"};
static const char *const fusion_tuned[] = {"fused"};
static const char *const amp_tuned[] = {"fp16", "bf16", "fp16_start_up"};
#define ZERO_GRAD_ARGS "--backend=cpu --preset=tiny --benchmark_filter='^zero_grad/' --benchmark_min_time=0.01"
#define FUSION_ARGS "--backend=cpu --preset=tiny --benchmark_filter='^fusion/' --benchmark_min_time=0.01"
#define AMP_ARGS "practice --backend=cpu --benchmark_min_time=0.01 --benchmark_filter='^t_amp/'"
#define SELF "tests/test_practice_selftest"
#define DIFFERS "the update differs by "
#define NOT_EXPLAINED "skipped 3 of 3 steps (overflow); without GradScaler none is explained"

static void test_zero_grad_catches_every_self_test(void **state)
{
    (void)state;
    expect_passes("bench_zero_grad", ZERO_GRAD_ARGS, zero_grad_tuned, 1);
    const char *program = "bench_zero_grad", *p = "zero_grad", *base = "memset";
    test_selftest_fails(program, ZERO_GRAD_ARGS, "frozen", p, base, zero_grad_tuned, 1, DIFFERS "1 of the");
    test_selftest_fails(program, ZERO_GRAD_ARGS, "skip_all", p, base, zero_grad_tuned, 1, NOT_EXPLAINED);
    test_selftest_fails(program, ZERO_GRAD_ARGS, "half_lr", p, base, zero_grad_tuned, 1, DIFFERS "0.5 of the");
    test_selftest_fails(program, ZERO_GRAD_ARGS, "drop_step", p, base, zero_grad_tuned, 1, DIFFERS);
}

static void test_fusion_catches_every_self_test(void **state)
{
    (void)state;
    expect_passes("bench_fusion", FUSION_ARGS, fusion_tuned, 1);
    const char *program = "bench_fusion", *p = "fusion", *base = "separate";
    test_selftest_fails(program, FUSION_ARGS, "frozen", p, base, fusion_tuned, 1, DIFFERS "1 of the");
    test_selftest_fails(program, FUSION_ARGS, "skip_all", p, base, fusion_tuned, 1, NOT_EXPLAINED);
    test_selftest_fails(program, FUSION_ARGS, "half_lr", p, base, fusion_tuned, 1, DIFFERS "0.5 of the");
    test_selftest_fails(program, FUSION_ARGS, "drop_step", p, base, fusion_tuned, 1, DIFFERS);
}

// fp16's skips are the core's GradScaler's (an inf in every step's gradients); bf16 has no
// scaler, so the driver drops its updates. An fp16 run whose first steps overflow (start-up)
// passes: the check compares its update from the settled scale.
static void test_precisions_catch_every_self_test(void **state)
{
    (void)state;
    expect_passes(SELF, AMP_ARGS, amp_tuned, 3);
    int status = -1;
    char *csv = test_bench_csv_exit(SELF, AMP_ARGS, &status);
    assert_non_null(csv);
    expect_cell(csv, "fp16", "skipped_steps", "0");  // no fp32 gradient overflows at 65536
    expect_cell(csv, "fp16", "check_skipped_steps", "0");
    // GradScaler's start-up (from 2^127 the CPU's fp32 gradients overflow too): 2 steps
    // skipped before the first update, then a rerun from the settled scale matches fp32
    // exactly; the timed run's warm-up takes its start-up (2 skips) out of the timed steps
    expect_cell(csv, "fp16_start_up", "check_skipped_steps", "2");
    expect_cell(csv, "fp16_start_up", "check_rel_diff", "0");
    expect_cell(csv, "fp16_start_up", "skipped_steps", "2");
    free(csv);
    test_selftest_fails(SELF, AMP_ARGS, "frozen", "t_amp", "fp32", amp_tuned, 3, DIFFERS "1 of the");
    test_selftest_fails(SELF, AMP_ARGS, "skip_all", "t_amp", "fp32", amp_tuned, 3, " steps (overflow); ");
    test_selftest_fails(SELF, AMP_ARGS, "half_lr", "t_amp", "fp32", amp_tuned, 3, DIFFERS "0.5 of the");
    test_selftest_fails(SELF, AMP_ARGS, "drop_step", "t_amp", "fp32", amp_tuned, 3, DIFFERS);
    // each row names the rule it broke: fp16 skipped every step while halving the scale (16
    // halvings from 65536 to 1; the check's 3 steps a run, 6 runs: 18), bf16 has no GradScaler
    csv = test_bench_csv_exit(SELF, AMP_ARGS " --practice_selftest=skip_all", &status);
    assert_non_null(csv);
    expect_cell(csv, "fp16", "reason", "skipped 18 of 18 steps (overflow); GradScaler's start-up explains "
                                       "at most 16 (one per halving of the scale down to 1)");
    expect_cell(csv, "bf16", "reason", NOT_EXPLAINED);
    free(csv);
}

// The check runs the timed configuration: a practice's hook (here one that overflows every
// fp16 step) is on the check's cores too, so the check fails; the timed run is not reached.
static void test_check_runs_the_practices_hooks(void **state)
{
    (void)state;
    int status = -1;
    char *csv = practice_run("t_hooked", NULL, &status);
    assert_int_equal(status, 1);
    expect_cell(csv, "fp32", "status", "ok");
    expect_cell(csv, "fp16", "status", "error");
    expect_cell(csv, "fp16", "reason", "the check's run skipped 18 of 18 steps (overflow)");
    free(csv);
}

// The check trains on the run's own batches (its source's): a source whose batches diverge any
// training leaves a baseline whose update is not finite, which vouches for nothing.
static void test_check_trains_on_the_runs_batches(void **state)
{
    (void)state;
    int status = -1;
    char *csv = practice_run("t_source", NULL, &status);
    assert_int_equal(status, 1);
    expect_cell(csv, "bf16", "status", "error");
    expect_cell(csv, "bf16", "reason", "the baseline's update after 3 steps is not finite");
    free(csv);
}

// A tensor group that carries under 1% of the update (tiny's first block's BNs, frozen in the
// tuned run) hides inside the global figure (under the tolerance 0.1); alone it is all wrong.
static void test_check_catches_one_wrong_tensor(void **state)
{
    (void)state;
    int status = -1;
    char *csv = practice_run("t_tensor", NULL, &status);
    assert_int_equal(status, 1);
    char why[1024] = "";
    assert_true(cell(csv, "bf16", "reason", why, sizeof why));
    const char *at = strstr(why, DIFFERS), *worst = strstr(why, "; by ");
    assert_non_null(at);
    assert_non_null(worst);
    assert_non_null(strstr(worst, " of its own in the worst tensor (op "));
    assert_non_null(strstr(worst, " bn "));
    double global = atof(at + strlen(DIFFERS)), tensor = atof(worst + strlen("; by "));
    printf("global relative difference %.3g, worst tensor's %.3g (tolerance 0.1)\n", global, tensor);
    assert_true(global > 0.0 && global < 0.1);  // the global figure alone would have passed
    assert_true(tensor > 0.5);                  // the frozen tensor: all of its update wrong
    free(csv);
}

// A baseline that does not move (no learning rate) vouches for nothing, even when the tuned
// run agrees with it exactly.
static void test_baseline_that_does_not_move_fails(void **state)
{
    (void)state;
    int status = -1;
    char *csv = practice_run("t_still", NULL, &status);
    assert_int_equal(status, 1);
    expect_cell(csv, "fp32", "status", "ok");
    expect_cell(csv, "bf16", "status", "error");
    expect_cell(csv, "bf16", "reason", "the baseline's update after 3 steps is 0 of its parameters; below the "
                                       "floor 1e-06");  // the CSV writes commas as ';'

    free(csv);
}

// After GradScaler's start-up (in the warm-up) a timed fp16 run may skip only an overflow
// after a growth: one skipped timed step (each core's 5th: the check's 3 steps pass) fails it.
static void test_timed_run_that_skips_after_start_up_fails(void **state)
{
    (void)state;
    int status = -1;
    // two repetitions: the second runs the 5th step whatever the host's speed (one slow
    // enough, as under the sanitizers, makes the first a single timed step)
    char *csv = practice_run("t_timed_skip", "--benchmark_repetitions=2", &status);
    assert_int_equal(status, 1);
    expect_cell(csv, "fp32", "status", "ok");
    expect_cell(csv, "fp16", "status", "error");
    expect_cell(csv, "fp16", "reason", "(warm-up and timed; overflow): GradScaler's start-up explains the 0 "
                                       "of the warm-up; growth every 2000 updating steps 0 more");
    free(csv);
}

static void test_unknown_self_test_fails(void **state)
{
    (void)state;
    int status = -1;
    char *csv = test_bench_csv_exit("bench_zero_grad", ZERO_GRAD_ARGS " --practice_selftest=bogus", &status);
    assert_non_null(csv);
    assert_int_equal(status, 1);
    expect_cell(csv, "set_to_none", "status", "error");
    expect_cell(csv, "set_to_none", "reason", "--practice_selftest=bogus");
    free(csv);
}

// GradScaler's start-up: one skip per halving from 65536 down to 1 (16); after it, one per
// growth_interval (2000) updating steps.
static void test_skips_explained_rule(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.precision = CORE_PRECISION_FP32;
    assert_int_equal(practice_startup_skips_max(&cfg), 0);
    assert_int_equal(practice_growth_skips_max(&cfg, 4000), 0);
    cfg.precision = CORE_PRECISION_BF16;
    assert_int_equal(practice_startup_skips_max(&cfg), 0);
    assert_int_equal(practice_growth_skips_max(&cfg, 4000), 0);
    cfg.precision = CORE_PRECISION_FP16;
    assert_true(cfg.scaler.init_scale == 65536.0f && cfg.scaler.backoff_factor == 0.5f &&
                cfg.scaler.growth_interval == 2000);
    assert_int_equal(practice_startup_skips_max(&cfg), 16);
    assert_int_equal(practice_growth_skips_max(&cfg, 0), 0);
    assert_int_equal(practice_growth_skips_max(&cfg, 10), 0);
    assert_int_equal(practice_growth_skips_max(&cfg, 1999), 0);
    assert_int_equal(practice_growth_skips_max(&cfg, 2000), 1);
    assert_int_equal(practice_growth_skips_max(&cfg, 4000), 2);
    cfg.scaler.init_scale = 1024.0f;
    assert_int_equal(practice_startup_skips_max(&cfg), 10);
    cfg.scaler.growth_interval = 1;
    assert_int_equal(practice_growth_skips_max(&cfg, 7), 7);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "practice") == 0) return run_practice_mode(argc - 1, argv + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skips_explained_rule),
        cmocka_unit_test(test_zero_grad_catches_every_self_test),
        cmocka_unit_test(test_fusion_catches_every_self_test),
        cmocka_unit_test(test_precisions_catch_every_self_test),
        cmocka_unit_test(test_check_runs_the_practices_hooks),
        cmocka_unit_test(test_check_trains_on_the_runs_batches),
        cmocka_unit_test(test_check_catches_one_wrong_tensor),
        cmocka_unit_test(test_baseline_that_does_not_move_fails),
        cmocka_unit_test(test_timed_run_that_skips_after_start_up_fails),
        cmocka_unit_test(test_unknown_self_test_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
