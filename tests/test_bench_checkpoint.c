// test_bench_checkpoint.c: the activation-checkpointing practice (build/bench_checkpoint).
// It lists keep_all (baseline), checkpoint and checkpoint_sqrt (tuned) and the max-batch
// rows; tiny at batch 8 runs on whatever backend this machine has (the fast CPU backend
// without a GPU): every row ok, the tuned rows checkpointed segments, hold fewer activation
// bytes than keep_all and pass the update check (on the CPU bit for bit: difference 0);
// --practice_selftest=frozen and =skip_all fail the tuned rows. The max-batch rows of small
// within a 512 MiB budget: memory ends the search in every mode and checkpointing fits a
// larger batch than keep_all; probed and timed on a GPU, estimated on a CPU (reference rows).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

#define TINY "--preset=tiny --harness_axis=batch=8 --benchmark_filter='^checkpoint/' --benchmark_min_time=0.01"

static const char *const tuned[] = {"checkpoint", "checkpoint_sqrt"};

static void test_lists_variants(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_checkpoint");
    assert_non_null(list);
    assert_non_null(strstr(list, "checkpoint/keep_all/preset:tiny/"));
    assert_non_null(strstr(list, "checkpoint/checkpoint/preset:small/"));
    assert_non_null(strstr(list, "checkpoint/checkpoint_sqrt/preset:tiny/"));
    assert_non_null(strstr(list, "checkpoint_max_batch/keep_all/"));
    assert_non_null(strstr(list, "checkpoint_max_batch/checkpoint/"));
    free(list);
}

static double value(const char *csv, const char *variant, const char *name)
{
    char out[64] = "", pv[64];
    snprintf(pv, sizeof pv, "checkpoint,%s", variant);
    if (!test_csv_row_value(csv, pv, "preset:tiny;batch:8", name, out, sizeof out))
        fail_msg("no %s for %s", name, variant);
    return atof(out);
}

static void expect_text(const char *csv, const char *variant, const char *name, const char *want)
{
    char out[1024] = "", pv[64];
    snprintf(pv, sizeof pv, "checkpoint,%s", variant);
    if (!test_csv_row_value(csv, pv, "preset:tiny;batch:8", name, out, sizeof out))
        fail_msg("no %s for %s", name, variant);
    if (!strstr(out, want)) fail_msg("%s %s = '%s', want '%s'", variant, name, out, want);
}

static void test_tiny_runs_and_checks(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_checkpoint", TINY);
    assert_non_null(csv);
    bool gpu = test_gpu_present();
    expect_text(csv, "keep_all", "status", "ok");
    double base = value(csv, "keep_all", "activation_bytes");
    assert_true(base > 0);
    assert_true(value(csv, "keep_all", "checkpointed_segments") == 0);
    for (int i = 0; i < 2; i++) {
        expect_text(csv, tuned[i], "status", "ok");
        double bytes = value(csv, tuned[i], "activation_bytes"), rel = value(csv, tuned[i], "check_rel_diff");
        printf("%s: activation bytes %.0f (keep_all %.0f, %.2fx), %.0f segments, update difference %g\n",
               tuned[i], bytes, base, bytes / base, value(csv, tuned[i], "checkpointed_segments"), rel);
        assert_true(value(csv, tuned[i], "checkpointed_segments") > 0);
        assert_true(bytes < base);
        assert_true(value(csv, tuned[i], "wrong") == 0);
        assert_true(value(csv, tuned[i], "check_baseline_moved") > 0);
        if (!gpu) assert_true(rel == 0.0);  // the CPU's recompute is bit for bit
        assert_true(value(csv, tuned[i], "step_ms") > 0);
        assert_true(value(csv, tuned[i], "peak_bytes") > 0);
    }
    free(csv);
}

static void test_self_tests_fail_the_check(void **state)
{
    (void)state;
    test_selftest_fails("bench_checkpoint", TINY, "frozen", "checkpoint", "keep_all", tuned, 2,
                        "the update differs by 1 of the baseline's update");
    test_selftest_fails("bench_checkpoint", TINY, "skip_all", "checkpoint", "keep_all", tuned, 2,
                        "skipped 3 of 3 steps (overflow)");
}

static double max_batch_value(const char *csv, const char *variant, const char *name)
{
    char out[64] = "", pv[64];
    snprintf(pv, sizeof pv, "checkpoint_max_batch,%s", variant);
    if (!test_csv_row_value(csv, pv, "preset:small;batch:0", name, out, sizeof out))
        fail_msg("no %s for %s", name, pv);
    printf("checkpoint_max_batch,%s: %s = %s\n", variant, name, out);
    return atof(out);
}

// The larger batch it enables, within a budget small enough that memory ends every mode's
// search on any GPU (a 139 GiB one would otherwise take each mode to the 2^31-value guard).
static void test_max_batch_rows(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_checkpoint", "--benchmark_filter='^checkpoint_max_batch/' "
                               "--harness_axis=preset=small --max_batch_memory_mib=512 "
                               "--checkpoint_max_steps=1");
    assert_non_null(csv);
    bool gpu = test_gpu_present();
    const char *modes[] = {"keep_all", "checkpoint", "checkpoint_sqrt"};
    const char *roles[] = {"baseline", "tuned", "tuned"};
    for (int i = 0; i < 3; i++) {
        char pv[64], text[64] = "";
        snprintf(pv, sizeof pv, "checkpoint_max_batch,%s", modes[i]);
        assert_true(test_csv_row_value(csv, pv, "preset:small;batch:0", "status", text, sizeof text));
        if (strcmp(text, "ok") != 0) fail_msg("%s: status %s", pv, text);
        assert_true(test_csv_row_value(csv, pv, "preset:small;batch:0", "role", text, sizeof text));
        assert_string_equal(text, gpu ? roles[i] : "reference");  // a CPU times no steps there
        assert_true(max_batch_value(csv, modes[i], "memory_budget_mib") == 512);
        assert_true(max_batch_value(csv, modes[i], "max_batch_out_of_memory") == 1);
        assert_true(max_batch_value(csv, modes[i], "max_batch_estimated") == (gpu ? 0 : 1));
        assert_true(max_batch_value(csv, modes[i], "max_batch") > 0);
        if (gpu) assert_true(max_batch_value(csv, modes[i], "images_per_second") > 0);
    }
    double keep_all = max_batch_value(csv, "keep_all", "max_batch");
    assert_true(max_batch_value(csv, "checkpoint", "max_batch") > keep_all);
    assert_true(max_batch_value(csv, "checkpoint_sqrt", "max_batch") >= keep_all);
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_variants),
        cmocka_unit_test(test_tiny_runs_and_checks),
        cmocka_unit_test(test_self_tests_fail_the_check),
        cmocka_unit_test(test_max_batch_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
