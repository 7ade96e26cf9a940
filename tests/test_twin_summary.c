// test_twin_summary.c: the PyTorch side beside the core's (issue 33) in the results
// pipeline: summary_pytorch.csv (scripts/stats.py), the agreement rule at its boundaries
// (scripts/verdicts.py agreement), the report's "PyTorch side by side" section
// (scripts/claims.py pytorch through report.sh) and the side-by-side charts
// (scripts/charts/render.py). The fixture tests/fixtures/twin_A is a results folder with
// made-up numbers in the tidy schema (the header of a real bench_zero_grad run): the core's
// zero_grad.csv and inference.csv and the PyTorch side's pytorch.csv, with per-repetition
// files in the order they ran (paired). Its points, by design:
//   zero_grad preset:tiny;batch:0   core 1.20x, PyTorch 1.20x, both faster      -> agree
//   zero_grad preset:mlp;batch:0    core 1.50x faster, PyTorch 1.00x equivalent -> differ
//   zero_grad preset:small;batch:0  PyTorch's interval about ±20% (inconclusive) -> inconclusive
//   zero_grad preset:big;batch:0    PyTorch skipped (too little memory)         -> core only
//   zero_grad preset:tiny;batch:64  PyTorch's check failed (its row an error)   -> core only
//   inference_grad inference_mode   a variant the core does not have            -> PyTorch only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

static int setup(void **state)
{
    if (test_setup_dir(state) != 0) return -1;
    return test_run("cp -r '%s/tests/fixtures/twin_A' '%s/'", test_suite_root(), test_dir);
}

// The line of a CSV text whose first fields are `prefix`, copied into out.
static bool line_starting(const char *text, const char *prefix, char *out, size_t n)
{
    size_t len = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, prefix, len) != 0) continue;
        const char *end = strchr(p, '\n');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l >= n) return false;
        memcpy(out, p, l);
        out[l] = '\0';
        return true;
    }
    return false;
}

static void expect_field(const char *csv, const char *line, const char *name, const char *want)
{
    char f[512];
    test_csv_named_field(csv, line, name, f, sizeof f);
    if (strcmp(f, want) != 0) fail_msg("%s is \"%s\", want \"%s\" in %s", name, f, want, line);
}

static void expect_field_has(const char *csv, const char *line, const char *name, const char *part)
{
    char f[512];
    test_csv_named_field(csv, line, name, f, sizeof f);
    if (!strstr(f, part)) fail_msg("%s is \"%s\", want it to contain \"%s\"", name, f, part);
}

static double numf(const char *csv, const char *line, const char *name)
{
    char f[128];
    test_csv_named_field(csv, line, name, f, sizeof f);
    if (!*f) fail_msg("field %s is empty in %s", name, line);
    return atof(f);
}

static char *summarize_twin(void)
{
    if (test_run("bash '%s/scripts/summarize.sh' '%s/twin_A' >/dev/null", test_suite_root(), test_dir) != 0)
        return NULL;
    return test_read_in(test_dir, "twin_A/summary_pytorch.csv");
}

// One row per point the PyTorch side tried, each with the agreement the fixture was made for.
static void test_summary_pytorch_rows(void **state)
{
    (void)state;
    char *csv = summarize_twin();
    assert_non_null(csv);
    char line[2048];
    assert_int_equal(test_count_lines(csv), 1 + 7);

    assert_true(line_starting(csv, "zero_grad,preset:tiny;batch:0,memset,set_to_none,", line, sizeof line));
    expect_field(csv, line, "agreement", "agree");
    expect_field(csv, line, "core_verdict", "faster");
    expect_field(csv, line, "pytorch_verdict", "faster");
    // the ratio of effects, PyTorch's speedup over the core's, inside its interval
    double r = numf(csv, line, "effect_ratio");
    assert_true(numf(csv, line, "effect_ratio_ci_low") <= r && r <= numf(csv, line, "effect_ratio_ci_high"));
    assert_true(r > 0.98 && r < 1.02);
    expect_field(csv, line, "core_pairs", "8");

    assert_true(line_starting(csv, "zero_grad,preset:mlp;batch:0,memset,set_to_none,", line, sizeof line));
    expect_field(csv, line, "agreement", "differ");
    expect_field(csv, line, "pytorch_verdict", "equivalent");
    expect_field_has(csv, line, "note", "PyTorch's overhead hides the effect");
    r = numf(csv, line, "effect_ratio");
    assert_true(r > 0.66 && r < 0.67);  // 1.00 / 1.50
    assert_true(numf(csv, line, "effect_ratio_ci_high") < 1.0);

    assert_true(line_starting(csv, "zero_grad,preset:small;batch:0,memset,set_to_none,", line, sizeof line));
    expect_field(csv, line, "agreement", "inconclusive");
    expect_field(csv, line, "pytorch_verdict", "inconclusive");
    expect_field_has(csv, line, "note", "PyTorch's interval is too wide");

    assert_true(line_starting(csv, "zero_grad,preset:big;batch:0,memset,set_to_none,", line, sizeof line));
    expect_field(csv, line, "agreement", "core only");
    expect_field(csv, line, "pytorch_speedup", "");
    expect_field_has(csv, line, "note", "PyTorch skipped: too little memory");

    // the check on the PyTorch side: a tuned variant whose update differs fails its row,
    // and the comparison says so instead of giving a speedup
    assert_true(line_starting(csv, "zero_grad,preset:tiny;batch:64,memset,set_to_none,", line, sizeof line));
    expect_field(csv, line, "agreement", "core only");
    expect_field_has(csv, line, "note", "PyTorch failed: check failed");

    assert_true(line_starting(csv, "inference_grad,preset:tiny;batch:1,grad_on,inference_mode,", line, sizeof line));
    expect_field(csv, line, "agreement", "PyTorch only");
    expect_field(csv, line, "core_speedup", "");
    expect_field_has(csv, line, "note", "the core has no variant inference_mode");
    assert_true(line_starting(csv, "inference_grad,preset:tiny;batch:1,grad_on,no_grad,", line, sizeof line));
    expect_field(csv, line, "agreement", "agree");
    free(csv);

    // the PyTorch rows are ordinary rows of summary.csv too
    char *summary = test_read_in(test_dir, "twin_A/summary.csv");
    assert_non_null(summary);
    assert_true(line_starting(summary, "pytorch_zero_grad,preset:mlp;batch:0,memset,set_to_none,", line,
                              sizeof line));
    expect_field(summary, line, "verdict", "equivalent");
    free(summary);
}

// Without a PyTorch side there is no summary_pytorch.csv (a stale one is removed), and the
// report says why there is no comparison.
static void test_no_pytorch_side(void **state)
{
    (void)state;
    char *csv = summarize_twin();
    assert_non_null(csv);
    free(csv);
    assert_int_equal(test_run("cd '%s/twin_A' && rm pytorch.csv pytorch.reps.csv", test_dir), 0);
    assert_null(summarize_twin());
    assert_int_equal(test_run("bash '%s/scripts/report.sh' '%s/twin_A' >/dev/null", test_suite_root(), test_dir),
                     0);
    char *report = test_read_in(test_dir, "twin_A/report.md");
    assert_non_null(report);
    assert_non_null(strstr(report, "## PyTorch side by side"));
    assert_non_null(strstr(report, "No PyTorch side in this run"));
    assert_null(strstr(report, "PyTorch here"));  // the claims table keeps its columns
    free(report);
}

// The agreement rule at its boundaries, on fixed numbers (verdicts.py agreement CORE LOW
// HIGH VERDICT PYTORCH LOW HIGH VERDICT): the first word of its answer.
static void expect_agreement(const char *args, const char *want)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "agreement.txt");
    if (test_run("python3 '%s/scripts/verdicts.py' agreement %s >'%s/%s'", test_suite_root(), args, test_dir, cmd)
        != 0)
        fail_msg("verdicts.py agreement %s failed", args);
    char *out = test_read_in(test_dir, cmd);
    assert_non_null(out);
    size_t n = strlen(want);
    if (strncmp(out, want, n) != 0 || out[n] != ':') fail_msg("agreement %s: \"%s\", want %s", args, out, want);
    free(out);
}

static void test_agreement_boundaries(void **state)
{
    (void)state;
    // intervals that touch overlap: agree; a hair apart: differ
    expect_agreement("1.2 1.1 1.3 faster 1.4 1.3 1.5 faster", "agree");
    expect_agreement("1.2 1.1 1.3 faster 1.4 1.3001 1.5 faster", "differ");
    expect_agreement("0.5 0.4 0.6 slower 0.55 0.45 0.65 slower", "agree");
    expect_agreement("1.0 0.97 1.03 equivalent 1.01 0.96 1.04 equivalent", "agree");
    // disjoint intervals differ whatever the verdicts say (an inconclusive side included)
    expect_agreement("1.0 0.8 1.3 inconclusive 1.5 1.4 1.6 faster", "differ");
    expect_agreement("1.2 1.1 1.3 faster 0.5 0.4 0.6 slower", "differ");
    // overlapping, but a side too wide to tell, or verdicts the intervals do not separate
    expect_agreement("1.0 0.8 1.3 inconclusive 1.1 1.05 1.2 faster", "inconclusive");
    expect_agreement("1.02 0.97 1.04 equivalent 1.05 1.03 1.08 faster", "inconclusive");
    // a side without a usable interval: too few repetitions, or none at all
    expect_agreement("1.2 1.1 1.3 faster 1.2 1.15 1.25 n/a", "inconclusive");
    expect_agreement("1.2 1.1 1.3 faster 1.2 - - faster", "inconclusive");
    // bad numbers are refused with a message, not a traceback
    assert_int_not_equal(test_run("python3 '%s/scripts/verdicts.py' agreement 1.2 1.1 1.3 faster x 1 2 faster "
                                  "2>'%s/err.txt'", test_suite_root(), test_dir), 0);
    char *err = test_read_in(test_dir, "err.txt");
    assert_non_null(err);
    assert_null(strstr(err, "Traceback"));
    free(err);
}

// report.md: the side-by-side section per practice, PyTorch's context, the claims table's
// PyTorch column.
static void test_report_section(void **state)
{
    (void)state;
    char *csv = summarize_twin();
    assert_non_null(csv);
    free(csv);
    assert_int_equal(test_run("bash '%s/scripts/report.sh' '%s/twin_A' >/dev/null", test_suite_root(), test_dir),
                     0);
    char *report = test_read_in(test_dir, "twin_A/report.md");
    assert_non_null(report);
    const char *section = strstr(report, "## PyTorch side by side");
    assert_non_null(section);
    assert_non_null(strstr(section, "PyTorch: 2.9.0+cpu (fixture); threads: 1; device: cpu"));
    const char *zg = strstr(section, "### zero_grad");
    assert_non_null(zg);
    assert_non_null(strstr(section, "### inference_grad"));
    assert_non_null(strstr(zg, "| preset:mlp;batch:0 | memset -> set_to_none | 1.50x ["));
    assert_non_null(strstr(zg, "(equivalent) | **differ** | 0.67x ["));
    assert_non_null(strstr(zg, "PyTorch's overhead hides the effect"));
    assert_non_null(strstr(zg, "*core only*"));
    assert_non_null(strstr(section, "*PyTorch only*"));
    assert_non_null(strstr(report, "| verdict | PyTorch here |"));
    free(report);
}

// One chart per practice, core and PyTorch side by side, with the 95% intervals and the
// 1x line named in the legend, PyTorch's version in the title.
static void test_chart_drawn(void **state)
{
    (void)state;
    char *csv = summarize_twin();
    assert_non_null(csv);
    free(csv);
    setenv("CHART_FORMATS", "svg", 1);
    assert_int_equal(test_run("bash '%s/scripts/charts.sh' '%s/twin_A' >/dev/null 2>&1", test_suite_root(),
                              test_dir), 0);
    char *svg = test_read_in(test_dir, "twin_A/charts/twin_zero_grad.svg");
    assert_non_null(svg);
    assert_non_null(strstr(svg, "the core"));
    assert_non_null(strstr(svg, "PyTorch"));
    assert_non_null(strstr(svg, "95% interval"));
    assert_non_null(strstr(svg, "1x: no effect"));
    assert_non_null(strstr(svg, "PyTorch 2.9.0+cpu (fixture)"));
    assert_non_null(strstr(svg, "differ (0.67x)"));
    assert_null(strstr(svg, "e+0"));  // no scientific notation
    free(svg);
    char *other = test_read_in(test_dir, "twin_A/charts/twin_inference_grad.svg");
    assert_non_null(other);
    free(other);
    // the headline stays the core's: PyTorch's practices are in the twin charts
    char *headline = test_read_in(test_dir, "twin_A/charts/summary_speedup.svg");
    assert_non_null(headline);
    assert_non_null(strstr(headline, "zero_grad"));
    assert_null(strstr(headline, "pytorch_"));
    free(headline);

    // a summary_pytorch.csv that is not one is an error naming the file, never a crash
    assert_int_equal(test_run("cd '%s/twin_A' && sed -i '2s/^\\([^,]*,[^,]*,[^,]*,[^,]*\\),[^,]*,/\\1,fast,/' "
                              "summary_pytorch.csv", test_dir), 0);
    assert_int_not_equal(test_run("bash '%s/scripts/charts.sh' '%s/twin_A' >/dev/null 2>'%s/err.txt'",
                                  test_suite_root(), test_dir, test_dir), 0);
    char *err = test_read_in(test_dir, "err.txt");
    assert_non_null(err);
    assert_non_null(strstr(err, "summary_pytorch.csv: line 2"));
    assert_null(strstr(err, "Traceback"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_summary_pytorch_rows, setup, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_no_pytorch_side, setup, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_agreement_boundaries, setup, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_report_section, setup, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_chart_drawn, setup, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
