// test_bench_pin_memory.c: the pin_memory practice. Always: the program lists every
// variant and, without a GPU, skips with "no CUDA device" and exits 0; bad flag values
// and an unwritable CSV are refused before anything runs. With a GPU:
// every copy variant moves exactly the right bytes both ways (compared byte for byte),
// and every step pipeline's output equals the CPU reference bit for bit.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/driver/transfer.h"
#include "kernels/check.h"
#include "kernels/gpu_device.h"
#include "tests/support.h"

static void test_lists_every_variant(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_pin_memory");
    assert_non_null(list);
    const char *want[] = {"pin_memory/pageable/h2d:1/bytes:4096/", "pin_memory/pinned/h2d:0/bytes:268435456/",
                          "pin_memory/pinned_async/", "pin_memory/registered_async/",
                          "pin_memory_step/pageable_blocking/bytes:4194304/fma:64/",
                          "pin_memory_step/pinned_async_overlap/", "pin_memory_alloc/pinned_per_batch/",
                          "pin_memory_alloc/pinned_once/bytes:67108864/fma:4096/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    assert_int_equal(test_count_lines(list), 4 * 2 * 9 + 4 * 3 * 3); // copies: 2 directions x 9 sizes; steps: 3x3
    free(list);
}

static void test_runs_or_skips_with_reason(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_pin_memory", "--benchmark_filter='^pin_memory/pinned/h2d:1/bytes:4096/' "
                                                   "--benchmark_min_time=0.01");
    assert_non_null(csv);
    const char *row = strchr(csv, '\n');
    assert_non_null(row);
    char status[32], reason[256], wrong[32];
    assert_true(test_csv_field(row + 1, test_csv_column(csv, "status"), status, sizeof status));
    assert_true(test_csv_field(row + 1, test_csv_column(csv, "reason"), reason, sizeof reason));
    if (test_gpu_present()) {
        assert_string_equal(status, "ok");
        assert_true(test_csv_field(row + 1, test_csv_column(csv, "wrong_bytes"), wrong, sizeof wrong));
        assert_string_equal(wrong, "0");
    } else {
        assert_string_equal(status, "skipped");
        assert_true(strncmp(reason, "no CUDA device", 14) == 0);
    }
    free(csv);
}

// Flag values Google Benchmark aborts on (a negative repetition count), runs nothing for
// (0 repetitions) or answers with exit status 0 (an unknown format) are refused with exit
// status 2 and a message naming the flag; an unwritable --harness_csv fails before any
// benchmark runs (exit status 1), not after the whole run.
static void test_bad_flag_values_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {"--benchmark_repetitions=-1", "--benchmark_repetitions=0",
                         "--benchmark_format=xml", "--benchmark_out_format=xml",
                         "--benchmark_time_unit=zs", "--harness_csv="};
    test_bad_options_refused("bench_pin_memory", bad, sizeof bad / sizeof bad[0],
                             "--benchmark_min_time=0.01 "
                             "--benchmark_filter='^pin_memory/pageable/h2d:0/bytes:4096/'");
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char path[600];
    snprintf(path, sizeof path, "%s/err.txt", tmp);
    int rc = test_run("'%s/bench_pin_memory' --harness_csv='%s/no/such/folder/pm.csv' "
                      "--benchmark_min_time=0.01 --benchmark_filter='^pin_memory/pageable/h2d:0/bytes:4096/' "
                      ">'%s/out.txt' 2>'%s'", test_build_dir(), tmp, tmp, path);
    assert_int_equal(rc, 1);
    char *err = test_read_file(path, NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "cannot write tidy CSV"));
    free(err);
    snprintf(path, sizeof path, "%s/out.txt", tmp);
    char *out = test_read_file(path, NULL);
    assert_non_null(out);
    assert_null(strstr(out, "pin_memory/pageable")); // refused before anything ran
    free(out);
    test_remove_tree(tmp);
    free(tmp);
}

static void test_json_format_on_stdout_carries_context(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    assert_int_equal(test_run("'%s/bench_pin_memory' --benchmark_format=json --benchmark_min_time=0.01 "
                              "--benchmark_filter='^pin_memory/pageable/h2d:0/bytes:4096/' "
                              "> '%s/out.json' 2>/dev/null", test_build_dir(), tmp), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/out.json", tmp);
    char *json = test_read_file(path, NULL);
    assert_non_null(json);
    assert_int_equal(json[0], '{');
    const char *keys[] = {"\"gpu_name\"", "\"gpu_compute_capability\"", "\"gpu_sm_count\"",
                          "\"gpu_memory_mib\"", "\"gpu_sm_clock_mhz\"", "\"driver_version\"",
                          "\"cuda_runtime\"", "\"cublas_version\"", "\"cudnn_version\"",
                          "\"nccl_version\"", "\"benchmarks\"",
                          // without a GPU the row is named min_time:0.000 (a skip: harness.h's gpu_only)
                          "\"pin_memory/pageable/h2d:0/bytes:4096/", "/manual_time\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strstr(json, keys[i])) fail_msg("JSON on stdout lacks %s", keys[i]);
    free(json);
    test_remove_tree(tmp);
    free(tmp);
}

static void test_gpu_every_copy_variant_moves_the_right_bytes(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const CopyVariant variants[] = {{HOST_PAGEABLE, false}, {HOST_PINNED, false},
                                    {HOST_PINNED, true}, {HOST_REGISTERED, true}};
    const size_t sizes[] = {1, 4096 + 3, (size_t)1 << 20, ((size_t)16 << 20) + 7};
    for (size_t v = 0; v < 4; v++)
        for (size_t i = 0; i < 4; i++)
            for (int h2d = 0; h2d <= 1; h2d++) {
                CopySetup s;
                int64_t wrong = -1;
                int rc = copy_prepare(&s, variants[v], sizes[i]);
                if (rc == 0) rc = copy_verify(&s, h2d, &wrong);
                copy_release(&s);
                if (rc != 0) fail_msg("variant %zu, %zu bytes: %s", v, sizes[i], error_message());
                if (wrong != 0)
                    fail_msg("variant %zu, %zu bytes, h2d=%d: %lld bytes wrong", v, sizes[i], h2d,
                             (long long)wrong);
            }
}

static void test_gpu_step_pipelines_match_cpu_reference(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const StepsVariant variants[] = {STEPS_PAGEABLE_BLOCKING, STEPS_PINNED_ASYNC, STEPS_PINNED_PER_BATCH};
    for (size_t v = 0; v < 3; v++) {
        StepsSetup s;
        int64_t wrong = -1;
        int rc = steps_prepare(&s, variants[v], (size_t)1 << 20);
        for (int pass = 0; rc == 0 && pass < 2; pass++) rc = steps_run(&s, 64);
        if (rc == 0) rc = steps_check_output(&s, 64, &wrong);
        steps_release(&s);
        if (rc != 0) fail_msg("steps variant %zu: %s", v, error_message());
        assert_int_equal(wrong, 0); // exact: fused multiply-adds on both sides
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_variant),
        cmocka_unit_test(test_runs_or_skips_with_reason),
        cmocka_unit_test(test_bad_flag_values_are_refused),
        cmocka_unit_test(test_json_format_on_stdout_carries_context),
        cmocka_unit_test(test_gpu_every_copy_variant_moves_the_right_bytes),
        cmocka_unit_test(test_gpu_step_pipelines_match_cpu_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
