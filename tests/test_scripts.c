// test_scripts.c: the results pipeline on the committed fixture
// (tests/fixtures/pin_memory_fixture.csv, made-up numbers for tests only):
// speedup summary values, gnuplot charts that are real non-empty PNGs (skipped, visibly,
// where gnuplot is missing, as on the GPU machine), report.md; bad arguments and missing
// folders are clear errors; `make test` stopped by a signal to its process group stops the
// running test too.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support.h"

static int setup(void **state)
{
    if (test_setup_dir(state) != 0) return -1;
    return test_run("cp '%s/tests/fixtures/pin_memory_fixture.csv' '%s/pin_memory.csv'",
                    test_suite_root(), test_dir);
}

// Speedup column of the summary row for practice/params/tuned, or -1.
static double speedup_of(const char *summary, const char *practice, const char *params,
                         const char *tuned)
{
    char want[256];
    snprintf(want, sizeof want, "\n%s,%s,", practice, params);
    for (const char *p = strstr(summary, want); p; p = strstr(p + 1, want)) {
        char line[512], f[64];
        const char *end = strchr(p + 1, '\n');
        size_t n = end ? (size_t)(end - p - 1) : strlen(p + 1);
        if (n >= sizeof line) continue;
        memcpy(line, p + 1, n);
        line[n] = '\0';
        if (test_csv_field(line, 3, f, sizeof f) && strcmp(f, tuned) == 0 &&
            test_csv_field(line, 6, f, sizeof f))
            return atof(f);
    }
    return -1.0;
}

static void test_summary_speedups_from_fixture(void **state)
{
    (void)state;
    assert_int_equal(test_run("bash '%s/scripts/summarize.sh' '%s' >/dev/null", test_suite_root(), test_dir), 0);
    char *summary = test_read_in(test_dir, "summary.csv");
    assert_non_null(summary);
    // a header, then 2 directions x 3 sizes x 3 tuned copy variants + 2 macros x 2 sizes
    // x 2 fma; the fixture's skipped rows give no speedup
    assert_int_equal(test_count_lines(summary), 1 + 18 + 8);
    // fixture: pageable 10 GB/s, pinned 25 GB/s at 1 MiB -> 2.5x
    assert_true(speedup_of(summary, "pin_memory", "h2d:1;bytes:1048576", "pinned") == 2.5);
    // 64 KiB: 10/3 -> 3 GB/s (integer), 26/3 -> 8 GB/s: 8/3
    double s = speedup_of(summary, "pin_memory", "h2d:0;bytes:65536", "pinned_async");
    assert_true(s > 2.6666 && s < 2.6668);
    assert_true(speedup_of(summary, "pin_memory_step", "bytes:4194304;fma:64", "pinned_async_overlap") == 2.0);
    assert_true(speedup_of(summary, "pin_memory", "h2d:1;bytes:268435456", "pinned") < 0);
    free(summary);
    char *by_variant = test_read_in(test_dir, "summary_by_variant.csv");
    assert_non_null(by_variant);
    assert_non_null(strstr(by_variant, "pin_memory_alloc,pinned_once,"));
    assert_non_null(strstr(by_variant, ",4,3.0000,")); // then ci_low,ci_high,verdict,...
    free(by_variant);
}

static void test_summary_rejects_a_file_that_is_not_tidy_csv(void **state)
{
    (void)state;
    char bad[512];
    snprintf(bad, sizeof bad, "%s/not_tidy.csv", test_dir);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("a,b\n1,2\n", f);
    fclose(f);
    assert_int_not_equal(test_run("bash '%s/scripts/summarize.sh' -o '%s/not_tidy.out' '%s' 2>/dev/null",
                                  test_suite_root(), test_dir, bad), 0);
    remove(bad);
    snprintf(bad, sizeof bad, "%s/not_tidy.out", test_dir);
    remove(bad);
}

// Missing or empty arguments and missing folders: exit status 1 and a "summarize:" message
// that names the problem (not a shell "unbound variable" or an awk error on a literal
// "DIR/*.csv"), also for a folder without CSVs that is no results folder; a results folder
// without CSVs (every program cut): a warning and an empty summary.
static void test_summary_bad_arguments_are_clear_errors(void **state)
{
    (void)state;
    char empty[512], err[512];
    snprintf(empty, sizeof empty, "%s/empty", test_dir);
    snprintf(err, sizeof err, "%s/err.txt", test_dir);
    assert_int_equal(test_run("mkdir -p '%s'", empty), 0);
    const char *cases[][2] = {{"-o", "-o needs an output file"},
                              {"''", "usage: summarize.sh"},
                              {"/nonexistent", "no results folder /nonexistent"},
                              {"EMPTY", "no tidy CSV files in"},
                              {"-o x.csv /nonexistent.csv", "cannot read /nonexistent.csv"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args = strcmp(cases[i][0], "EMPTY") == 0 ? empty : cases[i][0];
        int rc = test_run("cd '%s' && bash '%s/scripts/summarize.sh' %s >/dev/null 2>'%s'", test_dir,
                          test_suite_root(), args, err);
        if (rc != 1) fail_msg("summarize.sh %s: exit status %d, want 1", args, rc);
        char *text = test_read_file(err, NULL);
        assert_non_null(text);
        if (!strstr(text, cases[i][1])) fail_msg("summarize.sh %s: message lacks '%s': %s", args, cases[i][1], text);
        free(text);
    }
    // a results folder (its context.txt) with no tidy CSV at all (every program cut or not
    // run): a warning that says so and an empty summary, exit status 0
    assert_int_equal(test_run("echo host=vm >'%s/context.txt'", empty), 0);
    assert_int_equal(test_run("bash '%s/scripts/summarize.sh' '%s' >/dev/null 2>'%s'", test_suite_root(), empty, err), 0);
    char *warning = test_read_file(err, NULL);
    assert_non_null(warning);
    assert_non_null(strstr(warning, "no tidy CSV files in"));
    free(warning);
    assert_int_equal(test_run("rm -rf '%s' '%s' '%s/x.csv'", empty, err, test_dir), 0);
    // charts and report refuse a folder that does not exist; a report that cannot be
    // written is a failure, not "report: DIR/report.md" and exit status 0
    assert_int_equal(test_run("bash '%s/scripts/charts.sh' /nonexistent 2>/dev/null", test_suite_root()), 1);
    assert_int_equal(test_run("bash '%s/scripts/report.sh' /nonexistent 2>/dev/null", test_suite_root()), 1);
    assert_int_equal(test_run("mkdir -p '%s/report.md'", empty), 0);
    assert_int_equal(test_run("bash '%s/scripts/report.sh' '%s' >/dev/null 2>&1", test_suite_root(), empty), 1);
    assert_int_equal(test_run("rm -rf '%s'", empty), 0);
}

// run-suite.sh refuses a BENCH_TIMEOUT that is not a number of seconds (every program
// used to "fail" with timeout's exit status 125) and a BENCH_FILTER that selects nothing,
// before it writes any results folder.
static void test_run_suite_bad_settings_are_refused(void **state)
{
    (void)state;
    char res[512], err[512];
    snprintf(res, sizeof res, "%s/suite-results", test_dir);
    snprintf(err, sizeof err, "%s/err.txt", test_dir);
    const char *cases[][2] = {{"BENCH_TIMEOUT=abc BENCH_FILTER=pin_memory", "BENCH_TIMEOUT='abc'"},
                              {"BENCH_TIMEOUT=-5 BENCH_FILTER=pin_memory", "BENCH_TIMEOUT='-5'"},
                              {"BENCH_FILTER=no_such_practice", "no practice programs"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = test_run("%s RESULTS_DIR='%s' bash '%s/scripts/run-suite.sh' '%s' >/dev/null 2>'%s'",
                          cases[i][0], res, test_suite_root(), test_build_dir(), err);
        if (rc != 1) fail_msg("%s run-suite.sh: exit status %d, want 1", cases[i][0], rc);
        char *text = test_read_file(err, NULL);
        assert_non_null(text);
        if (!strstr(text, cases[i][1])) fail_msg("%s: message lacks '%s': %s", cases[i][0], cases[i][1], text);
        free(text);
        assert_true(test_run("test -e '%s'", res) != 0);
    }
    remove(err);
    // run-tests.sh likewise refuses, before running any program, a TEST_TIMEOUT that
    // timeout(1) would reject for every one and a TEST_JOBS that is not a positive number
    const char *bad_env[][2] = {{"TEST_TIMEOUT=abc", "TEST_TIMEOUT='abc'"},
                                {"TEST_JOBS=0", "TEST_JOBS='0' is not a positive whole number"}};
    for (size_t i = 0; i < sizeof bad_env / sizeof bad_env[0]; i++) {
        assert_int_equal(test_run("%s bash '%s/scripts/run-tests.sh' '%s' >'%s' 2>&1", bad_env[i][0],
                                  test_suite_root(), test_build_dir(), err), 1);
        char *text = test_read_file(err, NULL);
        assert_non_null(text);
        if (!strstr(text, bad_env[i][1]) || strstr(text, "=== test_"))
            fail_msg("%s: run-tests said:\n%s", bad_env[i][0], text);
        free(text);
        remove(err);
    }
    // the context program it names the results folder with refuses what it does not know
    assert_int_equal(test_run("'%s/context' --slug extra >/dev/null 2>&1", test_build_dir()), 2);
    assert_int_equal(test_run("'%s/context' --bogus >/dev/null 2>&1", test_build_dir()), 2);
    assert_int_equal(test_run("'%s/context' --slug >/dev/null 2>&1", test_build_dir()), 0);
}

// `timeout 40 make test`: SIGTERM to make's whole process group (timeout(1), scancel, CI).
// The running test sits in a process group of its own (its timeout(1) makes one), which
// that signal does not reach: run-tests sends it on, prints the tally so far and the tests
// not reached, and make waits for it (the recipe execs the runner); within 10 s nothing of
// the test is left.
static void test_signal_to_make_test_stops_the_tests(void **state)
{
    (void)state;
    char tests_dir[600], body[700], sleeper[64];
    snprintf(tests_dir, sizeof tests_dir, "%s/build/tests", test_dir);
    snprintf(sleeper, sizeof sleeper, "sleep %d.125", 700 + (int)(getpid() % 1000));
    assert_int_equal(test_run("mkdir -p '%s'", tests_dir), 0);
    test_write_script(tests_dir, "test_a", "echo '[  PASSED  ] 2 test(s).'");
    snprintf(body, sizeof body, "touch '%s/b_started'; %s & wait", test_dir, sleeper);  // its own child
    test_write_script(tests_dir, "test_b", body);
    test_write_script(tests_dir, "test_c", "echo '[  PASSED  ] 1 test(s).'");
    // the Makefile's own `make test` (-o all: the fake build is not rebuilt) in a group of
    // its own, as timeout(1) makes one; the signal once test_b runs, to the whole group
    double t0 = test_now_s();
    int rc = test_run("cd '%s' && { setsid make -s -o all test BUILD='%s/build' TEST_JOBS=1 >'%s/out.txt' 2>&1 "
                      "</dev/null & p=$!; i=0; while [ ! -e '%s/b_started' ] && [ $i -lt 300 ]; do sleep 0.1; "
                      "i=$((i + 1)); done; kill -TERM -$p; wait $p; }",
                      test_suite_root(), test_dir, test_dir, test_dir);
    double took = test_now_s() - t0;
    char *text = test_read_in(test_dir, "out.txt");
    assert_non_null(text);
    printf("make test, SIGTERM to its group: exit %d, %.1f s in all\n%s", rc, took, text);
    assert_true(rc != 0);
    const char *want[] = {"tests stopped: test_b (SIGTERM", "tests not reached: test_c",
                          "tests: 2 passed, 0 failed, 0 skipped (stopped by SIGTERM)"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("make test's output lacks '%s':\n%s", want[i], text);
    free(text);
    int left = 1;
    for (int i = 0; i < 100 && left; i++) {
        left = test_run("pgrep -f '^%s$' >/dev/null", sleeper) == 0;
        if (left) usleep(100 * 1000);
    }
    if (left) {
        test_run("for p in $(pgrep -f '^%s$'); do kill -KILL $p; done", sleeper);
        fail_msg("'%s' of the stopped test still ran 10 s after make ended", sleeper);
    }
}

// The GPU machine has no gnuplot: its charts are drawn back home (make charts). Tests
// that draw say so and skip there, visibly.
static bool gnuplot_missing(void)
{
    if (test_run("command -v gnuplot >/dev/null 2>&1") == 0) return false;
    printf("skipped: gnuplot is not installed here (charts are drawn where it is: make charts)\n");
    return true;
}

static void test_charts_are_non_empty_svgs(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    assert_int_equal(test_run("bash '%s/scripts/summarize.sh' '%s' >/dev/null && "
                              "bash '%s/scripts/charts.sh' '%s' >/dev/null",
                              test_suite_root(), test_dir, test_suite_root(), test_dir), 0);
    const char *charts[] = {"pin_memory_bw_h2d", "pin_memory_bw_d2h", "pin_memory_step",
                            "pin_memory_alloc", "summary_speedup"};
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/charts/%s.svg", test_dir, charts[i]);
        size_t size = 0;
        char *svg = test_read_file(path, &size);
        if (!svg) fail_msg("no chart %s", path);
        assert_true(size > 2000); // axes, labels and lines, not an empty canvas
        assert_non_null(strstr(svg, "<svg"));
        free(svg);
    }
}

// `make compare` and `make charts` take folder names as data: a name holding a quote,
// $(shell ...), $(...) and backquotes runs none of them (make used to expand $(shell ...)
// and the recipe's shell the rest), and the targets still work on that folder.
static void test_make_targets_treat_paths_as_data(void **state)
{
    (void)state;
    const char *hostile = "it's $(shell touch mk_pwned1) $(touch mk_pwned2) `touch mk_pwned3`";
    char a[1024], b[1024], cmp[1024], make[1024];
    snprintf(a, sizeof a, "%s/mkA", test_dir);
    snprintf(b, sizeof b, "%s/%s", test_dir, hostile);
    snprintf(cmp, sizeof cmp, "%s/mkcmp", test_dir);
    setenv("TEST_MK_A", a, 1);
    setenv("TEST_MK_B", b, 1);
    setenv("COMPARE_OUT", cmp, 1);
    snprintf(make, sizeof make, "make -s --no-print-directory -C '%s' CUDA_ARCH=90 BUILD='%s'",
             test_suite_root(), test_build_dir());
    assert_int_equal(test_run("cd '%s' && cp -r '%s/tests/fixtures/stats_A' \"$TEST_MK_A\" && "
                              "cp -r '%s/tests/fixtures/stats_B' \"$TEST_MK_B\" && "
                              "cp pin_memory.csv \"$TEST_MK_B/\"",
                              test_dir, test_suite_root(), test_suite_root()), 0);
    // names with spaces: one a line
    int compare_rc = test_run("cd '%s' && %s compare RESULTS=\"$TEST_MK_A\n$TEST_MK_B\" >mk_compare.txt 2>&1",
                              test_dir, make);
    unsetenv("COMPARE_OUT");
    // charts and the report of the hostile folder, into it
    int charts_rc = test_run("cd '%s' && %s charts RESULTS=\"$TEST_MK_B\" >mk_charts.txt 2>&1", test_dir, make);
    // nothing ran: not where make runs, not where the test runs, not in the folders
    char path[1200];
    for (int i = 1; i <= 3; i++) {
        snprintf(path, sizeof path, "mk_pwned%d", i);
        int found = test_run("test -e '%s/%s' || test -e '%s/%s' || test -e \"$TEST_MK_B/%s\"",
                             test_suite_root(), path, test_dir, path, path);
        test_run("rm -f '%s/%s'", test_suite_root(), path); // what an old Makefile left
        if (found == 0) fail_msg("make ran the command in a folder name: %s exists", path);
    }
    char *text = test_read_in(test_dir, "mk_compare.txt");
    if (compare_rc != 0) fail_msg("make compare: exit status %d: %s", compare_rc, text ? text : "");
    free(text);
    snprintf(path, sizeof path, "%s/compare.md", cmp);
    assert_true(test_file_at_least(path, 500));
    text = test_read_in(test_dir, "mk_charts.txt");
    if (!gnuplot_missing() && charts_rc != 0) fail_msg("make charts: exit status %d: %s", charts_rc, text ? text : "");
    free(text);
    if (charts_rc == 0) {
        snprintf(path, sizeof path, "%s/report.md", b);
        assert_true(test_file_at_least(path, 200));
    }
    assert_int_equal(test_run("rm -rf \"$TEST_MK_A\" \"$TEST_MK_B\" '%s' '%s'/mk_*.txt", cmp, test_dir), 0);
}

static void test_report_embeds_charts_and_speedups(void **state)
{
    (void)state;
    assert_int_equal(test_run("bash '%s/scripts/report.sh' '%s' >/dev/null", test_suite_root(), test_dir), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/report.md", test_dir);
    char *report = test_read_file(path, NULL);
    assert_non_null(report);
    assert_non_null(strstr(report, "| pin_memory_step | pinned_async_overlap | 4 | 2.00x |"));
    // the charts are embedded where gnuplot drew them
    if (!gnuplot_missing())
        assert_non_null(strstr(report, "![pin_memory_bw_h2d](charts/pin_memory_bw_h2d.svg)"));
    free(report);
}

// check_margins.py: per practice and variant, the largest check difference against its
// tolerance, and their ratio; a bit-for-bit check that saw a difference says FAILS; rows that
// did not run, or record no tolerance, are left out.
static void test_check_margins_table(void **state)
{
    (void)state;
    char dir[600], out[700];
    snprintf(dir, sizeof dir, "%s/margins", test_dir);
    snprintf(out, sizeof out, "%s/margins.tsv", dir);
    assert_int_equal(test_run("mkdir -p '%s'", dir), 0);
    assert_true(test_write_file(dir, "grad_accum.csv",
        "practice,variant,role,params,status,check_rel_diff,check_tolerance\n"
        "grad_accum,accumulate_2,tuned,preset:tiny,ok,2e-6,1e-4\n"
        "grad_accum,accumulate_2,tuned,preset:mlp,ok,5e-6,1e-4\n"
        "grad_accum,accumulate_4,tuned,preset:tiny,error,0.9,1e-4\n"
        "grad_accum,baseline,baseline,preset:tiny,ok,,\n"
        "fusion,fused,tuned,preset:tiny,ok,3e-7,0\n"));
    assert_int_equal(test_run("python3 '%s/scripts/check_margins.py' '%s' --out '%s' >/dev/null",
                              test_suite_root(), dir, out), 0);
    char *tsv = test_read_file(out, NULL);
    assert_non_null(tsv);
    printf("%s", tsv);
    assert_non_null(strstr(tsv, "grad_accum\tgrad_accum\taccumulate_2\tcheck_rel_diff\t2\t5e-06\t0.0001\t20\n"));
    assert_non_null(strstr(tsv, "fusion\tfused\tcheck_rel_diff\t1\t3e-07\t0\tFAILS (bit for bit wanted)\n"));
    assert_null(strstr(tsv, "accumulate_4"));  // an error row is no margin
    assert_null(strstr(tsv, "baseline"));
    free(tsv);
    assert_int_not_equal(test_run("python3 '%s/scripts/check_margins.py' /nonexistent 2>/dev/null",
                                  test_suite_root()), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_speedups_from_fixture),
        cmocka_unit_test(test_summary_rejects_a_file_that_is_not_tidy_csv),
        cmocka_unit_test(test_summary_bad_arguments_are_clear_errors),
        cmocka_unit_test(test_run_suite_bad_settings_are_refused),
        cmocka_unit_test(test_signal_to_make_test_stops_the_tests),
        cmocka_unit_test(test_charts_are_non_empty_svgs),
        cmocka_unit_test(test_report_embeds_charts_and_speedups),
        cmocka_unit_test(test_make_targets_treat_paths_as_data),
        cmocka_unit_test(test_check_margins_table),
    };
    return cmocka_run_group_tests(tests, setup, test_teardown_dir);
}
