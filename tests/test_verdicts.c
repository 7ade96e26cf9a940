// test_verdicts.c: what a comparison's data can tell (scripts/verdicts.py, through
// summarize.sh and on fixed numbers): faster/slower only when significant and the 95%
// interval excludes 1, "equivalent" only when the interval lies within the equivalence
// margin (BENCH_EQUIVALENCE_MARGIN, default 0.05), "inconclusive" otherwise, never "no
// significant difference"; the margin and the seeds of the repetitions recorded in the
// summary; a quoted figure carries its precision ("1.96x [1.56-2.25], ±18%").
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

static bool python_missing(void)
{
    if (test_run("command -v python3 >/dev/null 2>&1") == 0) return false;
    printf("skipped: python3 is not installed here (the statistics need it)\n");
    return true;
}

// The verdict verdicts.py gives on fixed numbers ("RATIO LOW HIGH P N_BASE N_TUNED"), with
// `env` (e.g. "BENCH_EQUIVALENCE_MARGIN=0.1", or "") before it; the exit status in *rc.
static char *verdict_of(const char *env, const char *args, int *rc)
{
    *rc = test_run("%s python3 '%s/scripts/verdicts.py' speedup %s >'%s/v.txt' 2>&1", env, test_suite_root(), args,
                   test_dir);
    char *text = test_read_in(test_dir, "v.txt");
    assert_non_null(text);
    char *nl = strchr(text, '\n');
    if (nl) *nl = '\0';
    return text;
}

static void expect_verdict(const char *env, const char *args, const char *want)
{
    int rc = 0;
    char *got = verdict_of(env, args, &rc);
    if (rc != 0 || strcmp(got, want) != 0)
        fail_msg("%s verdicts.py speedup %s: '%s' (exit %d), want '%s'", env, args, got, rc, want);
    free(got);
}

// The rule at its boundaries (speedup, 95% interval, U-test p, repetitions a side).
static void test_three_verdicts_at_their_boundaries(void **state)
{
    (void)state;
    if (python_missing()) skip();
    const char *cases[][2] = {
        {"1.00 0.9501 1.0499 0.50 5 5", "equivalent"},     // just inside 0.95-1.05
        {"1.00 0.95 1.05 0.50 5 5", "equivalent"},         // its ends belong to it
        {"1.00 0.9499 1.0300 0.50 5 5", "inconclusive"},   // just crossing below
        {"1.00 0.9700 1.0501 0.50 5 5", "inconclusive"},   // just crossing above
        {"1.00 0.74 1.17 0.66 5 5", "inconclusive"},       // the "no effect here"
        {"1.10 1.0001 1.20 0.0079 5 5", "faster"},         // significant, excludes 1
        {"0.90 0.85 0.9999 0.0079 5 5", "slower"},
        {"1.10 1.0001 1.20 0.06 5 5", "inconclusive"},     // excludes 1, but p >= 0.05
        {"1.10 0.9999 1.20 0.0079 5 5", "inconclusive"},   // p < 0.05, but holds 1
        {"1.02 1.01 1.03 0.0079 5 5", "faster"},           // significant inside the margin
        {"1.02 1.01 1.03 0.06 5 5", "equivalent"},         // not significant, inside it
        {"1.10 1.05 1.20 0.0079 3 5", "n/a (too few repetitions)"},
        {"1.10 - - - 1 5", "n/a (1 repetition)"},
        {"1.50 - - 0.0079 5 5", "faster"},                 // a censored side: the U test alone
        {"1.50 - - 0.20 5 5", "inconclusive"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_verdict("", cases[i][0], cases[i][1]);
    // the margin is configurable: 0.92-1.08 is equivalent within 0.10, not within 0.05
    expect_verdict("", "1.00 0.92 1.08 0.50 5 5", "inconclusive");
    expect_verdict("BENCH_EQUIVALENCE_MARGIN=0.10", "1.00 0.92 1.08 0.50 5 5", "equivalent");
    expect_verdict("BENCH_EQUIVALENCE_MARGIN=0.07", "1.00 0.92 1.08 0.50 5 5", "inconclusive");
    // a margin that is not a fraction in (0, 1) is refused, naming the variable
    const char *bad[] = {"abc", "0", "1", "-0.05", "5%"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char env[64];
        int rc = 0;
        snprintf(env, sizeof env, "BENCH_EQUIVALENCE_MARGIN='%s'", bad[i]);
        char *got = verdict_of(env, "1.00 0.99 1.01 0.5 5 5", &rc);
        if (rc != 1 || !strstr(got, "BENCH_EQUIVALENCE_MARGIN")) fail_msg("%s: exit %d, '%s'", env, rc, got);
        free(got);
    }
    // a quoted figure: its interval and the half-width relative to it
    assert_int_equal(test_run("python3 '%s/scripts/verdicts.py' figure 1.96 1.56 2.25 >'%s/f.txt' && "
                              "python3 '%s/scripts/verdicts.py' figure 1.00 0.99 1.01 >>'%s/f.txt' && "
                              "python3 '%s/scripts/verdicts.py' figure 1.86 - - >>'%s/f.txt'",
                              test_suite_root(), test_dir, test_suite_root(), test_dir, test_suite_root(), test_dir), 0);
    char *fig = test_read_in(test_dir, "f.txt");
    assert_non_null(fig);
    assert_string_equal(fig, "1.96x [1.56-2.25], ±18%\n1.00x [0.99-1.01], ±1.0%\n1.86x\n");
    free(fig);
}

// A results folder with one practice: baseline `base` and tuned variants, five
// repetitions each with seeds 1..5 (a time-to-accuracy row records one per repetition).
//   same:   the baseline's times in another order: interval ~0.997-1.003, equivalent
//   wide:   8..12 around 10: a wide interval that holds 1, inconclusive
//   small:  2% faster, every repetition: significant inside the margin, faster
static const char kTidy[] =
    "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,time_unit\n"
    "v,base,baseline,manual,n:1,ok,,5,1,10,10,s\n"
    "v,same,tuned,manual,n:1,ok,,5,1,10,10,s\n"
    "v,wide,tuned,manual,n:1,ok,,5,1,10,10,s\n"
    "v,small,tuned,manual,n:1,ok,,5,1,9.8,9.8,s\n";

static void write_fixture(const char *dir)
{
    static const struct { const char *variant, *role; double t[5]; } sides[] = {
        {"base", "baseline", {10.00, 10.02, 9.98, 10.01, 9.99}},
        {"same", "tuned", {10.01, 9.99, 10.00, 10.02, 9.98}},
        {"wide", "tuned", {8.0, 12.0, 10.0, 9.0, 11.0}},
        {"small", "tuned", {9.80, 9.82, 9.78, 9.81, 9.79}},
    };
    char reps[4096] = "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations,seed\n";
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
        for (int k = 0; k < 5; k++) {
            char row[160];
            snprintf(row, sizeof row, "v,%s,%s,manual,n:1,%d,%g,%g,s,1,%d\n", sides[i].variant, sides[i].role, k + 1,
                     sides[i].t[k], sides[i].t[k], k + 1);
            strcat(reps, row);
        }
    char folder[1024];
    snprintf(folder, sizeof folder, "%s/%s", test_dir, dir);
    assert_int_equal(test_run("mkdir -p '%s'", folder), 0);
    assert_true(test_write_file(folder, "v.csv", kTidy));
    assert_true(test_write_file(folder, "v.reps.csv", reps));
}

// Summarizes test_dir/DIR with `env` before the command; returns summary.csv (or NAME).
static char *summarize(const char *env, const char *dir, const char *name)
{
    if (test_run("%s bash '%s/scripts/summarize.sh' '%s/%s' >'%s/out.txt' 2>&1", env, test_suite_root(), test_dir, dir,
                 test_dir) != 0) {
        char *out = test_read_in(test_dir, "out.txt");
        fail_msg("summarize %s failed: %s", dir, out ? out : "");
    }
    char folder[1024];
    snprintf(folder, sizeof folder, "%s/%s", test_dir, dir);
    char *text = test_read_in(folder, name);
    assert_non_null(text);
    return text;
}

// Field `name` of the row of `text` that starts with `prefix`.
static void field(const char *text, const char *prefix, const char *name, char *out, size_t size)
{
    const char *row = strstr(text, prefix);
    if (!row) fail_msg("no row '%s' in:\n%s", prefix, text);
    test_csv_named_field(text, row, name, out, size);
}

static void expect_field(const char *text, const char *prefix, const char *name, const char *want)
{
    char got[256];
    field(text, prefix, name, got, sizeof got);
    if (strcmp(got, want) != 0) fail_msg("%s of '%s' is '%s', want '%s'", name, prefix, got, want);
}

static double number_field(const char *text, const char *prefix, const char *name)
{
    char got[256];
    field(text, prefix, name, got, sizeof got);
    if (!*got) fail_msg("%s of '%s' is empty", name, prefix);
    return atof(got);
}

// Through the summary: the three outcomes, the margin and the seeds recorded; the margin
// moved just past a measured interval's farther end turns it equivalent, just short of it
// inconclusive, in summary.csv and summary_by_variant.csv alike.
static void test_summary_verdicts_follow_the_margin(void **state)
{
    (void)state;
    if (python_missing()) skip();
    write_fixture("run");
    char *s = summarize("", "run", "summary.csv");
    expect_field(s, "\nv,n:1,base,same,", "verdict", "equivalent");
    expect_field(s, "\nv,n:1,base,wide,", "verdict", "inconclusive");
    expect_field(s, "\nv,n:1,base,small,", "verdict", "faster");
    expect_field(s, "\nv,n:1,base,same,", "equivalence_margin", "0.05");
    expect_field(s, "\nv,n:1,base,same,", "baseline_seeds", "5");
    expect_field(s, "\nv,n:1,base,wide,", "tuned_seeds", "5");
    double lo = number_field(s, "\nv,n:1,base,same,", "ci_low"), hi = number_field(s, "\nv,n:1,base,same,", "ci_high");
    assert_true(lo >= 0.95 && hi <= 1.05 && lo <= 1.0 && hi >= 1.0);
    if (strstr(s, "significant")) fail_msg("a verdict of 'no significant difference' in:\n%s", s);
    free(s);
    char *v = summarize("", "run", "summary_by_variant.csv");
    expect_field(v, "\nv,same,", "verdict", "equivalent");
    expect_field(v, "\nv,wide,", "verdict", "inconclusive");
    expect_field(v, "\nv,same,", "equivalence_margin", "0.05");
    free(v);

    // the wide interval's farther end from 1 sets the margin it needs
    s = summarize("", "run", "summary.csv");
    lo = number_field(s, "\nv,n:1,base,wide,", "ci_low");
    hi = number_field(s, "\nv,n:1,base,wide,", "ci_high");
    free(s);
    double need = 1.0 - lo > hi - 1.0 ? 1.0 - lo : hi - 1.0;
    printf("wide: interval %.4f-%.4f, equivalent from a margin of %.4f\n", lo, hi, need);
    assert_true(need > 0.05 && need < 0.9);
    char inside[64], crossing[64];
    snprintf(inside, sizeof inside, "BENCH_EQUIVALENCE_MARGIN=%.4f", need + 0.001);
    snprintf(crossing, sizeof crossing, "BENCH_EQUIVALENCE_MARGIN=%.4f", need - 0.001);
    s = summarize(inside, "run", "summary.csv");
    expect_field(s, "\nv,n:1,base,wide,", "verdict", "equivalent");
    char margin[32];
    snprintf(margin, sizeof margin, "%g", need + 0.001);
    expect_field(s, "\nv,n:1,base,wide,", "equivalence_margin", margin);
    free(s);
    v = summarize(inside, "run", "summary_by_variant.csv");
    expect_field(v, "\nv,wide,", "verdict", "equivalent");
    free(v);
    s = summarize(crossing, "run", "summary.csv");
    expect_field(s, "\nv,n:1,base,wide,", "verdict", "inconclusive");
    free(s);
    v = summarize(crossing, "run", "summary_by_variant.csv");
    expect_field(v, "\nv,wide,", "verdict", "inconclusive");
    free(v);
    // a bad margin stops summarize before it writes anything
    assert_int_equal(test_run("BENCH_EQUIVALENCE_MARGIN=2 bash '%s/scripts/summarize.sh' '%s/run' >/dev/null 2>&1",
                              test_suite_root(), test_dir), 1);
}

// Accuracy parity (summary_accuracy.csv): the difference's interval against the margin
// times the baseline's accuracy (0.05 x 0.92 = 0.046): the same accuracies are equivalent;
// a spread of 0.70..0.98 against 0.92 inconclusive; the seeds are counted.
static void test_accuracy_verdicts_and_seeds(void **state)
{
    (void)state;
    if (python_missing()) skip();
    static const struct { const char *variant, *role; double acc[5]; } sides[] = {
        {"small", "baseline", {0.90, 0.91, 0.92, 0.93, 0.94}},
        {"same", "tuned", {0.94, 0.93, 0.92, 0.91, 0.90}},
        {"spread", "tuned", {0.70, 0.98, 0.80, 0.95, 0.86}},
    };
    char tidy[1024] = "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,"
                      "time_unit,final_accuracy,accuracy_parity\n";
    char reps[4096] = "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations,"
                      "final_accuracy,accuracy_parity,seed\n";
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        char row[200];
        snprintf(row, sizeof row, "par,%s,%s,manual,p:1,ok,,5,1,1,1,s,0.9,1\n", sides[i].variant, sides[i].role);
        strcat(tidy, row);
        for (int k = 0; k < 5; k++) {
            snprintf(row, sizeof row, "par,%s,%s,manual,p:1,%d,1,1,s,1,%g,1,%d\n", sides[i].variant, sides[i].role,
                     k + 1, sides[i].acc[k], 1 + k);
            strcat(reps, row);
        }
    }
    char folder[1024];
    snprintf(folder, sizeof folder, "%s/par", test_dir);
    assert_int_equal(test_run("mkdir -p '%s'", folder), 0);
    assert_true(test_write_file(folder, "par.csv", tidy));
    assert_true(test_write_file(folder, "par.reps.csv", reps));
    char *a = summarize("", "par", "summary_accuracy.csv");
    expect_field(a, "\npar,p:1,same,", "verdict", "equivalent");
    expect_field(a, "\npar,p:1,spread,", "verdict", "inconclusive");
    expect_field(a, "\npar,p:1,small,", "seeds", "5");
    expect_field(a, "\npar,p:1,same,", "equivalence_margin", "0.05");
    if (strstr(a, "significant")) fail_msg("a verdict of 'no significant difference' in:\n%s", a);
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_three_verdicts_at_their_boundaries, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_summary_verdicts_follow_the_margin, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_accuracy_verdicts_and_seeds, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
