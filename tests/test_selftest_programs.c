// test_selftest_programs.c: every program with a check fails, on every preset it runs on the
// CPU, under the self-tests that break a tuned variant the way a real implementation could:
// --practice_selftest=half_lr (the learning rate halved) and =drop_step (one checked step's
// update not applied). For each program the rows with a check on the CPU (its default
// presets: no --preset, the program's own CPU list) are listed with --benchmark_list_tests,
// and each must then be an error naming the check's finding, with exit status 1; without the
// switch the same rows pass (test_practice_selftest and each program's own test show that).
// For time, a program whose CPU presets include small runs them at a small batch (the
// self-test breaks the variant, whatever the batch): every preset at 8 images (1 for the
// inference programs) instead of small's 128, 12 s for both modes instead of 60.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

typedef struct Program {
    const char *name;   // build/<name>
    const char *filter; // its rows with a check on the CPU (tuned and reference variants)
    const char *batch;  // the batch axis for this test ("": the program's own)
} Program;

static const Program programs[] = {
    {"bench_zero_grad", "^zero_grad/set_to_none/", "8"},
    {"bench_grad_accum", "^grad_accum/accumulate_", ""},
    {"bench_conv_bias", "^conv_bias/no_bias/", "8"},
    {"bench_fusion", "^fusion/fused/", "8"},
    {"bench_checkpoint", "^checkpoint/checkpoint", "8"},
    {"bench_amp", "^amp_(clip|backoff_growth)/(fp16|bf16)/", ""},
    {"bench_bn_fold", "^bn_fold/folded/", "1"},
    {"bench_inference", "^inference_grad/no_grad/", "1"},
};

// The arguments that pick a program's rows for this test.
static void rows_args(const Program *pg, char *out, size_t size)
{
    snprintf(out, size, "--backend=cpu --benchmark_filter='%s'%s%s", pg->filter, pg->batch[0] ? " --harness_axis=batch=" : "",
             pg->batch);
}

// The rows of pg on the CPU, as benchmark names one a line (malloc'd), and their count.
static char *cpu_rows(const Program *pg, int *count)
{
    char *tmp = test_temp_dir(), args[512];
    assert_non_null(tmp);
    rows_args(pg, args, sizeof args);
    int rc = test_run("'%s/%s' %s --benchmark_list_tests >'%s/list.txt' 2>/dev/null", test_build_dir(), pg->name, args,
                      tmp);
    assert_int_equal(rc, 0);
    char *list = test_read_in(tmp, "list.txt");
    assert_non_null(list);
    test_remove_tree(tmp);
    free(tmp);
    *count = test_count_lines(list);
    return list;
}

// practice/variant/preset:P/batch:B/... -> "preset:P;batch:B" (the CSV's params).
static void params_of(const char *name, char *out, size_t size)
{
    const char *p = strstr(name, "preset:");
    const char *b = p ? strstr(p, "/batch:") : NULL;
    const char *end = b ? strchr(b + 1, '/') : NULL;
    if (!p || !b) fail_msg("no preset and batch in %s", name);
    snprintf(out, size, "%.*s;%.*s", (int)(b - p), p, end ? (int)(end - b - 1) : (int)strlen(b + 1), b + 1);
}

static void expect_every_row_fails(const Program *pg, const char *mode)
{
    int listed = 0;
    char *list = cpu_rows(pg, &listed);
    assert_true(listed > 0);
    char rows[512], args[700];
    rows_args(pg, rows, sizeof rows);
    snprintf(args, sizeof args, "%s --benchmark_min_time=0.01 --practice_selftest=%s", rows, mode);
    int status = -1;
    char *csv = test_bench_csv_exit(pg->name, args, &status);
    assert_non_null(csv);
    printf("%s --practice_selftest=%s: exit status %d, %d rows with a check\n", pg->name, mode, status, listed);
    if (status != 1) fail_msg("%s --practice_selftest=%s: exit status %d, want 1", pg->name, mode, status);
    int seen = 0;
    for (char *line = list; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char name[512], params[256], practice[128], variant[128];
        size_t len = strcspn(line, "\n");
        snprintf(name, sizeof name, "%.*s", (int)len, line);
        params_of(name, params, sizeof params);
        const char *slash = strchr(name, '/'), *slash2 = slash ? strchr(slash + 1, '/') : NULL;
        assert_non_null(slash2);
        snprintf(practice, sizeof practice, "%.*s", (int)(slash - name), name);
        snprintf(variant, sizeof variant, "%.*s", (int)(slash2 - slash - 1), slash + 1);
        char pv[300], status_text[32] = "", why[1024] = "";
        snprintf(pv, sizeof pv, "%s,%s", practice, variant);
        if (!test_csv_row_value(csv, pv, params, "status", status_text, sizeof status_text))
            fail_msg("%s: no row %s %s", pg->name, pv, params);
        test_csv_row_value(csv, pv, params, "reason", why, sizeof why);
        if (seen++ == 0) printf("  %s %s: %s\n", pv, params, why);
        if (strcmp(status_text, "error") != 0) fail_msg("%s %s: status %s, want error", pv, params, status_text);
        // the check's finding (an update, logits or a loss that differ, or skipped steps), not a
        // refused flag or a failure to run
        if (!strstr(why, "differ") && !strstr(why, "skipped"))
            fail_msg("%s %s: reason '%s' is not the check's", pv, params, why);
    }
    assert_int_equal(seen, listed);
    free(csv);
    free(list);
}

static void test_every_program_fails_half_lr(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) expect_every_row_fails(&programs[i], "half_lr");
}

static void test_every_program_fails_drop_step(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        expect_every_row_fails(&programs[i], "drop_step");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_program_fails_half_lr),
        cmocka_unit_test(test_every_program_fails_drop_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
