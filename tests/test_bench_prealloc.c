// test_bench_prealloc.c: the prealloc practice (build/bench_prealloc). It lists grow
// (baseline) and preallocated (tuned) for tiny and small; tiny runs on whatever backend this
// machine has (the fast CPU backend without a GPU) over a short schedule: both rows ok, the
// preallocated row's parameters and BN statistics after the schedule are grow's bit for bit
// (wrong = 0), its arena never grows during the schedule while grow's does, its peak is not
// below grow's and its one-off preallocation is timed (prealloc_ms > 0) with the break-even
// counters beside it; the MLP preset is a visible skip; --practice_selftest=frozen (the
// preallocation takes a training step) fails the preallocated row while grow stays ok.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

#define TINY_ARGS "--benchmark_filter='preset:tiny/' --benchmark_min_time=0.01 --prealloc_steps=12"
#define TINY_PARAMS "preset:tiny;batch:0"

static void test_lists_both_variants(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_prealloc");
    assert_non_null(list);
    assert_non_null(strstr(list, "prealloc/grow/preset:tiny/"));
    assert_non_null(strstr(list, "prealloc/preallocated/preset:tiny/"));
    // small on a GPU only (its CPU schedule takes over a minute)
    bool gpu = test_gpu_present();
    assert_true(!strstr(list, "prealloc/grow/preset:small/") == !gpu);
    assert_true(!strstr(list, "prealloc/preallocated/preset:small/") == !gpu);
    assert_null(strstr(list, "preset:mlp"));  // one input size only
    free(list);
}

static double value(const char *csv, const char *variant, const char *name)
{
    char pv[64], out[64];
    snprintf(pv, sizeof pv, "prealloc,%s", variant);
    if (!test_csv_row_value(csv, pv, TINY_PARAMS, name, out, sizeof out) || !out[0]) {
        printf("no %s in the %s row\n", name, variant);
        fail();
    }
    return atof(out);
}

static void test_tiny_runs_and_checks(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_prealloc", TINY_ARGS);
    assert_non_null(csv);
    assert_int_equal(test_count_lines(csv), 3);  // the header and two rows
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char status[32];
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        assert_string_equal(status, "ok");
    }
    double peak_grow = value(csv, "grow", "peak_mib"), peak_pre = value(csv, "preallocated", "peak_mib");
    double growths_grow = value(csv, "grow", "arena_growths");
    double growths_pre = value(csv, "preallocated", "arena_growths");
    double prealloc_ms = value(csv, "preallocated", "prealloc_ms");
    double step_grow = value(csv, "grow", "step_ms"), step_pre = value(csv, "preallocated", "step_ms");
    printf("tiny, 12 steps: step_ms grow %.3f, preallocated %.3f; preallocation %.3f ms; peak MiB "
           "%.3f vs %.3f; arena growths %.0f vs %.0f\n", step_grow, step_pre, prealloc_ms, peak_grow,
           peak_pre, growths_grow, growths_pre);
    assert_true(value(csv, "preallocated", "wrong") == 0.0);
    assert_true(value(csv, "grow", "shapes") == 9.0);  // 8..16: nine sizes
    assert_true(value(csv, "grow", "activation_mib") > 0.0);
    assert_true(peak_grow > 0.0 && peak_pre >= peak_grow);
    assert_true(growths_grow >= 1.0 && growths_pre == 0.0);
    assert_true(prealloc_ms > 0.0 && step_grow > 0.0 && step_pre > 0.0);
    double pays = value(csv, "preallocated", "pays_off");
    assert_true(pays == 0.0 || pays == 1.0);
    (void)value(csv, "preallocated", "saving_ms_per_step");
    free(csv);
}

static void test_mlp_is_skipped(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_prealloc", "--harness_axis=preset=mlp --benchmark_filter=grow "
                                                 "--benchmark_min_time=0.01");
    assert_non_null(csv);
    char status[32], reason[200];
    const char *line = strchr(csv, '\n') + 1;
    test_csv_named_field(csv, line, "status", status, sizeof status);
    test_csv_named_field(csv, line, "reason", reason, sizeof reason);
    assert_string_equal(status, "skipped");
    assert_non_null(strstr(reason, "fixes its input size"));
    free(csv);
}

// A preallocation that applies its step's update changes training: the check fails it.
static void test_selftest_frozen_fails(void **state)
{
    (void)state;
    static const char *const tuned[] = {"preallocated"};
    assert_int_equal(test_selftest_fails("bench_prealloc", TINY_ARGS, "frozen", "prealloc", "grow", tuned, 1,
                                         "the preallocation changed training"),
                     1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_both_variants),
        cmocka_unit_test(test_tiny_runs_and_checks),
        cmocka_unit_test(test_mlp_is_skipped),
        cmocka_unit_test(test_selftest_frozen_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
