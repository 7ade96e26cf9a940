// test_bench_attention.c: the attention practice (build/bench_attention) on the CPU. The
// program lists attention/{unfused,fused} on gpt-tiny and attention_layer/{unfused,fused}
// over the seq axis; every row runs (--backend=cpu: the CUDA backend runs no transformer
// yet); the fused training row's update agrees with the unfused one's, its memory plan is
// smaller by about the layers' probabilities; the fused layer's output and gradient agree
// with the unfused one's and it keeps heads x T floats per sequence where the unfused keeps
// heads x T x T; the self-tests (a broken LR, a fused backward without its D term) fail the
// fused rows with the check's reason.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

#define ARGS "--backend=cpu --benchmark_filter='attention/|seq:256/' --benchmark_min_time=0.01"

static void test_lists_families(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_attention");
    assert_non_null(list);
    const char *want[] = {"attention/unfused/preset:gpt-tiny/batch:0/", "attention/fused/preset:gpt-tiny/batch:0/",
                          "attention_layer/unfused/seq:256/", "attention_layer/fused/seq:2048/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("%s is not listed", want[i]);
    free(list);
}

static void test_rows_run_and_check(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_attention", ARGS);
    assert_non_null(csv);
    double arena[2] = {0, 0}, saved[2] = {0, 0};
    int rows = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char practice[32], variant[32], status[32];
        test_csv_named_field(csv, line + 1, "practice", practice, sizeof practice);
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        assert_string_equal(status, "ok");
        bool fused = strcmp(variant, "fused") == 0;
        if (strcmp(practice, "attention") == 0) {
            arena[fused] = test_csv_number(csv, line + 1, "activation_mib");
            if (fused) assert_true(test_csv_number(csv, line + 1, "check_rel_diff") < 1e-3);
        } else {
            assert_string_equal(practice, "attention_layer");
            saved[fused] = test_csv_number(csv, line + 1, "saved_mib");
            if (fused) {
                assert_true(test_csv_number(csv, line + 1, "check_rel_diff") < 1e-5);
                assert_true(test_csv_number(csv, line + 1, "wrong") == 0);
            }
        }
        assert_true(test_csv_number(csv, line + 1, "tokens_per_second") > 0);
        rows++;
    }
    assert_int_equal(rows, 4);
    // gpt-tiny, batch 16, 2 layers of 4 heads x 64 x 64 probabilities: 2 MiB more unfused
    printf("gpt-tiny arena: unfused %.3f MiB, fused %.3f MiB; one layer of 256 tokens keeps "
           "%.4f MiB unfused, %.6f MiB fused\n", arena[0], arena[1], saved[0], saved[1]);
    assert_true(arena[0] - arena[1] > 1.5 && arena[0] - arena[1] < 2.5);
    assert_true(saved[0] == 2.0);                         // 2 x 4 x 256 x 256 floats
    assert_true(saved[1] * 1048576.0 == 2 * 4 * 256 * 4); // 2 x 4 x 256 floats
    free(csv);
}

static const char *const fused[] = {"fused"};

static void test_selftests_fail_the_fused_rows(void **state)
{
    (void)state;
    assert_true(test_selftest_fails("bench_attention", "--backend=cpu --benchmark_filter='^attention/' "
                                    "--benchmark_min_time=0.01", "half_lr", "attention", "unfused",
                                    fused, 1, "differ from the baseline's") >= 1);
    assert_true(test_selftest_fails("bench_attention", "--backend=cpu --benchmark_filter='seq:256/' "
                                    "--benchmark_min_time=0.01", "frozen", "attention_layer", "unfused",
                                    fused, 1, "the fused form differs from the unfused one") >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_families),
        cmocka_unit_test(test_rows_run_and_check),
        cmocka_unit_test(test_selftests_fail_the_fused_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
