// test_bench_kernels.c: the kernel micro benchmarks (build/bench_kernels). Always: the
// program lists every family on the presets' shapes (resnet18 at 128 and 256 among them;
// --kernels_shapes=all adds the rest); its CPU rows run for real: the fast CPU layers are
// validated against the CPU reference (ok, error within tolerance, a GB/s); the GPU rows
// skip with "no CUDA device" (with a GPU they run, validate and report GB/s and a fraction of
// peak); --kernels_perturb makes every validated row fail (the validation can fail); the
// validation and bytes helpers give the documented numbers; a bad option is refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/core_kernels/kernels_case.h"
#include "kernels/gpu_device.h"
#include "tests/support.h"

// Field `name` of every data row, in order; returns the number of rows (at most max).
static int column(const char *csv, const char *name, char out[][256], int max)
{
    int col = test_csv_column(csv, name), rows = 0;
    if (col < 0) return -1;
    for (const char *line = strchr(csv, '\n'); line && line[1] && rows < max; line = strchr(line + 1, '\n'))
        if (test_csv_field(line + 1, col, out[rows], 256)) rows++;
    return rows;
}

static void test_lists_every_family(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_kernels");
    assert_non_null(list);
    const char *want[] = {
        "kernels_bn/ours/kernel:bn_fwd_train/shape:n256c64h56w56/dtype:fp16/layout:nhwc",
        "kernels_bn/ours/kernel:bn_relu_bwd/shape:n128c512h7w7/dtype:bf16/layout:nchw",
        "kernels_bn/cudnn/kernel:bn_bwd/shape:n128c64h56w56/dtype:fp32/layout:nchw",
        "kernels_bn/cudnn/kernel:bn_fwd_infer/", "kernels_bn/cpu_fast/kernel:bn_relu_fwd_train/shape:n32c8h16w16",
        "kernels_ew/ours/kernel:add_relu/shape:n256c64h56w56/dtype:fp16", "kernels_ew/ours/kernel:cast/",
        "kernels_ew/ours/kernel:copy_grad_accum/shape:n32c128h1w1/",  // the mlp preset's hidden layer
        "kernels_ew/cpu_fast/kernel:relu_bwd/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    assert_null(strstr(list, "kernels_bn/cudnn/kernel:bn_relu"));  // cuDNN rows only where cuDNN has the kernel
    assert_null(strstr(list, "kernels_ew/cpu_fast/kernel:cast"));
    assert_null(strstr(list, "shape:n128c128h28w28"));  // a middle resnet18 shape: only with all
    free(list);
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    assert_int_equal(test_run("'%s/bench_kernels' --kernels_shapes=all --benchmark_list_tests >'%s/all.txt' 2>/dev/null",
                              test_build_dir(), tmp), 0);
    char *all = test_read_in(tmp, "all.txt");
    assert_non_null(all);
    assert_non_null(strstr(all, "kernels_bn/ours/kernel:bn_bwd/shape:n128c128h28w28/"));
    assert_non_null(strstr(all, "kernels_bn/ours/kernel:bn_bwd/shape:n256c256h14w14/"));
    free(all);
    test_remove_tree(tmp);
    free(tmp);
}

// The CPU rows on the small shapes for real; the GPU rows skip (or, with a GPU, run and check out).
static void test_rows_validate_or_skip(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_kernels", "--benchmark_filter='shape:n32c16h8w8/|shape:n32c128h1w1/' "
                               "--benchmark_min_time=0.005 --threads=1");
    assert_non_null(csv);
    bool gpu = test_gpu_present();
    char why[512];
    int rows = test_rows_ok_or_skipped(csv, gpu, why, sizeof why);
    if (rows < 0) {
        // without a GPU the CPU rows are ok, not skipped: check them apart
        if (gpu) fail_msg("%s", why);
    }
    static char variant[2000][256], status[2000][256], err[2000][256], tol[2000][256], gbps[2000][256],
        reason[2000][256], frac[2000][256];
    int n = column(csv, "variant", variant, 2000);
    assert_true(n > 0);
    assert_int_equal(column(csv, "status", status, 2000), n);
    assert_int_equal(column(csv, "reason", reason, 2000), n);
    assert_int_equal(column(csv, "max_rel_err", err, 2000), n);
    assert_int_equal(column(csv, "tolerance", tol, 2000), n);
    assert_int_equal(column(csv, "gbps", gbps, 2000), n);
    int cpu_rows = 0, gpu_rows = 0;
    for (int i = 0; i < n; i++) {
        bool cpu = strcmp(variant[i], "cpu_fast") == 0;
        if (cpu || gpu) {
            if (strcmp(status[i], "ok") != 0) fail_msg("row %d (%s): %s %s", i, variant[i], status[i], reason[i]);
            if (!(atof(err[i]) <= atof(tol[i]))) fail_msg("row %d: error %s > tolerance %s", i, err[i], tol[i]);
            if (!(atof(gbps[i]) > 0.0)) fail_msg("row %d: GB/s %s", i, gbps[i]);
            cpu_rows += cpu;
            gpu_rows += !cpu;
        } else {
            if (strcmp(status[i], "skipped") != 0 || strncmp(reason[i], "no CUDA device", 14) != 0)
                fail_msg("row %d (%s): %s '%s', want skipped: no CUDA device", i, variant[i], status[i], reason[i]);
            gpu_rows++;
        }
    }
    assert_int_equal(cpu_rows, 5 + 5 + 5);  // 5 BN kernels on one shape, 5 element-wise on two
    assert_true(gpu_rows >= 5 * 6 + 3 * 6 + 6 * 3 * 2);
    if (gpu) {
        int m = column(csv, "fraction_of_peak", frac, 2000);
        assert_int_equal(m, n);
        for (int i = 0; i < n; i++)
            if (strcmp(variant[i], "cpu_fast") != 0 && !(atof(frac[i]) > 0.0 && atof(frac[i]) < 1.5))
                fail_msg("row %d: fraction of peak %s", i, frac[i]);
    } else {
        printf("skipped: no CUDA device (the GPU rows of bench_kernels are checked only with one)\n");
    }
    free(csv);
}

// A wrong result fails its row (status error, no time) and the program's exit status.
static void test_perturbed_results_fail(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    int rc = test_run("'%s/bench_kernels' --benchmark_filter='shape:n32c16h8w8/' --benchmark_min_time=0.005 "
                      "--threads=1 --kernels_perturb=1 --harness_csv='%s/k.csv' >'%s/out.txt' 2>&1",
                      test_build_dir(), tmp, tmp);
    assert_int_equal(rc, 1);
    char *csv = test_read_in(tmp, "k.csv");
    assert_non_null(csv);
    static char variant[1000][256], status[1000][256], reason[1000][256];
    int n = column(csv, "variant", variant, 1000);
    assert_int_equal(column(csv, "status", status, 1000), n);
    assert_int_equal(column(csv, "reason", reason, 1000), n);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(status[i], "skipped") == 0) continue;
        if (strcmp(status[i], "error") != 0 || !strstr(reason[i], "validation failed"))
            fail_msg("row %d (%s): %s '%s', want a validation failure", i, variant[i], status[i], reason[i]);
        failed++;
    }
    assert_true(failed >= 10);
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
}

// kb_validate: exact copy 0; one element off by 1% of the scale: 1e-2; NaN: infinite.
static void test_validation_helper(void **state)
{
    (void)state;
    KbCase kc;
    assert_int_equal(kb_case_make(&kc, KB_BN_BWD, 2, 3, 5), 0);
    assert_int_equal(kc.outputs, 3);
    float *got[KB_MAX_OUT];
    assert_int_equal(kb_outputs_alloc(&kc, got), 0);
    for (int o = 0; o < kc.outputs; o++) memcpy(got[o], kc.ref[o], kc.out_count[o] * sizeof(float));
    double abs_err = -1.0, rel_err = -1.0;
    kb_validate(&kc, got, &abs_err, &rel_err);
    assert_true(abs_err == 0.0 && rel_err == 0.0);
    float scale = 0.0f;
    for (size_t i = 0; i < kc.out_count[2]; i++) scale = fmaxf(scale, fabsf(kc.ref[2][i]));
    got[2][1] += 0.01f * scale;  // dbeta of channel 1
    kb_validate(&kc, got, &abs_err, &rel_err);
    assert_float_equal(rel_err, 0.01, 1e-5);
    assert_true(rel_err > kb_tolerance(1) && rel_err < kb_tolerance(2));
    got[0][3] = NAN;
    kb_validate(&kc, got, &abs_err, &rel_err);
    assert_true(isinf(rel_err));
    kb_outputs_free(got);
    kb_case_free(&kc);
    // the bytes model: BN training reads x twice and writes y; the cast reads fp32
    assert_true(kb_bytes(KB_BN_FWD_TRAIN, 100, 2) == 600.0);
    assert_true(kb_bytes(KB_BN_RELU_BWD, 100, 4) == 2800.0);
    assert_true(kb_bytes(KB_CAST, 100, 2) == 600.0);
    KbKernel k;
    assert_int_equal(kb_kernel_parse("add_relu", &k), 0);
    assert_int_equal(k, KB_ADD_RELU);
    assert_int_equal(kb_kernel_parse("nope", &k), -1);
}

static void test_bad_option_is_refused(void **state)
{
    (void)state;
    int rc = test_run("'%s/bench_kernels' --kernels_shapes=some --benchmark_filter=none >/dev/null 2>&1", test_build_dir());
    assert_int_equal(rc, 2);
    rc = test_run("'%s/bench_kernels' --kernels_perturb=2 --benchmark_filter=none >/dev/null 2>&1", test_build_dir());
    assert_int_equal(rc, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_family),
        cmocka_unit_test(test_rows_validate_or_skip),
        cmocka_unit_test(test_perturbed_results_fail),
        cmocka_unit_test(test_validation_helper),
        cmocka_unit_test(test_bad_option_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
