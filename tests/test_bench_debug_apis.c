// test_bench_debug_apis.c: the debugging-API practice (build/bench_debug_apis) and its hooks
// (bench/debug_apis/debug_hooks.h). The program lists debug_anomaly and debug_profiler with
// on (baseline) and off (tuned) for tiny, mlp and small; tiny runs on whatever backend this
// machine has: every row ok, the on rows with their debugging work in effect (ops_checked,
// events_per_step > 0), the off rows without, and bit-identical to the on rows (check_rel_diff
// 0 at tolerance 0); --practice_selftest=frozen|half_lr fails the off rows of both.
// The anomaly scan: the core's fault injection (core_inject_grad_fault) writes its value in the
// update, after backward's gradients-ready hooks have run, so anomaly mode cannot see it (a
// test says so); a NaN in an input image reaches the first op's gradients in backward, where
// the anomaly hooks fail the step naming the op's parameter range; and the scan alone (CPU,
// and the GPU's with a device) finds a NaN or an Inf where it was put.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>
#include <math.h>

#include "bench/debug_apis/debug_hooks.h"
#include "kernels/error.h"
#include "tests/support.h"

#define TINY_ARGS "--benchmark_filter='preset:tiny/' --benchmark_min_time=0.01"

static void test_lists_families(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_debug_apis");
    assert_non_null(list);
    const char *practices[] = {"debug_anomaly", "debug_profiler"}, *variants[] = {"on", "off"},
               *presets[] = {"tiny", "mlp", "small"};
    for (int p = 0; p < 2; p++)
        for (int v = 0; v < 2; v++)
            for (int s = 0; s < 3; s++) {
                char name[96];
                snprintf(name, sizeof name, "%s/%s/preset:%s/", practices[p], variants[v], presets[s]);
                if (!strstr(list, name)) fail_msg("%s is not listed", name);
            }
    free(list);
}

static void test_tiny_rows_ok_and_bit_identical(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_debug_apis", TINY_ARGS);
    assert_non_null(csv);
    int rows = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char practice[32], variant[32], status[32];
        test_csv_named_field(csv, line + 1, "practice", practice, sizeof practice);
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        assert_string_equal(status, "ok");
        bool on = strcmp(variant, "on") == 0, anomaly = strcmp(practice, "debug_anomaly") == 0;
        double work = test_csv_number(csv, line + 1, anomaly ? "ops_checked" : "events_per_step");
        printf("%s/%s: %s %g per step, step_ms %.3f\n", practice, variant,
               anomaly ? "ops_checked" : "events", work, test_csv_number(csv, line + 1, "step_ms"));
        if (on) {
            assert_true(work > 0);
        } else {
            assert_string_equal(variant, "off");
            assert_true(work == 0);
            assert_true(test_csv_number(csv, line + 1, "wrong") == 0);
            assert_true(test_csv_number(csv, line + 1, "check_rel_diff") == 0);  // bit for bit
            assert_true(test_csv_number(csv, line + 1, "check_tolerance") == 0);
            assert_true(test_csv_number(csv, line + 1, "check_baseline_moved") > 0);
        }
        rows++;
    }
    assert_int_equal(rows, 4);
    free(csv);
}

static const char *const off[] = {"off"};

static void expect_selftest_fails(const char *mode)
{
    const char *practices[] = {"debug_anomaly", "debug_profiler"};
    for (int p = 0; p < 2; p++) {
        char args[160];
        snprintf(args, sizeof args, "--benchmark_filter='%s/.*preset:tiny/' --benchmark_min_time=0.01", practices[p]);
        assert_int_equal(test_selftest_fails("bench_debug_apis", args, mode, practices[p], "on", off, 1,
                                             "differ from the baseline's after 3 steps"),
                         1);
    }
}

static void test_selftest_frozen_fails(void **state)
{
    (void)state;
    expect_selftest_fails("frozen");
}

static void test_selftest_half_lr_fails(void **state)
{
    (void)state;
    expect_selftest_fails("half_lr");
}

// ---- the anomaly scan ---------------------------------------------------------------------------

static Core *tiny_core(CoreConfig *cfg)
{
    assert_int_equal(core_config_preset(cfg, "tiny"), 0);
    cfg->backend = CORE_BACKEND_CPU;
    return test_core_create(cfg);
}

static void test_clean_step_checks_every_op(void **state)
{
    (void)state;
    CoreConfig cfg;
    Core *core = tiny_core(&cfg);
    assert_int_equal(debug_hooks_install(core, DEBUG_ANOMALY, false), 0);
    TestBatch b;
    test_batch_open(&b, &cfg, cfg.batch_size, 0);
    assert_int_equal(core_step(core, &b.b, NULL), 0);
    DebugCounts c = debug_hooks_counts(core);
    printf("one clean step: %lld ops checked\n", (long long)c.ops_checked);
    assert_true(c.ops_checked >= 3);  // every conv, BN and linear of tiny
    assert_int_equal(c.steps, 1);
    test_batch_close(&b);
    core_free(core);
}

// A NaN pixel: the stem's convolution and BN carry it into their outputs (the core's ReLU,
// v > 0 ? v : 0, turns it into 0 after that, unlike torch.relu), so backward reaches the stem
// BN with finite gradients and its gamma's gradient (sum of dy * x_hat) is NaN: the step
// fails there, the op before the last that backward reports, every op before it clean.
static void test_nan_input_fails_the_step(void **state)
{
    (void)state;
    CoreConfig cfg;
    Core *core = tiny_core(&cfg);
    assert_int_equal(debug_hooks_install(core, DEBUG_ANOMALY, false), 0);
    TestBatch b;
    test_batch_open(&b, &cfg, cfg.batch_size, 0);
    b.images[5] = NAN;
    assert_int_equal(core_step(core, &b.b, NULL), -1);
    printf("%s\n", error_message());
    assert_int_equal(error_kind(), ERROR_BAD_DATA);
    assert_non_null(strstr(error_message(), "anomaly detection: the backward of the op with parameters ["));
    assert_non_null(strstr(error_message(), "returned nan values"));
    int64_t checked = debug_hooks_counts(core).ops_checked;
    printf("failed at the %lld-th op checked\n", (long long)checked);
    assert_true(checked >= 1);
    assert_int_equal(debug_hooks_counts(core).steps, 0);  // the update never came
    test_batch_close(&b);
    core_free(core);
}

// core_inject_grad_fault writes after the gradients-ready hooks (in the update, before the
// core's own inf/nan check): anomaly mode does not see it, which is why the test above puts
// its NaN into the input instead.
static void test_injected_fault_lands_after_the_hooks(void **state)
{
    (void)state;
    CoreConfig cfg;
    Core *core = tiny_core(&cfg);
    assert_int_equal(debug_hooks_install(core, DEBUG_ANOMALY, false), 0);
    TestBatch b;
    test_batch_open(&b, &cfg, cfg.batch_size, 0);
    assert_int_equal(core_inject_grad_fault(core, NAN), 0);
    assert_int_equal(core_step(core, &b.b, NULL), 0);
    assert_true(debug_hooks_counts(core).ops_checked > 0);
    test_batch_close(&b);
    core_free(core);
}

static void test_scan_finds_nan_and_inf(void **state)
{
    (void)state;
    float g[64];
    for (int i = 0; i < 64; i++) g[i] = 0.5f * (float)i - 3.0f;
    assert_int_equal(debug_scan_host(g, 8, 40), 0);
    g[20] = NAN;
    assert_int_equal(debug_scan_host(g, 8, 40), -1);
    assert_non_null(strstr(error_message(), "[8, 48)"));
    assert_non_null(strstr(error_message(), "nan values"));
    assert_non_null(strstr(error_message(), "first at parameter 20"));
    assert_int_equal(debug_scan_host(g, 21, 40), 0);  // the range after it
    g[40] = INFINITY;
    assert_int_equal(debug_scan_host(g, 21, 40), -1);
    assert_non_null(strstr(error_message(), "inf values"));
    assert_non_null(strstr(error_message(), "first at parameter 40"));
}

static void test_device_scan_finds_nan(void **state)
{
    (void)state;
    REQUIRE_GPU();
    enum { N = 300000 };
    float *host = malloc(N * sizeof(float)), *dev = NULL;
    assert_non_null(host);
    for (int i = 0; i < N; i++) host[i] = 1e-3f * (float)(i % 997);
    host[250001] = NAN;
    host[270000] = INFINITY;
    assert_int_equal(cudaMalloc((void **)&dev, N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMemcpy(dev, host, N * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(debug_scan_device(dev, 0, 250000, NULL), 0);
    assert_int_equal(debug_scan_device(dev, 1000, N - 1000, NULL), -1);
    printf("%s\n", error_message());
    assert_non_null(strstr(error_message(), "first at parameter 250001"));
    assert_int_equal(debug_scan_device(dev, 260000, N - 260000, NULL), -1);
    assert_non_null(strstr(error_message(), "first at parameter 270000"));
    cudaFree(dev);
    free(host);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_families),
        cmocka_unit_test(test_tiny_rows_ok_and_bit_identical),
        cmocka_unit_test(test_selftest_frozen_fails),
        cmocka_unit_test(test_selftest_half_lr_fails),
        cmocka_unit_test(test_clean_step_checks_every_op),
        cmocka_unit_test(test_nan_input_fails_the_step),
        cmocka_unit_test(test_injected_fault_lands_after_the_hooks),
        cmocka_unit_test(test_scan_finds_nan_and_inf),
        cmocka_unit_test(test_device_scan_finds_nan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
