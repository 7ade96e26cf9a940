// test_bench_amp.c: the mixed-precision practice (build/bench_amp). Always: the program
// lists every family and variant; its CPU parts run for real on the CPU backend: parity
// (fp32, fp16 + GradScaler and bf16 reach the same held-out target; on the CPU, where
// every precision computes in fp32, in exactly the same steps), the GradScaler's trajectory
// in the curves file, the two clipping orders (unscale-then-clip converges and clips at
// the true norm; clipping the scaled gradients sees a norm the loss scale times larger
// and does not converge) and the GradScaler pass's share of a step; the GPU families skip
// with "no CUDA device"; the peak table and the clipping helpers give the documented
// numbers; a bad option is refused. With a GPU: every GEMM type is correct against the
// exact product and reports TFLOP/s and a fraction of peak; a convolution pass and the
// macro steps run, the tuned precision within the stated tolerance of fp32; parity, the
// GradScaler trajectory, both clipping orders and the GradScaler pass run on CUDA.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/amp/amp_conv.h"
#include "bench/amp/amp_peak.h"
#include "bench/amp/amp_scaler.h"
#include "kernels/gpu_device.h"
#include "kernels/layers_cpu.h"
#include "tests/support.h"

// The value of column `name` in the first row whose first fields are `prefix` (e.g.
// "amp_parity,fp16,"), copied to out; false when there is none.
static bool cell(const char *csv, const char *prefix, const char *name, char *out, size_t size)
{
    int col = test_csv_column(csv, name);
    if (col < 0) return false;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n'))
        if (strncmp(line + 1, prefix, strlen(prefix)) == 0) return test_csv_field(line + 1, col, out, size);
    return false;
}

static double num(const char *csv, const char *prefix, const char *name)
{
    char v[128];
    if (!cell(csv, prefix, name, v, sizeof v)) fail_msg("no %s in the row %s", name, prefix);
    return atof(v);
}

static void expect_status(const char *csv, const char *prefix, const char *want)
{
    char status[32], reason[512];
    if (!cell(csv, prefix, "status", status, sizeof status)) fail_msg("no row %s", prefix);
    cell(csv, prefix, "reason", reason, sizeof reason);
    if (strcmp(status, want) != 0) fail_msg("%s: status %s (%s), want %s", prefix, status, reason, want);
}

// True when the curves file has a point of `metric` in a row starting with `prefix`.
static bool has_curve(const char *curves, const char *prefix, const char *metric)
{
    int col = test_csv_column(curves, "metric");
    for (const char *line = strchr(curves, '\n'); col >= 0 && line && line[1]; line = strchr(line + 1, '\n')) {
        char m[64];
        if (strncmp(line + 1, prefix, strlen(prefix)) == 0 && test_csv_field(line + 1, col, m, sizeof m) &&
            strcmp(m, metric) == 0)
            return true;
    }
    return false;
}

// Runs bench_amp with the filter and extra flags; returns the CSV (and curves) text.
static char *run_amp(const char *tmp, const char *filter, const char *extra, char **curves)
{
    int rc = test_run("'%s/bench_amp' --benchmark_filter='%s' --harness_csv='%s/amp.csv' %s "
                      ">'%s/out.txt' 2>&1", test_build_dir(), filter, tmp, extra, tmp);
    char path[600];
    snprintf(path, sizeof path, "%s/out.txt", tmp);
    if (rc != 0) {
        char *out = test_read_file(path, NULL);
        fail_msg("bench_amp exited %d:\n%s", rc, out ? out : "");
    }
    if (curves) {
        snprintf(path, sizeof path, "%s/amp.curves.csv", tmp);
        *curves = test_read_file(path, NULL);
    }
    snprintf(path, sizeof path, "%s/amp.csv", tmp);
    return test_read_file(path, NULL);
}

static void test_lists_every_variant(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_amp");
    assert_non_null(list);
    const char *want[] = {
        "amp_gemm/fp32_strict/size:1024/", "amp_gemm/tf32/size:4096/", "amp_gemm/fp16/size:8192/",
        "amp_gemm/bf16/size:16384/", "amp_gemm_linear/fp16/preset:resnet18/",
        "amp_conv/fp32/shape:c3h224k64r7s4/pass:fwd/layout:nchw/", "amp_conv/fp16/shape:c512h7k512r3s1/pass:bwd_filter/layout:nhwc/",
        "amp_conv/bf16/shape:c64h56k128r1s2/pass:bwd_data/", "amp_conv_tf32/fp32_strict/", "amp_conv_tf32/tf32/",
        "amp/fp32/preset:tiny/", "amp/tf32/", "amp/fp16/preset:resnet18/", "amp/bf16/", "amp_nhwc/fp16/",
        "amp_tf32/fp32_strict/", "amp_tf32/tf32/", "amp_strict/fp32_strict/", "amp_strict/fp16/preset:tiny/",
        "amp_strict/bf16/", "amp_gemm/tf32/size:10240/", "amp_parity/fp32/preset:tiny/", "amp_parity/fp16/",
        "amp_parity/bf16/", "amp_scaler/unscale_then_clip/", "amp_scaler/clip_scaled_grads/",
        "amp_scaler_cost/fp16/preset:small/", "amp_clip/fp32/preset:tiny/", "amp_clip/fp16/preset:tiny/",
        "amp_clip/bf16/preset:tiny/", "amp_backoff_growth/fp32/preset:tiny/", "amp_backoff_growth/fp16/preset:tiny/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    free(list);
}

// amp_parity and amp_scaler on the CPU backend, for real (a few seconds).
static void test_cpu_parity_and_grad_scaler(void **state)
{
    (void)state;
    char *tmp = test_temp_dir(), *curves = NULL;
    assert_non_null(tmp);
    char *csv = run_amp(tmp, "^amp_parity/|^amp_scaler/|^amp_scaler_cost/fp16/preset:tiny/",
                        "--backend=cpu --threads=1 --amp_max_steps=100 --preset=tiny", &curves);
    assert_non_null(csv);
    assert_non_null(curves);
    const char *parity[] = {"amp_parity,fp32,", "amp_parity,fp16,", "amp_parity,bf16,"};
    for (int i = 0; i < 3; i++) {
        expect_status(csv, parity[i], "ok");
        assert_true(num(csv, parity[i], "reached_target") == 1.0);
    }
    for (int i = 1; i < 3; i++) {
        assert_true(num(csv, parity[i], "wrong") == 0.0);
        assert_true(num(csv, parity[i], "accuracy_diff") <= 0.02);
        // the CPU backend computes in fp32 and scaling by a power of two is exact: the same steps
        assert_true(num(csv, parity[i], "steps") == num(csv, parity[0], "steps"));
    }
    assert_true(num(csv, parity[1], "skipped_steps") == 0.0);
    assert_true(num(csv, parity[1], "final_loss_scale") == 65536.0);
    // the right order converges and clips at the true gradient norm; the mistake sees that
    // norm times the loss scale, clips every step and does not reach the target
    const char *right = "amp_scaler,unscale_then_clip,", *wrong = "amp_scaler,clip_scaled_grads,";
    expect_status(csv, right, "ok");
    expect_status(csv, wrong, "ok");
    assert_true(num(csv, right, "reached_target") == 1.0);
    assert_true(num(csv, wrong, "reached_target") == 0.0);
    assert_true(num(csv, wrong, "clipped_fraction") == 1.0);
    double ratio = num(csv, wrong, "mean_norm_seen") / num(csv, right, "mean_norm_seen");
    if (!(ratio > 1000.0)) fail_msg("scaled norm / true norm = %g, want about 65536", ratio);
    assert_true(num(csv, right, "best_accuracy") > num(csv, wrong, "best_accuracy") + 0.3);
    // the trajectory of every fp16 run is in the curves file
    const char *curve_rows[][2] = {{"amp_parity,fp16,", "loss_scale"},
                                   {"amp_scaler,unscale_then_clip,", "skipped_steps"},
                                   {"amp_scaler,clip_scaled_grads,", "clip_norm_seen"}};
    for (size_t i = 0; i < sizeof curve_rows / sizeof curve_rows[0]; i++)
        if (!has_curve(curves, curve_rows[i][0], curve_rows[i][1]))
            fail_msg("the curves file lacks %s %s", curve_rows[i][0], curve_rows[i][1]);
    assert_false(has_curve(curves, "amp_parity,fp32,", "loss_scale"));  // fp32 has no scaler
    // the GradScaler pass: measured, and a small share of a step
    const char *cost = "amp_scaler_cost,fp16,";
    expect_status(csv, cost, "ok");
    double share = num(csv, cost, "scaler_share_of_step");
    if (!(share > 0.0 && share < 0.5)) fail_msg("GradScaler share of the step %g", share);
    free(csv);
    free(curves);
    test_remove_tree(tmp);
    free(tmp);
}

// amp_parity checks every tuned run against the fp32 baseline whatever the order of the runs:
// with the baseline filtered out (or run after it, under random interleaving), fp16 and bf16
// are still compared (the baseline trained for them, untimed).
static void test_parity_is_checked_without_a_baseline_run(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char *csv = run_amp(tmp, "^amp_parity/(fp16|bf16)/", "--backend=cpu --amp_max_steps=100 --preset=tiny", NULL);
    assert_non_null(csv);
    const char *rows[] = {"amp_parity,fp16,", "amp_parity,bf16,"};
    for (int i = 0; i < 2; i++) {
        expect_status(csv, rows[i], "ok");
        double diff = num(csv, rows[i], "accuracy_diff"), steps = num(csv, rows[i], "baseline_steps");
        printf("%s accuracy_diff %g against a baseline of %g steps\n", rows[i], diff, steps);
        assert_true(diff <= 0.02);
        assert_true(steps == num(csv, rows[i], "steps"));  // the CPU computes every precision in fp32
    }
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
}

// GradScaler's parts under the check, on the CPU: amp_clip clips below the first gradient norm
// in every variant (the checked steps clip) and fp16 agrees with fp32 exactly (scaling by a
// power of two, unscaling before clipping); clipping before unscaling fails fp16 and leaves
// bf16 (no scaler) alone. amp_backoff_growth's check sees a growth, a backoff (a skipped step,
// left out by the baseline) and agrees exactly.
static void test_clipping_backoff_and_growth_are_checked(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    TestBatch tb;
    test_batch_open(&tb, &cfg, cfg.batch_size, 0);
    Core *core = test_core_create(&cfg);
    size_t n = core_param_count(core);
    float *g = malloc(n * sizeof(float)), loss = 0.0f;
    assert_non_null(g);
    assert_int_equal(core_loss_grad(core, &tb.b, &loss, g), 0);
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) sq += (double)g[i] * g[i];
    printf("tiny's first gradient norm %.3f, amp_clip's max_norm 0.25\n", sqrt(sq));
    assert_true(sqrt(sq) > 0.25);  // the first checked step clips
    free(g);
    core_free(core);
    test_batch_close(&tb);

    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char *csv = run_amp(tmp, "^amp_clip/|^amp_backoff_growth/", "--backend=cpu --benchmark_min_time=0.01", NULL);
    assert_non_null(csv);
    const char *checked[] = {"amp_clip,fp16,", "amp_clip,bf16,", "amp_backoff_growth,fp16,"};
    for (int i = 0; i < 3; i++) {
        expect_status(csv, checked[i], "ok");
        assert_true(num(csv, checked[i], "check_rel_diff") == 0.0);
        assert_true(num(csv, checked[i], "check_worst_tensor_rel_diff") == 0.0);
    }
    // the growth after step 1 explains the overflow forced into step 2 (skipped, backed off)
    assert_true(num(csv, "amp_backoff_growth,fp16,", "check_skipped_steps") == 1.0);
    // the timed run: its forced overflow (in the warm-up) follows a growth, so it is no
    // start-up skip; the scale then grows at every clean step
    assert_true(num(csv, "amp_backoff_growth,fp16,", "skipped_steps") == 1.0);
    assert_true(num(csv, "amp_backoff_growth,fp16,", "skipped_steps_explained") >= 1.0);
    assert_true(num(csv, "amp_backoff_growth,fp16,", "final_loss_scale") > 65536.0);
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
    tmp = test_temp_dir();
    assert_non_null(tmp);
    int rc = test_run("'%s/bench_amp' --backend=cpu --benchmark_min_time=0.01 --benchmark_filter='^amp_clip/' "
                      "--practice_selftest=clip_before_unscale --harness_csv='%s/amp.csv' >/dev/null 2>&1",
                      test_build_dir(), tmp);
    assert_int_equal(rc, 1);
    char path[600];
    snprintf(path, sizeof path, "%s/amp.csv", tmp);
    csv = test_read_file(path, NULL);
    assert_non_null(csv);
    char reason[512] = "";
    expect_status(csv, "amp_clip,fp16,", "error");
    assert_true(cell(csv, "amp_clip,fp16,", "reason", reason, sizeof reason));
    printf("clip_before_unscale: %s\n", reason);
    assert_non_null(strstr(reason, "the update differs by "));
    expect_status(csv, "amp_clip,fp32,", "ok");
    expect_status(csv, "amp_clip,bf16,", "ok");
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
}

// The GPU families: every row a visible skip without a GPU (this test then passes, the GPU
// one is a cmocka skip); with one, they run and check out (and this one is a cmocka skip).
static void gpu_families(bool want_gpu)
{
    bool gpu = test_gpu_present();
    if (gpu != want_gpu) {
        printf("skipped: %s\n", gpu ? "a CUDA device is present (its runs are checked by the GPU test)"
                                     : "no CUDA device (GPU runs of amp_gemm, amp_conv and amp checked only with one)");
        skip();
    }
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char *csv = run_amp(tmp, "^amp_gemm/.*/size:1024/|^amp_gemm_linear/fp16/preset:tiny/|"
                        "^amp_conv/bf16/shape:c64h56k64r3s1/pass:bwd_filter/layout:nhwc/|^amp/fp16/preset:tiny/|"
                        "^amp_tf32/tf32/preset:tiny/|^amp_nhwc/bf16/preset:tiny/",
                        "--benchmark_min_time=0.01", NULL);
    assert_non_null(csv);
    const char *rows[] = {"amp_gemm,fp32_strict,", "amp_gemm,tf32,", "amp_gemm,fp16,", "amp_gemm,bf16,",
                          "amp_gemm_linear,fp16,", "amp_conv,bf16,", "amp,fp16,", "amp_tf32,tf32,", "amp_nhwc,bf16,"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!gpu) {
            char reason[512];
            expect_status(csv, rows[i], "skipped");
            assert_true(cell(csv, rows[i], "reason", reason, sizeof reason));
            if (strncmp(reason, "no CUDA device", 14) != 0) fail_msg("%s: reason %s", rows[i], reason);
            continue;
        }
        expect_status(csv, rows[i], "ok");
        if (strncmp(rows[i], "amp_conv", 8) != 0) assert_true(num(csv, rows[i], "wrong") == 0.0);
        if (strncmp(rows[i], "amp_gemm", 8) == 0 || strncmp(rows[i], "amp_conv", 8) == 0)
            assert_true(num(csv, rows[i], "tflops") > 0.0);
    }
    if (gpu) {
        for (int i = 0; i < 4; i++) {
            double e = num(csv, rows[i], "max_rel_err"), tol = num(csv, rows[i], "tolerance");
            if (!(e <= tol)) fail_msg("%s: error %g > tolerance %g", rows[i], e, tol);
        }
    }
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
}

static void test_gpu_families_skip_without_gpu(void **state) { (void)state; gpu_families(false); }
static void test_gpu_families_run_on_gpu(void **state) { (void)state; gpu_families(true); }

// The parity, GradScaler and clipping-order runs on the CUDA backend (the gradient hook on
// device memory, the GradScaler pass timed by CUDA events).
static void test_gpu_parity_and_grad_scaler(void **state)
{
    (void)state;
    REQUIRE_GPU();
    char *tmp = test_temp_dir(), *curves = NULL;
    assert_non_null(tmp);
    char *csv = run_amp(tmp, "^amp_parity/|^amp_scaler/|^amp_scaler_cost/fp16/preset:tiny/",
                        "--amp_max_steps=150 --preset=tiny", &curves);
    assert_non_null(csv);
    const char *rows[] = {"amp_parity,fp32,", "amp_parity,fp16,", "amp_parity,bf16,", "amp_scaler,unscale_then_clip,",
                          "amp_scaler,clip_scaled_grads,", "amp_scaler_cost,fp16,"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) expect_status(csv, rows[i], "ok");
    assert_true(num(csv, "amp_parity,fp16,", "wrong") == 0.0);  // within the parity tolerance of fp32
    assert_true(num(csv, "amp_parity,bf16,", "wrong") == 0.0);
    assert_true(num(csv, "amp_scaler,unscale_then_clip,", "reached_target") == 1.0);
    // the scaled norm is the true one times the scale (65536, less any backoff)
    double ratio = num(csv, "amp_scaler,clip_scaled_grads,", "mean_norm_seen") /
                   num(csv, "amp_scaler,unscale_then_clip,", "mean_norm_seen");
    if (!(ratio > 100.0)) fail_msg("scaled norm / true norm = %g", ratio);
    assert_non_null(curves);
    assert_true(has_curve(curves, "amp_parity,fp16,", "loss_scale"));
    double share = num(csv, "amp_scaler_cost,fp16,", "scaler_share_of_step");
    if (!(share > 0.0 && share < 1.0)) fail_msg("GradScaler share of the step %g", share);
    free(csv);
    free(curves);
    test_remove_tree(tmp);
    free(tmp);
}

// The peak table gives the whitepapers' dense peaks (amp_peak.c's sources) and nothing for
// an architecture or a type it does not know.
static void test_peak_table(void **state)
{
    (void)state;
    // H100 SXM5: 132 SMs at 1830 MHz: 989.4 TFLOPS fp16/bf16, 494.7 TF32 (dense)
    assert_float_equal(amp_peak_flops(9, 0, 132, 1.83e9, AMP_MATH_FP16) / 1e12, 989.4, 0.5);
    assert_float_equal(amp_peak_flops(9, 0, 132, 1.83e9, AMP_MATH_TF32) / 1e12, 494.7, 0.5);
    // A100: 108 SMs at 1410 MHz: 312 fp16, 156 TF32, 19.5 fp32
    assert_float_equal(amp_peak_flops(8, 0, 108, 1.41e9, AMP_MATH_BF16) / 1e12, 311.9, 0.5);
    assert_float_equal(amp_peak_flops(8, 0, 108, 1.41e9, AMP_MATH_FP32) / 1e12, 19.5, 0.1);
    assert_true(amp_peak_flops(7, 0, 80, 1.53e9, AMP_MATH_BF16) == 0.0);  // no bf16 on Volta
    assert_true(amp_peak_flops(12, 0, 100, 2e9, AMP_MATH_FP16) == 0.0);   // not in the table
    assert_string_equal(amp_math_name(AMP_MATH_TF32), "tf32");
}

// The clipping helpers on host memory, and the CPU GradScaler pass.
static void test_clip_helpers_and_scaler_pass(void **state)
{
    (void)state;
    float g[4] = {3.0f, 0.0f, 4.0f, 0.0f};
    double norm = 0.0;
    assert_int_equal(amp_grad_norm(g, 4, NULL, &norm), 0);
    assert_float_equal(norm, 5.0, 1e-12);
    assert_float_equal(amp_clip_coef(norm, 1.0f), 1.0f / (5.0f + 1e-6f), 1e-7);
    assert_true(amp_clip_coef(0.5, 1.0f) == 1.0f);
    assert_true(amp_clip_coef(INFINITY, 1.0f) == 0.0f);  // inf norm: coefficient 0 (then inf * 0 = nan)
    assert_int_equal(amp_grad_scale(g, 4, 0.5f, NULL), 0);
    assert_true(g[0] == 1.5f && g[2] == 2.0f);
    double seconds = 0.0;
    assert_int_equal(amp_scaler_pass_seconds(1 << 16, false, 5, &seconds), 0);
    assert_true(seconds > 0.0 && seconds < 1.0);
    assert_int_equal(amp_scaler_pass_seconds(16, false, 0, &seconds), -1);
}

// The exact forward results the GPU convolution check compares with agree with the CPU
// reference convolution run on the same operands, for both layouts' index orders (so the
// GPU check's reference is right before it meets a GPU).
static void test_conv_check_reference(void **state)
{
    (void)state;
    const int shapes[][5] = {{3, 9, 4, 3, 2}, {4, 8, 6, 1, 2}, {3, 16, 5, 7, 4}};  // c, h, k, r, stride
    for (int si = 0; si < 3; si++)
        for (int nhwc = 0; nhwc < 2; nhwc++) {
            int c = shapes[si][0], h = shapes[si][1], k = shapes[si][2], r = shapes[si][3], st = shapes[si][4];
            int pad = r / 2, p = conv_out_size(h, r, st, pad);
            ConvShape s = {2, c, h, h, k, r, st, pad, p, p};
            float *x = malloc(sizeof(float) * 2 * c * h * h), *w = malloc(sizeof(float) * k * c * r * r);
            float *y = malloc(sizeof(float) * 2 * k * p * p), *col = malloc(sizeof(float) * c * r * r * p * p);
            assert_true(x && w && y && col);
            for (int n = 0; n < 2; n++)
                for (int ch = 0; ch < c; ch++)
                    for (int i = 0; i < h; i++)
                        for (int j = 0; j < h; j++)
                            x[((n * c + ch) * h + i) * h + j] = (float)amp_conv_input_value(&s, nhwc, n, ch, i, j);
            for (int kk = 0; kk < k; kk++)
                for (int ch = 0; ch < c; ch++)
                    for (int i = 0; i < r; i++)
                        for (int j = 0; j < r; j++)
                            w[((kk * c + ch) * r + i) * r + j] = (float)amp_conv_filter_value(&s, nhwc, kk, ch, i, j);
            conv_fwd_cpu(&s, x, w, y, col);
            for (int n = 0; n < 2; n++)
                for (int kk = 0; kk < k; kk++)
                    for (int i = 0; i < p; i++)
                        for (int j = 0; j < p; j++) {
                            int64_t exact, magnitude;
                            amp_conv_exact(&s, nhwc, n, kk, i, j, &exact, &magnitude);
                            double got = y[((n * k + kk) * p + i) * p + j];
                            if (fabs(got - exact / 4096.0) > 1e-6 * (1.0 + magnitude / 4096.0))
                                fail_msg("shape %d %s (%d,%d,%d,%d): CPU %g, exact %g", si, nhwc ? "nhwc" : "nchw",
                                         n, kk, i, j, got, exact / 4096.0);
                        }
            free(x);
            free(w);
            free(y);
            free(col);
        }
}

static void test_bad_option_is_refused(void **state)
{
    (void)state;
    int rc = test_run("'%s/bench_amp' --amp_max_steps=0 --benchmark_filter=none >/dev/null 2>&1", test_build_dir());
    assert_int_equal(rc, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_variant),
        cmocka_unit_test(test_cpu_parity_and_grad_scaler),
        cmocka_unit_test(test_parity_is_checked_without_a_baseline_run),
        cmocka_unit_test(test_clipping_backoff_and_growth_are_checked),
        cmocka_unit_test(test_gpu_families_skip_without_gpu),
        cmocka_unit_test(test_gpu_families_run_on_gpu),
        cmocka_unit_test(test_gpu_parity_and_grad_scaler),
        cmocka_unit_test(test_peak_table),
        cmocka_unit_test(test_clip_helpers_and_scaler_pass),
        cmocka_unit_test(test_conv_check_reference),
        cmocka_unit_test(test_bad_option_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
