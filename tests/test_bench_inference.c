// test_bench_inference.c: the inference practices (build/bench_inference). It lists every
// family's variants over the machine's default axes; bad option values are refused. On the
// tiny preset (100 requests, short runs, a 512 MiB budget for the largest batch): the CPU
// rows run (grad_on and no_grad with their plan's bytes, no_grad checked bit for bit against
// grad_on; the largest batch, which memory ends in both modes, no_grad's larger; fp32 serving
// latencies after at least 200 ms of warm-up, p50 and p90 but no p99 from 100 requests; the
// fp32 forward) and every GPU-only row skips naming "no CUDA device" (on a GPU every row runs
// and passes its check). From 1,000 requests a row reports p99. The labels name the budget
// and what stopped the search, the warm-up and the percentile rule. --practice_selftest=frozen
// and =skip_all fail the checked rows of inference_grad (exit status 1) with the check's
// reason.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

#define PROGRAM "bench_inference"
#define BUDGET_MIB 512  // a budget both modes run out of on tiny, far below the 2^31 guard
#define TINY_ARGS "--preset=tiny --harness_axis=batch=1,8 --serving_requests=100 " \
                  "--max_batch_memory_mib=512 --benchmark_min_time=0.01"

static void test_lists_every_family(void **state)
{
    (void)state;
    char *list = test_bench_list(PROGRAM);
    assert_non_null(list);
    const char *want[] = {
        "inference_grad/grad_on/preset:tiny/batch:1/", "inference_grad/no_grad/preset:small/batch:256/",
        "inference_grad_max_batch/no_grad/preset:small/batch:0/",
        "inference_serving/fp32/preset:tiny/batch:1/", "inference_serving/bf16/preset:small/batch:32/",
        "inference_precision/fp16_nhwc/preset:tiny/batch:0/", "inference_precision/nhwc/preset:small/",
        "inference_graphs/graph/preset:resnet18/batch:16/",
        "inference_cudnn/autotune/preset:small/batch:0/shapes:varying/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    // CPU: grad 2 x 2 presets x 5 batches, max batch 2 x 2, serving 4 x 2 x 6, precision
    // 6 x 2, graphs 2 x 3 x 5, cudnn 2 x 3 x 2; a GPU adds resnet18 and larger batches.
    int expect = test_gpu_present() ? 36 + 6 + 108 + 18 + 30 + 12 : 20 + 4 + 48 + 12 + 30 + 12;
    assert_int_equal(test_count_lines(list), expect);
    free(list);
}

static void test_bad_option_values_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {"--serving_requests=0", "--max_batch_cap=0", "--serving_requests=x",
                         "--max_batch_memory_mib=-1", "--max_batch_memory_mib=x"};
    test_bad_options_refused(PROGRAM, bad, sizeof bad / sizeof bad[0], "");
}

static void cell(const char *csv, const char *line, const char *name, char *out, size_t size)
{
    int col = test_csv_column(csv, name);
    if (col < 0) fail_msg("no column %s", name);
    assert_true(test_csv_field(line, col, out, size));
}

// Rows that run without a GPU: the fp32 and NCHW ones of the CPU's families.
static bool runs_on_cpu(const char *practice, const char *variant)
{
    if (strcmp(practice, "inference_grad") == 0 || strcmp(practice, "inference_grad_max_batch") == 0)
        return true;
    return (strcmp(practice, "inference_serving") == 0 || strcmp(practice, "inference_precision") == 0) &&
           strcmp(variant, "fp32") == 0;
}

static double value(const char *csv, const char *pv, const char *params, const char *name)
{
    char v[64];
    if (!test_csv_row_value(csv, pv, params, name, v, sizeof v))
        fail_msg("no %s in the row %s %s", name, pv, params);
    printf("%s %s: %s = %s\n", pv, params, name, v);
    return atof(v);
}

static void test_tiny_rows_run_or_skip(void **state)
{
    (void)state;
    char *csv = test_bench_csv(PROGRAM, TINY_ARGS);
    assert_non_null(csv);
    bool gpu = test_gpu_present();
    int rows = 0, ran = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char practice[64], variant[64], status[32], reason[512];
        cell(csv, line + 1, "practice", practice, sizeof practice);
        cell(csv, line + 1, "variant", variant, sizeof variant);
        cell(csv, line + 1, "status", status, sizeof status);
        cell(csv, line + 1, "reason", reason, sizeof reason);
        rows++;
        if (gpu || runs_on_cpu(practice, variant)) {
            if (strcmp(status, "ok") != 0) fail_msg("%s/%s: %s %s", practice, variant, status, reason);
            ran++;
        } else {
            if (strcmp(status, "skipped") != 0 || strncmp(reason, "no CUDA device", 14) != 0)
                fail_msg("%s/%s without a GPU: %s '%s'", practice, variant, status, reason);
        }
    }
    // 2 batches: grad 4, max batch 4, serving 8, precision 12, graphs 4, cudnn 8
    assert_int_equal(rows, 40);
    if (!gpu) assert_int_equal(ran, 4 + 4 + 2 + 2);
    const char *b8 = "preset:tiny;batch:8";
    // no_grad: the same logits as grad_on (bit for bit), a smaller arena and peak.
    assert_true(value(csv, "inference_grad,no_grad", b8, "check_rel_diff") == 0.0);
    assert_true(value(csv, "inference_grad,no_grad", b8, "check_top1_agreement") == 1.0);
    double on = value(csv, "inference_grad,grad_on", b8, "activation_mib");
    double off = value(csv, "inference_grad,no_grad", b8, "activation_mib");
    assert_true(off > 0.0 && off < on);
    assert_true(value(csv, "inference_grad,no_grad", b8, "peak_mib") <
                value(csv, "inference_grad,grad_on", b8, "peak_mib"));
    assert_true(value(csv, "inference_grad,grad_on", b8, "ms_per_batch") > 0.0);
    // The largest batch within the budget: memory ends the search in both modes (not the
    // cap, not the 2^31 guard), and no_grad's is larger; probed on a GPU, estimated on a CPU.
    const char *b1 = "preset:tiny;batch:1";
    const char *modes[] = {"inference_grad_max_batch,grad_on", "inference_grad_max_batch,no_grad"};
    for (int i = 0; i < 2; i++) {
        assert_true(value(csv, modes[i], b1, "memory_budget_mib") == BUDGET_MIB);
        assert_true(value(csv, modes[i], b1, "max_batch_out_of_memory") == 1);
        assert_true(value(csv, modes[i], b1, "max_batch_at_guard") == 0);
        assert_true(value(csv, modes[i], b1, "max_batch_capped") == 0);
        assert_true(value(csv, modes[i], b1, "max_batch_estimated") == (gpu ? 0 : 1));
    }
    assert_true(value(csv, modes[1], b1, "max_batch") > value(csv, modes[0], b1, "max_batch"));
    assert_true(value(csv, modes[0], b1, "max_batch") > 0);
    // Serving: warmed up for at least 200 ms; p50 and p90 from 100 requests, in order; p95
    // and p99 n/a (they need 200 and 1,000).
    const char *fp32 = "inference_serving,fp32";
    assert_true(value(csv, fp32, b8, "requests") == 100);
    assert_true(value(csv, fp32, b8, "warmup_ms") >= 200.0);
    assert_true(value(csv, fp32, b8, "warmup_requests") >= (gpu ? 3 : 1));
    double p50 = value(csv, fp32, b8, "latency_p50_ms");
    double p90 = value(csv, fp32, b8, "latency_p90_ms");
    assert_true(p50 > 0.0 && p90 >= p50);
    char cell_text[64] = "";
    assert_true(!test_csv_row_value(csv, fp32, b8, "latency_p99_ms", cell_text, sizeof cell_text) ||
                cell_text[0] == '\0');
    assert_true(!test_csv_row_value(csv, fp32, b8, "latency_p95_ms", cell_text, sizeof cell_text) ||
                cell_text[0] == '\0');
    assert_true(value(csv, fp32, b8, "images_per_second") > 0.0);
    free(csv);
}

// From 1,000 requests a serving row reports p99 (and p95), in order.
static void test_serving_p99_from_1000_requests(void **state)
{
    (void)state;
    char *csv = test_bench_csv(PROGRAM, "--benchmark_filter='^inference_serving/fp32/preset:tiny/batch:1/' "
                               "--serving_requests=1000");
    assert_non_null(csv);
    const char *fp32 = "inference_serving,fp32", *b1 = "preset:tiny;batch:1";
    assert_true(value(csv, fp32, b1, "requests") == 1000);
    double p50 = value(csv, fp32, b1, "latency_p50_ms"), p90 = value(csv, fp32, b1, "latency_p90_ms");
    double p95 = value(csv, fp32, b1, "latency_p95_ms"), p99 = value(csv, fp32, b1, "latency_p99_ms");
    assert_true(p50 > 0.0 && p90 >= p50 && p95 >= p90 && p99 >= p95);
    assert_true(value(csv, fp32, b1, "warmup_ms") >= 200.0);
    free(csv);
}

// The program's JSON output (the labels are there, not in the CSV).
static char *bench_json(const char *args)
{
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    int rc = test_run("'%s/" PROGRAM "' %s --benchmark_format=json >'%s/out.json' 2>'%s/err.txt'",
                      test_build_dir(), args, tmp, tmp);
    char *json = test_read_in(tmp, "out.json");
    test_remove_tree(tmp);
    free(tmp);
    if (rc != 0) fail_msg(PROGRAM " %s: exit status %d", args, rc);
    assert_non_null(json);
    return json;
}

static void expect_label(const char *json, const char *name, const char *want)
{
    const char *row = strstr(json, name);
    if (!row) fail_msg("no row %s", name);
    const char *label = strstr(row, "\"label\": \"");
    assert_non_null(label);
    label += strlen("\"label\": \"");
    const char *end = strchr(label, '"');
    assert_non_null(end);
    char text[2048];
    snprintf(text, sizeof text, "%.*s", (int)(end - label), label);
    if (!strstr(text, want)) fail_msg("%s: label %s lacks '%s'", name, text, want);
}

// The serving label says what the counters cannot: the warm-up's rule, no labels, and which
// percentiles are n/a and why.
static void test_serving_label_names_warm_up_and_percentiles(void **state)
{
    (void)state;
    char *json = bench_json("--benchmark_filter='^inference_serving/fp32/preset:tiny/batch:1/' "
                            "--serving_requests=100");
    const char *serving = "inference_serving/fp32/preset:tiny/batch:1/";
    expect_label(json, serving, "ms of warm-up (");
    expect_label(json, serving, " requests; at least 200 ms and ");
    expect_label(json, serving, "no labels");
    expect_label(json, serving, "p90, p95 n/a (needs 200), p99 n/a (needs 1000)");
    free(json);
}

// The largest batch's label names the budget and what stopped the search.
static void test_max_batch_label_names_the_budget(void **state)
{
    (void)state;
    char *json = bench_json("--benchmark_filter='^inference_grad_max_batch/.*/preset:tiny/' "
                            "--max_batch_memory_mib=512");
    const char *rows[] = {"inference_grad_max_batch/grad_on/preset:tiny/",
                          "inference_grad_max_batch/no_grad/preset:tiny/"};
    for (int i = 0; i < 2; i++) {
        expect_label(json, rows[i], "--max_batch_memory_mib=512");
        expect_label(json, rows[i], "by: out of memory");
    }
    free(json);
}

// Under the self-test inference_grad's checked rows (no_grad) fail, naming the check: the
// run is that family's alone (other families' rows would only cost time, on a GPU a lot).
static void expect_selftest_fails(const char *mode)
{
    static const char *const no_grad[] = {"no_grad"};
    test_selftest_fails(PROGRAM, "--benchmark_filter='^inference_grad/' --preset=tiny "
                        "--harness_axis=batch=8 --benchmark_min_time=0.01",
                        mode, "inference_grad", "grad_on", no_grad, 1, "logits differ from grad_on's");
}

static void test_selftest_fails_the_checks(void **state)
{
    (void)state;
    expect_selftest_fails("frozen");
    expect_selftest_fails("skip_all");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_family),
        cmocka_unit_test(test_bad_option_values_are_refused),
        cmocka_unit_test(test_tiny_rows_run_or_skip),
        cmocka_unit_test(test_serving_p99_from_1000_requests),
        cmocka_unit_test(test_serving_label_names_warm_up_and_percentiles),
        cmocka_unit_test(test_max_batch_label_names_the_budget),
        cmocka_unit_test(test_selftest_fails_the_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
