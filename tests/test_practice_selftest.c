// test_practice_selftest.c: the driver's check must catch a tuned variant that does not
// train. On the CPU, every practice program with a check and a CPU path (bench_zero_grad,
// bench_fusion) run with --practice_selftest=frozen (the tuned update dropped) or
// --practice_selftest=skip_all (every step an overflow) fails its tuned rows and exits
// non-zero, while its baseline rows stay ok; without the switch both pass. The same for
// fp16 (the core's own GradScaler skipping every step) and bf16 against fp32, through
// practices of this test (this program, run again with the argument `practice`). And the
// rule of how many skipped steps GradScaler's start-up explains.
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

// A gradient hook that overflows every step: GradScaler skips them all.
static int grads_ready(void *user, const CoreGradReady *ready)
{
    (void)user;
    (void)ready;
    return 0;
}

static int overflow(void *user, float *grads, size_t count, void *stream)
{
    (void)user;
    (void)stream;
    if (count) grads[0] = INFINITY;
    return 0;
}

// The timed fp16 run of t_amp_timed overflows every step (the check's cores, made by the
// driver, have no hook, so its check passes).
static int overflow_timed_fp16(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg)
{
    (void)ctx;
    (void)st;
    if (cfg->precision != CORE_PRECISION_FP16) return 0;
    CoreGradHooks hooks = {grads_ready, overflow, NULL};
    return core_set_grad_hooks(core, &hooks);
}

static const PracticeVariant fp16_only[] = {
    {"fp32", HARNESS_BASELINE, fp32, NULL},
    {"fp16", HARNESS_TUNED, fp16, NULL},
};

// As bench_amp's macro practice, on the CPU (where every precision computes in fp32 and
// fp16 still runs GradScaler's whole path).
static int run_practice_mode(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    static const Practice p = {
        .name = "t_amp", .variants = precisions, .variant_count = 4, .presets = "tiny", .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.1,
        .check_steps = 3};
    static const PracticeHooks overflowing = {.core_created = overflow_timed_fp16};
    static const Practice timed = {
        .name = "t_amp_timed", .variants = fp16_only, .variant_count = 2, .presets = "tiny",
        .batches = "0", .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS,
        .tolerance = 0.1, .check_steps = 3, .hooks = &overflowing};
    practice_register(&p);
    practice_register(&timed);
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

// ---- tests -------------------------------------------------------------------------------------

static const char *const zero_grad_tuned[] = {"set_to_none"};
static const char *const fusion_tuned[] = {"fused"};
static const char *const amp_tuned[] = {"fp16", "bf16", "fp16_start_up"};
#define ZERO_GRAD_ARGS "--backend=cpu --preset=tiny --benchmark_filter='^zero_grad/' --benchmark_min_time=0.01"
#define FUSION_ARGS "--backend=cpu --preset=tiny --benchmark_filter='^fusion/' --benchmark_min_time=0.01"
#define AMP_ARGS "practice --backend=cpu --benchmark_min_time=0.01 --benchmark_filter='^t_amp/'"
#define SELF "tests/test_practice_selftest"

static void test_zero_grad_catches_both_self_tests(void **state)
{
    (void)state;
    expect_passes("bench_zero_grad", ZERO_GRAD_ARGS, zero_grad_tuned, 1);
    test_selftest_fails("bench_zero_grad", ZERO_GRAD_ARGS, "frozen", "zero_grad", "memset",
                        zero_grad_tuned, 1, "the update differs by 1 of the baseline's update");
    test_selftest_fails("bench_zero_grad", ZERO_GRAD_ARGS, "skip_all", "zero_grad", "memset",
                        zero_grad_tuned, 1,
                        "skipped 3 of 3 steps (overflow); without GradScaler none is explained");
}

static void test_fusion_catches_both_self_tests(void **state)
{
    (void)state;
    expect_passes("bench_fusion", FUSION_ARGS, fusion_tuned, 1);
    test_selftest_fails("bench_fusion", FUSION_ARGS, "frozen", "fusion", "separate", fusion_tuned, 1,
                        "the update differs by 1 of the baseline's update");
    test_selftest_fails("bench_fusion", FUSION_ARGS, "skip_all", "fusion", "separate", fusion_tuned, 1,
                        "skipped 3 of 3 steps (overflow); without GradScaler none is explained");
}

// fp16's skips are the core's GradScaler's (an inf in every step's gradients); bf16 has no
// scaler, so the driver drops its updates. An fp16 run whose first steps overflow (start-up)
// passes: the check compares its update from the settled scale.
static void test_precisions_catch_both_self_tests(void **state)
{
    (void)state;
    expect_passes(SELF, AMP_ARGS, amp_tuned, 3);
    int status = -1;
    char *csv = test_bench_csv_exit(SELF, AMP_ARGS, &status);
    assert_non_null(csv);
    expect_cell(csv, "fp16", "skipped_steps", "0");  // no fp32 gradient overflows at 65536
    expect_cell(csv, "fp16", "check_skipped_steps", "0");
    // GradScaler's start-up (from 2^127 the CPU's fp32 gradients overflow too): 2 steps
    // skipped before the first update, then a rerun from the settled scale matches fp32 exactly
    expect_cell(csv, "fp16_start_up", "check_skipped_steps", "2");
    expect_cell(csv, "fp16_start_up", "check_rel_diff", "0");
    free(csv);
    test_selftest_fails(SELF, AMP_ARGS, "frozen", "t_amp", "fp32", amp_tuned, 3,
                        "the update differs by 1 of the baseline's update");
    test_selftest_fails(SELF, AMP_ARGS, "skip_all", "t_amp", "fp32", amp_tuned, 3, " steps (overflow); ");
    // each row names the rule it broke: fp16 skipped every step of its start-up (16 halvings
    // from 65536 to 1, then one more step: 17), bf16 has no GradScaler to explain any
    csv = test_bench_csv_exit(SELF, AMP_ARGS " --practice_selftest=skip_all", &status);
    assert_non_null(csv);
    expect_cell(csv, "fp16", "reason", "skipped 17 of 17 steps (overflow); GradScaler's start-up explains "
                                       "at most 16 before an update");
    expect_cell(csv, "bf16", "reason", "skipped 3 of 3 steps (overflow); without GradScaler none is explained");
    free(csv);
}

// A timed fp16 run that skips every step does less work: it fails on its skipped steps, even
// though its check (on cores of the driver's own) passed.
static void test_timed_run_that_skips_fails(void **state)
{
    (void)state;
    int status = -1;
    char *csv = test_bench_csv_exit(SELF, "practice --backend=cpu --benchmark_min_time=0.01 "
                                          "--benchmark_filter='^t_amp_timed/'", &status);
    assert_non_null(csv);
    char why[1024] = "";
    cell(csv, "fp16", "reason", why, sizeof why);
    printf("t_amp_timed/fp16: %s\n", why);
    assert_int_equal(status, 1);
    expect_cell(csv, "fp32", "status", "ok");
    expect_cell(csv, "fp16", "status", "error");
    expect_cell(csv, "fp16", "reason", "(warm-up and timed; overflow); GradScaler's start-up explains at most");
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

// GradScaler's start-up: one skip per halving from 65536 down to 1 (16), never every step
// of a run, plus one per growth_interval (2000) steps.
static void test_skips_explained_rule(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.precision = CORE_PRECISION_FP32;
    assert_int_equal(practice_skips_explained(&cfg, 1000), 0);
    cfg.precision = CORE_PRECISION_BF16;
    assert_int_equal(practice_skips_explained(&cfg, 1000), 0);
    cfg.precision = CORE_PRECISION_FP16;
    assert_true(cfg.scaler.init_scale == 65536.0f && cfg.scaler.backoff_factor == 0.5f &&
                cfg.scaler.growth_interval == 2000);
    assert_int_equal(practice_skips_explained(&cfg, 0), 0);
    assert_int_equal(practice_skips_explained(&cfg, 1), 0);
    assert_int_equal(practice_skips_explained(&cfg, 3), 2);
    assert_int_equal(practice_skips_explained(&cfg, 13), 12);
    assert_int_equal(practice_skips_explained(&cfg, 17), 16);
    assert_int_equal(practice_skips_explained(&cfg, 100), 16);
    assert_int_equal(practice_skips_explained(&cfg, 4000), 18);
    cfg.scaler.init_scale = 1024.0f;
    assert_int_equal(practice_skips_explained(&cfg, 100), 10);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "practice") == 0) return run_practice_mode(argc - 1, argv + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skips_explained_rule),
        cmocka_unit_test(test_zero_grad_catches_both_self_tests),
        cmocka_unit_test(test_fusion_catches_both_self_tests),
        cmocka_unit_test(test_precisions_catch_both_self_tests),
        cmocka_unit_test(test_timed_run_that_skips_fails),
        cmocka_unit_test(test_unknown_self_test_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
