// test_bench_on_device.c: the on_device practice. Always (CPU): the program lists every
// variant and, without a GPU, skips each kind of run with "no CUDA device" and exits 0;
// the host generator gives standard normal values, the same for the same seed and others
// for another stream; the checks accept good tensors and catch a shifted or scaled
// normal sample, a NaN, a nonzero byte and a wrong arange element, with tolerances that
// follow from the sample size. With a GPU: every build of every kind, at small and odd
// sizes, passes its check; device draws differ from one another; the noise-augmented
// training runs are ok with their noise checked.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/on_device/fill_check.h"
#include "bench/on_device/on_device.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "tests/support.h"

static void test_lists_every_variant(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_on_device");
    assert_non_null(list);
    const char *want[] = {"on_device/host_built/preset:tiny/batch:0/", "on_device/device_built/preset:resnet18/",
                          "on_device_randn/host_pageable/bytes:4096/", "on_device_randn/host_pinned/bytes:65536/",
                          "on_device_randn/device/bytes:268435456/", "on_device_zeros/host_pageable/bytes:16384/",
                          "on_device_zeros/device/bytes:1048576/", "on_device_arange/host_pageable/bytes:4194304/",
                          "on_device_arange/device/bytes:67108864/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    assert_int_equal(test_count_lines(list), 2 * 3 + 7 * 9);  // macro: 2 variants x 3 presets; micro: 7 x 9 sizes
    free(list);
}

static void test_runs_or_skips_with_reason(void **state)
{
    (void)state;
    bool gpu = test_gpu_present();
    char *csv = test_bench_csv("bench_on_device",
                               "--benchmark_min_time=0.01 --benchmark_filter='^(on_device/device_built/preset:tiny|"
                               "on_device/host_built/preset:tiny|on_device_randn/device/bytes:4096|"
                               "on_device_zeros/host_pageable/bytes:4096|on_device_arange/device/bytes:65536)/'");
    assert_non_null(csv);
    char why[512];
    int rows = test_rows_ok_or_skipped(csv, gpu, why, sizeof why);
    if (rows < 0) fail_msg("%s", why);
    assert_int_equal(rows, 5);
    if (gpu) {
        for (const char *row = strchr(csv, '\n'); row && row[1]; row = strchr(row + 1, '\n')) {
            if (strncmp(row + 1, "on_device,", 10) != 0) continue;
            char v[64];
            assert_true(test_csv_field(row + 1, test_csv_column(csv, "noise_wrong"), v, sizeof v));
            assert_string_equal(v, "0");
        }
    }
    free(csv);
}

static void test_host_normal_is_standard_and_reproducible(void **state)
{
    (void)state;
    const size_t n = 200000;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    fill_host_normal(a, n, 7, 0);
    NormalCheck c = check_normal(a, n);
    if (!c.ok) fail_msg("mean %g (tol %g), std %g (tol %g)", c.mean, c.mean_tol, c.std, c.std_tol);
    // the tails too: about 4.55 % beyond 2 sigma for a normal, 50 % for a uniform
    size_t beyond = 0;
    for (size_t i = 0; i < n; i++) beyond += fabsf(a[i]) > 2.0f;
    assert_true(fabs((double)beyond / n - 0.0455) < 0.003);
    fill_host_normal(b, n, 7, 0);
    assert_memory_equal(a, b, n * sizeof *a);
    fill_host_normal(b, n, 7, 1);  // another draw
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += a[i] == b[i];
    assert_true(same < 10);
    free(a);
    free(b);
}

static void test_checks_catch_wrong_tensors(void **state)
{
    (void)state;
    const size_t n = 100000;
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    fill_host_normal(x, n, 3, 0);
    NormalCheck c = check_normal(x, n);
    assert_true(c.ok);
    // tolerances from the sample size: 6 standard errors
    assert_true(fabs(c.mean_tol - 6.0 / sqrt((double)n)) < 1e-12);
    assert_true(fabs(c.std_tol - 6.0 / sqrt(2.0 * (n - 1))) < 1e-12);
    for (size_t i = 0; i < n; i++) x[i] += 0.1f;  // shifted: 0.1 > 6 / sqrt(1e5) = 0.019
    assert_false(check_normal(x, n).ok);
    fill_host_normal(x, n, 3, 0);
    for (size_t i = 0; i < n; i++) x[i] *= 1.05f;  // scaled: 0.05 > 6 / sqrt(2e5) = 0.0134
    assert_false(check_normal(x, n).ok);
    fill_host_normal(x, n, 3, 0);
    x[n / 2] = NAN;
    assert_false(check_normal(x, n).ok);
    assert_false(check_normal(x, 1).ok);  // one value says nothing
    // a small sample is judged by its wider tolerance: 1024 values, mean tolerance 0.1875
    fill_host_normal(x, 1024, 3, 0);
    c = check_normal(x, 1024);
    assert_true(c.ok);
    assert_true(fabs(c.mean_tol - 0.1875) < 1e-12);
    free(x);

    int32_t r[1000];
    fill_host_arange(r, 1000);
    assert_int_equal(check_arange(r, 1000), 0);
    r[999] = 998;
    r[0] = -1;
    assert_int_equal(check_arange(r, 1000), 2);
    unsigned char z[4096] = {0};
    assert_int_equal(check_zeros(z, sizeof z), 0);
    z[4095] = 0x80;
    assert_int_equal(check_zeros(z, sizeof z), 1);
}

static void test_gpu_every_build_passes_its_check(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const size_t sizes[] = {4, 4096 + 12, (size_t)1 << 20, ((size_t)8 << 20) + 4};
    const TensorKind kinds[] = {TENSOR_NORMAL, TENSOR_ZEROS, TENSOR_ARANGE};
    const TensorBuild builds[] = {BUILT_HOST_PAGEABLE, BUILT_HOST_PINNED, BUILT_DEVICE};
    for (size_t k = 0; k < 3; k++)
        for (size_t b = 0; b < 3; b++)
            for (size_t i = 0; i < 4; i++) {
                // one value says nothing about a distribution: random tensors from 2 values
                if (kinds[k] == TENSOR_NORMAL && sizes[i] < 8) continue;
                TensorBuilder t;
                int64_t wrong = -1;
                NormalCheck c;
                int rc = tensor_builder_create(&t, kinds[k], builds[b], sizes[i]);
                if (rc == 0) rc = tensor_builder_check(&t, &wrong, &c);
                tensor_builder_free(&t);
                if (rc != 0) fail_msg("kind %zu build %zu, %zu bytes: %s", k, b, sizes[i], error_message());
                if (wrong != 0)
                    fail_msg("kind %zu build %zu, %zu bytes: %lld wrong (mean %g std %g)", k, b, sizes[i],
                             (long long)wrong, c.mean, c.std);
            }
}

static void test_gpu_device_draws_differ(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const size_t n = 100000 + 3;  // not a multiple of 4: the last thread's partial round
    float *d = NULL, *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(cudaMalloc((void **)&d, n * sizeof *d), cudaSuccess);
    assert_int_equal(device_fill_normal(d, n, 11, 0, 0), 0);
    assert_int_equal(cudaMemcpy(a, d, n * sizeof *a, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(device_fill_normal(d, n, 11, 1, 0), 0);
    assert_int_equal(cudaMemcpy(b, d, n * sizeof *b, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += a[i] == b[i];
    assert_true(same < 10);
    assert_true(check_normal(a, n).ok);
    assert_true(check_normal(b, n).ok);
    assert_int_equal(device_fill_normal(d, n, 11, 0, 0), 0);  // the same draw again
    assert_int_equal(cudaMemcpy(b, d, n * sizeof *b, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(a, b, n * sizeof *a);
    cudaFree(d);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_variant),
        cmocka_unit_test(test_runs_or_skips_with_reason),
        cmocka_unit_test(test_host_normal_is_standard_and_reproducible),
        cmocka_unit_test(test_checks_catch_wrong_tensors),
        cmocka_unit_test(test_gpu_every_build_passes_its_check),
        cmocka_unit_test(test_gpu_device_draws_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
