// test_bench_conv_bias.c: the conv_bias practice (build/bench_conv_bias). It lists bias
// (baseline) and no_bias (tuned) for its presets; tiny runs on whatever backend this
// machine has (the fast CPU backend without a GPU): both rows ok, the no_bias row checked
// against the bias row over the shared parameters (wrong = 0, check_rel_diff within the
// program's tolerance and > 0 only by rounding), with one bias per output channel more in
// the baseline; --practice_selftest=frozen and =skip_all fail the no_bias row (exit 1)
// while the bias row stays ok.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

// The program's CONV_BIAS_TOL.
#define TOL 1e-2
#define TINY_ARGS "--benchmark_filter='preset:tiny/' --benchmark_min_time=0.01"

static void test_lists_both_variants(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_conv_bias");
    assert_non_null(list);
    assert_non_null(strstr(list, "conv_bias/bias/preset:tiny/"));
    assert_non_null(strstr(list, "conv_bias/no_bias/preset:tiny/"));
    assert_non_null(strstr(list, "conv_bias/no_bias/preset:small/"));
    assert_null(strstr(list, "preset:mlp"));  // no convolution
    free(list);
}

static void test_tiny_runs_and_checks(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_conv_bias", TINY_ARGS);
    assert_non_null(csv);
    int rows = 0;
    double params_bias = 0, params_none = 0, step_bias = 0, step_none = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char status[32], variant[32], wrong[32], rel[32], moved[32], params[32], step[32];
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        assert_string_equal(status, "ok");
        test_csv_named_field(csv, line + 1, "parameters", params, sizeof params);
        test_csv_named_field(csv, line + 1, "step_ms", step, sizeof step);
        if (strcmp(variant, "bias") == 0) {
            params_bias = atof(params);
            step_bias = atof(step);
        } else {
            assert_string_equal(variant, "no_bias");
            params_none = atof(params);
            step_none = atof(step);
            test_csv_named_field(csv, line + 1, "wrong", wrong, sizeof wrong);
            test_csv_named_field(csv, line + 1, "check_rel_diff", rel, sizeof rel);
            test_csv_named_field(csv, line + 1, "check_baseline_moved", moved, sizeof moved);
            printf("no_bias vs bias: update relative difference %s (tolerance %g), the "
                   "baseline moved %s of its parameters\n", rel, TOL, moved);
            assert_string_equal(wrong, "0");
            assert_true(atof(rel) <= TOL);
            assert_true(atof(moved) > 0.0);
        }
        rows++;
    }
    printf("tiny: step_ms bias %.3f, no_bias %.3f; parameters %.0f vs %.0f\n", step_bias,
           step_none, params_bias, params_none);
    assert_int_equal(rows, 2);
    assert_true(params_bias > params_none && params_none > 0);
    free(csv);
}

static const char *const no_bias[] = {"no_bias"};

// A broken no_bias run (its update dropped, or every step an overflow) fails its row.
static void expect_selftest_fails(const char *mode, const char *reason)
{
    assert_int_equal(test_selftest_fails("bench_conv_bias", TINY_ARGS, mode, "conv_bias", "bias", no_bias, 1,
                                         reason),
                     1);
}

static void test_selftest_frozen_fails(void **state)
{
    (void)state;
    expect_selftest_fails("frozen", "differ from the baseline's after 3 steps");
}

static void test_selftest_skip_all_fails(void **state)
{
    (void)state;
    expect_selftest_fails("skip_all", "skipped 3 of 3 steps (overflow)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_both_variants),
        cmocka_unit_test(test_tiny_runs_and_checks),
        cmocka_unit_test(test_selftest_frozen_fails),
        cmocka_unit_test(test_selftest_skip_all_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
