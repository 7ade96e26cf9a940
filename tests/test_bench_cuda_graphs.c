// test_bench_cuda_graphs.c: the cuda_graphs practice program. Always: it lists every
// variant with its axes, and bad option values are refused (exit status 2, naming the
// flag). Without a GPU every row skips with "no CUDA device"; with one, the tiny preset's
// rows succeed: the graph variant agrees with eager and really replayed (one capture),
// the capture-cost row carries its verdict, and the dynamic-shape graph row re-captured
// once per new shape (8 steps, size changing every 2: 3 captures after the warm-up's).
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

#define PROGRAM "bench_cuda_graphs"

static void test_lists_every_variant(void **state)
{
    (void)state;
    char *list = test_bench_list(PROGRAM);
    assert_non_null(list);
    const char *want[] = {
        "cuda_graphs/eager/preset:tiny/batch:0/", "cuda_graphs/graph/preset:resnet18/batch:0/",
        "cuda_graphs/graph/preset:mlp/batch:0/", "cuda_graphs_capture/eager/preset:small/batch:0/",
        "cuda_graphs_capture/graph/preset:resnet18/batch:0/",
        "cuda_graphs_dynamic/eager/preset:tiny/batch:0/every:1/",
        "cuda_graphs_dynamic/graph/preset:resnet18/batch:0/every:16/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    // steps and capture: 2 variants x 4 presets each; dynamic: 2 x 3 presets x 4 settings
    assert_int_equal(test_count_lines(list), 8 + 8 + 24);
    free(list);
}

static void test_bad_option_values_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {"--capture_steps=0", "--dynamic_steps=-1", "--capture_steps=x"};
    test_bad_options_refused(PROGRAM, bad, sizeof bad / sizeof bad[0], "");
}


static void test_rows_run_or_skip(void **state)
{
    (void)state;
    char *csv = test_bench_csv(PROGRAM, "--preset=tiny --capture_steps=3 --dynamic_steps=8 "
                                        "--harness_axis=every=2 --benchmark_min_time=0.01");
    assert_non_null(csv);
    bool gpu = test_gpu_present();
    char why[512];
    int rows = test_rows_ok_or_skipped(csv, gpu, why, sizeof why);
    if (rows < 0) fail_msg("%s", why);
    assert_int_equal(rows, 6);  // 3 parts x 2 variants on tiny
    if (gpu) {
        char v[256];
        assert_true(test_csv_row_value(csv, "cuda_graphs,graph", "preset:tiny;batch:0", "wrong", v, sizeof v));
        assert_string_equal(v, "0");
        assert_true(test_csv_row_value(csv, "cuda_graphs,graph", "preset:tiny;batch:0", "graph_captures", v, sizeof v));
        assert_string_equal(v, "1");
        assert_true(test_csv_row_value(csv, "cuda_graphs,eager", "preset:tiny;batch:0", "graph_captures", v, sizeof v));
        assert_string_equal(v, "0");
        assert_true(test_csv_row_value(csv, "cuda_graphs_capture,graph", "preset:tiny;batch:0", "pays_off", v, sizeof v));
        assert_true(strcmp(v, "0") == 0 || strcmp(v, "1") == 0);
        assert_true(test_csv_row_value(csv, "cuda_graphs_capture,graph", "preset:tiny;batch:0", "capture_ms", v, sizeof v));
        assert_true(atof(v) > 0.0);
        const char *dyn = "preset:tiny;batch:0;every:2";
        assert_true(test_csv_row_value(csv, "cuda_graphs_dynamic,graph", dyn, "graph_captures", v, sizeof v));
        assert_string_equal(v, "3");
        assert_true(test_csv_row_value(csv, "cuda_graphs_dynamic,graph", dyn, "check_rel_diff", v, sizeof v));
        assert_true(atof(v) <= 1e-5);
    }
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_variant),
        cmocka_unit_test(test_bad_option_values_are_refused),
        cmocka_unit_test(test_rows_run_or_skip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
