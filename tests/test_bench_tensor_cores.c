// test_bench_tensor_cores.c: the tensor_cores practice (build/bench_tensor_cores). It lists
// the GEMM micro (misaligned, aligned per size) and the width macro (small preset); without
// a GPU every row is skipped with the no-device reason and the program exits 0; with one,
// every row is ok, and the GEMM rows report tflops > 0 with their result checked (wrong = 0);
// --tc_width that is not a multiple of 8 is refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

static void test_lists_both_families(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_tensor_cores");
    assert_non_null(list);
    assert_non_null(strstr(list, "tensor_cores_gemm/misaligned/size:4096/"));
    assert_non_null(strstr(list, "tensor_cores_gemm/aligned/size:4096/"));
    assert_non_null(strstr(list, "tensor_cores_gemm/aligned/size:1024/"));
    assert_non_null(strstr(list, "tensor_cores_width/misaligned/preset:small/"));
    assert_non_null(strstr(list, "tensor_cores_width/aligned/preset:small/"));
    free(list);
}

// Every row: ok with a GPU, else skipped naming the missing device (exit 0 either way).
static void test_rows_run_or_skip(void **state)
{
    (void)state;
    bool gpu = test_gpu_present();
    char *csv = test_bench_csv("bench_tensor_cores", "--benchmark_min_time=0.01 --harness_axis=size=1024");
    assert_non_null(csv);
    char why[400] = "";
    int rows = test_rows_ok_or_skipped(csv, gpu, why, sizeof why);
    if (rows < 0) printf("%s\n", why);
    assert_int_equal(rows, 4);  // two GEMM rows at 1024, two width rows
    free(csv);
}

static void test_gpu_gemm_rates(void **state)
{
    (void)state;
    REQUIRE_GPU();
    char *csv = test_bench_csv("bench_tensor_cores", "--benchmark_filter=tensor_cores_gemm "
                                                     "--benchmark_min_time=0.01 --harness_axis=size=1024,4096");
    assert_non_null(csv);
    const char *const variants[] = {"tensor_cores_gemm,misaligned", "tensor_cores_gemm,aligned"};
    const char *const sizes[] = {"size:1024", "size:4096"};
    for (int v = 0; v < 2; v++) {
        for (int s = 0; s < 2; s++) {
            char status[32], tflops[64], wrong[32];
            assert_true(test_csv_row_value(csv, variants[v], sizes[s], "status", status, sizeof status));
            assert_true(test_csv_row_value(csv, variants[v], sizes[s], "tflops", tflops, sizeof tflops));
            assert_true(test_csv_row_value(csv, variants[v], sizes[s], "wrong", wrong, sizeof wrong));
            printf("%s %s: %s TFLOP/s\n", variants[v], sizes[s], tflops);
            assert_string_equal(status, "ok");
            assert_true(atof(tflops) > 0.0);
            assert_string_equal(wrong, "0");
        }
    }
    free(csv);
}

static void test_unaligned_width_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {"--tc_width=63", "--tc_width=4"};
    test_bad_options_refused("bench_tensor_cores", bad, 2, "--benchmark_list_tests");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_both_families),
        cmocka_unit_test(test_rows_run_or_skip),
        cmocka_unit_test(test_gpu_gemm_rates),
        cmocka_unit_test(test_unaligned_width_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
