// test_bench_layout.c: the channels_last practice (build/bench_layout). Always: the program
// lists NCHW (baseline) and channels_last (tuned) for every precision and preset, and,
// without a GPU, skips every run with "no CUDA device" and exits 0 (the CPU backends
// compute in NCHW only). With a GPU: channels_last trains tiny in fp32 and fp16, its
// update after 3 steps within the stated tolerance of NCHW's (wrong = 0); without one that
// test is a cmocka skip.
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

static void test_lists_every_variant(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_layout");
    assert_non_null(list);
    const char *precisions[] = {"fp32", "fp32_strict", "tf32", "fp16", "bf16"};
    const char *presets[] = {"tiny", "small", "medium", "resnet18"};
    for (int p = 0; p < 5; p++)
        for (int q = 0; q < 4; q++)
            for (int v = 0; v < 2; v++) {
                char want[128];
                snprintf(want, sizeof want, "layout_%s/%s/preset:%s/", precisions[p], v ? "channels_last" : "nchw",
                         presets[q]);
                if (!strstr(list, want)) fail_msg("--benchmark_list_tests lacks %s", want);
            }
    assert_int_equal(test_count_lines(list), 5 * 4 * 2);
    free(list);
}

static void test_runs_or_skips_with_reason(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_layout", "--benchmark_filter='^layout_(fp32|fp16)/.*/preset:tiny/' "
                                               "--benchmark_min_time=0.01");
    assert_non_null(csv);
    int status = test_csv_column(csv, "status"), reason = test_csv_column(csv, "reason"),
        wrong = test_csv_column(csv, "wrong"), variant = test_csv_column(csv, "variant");
    assert_true(status >= 0 && reason >= 0 && variant >= 0);
    bool gpu = test_gpu_present();
    char why[512];
    int rows = test_rows_ok_or_skipped(csv, gpu, why, sizeof why);
    if (rows < 0) fail_msg("%s", why);
    assert_int_equal(rows, 4);
    (void)wrong;
    free(csv);
}

// With a GPU: channels_last's update within the stated tolerance of NCHW's (wrong = 0); without
// one, a visible cmocka skip.
static void test_gpu_channels_last_checks_out(void **state)
{
    (void)state;
    REQUIRE_GPU();
    char *csv = test_bench_csv("bench_layout", "--benchmark_filter='^layout_(fp32|fp16)/.*/preset:tiny/' "
                                               "--benchmark_min_time=0.01");
    assert_non_null(csv);
    int wrong = test_csv_column(csv, "wrong"), variant = test_csv_column(csv, "variant");
    assert_true(wrong >= 0 && variant >= 0);
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char w[32], v[64];
        assert_true(test_csv_field(line + 1, variant, v, sizeof v));
        if (strcmp(v, "channels_last") == 0) {
            assert_true(test_csv_field(line + 1, wrong, w, sizeof w));
            assert_string_equal(w, "0");
        }
    }
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_variant),
        cmocka_unit_test(test_runs_or_skips_with_reason),
        cmocka_unit_test(test_gpu_channels_last_checks_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
