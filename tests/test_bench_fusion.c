// test_bench_fusion.c: the pointwise-fusion practice (build/bench_fusion). It lists
// separate (baseline) and fused (tuned) for its presets; tiny runs on whatever backend
// this machine has (the fast CPU backend without a GPU): both rows ok, and the fused one
// passes its checks against the separate one (wrong = 0; on the CPU bit for bit, so the
// parameter and loss differences are exactly 0), with the plan's activation bytes > 0.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/gpu_device.h"
#include "tests/support.h"

static void test_lists_both_variants(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_fusion");
    assert_non_null(list);
    assert_non_null(strstr(list, "fusion/separate/preset:tiny/"));
    assert_non_null(strstr(list, "fusion/fused/preset:tiny/"));
    assert_non_null(strstr(list, "fusion/fused/preset:small/"));
    assert_null(strstr(list, "preset:mlp"));  // nothing to fuse
    free(list);
}

static void test_tiny_runs_and_checks(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_fusion", "--benchmark_filter='preset:tiny/' --benchmark_min_time=0.01");
    assert_non_null(csv);
    bool gpu = test_gpu_present();
    int rows = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char status[32], variant[32], wrong[32], mib[32], rel[32], loss_rel[32];
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        assert_string_equal(status, "ok");
        test_csv_named_field(csv, line + 1, "activation_mib", mib, sizeof mib);
        assert_true(atof(mib) > 0.0);
        char fused_ops[32];
        test_csv_named_field(csv, line + 1, "fused_ops", fused_ops, sizeof fused_ops);
        printf("%s: fused_ops = %s\n", variant, fused_ops);
        if (strcmp(variant, "separate") == 0) assert_true(atof(fused_ops) == 0.0);
        if (strcmp(variant, "fused") == 0) {
            assert_true(atof(fused_ops) > 0.0);
            test_csv_named_field(csv, line + 1, "wrong", wrong, sizeof wrong);
            test_csv_named_field(csv, line + 1, "check_rel_diff", rel, sizeof rel);
            test_csv_named_field(csv, line + 1, "check_loss_rel_diff", loss_rel, sizeof loss_rel);
            assert_string_equal(wrong, "0");
            if (!gpu) {  // the CPU's fused loops are bit-identical
                assert_true(atof(rel) == 0.0);
                assert_true(atof(loss_rel) == 0.0);
            }
        }
        rows++;
    }
    assert_int_equal(rows, 2);
    free(csv);
}

// The fused variant on a backend that never fuses (the plain-C reference) fused nothing:
// its run fails, so a "fused" row can never time the separate kernels.
static void test_fused_config_that_fuses_nothing_fails(void **state)
{
    (void)state;
    int status = -1;
    char *csv = test_bench_csv_exit("bench_fusion", "--backend=cpu-ref --preset=tiny --benchmark_min_time=0.01",
                                    &status);
    assert_non_null(csv);
    assert_int_equal(status, 1);
    int v = test_csv_column(csv, "variant"), st = test_csv_column(csv, "status"), r = test_csv_column(csv, "reason");
    bool seen = false;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char variant[32], status_text[32], reason[512];
        assert_true(test_csv_field(line + 1, v, variant, sizeof variant));
        assert_true(test_csv_field(line + 1, st, status_text, sizeof status_text));
        if (strcmp(variant, "fused") != 0) {
            assert_string_equal(status_text, "ok");
            continue;
        }
        assert_true(test_csv_field(line + 1, r, reason, sizeof reason));
        printf("fused on cpu-ref: %s\n", reason);
        assert_string_equal(status_text, "error");
        assert_non_null(strstr(reason, "fused no operation"));
        seen = true;
    }
    assert_true(seen);
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_both_variants),
        cmocka_unit_test(test_tiny_runs_and_checks),
        cmocka_unit_test(test_fused_config_that_fuses_nothing_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
