// test_bench_cudnn_benchmark.c: the cudnn_benchmark practice program. Always: it lists
// every variant with its axes; bad option values are refused (exit status 2, naming the
// flag); the CPU part (the dynamic-shape schedule on the fast CPU backend) runs for real:
// one row per size setting, as many distinct shapes as the schedule promises, and a
// cumulative-time curve that grows step by step. Without a GPU, every cuDNN part skips
// with "no CUDA device"; with one, the tiny preset's runs of each part succeed (the
// tuned tuning row carries its break-even verdict, the regret rows their times, and the
// engine-configuration search timed at least one configuration).
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

#define PROGRAM "bench_cudnn_benchmark"

static void test_lists_every_variant(void **state)
{
    (void)state;
    char *list = test_bench_list(PROGRAM);
    assert_non_null(list);
    const char *want[] = {
        "cudnn_benchmark/heuristic/preset:resnet18/batch:0/", "cudnn_benchmark/autotune/preset:tiny/",
        "cudnn_benchmark_tuning/heuristic/preset:medium/", "cudnn_benchmark_tuning/autotune/preset:small/",
        "cudnn_benchmark_dynamic/heuristic/preset:resnet18/batch:0/sizes:16/",
        "cudnn_benchmark_dynamic/autotune/preset:small/batch:0/sizes:0/",
        "cudnn_benchmark_dynamic_cpu/fast_cpu/preset:tiny/batch:0/sizes:4/",
        "cudnn_benchmark_regret/heuristic/preset:resnet18/batch:0/pass:bwd_filter/conv:10/",
        "cudnn_benchmark_regret/find/preset:small/batch:0/pass:fwd/conv:0/",
        "cudnn_benchmark_regret/fastest/preset:small/batch:0/pass:bwd_data/conv:3/",
        "cudnn_benchmark_regret/engine_search/preset:resnet18/batch:0/pass:fwd/conv:7/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    // steps and tuning: 2 x 4 presets each; dynamic: 2 x 2 presets x 4 size settings; CPU
    // dynamic: 4; regret: 4 picks x 2 presets x 3 passes x 11 shapes
    assert_int_equal(test_count_lines(list), 8 + 8 + 16 + 4 + 4 * 2 * 3 * 11);
    free(list);
}

static void test_bad_option_values_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {"--dynamic_steps=0", "--epoch_steps=-1", "--regret_reps=0", "--fixed_steps=x",
                         "--engine_limit=-1"};
    test_bad_options_refused(PROGRAM, bad, sizeof bad / sizeof bad[0], "--benchmark_filter=dynamic_cpu");
}


// The CPU part runs; the cuDNN parts skip without a GPU (or, with one, run on tiny).
static void test_runs_cpu_part_and_skips_or_runs_cudnn_parts(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    int rc = test_run("'%s/" PROGRAM "' --preset=tiny --dynamic_steps=6 --epoch_steps=3 --fixed_steps=3 "
                      "--regret_reps=2 --engine_limit=3 --harness_axis=sizes=0,4 --harness_axis=conv=0 "
                      "--harness_axis=pass=fwd --benchmark_min_time=0.01 "
                      "--benchmark_filter='^cudnn_benchmark(_tuning|_dynamic|_dynamic_cpu|_regret)?/' "
                      "--harness_csv='%s/cb.csv' >'%s/out.txt' 2>&1", test_build_dir(), tmp, tmp);
    assert_int_equal(rc, 0);
    char path[600];
    snprintf(path, sizeof path, "%s/cb.csv", tmp);
    char *csv = test_read_file(path, NULL);
    assert_non_null(csv);
    char v[256];
    // The CPU reference: 6 steps, every one a new size (6 shapes), or 4 sizes.
    const char *cpu_params[] = {"preset:tiny;batch:0;sizes:0", "preset:tiny;batch:0;sizes:4"};
    for (int i = 0; i < 2; i++) {
        assert_true(test_csv_row_value(csv, "cudnn_benchmark_dynamic_cpu,fast_cpu", cpu_params[i], "status", v, sizeof v));
        assert_string_equal(v, "ok");
        assert_true(test_csv_row_value(csv, "cudnn_benchmark_dynamic_cpu,fast_cpu", cpu_params[i], "steps", v, sizeof v));
        assert_int_equal(atoi(v), 6);
        assert_true(test_csv_row_value(csv, "cudnn_benchmark_dynamic_cpu,fast_cpu", cpu_params[i], "shapes", v, sizeof v));
        if (i == 0) assert_int_equal(atoi(v), 6);
        else assert_true(atoi(v) >= 1 && atoi(v) <= 4 * 2);
        assert_true(test_csv_row_value(csv, "cudnn_benchmark_dynamic_cpu,fast_cpu", cpu_params[i], "time", v, sizeof v));
        assert_true(atof(v) > 0.0);
    }
    // Its curve: 6 cumulative points per run, growing.
    snprintf(path, sizeof path, "%s/cb.curves.csv", tmp);
    char *curves = test_read_file(path, NULL);
    assert_non_null(curves);
    int vcol = test_csv_column(curves, "value"), mcol = test_csv_column(curves, "metric");
    int pcol = test_csv_column(curves, "params");
    assert_true(vcol >= 0 && mcol >= 0 && pcol >= 0);
    int points = 0;
    double last = 0.0;
    for (const char *line = strchr(curves, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char metric[64], params[128], value[64];
        if (strncmp(line + 1, "cudnn_benchmark_dynamic_cpu,", 28) != 0) continue;
        assert_true(test_csv_field(line + 1, mcol, metric, sizeof metric));
        assert_true(test_csv_field(line + 1, pcol, params, sizeof params));
        assert_true(test_csv_field(line + 1, vcol, value, sizeof value));
        if (strcmp(metric, "cumulative_ms") != 0 || strcmp(params, cpu_params[0]) != 0) continue;
        assert_true(atof(value) > last);
        last = atof(value);
        points++;
    }
    assert_int_equal(points, 6);
    free(curves);

    // The cuDNN parts.
    const char *gpu_rows[][2] = {
        {"cudnn_benchmark,heuristic", "preset:tiny;batch:0"},
        {"cudnn_benchmark,autotune", "preset:tiny;batch:0"},
        {"cudnn_benchmark_tuning,heuristic", "preset:tiny;batch:0"},
        {"cudnn_benchmark_tuning,autotune", "preset:tiny;batch:0"},
        {"cudnn_benchmark_dynamic,heuristic", "preset:tiny;batch:0;sizes:0"},
        {"cudnn_benchmark_dynamic,autotune", "preset:tiny;batch:0;sizes:4"},
        {"cudnn_benchmark_regret,heuristic", "preset:tiny;batch:0;pass:fwd;conv:0"},
        {"cudnn_benchmark_regret,find", "preset:tiny;batch:0;pass:fwd;conv:0"},
        {"cudnn_benchmark_regret,fastest", "preset:tiny;batch:0;pass:fwd;conv:0"},
        {"cudnn_benchmark_regret,engine_search", "preset:tiny;batch:0;pass:fwd;conv:0"},
    };
    bool gpu = test_gpu_present();
    for (size_t i = 0; i < sizeof gpu_rows / sizeof gpu_rows[0]; i++) {
        if (!test_csv_row_value(csv, gpu_rows[i][0], gpu_rows[i][1], "status", v, sizeof v))
            fail_msg("no row %s %s", gpu_rows[i][0], gpu_rows[i][1]);
        if (!gpu) {
            if (strcmp(v, "skipped") != 0) fail_msg("%s: status %s, want skipped", gpu_rows[i][0], v);
            assert_true(test_csv_row_value(csv, gpu_rows[i][0], gpu_rows[i][1], "reason", v, sizeof v));
            if (strncmp(v, "no CUDA device", 14) != 0) fail_msg("%s: reason '%s'", gpu_rows[i][0], v);
            continue;
        }
        if (strcmp(v, "ok") != 0) fail_msg("%s %s: status %s", gpu_rows[i][0], gpu_rows[i][1], v);
        assert_true(test_csv_row_value(csv, gpu_rows[i][0], gpu_rows[i][1], "time", v, sizeof v));
        assert_true(atof(v) > 0.0);
    }
    if (gpu) {
        assert_true(test_csv_row_value(csv, "cudnn_benchmark_tuning,autotune", "preset:tiny;batch:0", "pays_off", v, sizeof v));
        assert_true(strcmp(v, "0") == 0 || strcmp(v, "1") == 0);
        assert_true(test_csv_row_value(csv, "cudnn_benchmark_regret,heuristic", "preset:tiny;batch:0;pass:fwd;conv:0",
                              "regret", v, sizeof v));
        assert_true(atof(v) >= 1.0);  // the fastest is the fastest of what was timed
        assert_true(test_csv_row_value(csv, "cudnn_benchmark_regret,engine_search", "preset:tiny;batch:0;pass:fwd;conv:0",
                              "engine_timed", v, sizeof v));
        assert_true(atoi(v) >= 1 && atoi(v) <= 3);  // --engine_limit=3 plans at most
        assert_true(test_csv_row_value(csv, "cudnn_benchmark,autotune", "preset:tiny;batch:0", "wrong", v, sizeof v));
        assert_string_equal(v, "0");
    }
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_variant),
        cmocka_unit_test(test_bad_option_values_are_refused),
        cmocka_unit_test(test_runs_cpu_part_and_skips_or_runs_cudnn_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
