// test_stats.c: the statistics of the results pipeline (scripts/stats.py through
// summarize.sh and compare.sh) on committed fixtures with made-up numbers
// (tests/fixtures/stats_A and stats_B: two "machines" that differ in driver, with
// per-repetition files), the harness's per-repetition file, and (on a GPU) the NVML state
// and cache labels recorded with every run.
// The expected values were computed once with scipy 1.17.1 (scipy.stats.mannwhitneyu,
// two-sided, method 'exact' without ties and 'asymptotic' with them; scipy.stats.bootstrap,
// percentile method, paired=False, on the ratio of medians) or by hand, and are written
// here: the test itself needs only Python's standard library.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/driver/context.h"
#include "tests/support.h"

static int setup(void **state)
{
    if (test_setup_dir(state) != 0) return -1;
    return test_run("cp -r '%s/tests/fixtures/stats_A' '%s/tests/fixtures/stats_B' '%s/'", test_suite_root(),
                    test_suite_root(), test_dir);
}

// The line of a CSV text whose first fields are `prefix` (e.g. "fx,n:1,base,fast,"), copied.
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

// Asserts that field `name` of `line` is exactly `want`.
static void expect_field(const char *text, const char *line, const char *name, const char *want)
{
    char f[256];
    test_csv_named_field(text, line, name, f, sizeof f);
    if (strcmp(f, want) != 0) fail_msg("%s is \"%s\", want \"%s\" in %s", name, f, want, line);
}

static double numf(const char *text, const char *line, const char *name)
{
    char f[256];
    test_csv_named_field(text, line, name, f, sizeof f);
    if (!*f) fail_msg("field %s is empty in %s", name, line);
    return atof(f);
}

#define ASSERT_NEAR(x, want, tol) \
    do { double x_ = (x); if (!(x_ > (want) - (tol) && x_ < (want) + (tol))) \
         fail_msg("%s = %.6g, want %.6g +- %g", #x, x_, (double)(want), (double)(tol)); } while (0)

static char *summarize_a(void)
{
    if (test_run("bash '%s/scripts/summarize.sh' '%s/stats_A' >/dev/null", test_suite_root(), test_dir) != 0)
        return NULL;
    return test_read_in(test_dir, "stats_A/summary.csv");
}

// Sample "n:1": baseline 10.0 10.2 9.9 10.1 10.4, tuned 8.0 8.1 7.9 8.3 8.2 (us).
// Median ratio 10.1 / 8.1 = 1.24691; no ties, every baseline above every tuned: U = 25,
// exact two-sided p = 2 / C(10,5) = 2/252 = 0.0079365 (scipy: 0.007936507936507936);
// bootstrap 95% interval [1.207317, 1.291139] (scipy, 20000 resamples, gives the same:
// the medians of 5 take few values); CVs 1.90% and 1.95%: under 2%, not noisy.
// Sample "n:2": baseline 5 5 6 7 7, tuned 5 6 6 7 8: ratio 6/6 = 1, ties: asymptotic
// p = 0.6643894 (scipy); its interval 0.71-1.20 is far wider than the equivalence margin
// (0.95-1.05): inconclusive, not "no difference"; CV 16.7%: noisy.
static void test_speedup_interval_p_value_and_verdict(void **state)
{
    (void)state;
    char *s = summarize_a();
    assert_non_null(s);
    char line[1024];
    assert_true(line_starting(s, "fx,n:1,base,fast,", line, sizeof line));
    ASSERT_NEAR(numf(s, line, "speedup"), 1.24691, 1e-4);
    ASSERT_NEAR(numf(s, line, "ci_low"), 1.207317, 1e-4);
    ASSERT_NEAR(numf(s, line, "ci_high"), 1.291139, 1e-4);
    ASSERT_NEAR(numf(s, line, "p_value"), 0.0079365, 1e-6);
    expect_field(s, line, "verdict", "faster");
    expect_field(s, line, "repetitions", "5");
    expect_field(s, line, "noisy", "0");
    expect_field(s, line, "contended", "");
    ASSERT_NEAR(numf(s, line, "baseline_cv_pct"), 1.9007, 0.01); // stdev / mean, by hand
    ASSERT_NEAR(numf(s, line, "baseline_s"), 10.1e-6, 1e-12);   // medians, in seconds

    assert_true(line_starting(s, "fx,n:2,base,fast,", line, sizeof line));
    ASSERT_NEAR(numf(s, line, "speedup"), 1.0, 1e-9);
    ASSERT_NEAR(numf(s, line, "p_value"), 0.6643894, 1e-4);
    expect_field(s, line, "verdict", "inconclusive");
    expect_field(s, line, "noisy", "1");
    // the skipped benchmark gives no speedup
    assert_null(strstr(s, "skipper"));
    free(s);

    // geometric mean over the two points: sqrt(1.24691 * 1) = 1.11665, with an interval from
    // the same bootstrap replicates that holds 1 and is wider than the margin: inconclusive;
    // noisy (n:2)
    char *v = test_read_in(test_dir, "stats_A/summary_by_variant.csv");
    assert_non_null(v);
    assert_true(line_starting(v, "fx,fast,", line, sizeof line));
    ASSERT_NEAR(numf(v, line, "geomean_speedup"), 1.11665, 1e-4);
    double lo = numf(v, line, "ci_low"), hi = numf(v, line, "ci_high");
    assert_true(lo < 1.0 && hi > 1.11665 && hi < 1.3);
    expect_field(v, line, "verdict", "inconclusive");
    expect_field(v, line, "noisy", "1");
    expect_field(v, line, "points", "2");
    free(v);
}

// Contended: the 2-worker loader's repetition 3 used 1.2 cores (below 75% of 2); the GPU
// run's repetition 2 ended at 900 of 1980 MHz with throttle reason 0x20 (thermal).
static void test_noisy_and_contended_flags(void **state)
{
    (void)state;
    char *s = summarize_a();
    assert_non_null(s);
    char line[1024], f[512];
    assert_true(line_starting(s, "fx_loader,n:1,workers_0,workers_2,", line, sizeof line));
    test_csv_named_field(s, line, "contended", f, sizeof f);
    assert_non_null(strstr(f, "loader used 1.20 of the 2 cores its workers could use (1 of 5 repetitions)"));
    expect_field(s, line, "noisy", "1"); // 70 us among 50s: CV 16%
    assert_true(line_starting(s, "fx_gpu,n:1,plain,tuned_gpu,", line, sizeof line));
    test_csv_named_field(s, line, "contended", f, sizeof f);
    assert_non_null(strstr(f, "SM clock 900 of 1980 MHz"));
    assert_non_null(strstr(f, "thermal"));
    expect_field(s, line, "noisy", "0");
    free(s);
    // a stricter noise threshold flags the n:1 row too (CV 1.9%)
    assert_int_equal(test_run("STATS_NOISE_CV=1 bash '%s/scripts/summarize.sh' '%s/stats_A' >/dev/null && "
                              "grep -q '^fx,n:1,base,fast,.*,faster,5,1,' '%s/stats_A/summary.csv'",
                              test_suite_root(), test_dir, test_dir), 0);
    assert_int_not_equal(test_run("STATS_NOISE_CV=abc bash '%s/scripts/summarize.sh' '%s/stats_A' 2>/dev/null",
                                  test_suite_root(), test_dir), 0);
}

// Zero, negative or non-numeric times and malformed rows are errors, never a speedup.
static void test_garbage_csv_is_an_error(void **state)
{
    (void)state;
    const char *cases[][3] = {
        {"s/^fx,fast,tuned,manual,n:1,1,8,/fx,fast,tuned,manual,n:1,1,0,/", "fx.reps.csv", "not a positive number"},
        {"s/^fx,fast,tuned,manual,n:1,1,8,/fx,fast,tuned,manual,n:1,1,-8,/", "fx.reps.csv", "not a positive number"},
        {"s/^fx,fast,tuned,manual,n:1,1,8,/fx,fast,tuned,manual,n:1,1,abc,/", "fx.reps.csv", "is not a number"},
        {"2s/,ok,,5,100,[0-9.]*,/,ok,,5,100,nan,/", "fx.csv", "not a positive number"},
        {"3s/$/,extra/", "fx.csv", "fields, the header has"},
        {"1s/.*/garbage header/", "fx.csv", "is not a tidy CSV"},
    };
    char g[512], err[600];
    snprintf(g, sizeof g, "%s/garbage", test_dir);
    snprintf(err, sizeof err, "%s/err.txt", test_dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(test_run("rm -rf '%s' && cp -r '%s/stats_A' '%s' && sed -i '%s' '%s/%s'", g, test_dir, g,
                                  cases[i][0], g, cases[i][1]), 0);
        int rc = test_run("bash '%s/scripts/summarize.sh' '%s' >/dev/null 2>'%s'", test_suite_root(), g, err);
        if (rc == 0) fail_msg("case %zu (%s): summarize accepted it", i, cases[i][0]);
        char *text = test_read_file(err, NULL);
        assert_non_null(text);
        if (!strstr(text, cases[i][2])) fail_msg("case %zu: message lacks '%s': %s", i, cases[i][2], text);
        free(text);
    }
    assert_int_equal(test_run("rm -rf '%s' '%s'", g, err), 0);
}

// The committed CPU run has one repetition: intervals and p-values are empty (n/a), the
// verdict says nothing is shown, nothing crashes.
static void test_single_repetition_run_degrades_to_n_a(void **state)
{
    (void)state;
    char one[512];
    snprintf(one, sizeof one, "%s/one", test_dir);
    assert_int_equal(test_run("cp -r '%s/results/cpu_vm_20261130-1203' '%s' && bash '%s/scripts/summarize.sh' '%s' >/dev/null",
                              test_suite_root(), one, test_suite_root(), one), 0);
    char line[1024];
    char *s = test_read_in(one, "summary.csv");
    assert_non_null(s);
    assert_true(line_starting(s, "num_workers,batch:64,workers_0,workers_2,", line, sizeof line));
    ASSERT_NEAR(numf(s, line, "speedup"), 1.8622, 1e-3);
    expect_field(s, line, "ci_low", "");
    expect_field(s, line, "p_value", "");
    expect_field(s, line, "verdict", "n/a (1 repetition)");
    expect_field(s, line, "repetitions", "1");
    free(s);
    char *v = test_read_in(one, "summary_by_variant.csv");
    assert_non_null(v);
    assert_null(strstr(v, "no significant difference")); // nothing is shown by 1 repetition
    free(v);
    assert_int_equal(test_run("rm -rf '%s'", one), 0);
}

// make compare on two fixture machines that differ in driver: A's fx/fast is 1.117x, B's
// tuned times are higher (9.1 us median at n:1: 10.1 / 9.1 = 1.10989), so B's geomean is
// sqrt(1.10989) = 1.05351 and B / A = 1.05351 / 1.11665 = 0.94346.
static void test_compare_two_machines(void **state)
{
    (void)state;
    // a results path with a quote and a $(...) is data, never code
    char weird[600];
    snprintf(weird, sizeof weird, "%s/it's $(touch pwned)", test_dir);
    setenv("STATS_WEIRD", weird, 1);
    assert_int_equal(test_run("cd '%s' && mkdir -p \"$STATS_WEIRD\" && cp -r stats_B/. \"$STATS_WEIRD/\"",
                              test_dir), 0);
    // a user's own README.md beside the comparison (outside results/) is left alone
    assert_int_equal(test_run("cd '%s' && mkdir -p cmp && echo 'my notes' >cmp/README.md", test_dir), 0);
    int rc = test_run("cd '%s' && bash '%s/scripts/compare.sh' -o cmp/out stats_A \"$STATS_WEIRD\" >out.txt 2>&1",
                      test_dir, test_suite_root());
    if (rc != 0) {
        char p[600];
        snprintf(p, sizeof p, "%s/out.txt", test_dir);
        char *t = test_read_file(p, NULL);
        fail_msg("compare.sh failed (%d): %s", rc, t ? t : "");
    }
    assert_true(test_run("test -e '%s/pwned'", test_dir) != 0);
    char path[600], line[1024];
    char *md = test_read_in(test_dir, "cmp/out/compare.md");
    assert_non_null(md);
    assert_non_null(strstr(md, "**driver differs**: A 0.0.fixture-a, B 0.0.fixture-b"));
    assert_null(strstr(md, "**cuDNN differs**"));
    assert_non_null(strstr(md, "| fast | A | 2 | 1.12x |"));
    assert_non_null(strstr(md, "| fast | B | 2 | 1.05x |"));
    assert_non_null(strstr(md, "## Absolute times relative to A"));
    free(md);
    char *sp = test_read_in(test_dir, "cmp/out/speedups.csv");
    assert_non_null(sp);
    assert_true(line_starting(sp, "fx,fast,B,", line, sizeof line));
    ASSERT_NEAR(numf(sp, line, "speedup"), 1.05351, 1e-4);
    ASSERT_NEAR(numf(sp, line, "vs_ref"), 0.94346, 1e-4);
    expect_field(sp, line, "driver_version", "0.0.fixture-b");
    double lo = numf(sp, line, "vs_ref_ci_low"), hi = numf(sp, line, "vs_ref_ci_high");
    assert_true(lo <= 0.94346 && 0.94346 <= hi);
    // the loader's speedup is the same on both (1.98x), but A's noisy repetitions leave the
    // ratio's interval (0.98-1.39) far wider than the margin: inconclusive, not "no"
    assert_true(line_starting(sp, "fx_loader,workers_2,B,", line, sizeof line));
    expect_field(sp, line, "differs", "inconclusive");
    free(sp);
    // absolute times: B's fx/fast at n:1 over A's = 9.1 / 8.1 = 1.12346, every repetition of
    // B above every one of A: exact p = 2/252
    char *tm = test_read_in(test_dir, "cmp/out/times.csv");
    assert_non_null(tm);
    assert_true(line_starting(tm, "fx,fast,n:1,B,", line, sizeof line));
    ASSERT_NEAR(numf(tm, line, "relative_to_ref"), 1.12346, 1e-4);
    ASSERT_NEAR(numf(tm, line, "p_value"), 0.0079365, 1e-6);
    free(tm);
    // the index lives only in the repository's results/: a comparison elsewhere writes
    // nothing outside its own folder
    char *index = test_read_in(test_dir, "cmp/README.md");
    assert_non_null(index);
    assert_string_equal(index, "my notes\n");
    free(index);
    assert_int_equal(test_run("cd '%s' && test \"$(ls cmp)\" = \"$(printf 'README.md\\nout')\"", test_dir), 0);
    // fewer than two folders, or one that does not exist: clear errors
    assert_int_equal(test_run("bash '%s/scripts/compare.sh' '%s/stats_A' 2>/dev/null", test_suite_root(), test_dir), 1);
    assert_int_equal(test_run("bash '%s/scripts/compare.sh' '%s/stats_A' /nonexistent 2>/dev/null",
                              test_suite_root(), test_dir), 1);
    // the charts last: where gnuplot is missing the test is counted as a skip
    if (test_run("command -v gnuplot >/dev/null 2>&1") != 0) skip();
    snprintf(path, sizeof path, "%s/cmp/out/charts/compare_fx.png", test_dir);
    assert_true(test_file_at_least(path, 5000));
    snprintf(path, sizeof path, "%s/cmp/out/charts/compare_fx.svg", test_dir);
    assert_true(test_file_at_least(path, 2000));
}

// The harness keeps every repetition: FILE.reps.csv beside the tidy CSV, and time_cv.
static void test_harness_writes_every_repetition(void **state)
{
    (void)state;
    char csv[600], path[700];
    snprintf(csv, sizeof csv, "%s/h/zg.csv", test_dir);
    assert_int_equal(test_run("mkdir -p '%s/h' && '%s/bench_zero_grad' --backend=cpu "
                              "--benchmark_filter='zero_grad_memset/.*/preset:tiny/' --benchmark_repetitions=3 "
                              "--benchmark_enable_random_interleaving=true --benchmark_min_time=0.01 "
                              "--harness_csv='%s' >/dev/null 2>&1",
                              test_dir, test_build_dir(), csv), 0);
    char *reps = test_read_in(test_dir, "h/zg.reps.csv");
    assert_non_null(reps);
    assert_int_equal(test_count_lines(reps), 1 + 2 * 3); // header, 2 variants x 3 repetitions
    assert_non_null(strstr(reps, "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations,"));
    char line[1024];
    assert_true(line_starting(reps, "zero_grad_memset,flat_buffer,tuned,manual,preset:tiny;batch:0,3,", line, sizeof line));
    assert_true(numf(reps, line, "time") > 0);
    free(reps);
    char *tidy = test_read_file(csv, NULL);
    assert_non_null(tidy);
    assert_true(line_starting(tidy, "zero_grad_memset,per_tensor,", line, sizeof line));
    assert_true(numf(tidy, line, "time_cv") >= 0);
    expect_field(tidy, line, "repetitions", "3");
    free(tidy);
    // and the summary uses them
    snprintf(path, sizeof path, "%s/h", test_dir);
    assert_int_equal(test_run("bash '%s/scripts/summarize.sh' '%s' >/dev/null && "
                              "grep -q '^zero_grad_memset,preset:tiny;batch:0,per_tensor,flat_buffer,.*,3,[01],' '%s/summary.csv'",
                              test_suite_root(), path, path), 0);
}

// The harness's stopping rule end to end (bench/driver/precision.h has its unit tests,
// a noise-free row stopping at the minimum among them): without a target a row group runs
// exactly --benchmark_repetitions (`no target`); with one it cannot meet it goes on in
// blocks and stops at the repetition cap, saying so in the tidy CSV and on the display;
// the reps file numbers the repetitions in the order they ran (1..n across the group's
// rows, each once).
static void test_harness_stops_on_precision(void **state)
{
    (void)state;
    const char *cases[2][3] = {{"none", "0", "no target"},
                               {"tight", "0.000001", "target not met: capped at 9 repetitions"}};
    for (int c = 0; c < 2; c++) {
        char csv[700];
        snprintf(csv, sizeof csv, "%s/%s/zg.csv", test_dir, cases[c][0]);
        assert_int_equal(test_run("mkdir -p '%s/%s' && '%s/bench_zero_grad' --backend=cpu "
                                  "--benchmark_filter='zero_grad_memset/.*/preset:tiny/' --benchmark_repetitions=6 "
                                  "--benchmark_min_time=0.005 --harness_precision=%s --harness_max_repetitions=9 "
                                  "--harness_csv='%s' >'%s/%s/out.txt' 2>&1",
                                  test_dir, cases[c][0], test_build_dir(), cases[c][1], csv, test_dir, cases[c][0]),
                         0);
        char *tidy = test_read_file(csv, NULL), line[2048];
        assert_non_null(tidy);
        assert_true(line_starting(tidy, "zero_grad_memset,flat_buffer,", line, sizeof line));
        expect_field(tidy, line, "stop", cases[c][2]);
        expect_field(tidy, line, "repetitions", c == 0 ? "6" : "9");
        if (c == 1) assert_true(numf(tidy, line, "precision_reached") > 0.000001);
        free(tidy);
        char name[64];
        snprintf(name, sizeof name, "%s/zg.reps.csv", cases[c][0]);
        char *reps = test_read_in(test_dir, name);
        assert_non_null(reps);
        int rows = test_count_lines(reps) - 1, n = c == 0 ? 12 : 18;
        assert_int_equal(rows, n);
        for (int k = 1; k <= n; k++) {  // every place 1..n once
            char want[32];
            snprintf(want, sizeof want, ",%d\n", k);
            if (!strstr(reps, want)) fail_msg("no repetition with sequence %d in %s", k, name);
        }
        free(reps);
        if (c == 1) {  // the display says why it stopped
            snprintf(name, sizeof name, "%s/out.txt", cases[c][0]);
            char *out = test_read_in(test_dir, name);
            assert_non_null(out);
            assert_non_null(strstr(out, cases[c][2]));
            free(out);
        }
    }
}

// Under --harness_budget (docs/statistics.md, "Under a budget") each practice gets an equal
// share of what is left and spends it precision first: its first group runs its first
// block and then adds repetitions until the share is spent (a target it cannot meet:
// "capped at N s"); a later group of the practice that finds less of the share left than
// the previous group took is not run (a visible skip naming the share), never measured loosely; the next practice
// gets its own share, so both practices have figures; the program ends within the budget
// and its start-up.
static void test_harness_budget_bounds_added_repetitions(void **state)
{
    (void)state;
    char csv[600];
    snprintf(csv, sizeof csv, "%s/budget/zg.csv", test_dir);
    double t0 = test_now_s();
    assert_int_equal(test_run("mkdir -p '%s/budget' && '%s/bench_zero_grad' --backend=cpu "
                              "--benchmark_filter='zero_grad_(memset|wgrad)/' --benchmark_repetitions=6 "
                              "--benchmark_min_time=0.005 --harness_precision=0.000001 --harness_max_repetitions=1000 "
                              "--harness_budget=3 --harness_csv='%s' >'%s/budget/out.txt' 2>&1",
                              test_dir, test_build_dir(), csv, test_dir),
                     0);
    double seconds = test_now_s() - t0;
    char *tidy = test_read_file(csv, NULL);
    assert_non_null(tidy);
    int rows = 0, ran = 0, not_run = 0, ran_of[2] = {0, 0};
    for (const char *p = strchr(tidy, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        char line[4096], status[32], stop[256], reason[256], practice[64], params[128];
        size_t n = strcspn(p + 1, "\n");
        assert_true(n < sizeof line);
        memcpy(line, p + 1, n);
        line[n] = '\0';
        rows++;
        test_csv_named_field(tidy, line, "status", status, sizeof status);
        test_csv_named_field(tidy, line, "practice", practice, sizeof practice);
        test_csv_named_field(tidy, line, "params", params, sizeof params);
        int k = strcmp(practice, "zero_grad_memset") == 0 ? 0 : 1;
        if (strcmp(status, "ok") == 0) {
            assert_true(numf(tidy, line, "repetitions") >= 6);  // never under the least
            test_csv_named_field(tidy, line, "stop", stop, sizeof stop);
            if (!strstr(stop, "target not met: capped at") || !strstr(stop, " s ("))
                fail_msg("%s %s stopped: %s", practice, params, stop);
            ran++;
            ran_of[k]++;
        } else {
            assert_string_equal(status, "skipped");
            test_csv_named_field(tidy, line, "reason", reason, sizeof reason);
            if (!strstr(reason, "not run: less of its practice's share of --harness_budget"))
                fail_msg("%s %s skipped: %s", practice, params, reason);
            if (strstr(params, "preset:tiny")) fail_msg("%s: its first group was not run", practice);
            not_run++;
        }
    }
    assert_int_equal(rows, 12);  // 2 practices x 3 presets x 2 variants
    assert_true(ran_of[0] >= 2 && ran_of[1] >= 2);  // each practice: its first group at least
    assert_true(not_run >= 2);  // 1000 repetitions of every group cannot fit in 3 s
    printf("%d rows run, %d not run, in %.1f s under a 3 s budget\n", ran, not_run, seconds);
    // the budget, and what it does not bound: the program's start-up and each practice's
    // first block (6 rounds, each a library call that estimates its iterations again);
    // without the budget the rows would run 1000 repetitions each (generous: a shared machine)
    assert_true(seconds < 3 + 14);
    free(tidy);
}

// NVML's view of the GPU: without one (or without NVML) nothing is claimed; with one the
// clock is a real frequency.
static void test_gpu_state_sample(void **state)
{
    (void)state;
    GpuState s;
    memset(&s, 0xff, sizeof s);
    bool ok = context_gpu_state(&s);
    if (!ok) {
        assert_false(s.has_clock || s.has_temperature || s.has_throttle);
        skip(); // no NVML here (no GPU driver): nothing sampled, as expected
        return;
    }
    if (s.has_clock) assert_true(s.sm_clock_mhz > 0 && s.sm_clock_mhz < 10000);
    if (s.has_temperature) assert_true(s.temperature_c < 150);
}

// On a GPU every run records the SM clock, temperature and throttle reasons before and
// after it, per repetition; a copy benchmark says it is warm, a zero_grad micro cold.
static void test_gpu_runs_record_state_and_cache(void **state)
{
    (void)state;
    REQUIRE_GPU();
    char csv[600];
    snprintf(csv, sizeof csv, "%s/g/pm.csv", test_dir);
    assert_int_equal(test_run("mkdir -p '%s/g' && '%s/bench_pin_memory' --benchmark_filter='^pin_memory/pinned/h2d:1/bytes:65536/' "
                              "--benchmark_repetitions=2 --benchmark_min_time=0.01 --harness_csv='%s' >/dev/null 2>&1",
                              test_dir, test_build_dir(), csv), 0);
    char *reps = test_read_in(test_dir, "g/pm.reps.csv"), line[2048];
    assert_non_null(reps);
    assert_true(line_starting(reps, "pin_memory,pinned,tuned,cuda_events,h2d:1;bytes:65536,2,", line, sizeof line));
    double clock = numf(reps, line, "gpu_sm_clock_after_mhz");
    assert_true(clock > 0 && clock < 10000);
    assert_true(test_csv_column(reps, "gpu_temp_before_c") >= 0);
    free(reps);
    char *tidy = test_read_file(csv, NULL);
    assert_non_null(tidy);
    assert_true(line_starting(tidy, "pin_memory,pinned,", line, sizeof line));
    expect_field(tidy, line, "cache", "warm");
    free(tidy);
    tidy = test_bench_csv("bench_zero_grad", "--backend=cuda --benchmark_min_time=0.01 "
                                             "--benchmark_filter='zero_grad_memset/flat_buffer/preset:tiny/'");
    assert_non_null(tidy);
    assert_true(line_starting(tidy, "zero_grad_memset,flat_buffer,", line, sizeof line));
    expect_field(tidy, line, "cache", "cold");
    free(tidy);
}

// ---- verdicts that need data, misses, accuracy parity, independent runs, cut runs ----

static const char kTidyHeader[] =
    "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,time_unit,"
    "reached_target,final_accuracy,accuracy_parity\n";
static const char kRepsHeader[] =
    "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations,"
    "reached_target,final_accuracy,accuracy_parity\n";

// Writes NAME.csv (a tidy row per "variant,role,params,time,reached,accuracy,parity" line
// of `benches`, practice `practice`) and NAME.reps.csv (one row per "variant,role,params,
// time,reached,accuracy,parity" line of `reps`) into folder test_dir/DIR.
static void write_results(const char *dir, const char *name, const char *practice, const char *benches,
                          const char *reps)
{
    char folder[700], *tidy = malloc(65536), *rp = malloc(65536), fname[128];
    assert_non_null(tidy);
    assert_non_null(rp);
    snprintf(folder, sizeof folder, "%s/%s", test_dir, dir);
    assert_int_equal(test_run("mkdir -p '%s'", folder), 0);
    strcpy(tidy, kTidyHeader);
    strcpy(rp, kRepsHeader);
    const char *lists[2] = {benches, reps};
    char *outs[2] = {tidy, rp};
    for (int k = 0; k < 2; k++) {
        int rep = 0;
        char prev[200] = "";
        for (const char *l = lists[k]; l && *l;) {
            const char *end = strchr(l, '\n');
            size_t n = end ? (size_t)(end - l) : strlen(l);
            char v[128], role[32], params[64], t[32], reached[8], acc[16], par[8];
            char line[256];
            memcpy(line, l, n);
            line[n] = '\0';
            if (sscanf(line, "%127[^,],%31[^,],%63[^,],%31[^,],%7[^,],%15[^,],%7s", v, role, params, t, reached, acc, par) != 7)
                fail_msg("bad fixture line %s", line);
            char key[200];
            snprintf(key, sizeof key, "%s|%s", v, params);
            rep = strcmp(key, prev) == 0 ? rep + 1 : 1;
            snprintf(prev, sizeof prev, "%s", key);
            const char *f = strcmp(reached, "-") == 0 ? "" : reached;
            const char *a = strcmp(acc, "-") == 0 ? "" : acc;
            const char *q = strcmp(par, "-") == 0 ? "" : par;
            char row[512];
            if (k == 0)
                snprintf(row, sizeof row, "%s,%s,%s,manual,%s,ok,,5,1,%s,%s,s,%s,%s,%s\n", practice, v, role, params, t, t, f, a, q);
            else
                snprintf(row, sizeof row, "%s,%s,%s,manual,%s,%d,%s,%s,s,1,%s,%s,%s\n", practice, v, role, params, rep, t, t, f, a, q);
            strcat(outs[k], row);
            l = end ? end + 1 : NULL;
        }
    }
    snprintf(fname, sizeof fname, "%s.csv", name);
    assert_true(test_write_file(folder, fname, tidy));
    snprintf(fname, sizeof fname, "%s.reps.csv", name);
    assert_true(test_write_file(folder, fname, rp));
    free(tidy);
    free(rp);
}

static char *summarize_dir(const char *dir, const char *file)
{
    char folder[700];
    snprintf(folder, sizeof folder, "%s/%s", test_dir, dir);
    if (test_run("bash '%s/scripts/summarize.sh' '%s' >'%s/out.txt' 2>&1", test_suite_root(), folder, test_dir) != 0) {
        char *t = test_read_in(test_dir, "out.txt");
        fail_msg("summarize %s failed: %s", dir, t ? t : "");
    }
    return test_read_in(folder, file);
}

// With n repetitions a side the smallest two-sided Mann-Whitney p is 2 / C(2n, n): 1 for
// n = 1, 1/3 for 2, 0.1 for 3, 2/70 = 0.029 for 4. Below 4 no difference can be shown at
// p < 0.05, so the verdict is n/a, not "inconclusive" (or "faster"). The rule,
// as the docs state it, is 4 on each side: 3 against 5 (smallest p 2 / C(8, 3) = 0.036) is
// n/a too.
static void test_verdicts_need_enough_repetitions(void **state)
{
    (void)state;
    write_results("few", "few", "few",
                  "base,baseline,n:1,10,-,-,-\nfast,tuned,n:1,8,-,-,-\n"
                  "base,baseline,n:3,10,-,-,-\nfast,tuned,n:3,8,-,-,-\n"
                  "base,baseline,n:4,10,-,-,-\nfast,tuned,n:4,8,-,-,-\n"
                  "base,baseline,n:35,10,-,-,-\nfast,tuned,n:35,8,-,-,-\n",
                  "base,baseline,n:1,10,-,-,-\nfast,tuned,n:1,8,-,-,-\n"
                  "base,baseline,n:3,10,-,-,-\nbase,baseline,n:3,10.1,-,-,-\nbase,baseline,n:3,10.2,-,-,-\n"
                  "fast,tuned,n:3,8,-,-,-\nfast,tuned,n:3,8.1,-,-,-\nfast,tuned,n:3,8.2,-,-,-\n"
                  "base,baseline,n:4,10,-,-,-\nbase,baseline,n:4,10.1,-,-,-\nbase,baseline,n:4,10.2,-,-,-\nbase,baseline,n:4,10.3,-,-,-\n"
                  "fast,tuned,n:4,8,-,-,-\nfast,tuned,n:4,8.1,-,-,-\nfast,tuned,n:4,8.2,-,-,-\nfast,tuned,n:4,8.3,-,-,-\n"
                  "base,baseline,n:35,10,-,-,-\nbase,baseline,n:35,10.1,-,-,-\nbase,baseline,n:35,10.2,-,-,-\n"
                  "fast,tuned,n:35,8,-,-,-\nfast,tuned,n:35,8.1,-,-,-\nfast,tuned,n:35,8.2,-,-,-\n"
                  "fast,tuned,n:35,8.3,-,-,-\nfast,tuned,n:35,8.4,-,-,-\n");
    char *s = summarize_dir("few", "summary.csv"), line[1024];
    assert_non_null(s);
    assert_true(line_starting(s, "few,n:1,base,fast,", line, sizeof line));
    expect_field(s, line, "verdict", "n/a (1 repetition)");
    assert_true(line_starting(s, "few,n:3,base,fast,", line, sizeof line));
    ASSERT_NEAR(numf(s, line, "p_value"), 0.1, 1e-9); // every baseline above every tuned
    expect_field(s, line, "verdict", "n/a (too few repetitions)");
    assert_true(line_starting(s, "few,n:4,base,fast,", line, sizeof line));
    ASSERT_NEAR(numf(s, line, "p_value"), 2.0 / 70, 1e-5);
    expect_field(s, line, "verdict", "faster");
    assert_true(line_starting(s, "few,n:35,base,fast,", line, sizeof line));
    ASSERT_NEAR(numf(s, line, "p_value"), 2.0 / 56, 1e-5);  // below 0.05, but 3 on one side
    expect_field(s, line, "verdict", "n/a (too few repetitions)");
    free(s);
    // the geometric mean over points with too few repetitions is n/a too
    char *v = test_read_in(test_dir, "few/summary_by_variant.csv");
    assert_non_null(v);
    assert_true(line_starting(v, "few,fast,", line, sizeof line));
    expect_field(v, line, "verdict", "n/a (1 repetition)");
    free(v);
    // make compare: the same rule for each machine's speedup and for "differs from A"
    assert_int_equal(test_run("cd '%s' && rm -rf few2 && cp -r few few2 && "
                              "bash '%s/scripts/compare.sh' -o cmpfew/out few few2 >/dev/null 2>&1",
                              test_dir, test_suite_root()), 0);
    char *sp = test_read_in(test_dir, "cmpfew/out/speedups.csv");
    assert_non_null(sp);
    assert_true(line_starting(sp, "few,fast,B,", line, sizeof line));
    expect_field(sp, line, "verdict", "n/a (1 repetition)");
    expect_field(sp, line, "differs", "n/a");
    free(sp);
}

// Repetitions paired in the order they ran (the reps file's `sequence`, as the harness
// writes it): the machine drifts 2.4x over the run, the tuned variant is ~1.25x faster than
// the baseline repetition next to it (no two ratios tie). Paired: the median of the 8
// ratios, 1.246891 (numpy), the signed-rank test's exact p = 2 / 2^8 = 0.0078125
// (scipy.stats.wilcoxon on the log ratios), faster, to within the harness's +-5% target. The same times unpaired (an older
// folder without `sequence`): the Mann-Whitney p is 0.1949 (scipy), inconclusive: the
// drift swamps the effect. With 5 pairs the smallest p is 2 / 2^5 = 0.0625: n/a.
static void test_paired_repetitions_in_order(void **state)
{
    (void)state;
    static const double base[8] = {10, 12, 14, 16, 18, 20, 22, 24};
    static const double tuned[8] = {8.08, 9.4848, 11.424, 12.5696, 14.4, 16.176, 17.4416, 19.296};
    const char *tidy_head = "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,"
                            "time_unit,precision_target,precision_reached,stop\n";
    const char *reps_head = "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations,gpu_throttled,"
                            "sequence\n";
    for (int paired = 0; paired < 2; paired++) {
        char tidy[2048], reps[8192], dir[32];
        snprintf(dir, sizeof dir, "paired%d", paired);
        snprintf(tidy, sizeof tidy,
                 "%spr,base,baseline,wall,n:8,ok,,8,1,17,17,ms,0.05,0.01,target met\n"
                 "pr,fast,tuned,wall,n:8,ok,,8,1,13.6,13.6,ms,0.05,0.01,target met\n"
                 "pr,base,baseline,wall,n:5,ok,,5,1,14,14,ms,0.05,,target not met: capped at 5 repetitions\n"
                 "pr,fast,tuned,wall,n:5,ok,,5,1,11.4,11.4,ms,0.05,,target not met: capped at 5 repetitions\n",
                 tidy_head);
        size_t at = (size_t)snprintf(reps, sizeof reps, "%s", reps_head);
        for (int n = 8, seq = 1; n >= 5; n -= 3)
            for (int k = 0; k < n; k++) {
                // alternate which side ran first, as random interleaving would
                for (int side = 0; side < 2; side++) {
                    bool is_base = (side == 0) == (k % 2 == 0);
                    at += (size_t)snprintf(reps + at, sizeof reps - at, "pr,%s,%s,wall,n:%d,%d,%g,%g,ms,1,0,",
                                           is_base ? "base" : "fast", is_base ? "baseline" : "tuned", n, k + 1,
                                           is_base ? base[k] : tuned[k], is_base ? base[k] : tuned[k]);
                    at += (size_t)(paired ? snprintf(reps + at, sizeof reps - at, "%d\n", seq++)
                                          : snprintf(reps + at, sizeof reps - at, "\n"));
                }
            }
        // a pair the GPU was throttled in (discarded, and redone above): left out, counted
        at += (size_t)snprintf(reps + at, sizeof reps - at, "pr,base,baseline,wall,n:8,9,1000,1000,ms,1,1,%s\n"
                               "pr,fast,tuned,wall,n:8,9,1,1,ms,1,1,%s\n", paired ? "100" : "", paired ? "101" : "");
        if (!paired) {  // an older folder: no sequence column at all
            char *nl = strstr(reps, ",sequence\n");
            memmove(nl, nl + strlen(",sequence"), strlen(nl + strlen(",sequence")) + 1);
            for (char *c = reps; (c = strstr(c, ",\n")); ) memmove(c, c + 1, strlen(c + 1) + 1);
        }
        char folder[700];
        snprintf(folder, sizeof folder, "%s/%s", test_dir, dir);
        assert_int_equal(test_run("mkdir -p '%s'", folder), 0);
        assert_true(test_write_file(folder, "pr.csv", tidy));
        assert_true(test_write_file(folder, "pr.reps.csv", reps));
        char *s = summarize_dir(dir, "summary.csv"), line[1024];
        assert_non_null(s);
        assert_true(line_starting(s, "pr,n:8,base,fast,", line, sizeof line));
        if (paired) {
            ASSERT_NEAR(numf(s, line, "speedup"), 1.246891, 1e-4);
            ASSERT_NEAR(numf(s, line, "p_value"), 0.0078125, 1e-6);  // %.4g in the CSV
            expect_field(s, line, "verdict", "faster");
            expect_field(s, line, "pairs", "8");
            assert_true(numf(s, line, "precision") < 0.05);
            expect_field(s, line, "precision_target", "0.05");
            expect_field(s, line, "target_met", "yes");
            expect_field(s, line, "stop", "target met");
            expect_field(s, line, "discarded", "2");
            assert_true(line_starting(s, "pr,n:5,base,fast,", line, sizeof line));
            ASSERT_NEAR(numf(s, line, "p_value"), 0.0625, 1e-6);
            expect_field(s, line, "verdict", "n/a (too few repetitions)");
            expect_field(s, line, "stop", "target not met: capped at 5 repetitions");
        } else {
            ASSERT_NEAR(numf(s, line, "p_value"), 0.1949, 1e-4);
            expect_field(s, line, "verdict", "inconclusive");
            expect_field(s, line, "pairs", "");
        }
        expect_field(s, line, "baseline_repetitions", paired ? "5" : "8");
        free(s);
    }
}

// A run that misses its target is a result: reach counts beside the time, misses
// censored (slower than any run that reached it), a variant that never reaches it is
// "did not reach" (no speedup), not a dropped row.
static void test_missed_targets_are_results(void **state)
{
    (void)state;
    write_results("conv", "conv", "conv",
                  "small,baseline,p:1,1.2,1,-,-\nbig,tuned,p:1,0.7,1,-,-\nnever,tuned,p:1,3,0,-,-\n",
                  "small,baseline,p:1,1.0,1,-,-\nsmall,baseline,p:1,1.1,1,-,-\nsmall,baseline,p:1,1.2,1,-,-\n"
                  "small,baseline,p:1,1.3,1,-,-\nsmall,baseline,p:1,1.4,1,-,-\n"
                  "big,tuned,p:1,0.5,1,-,-\nbig,tuned,p:1,0.6,1,-,-\nbig,tuned,p:1,0.7,1,-,-\n"
                  "big,tuned,p:1,3.0,0,-,-\nbig,tuned,p:1,3.0,0,-,-\n"
                  "never,tuned,p:1,3.0,0,-,-\nnever,tuned,p:1,3.0,0,-,-\nnever,tuned,p:1,3.0,0,-,-\n"
                  "never,tuned,p:1,3.1,0,-,-\nnever,tuned,p:1,3.2,0,-,-\n");
    char *s = summarize_dir("conv", "summary.csv"), line[1024];
    assert_non_null(s);
    assert_true(line_starting(s, "conv,p:1,small,big,", line, sizeof line));
    expect_field(s, line, "repetitions", "5");
    expect_field(s, line, "tuned_reached", "3 of 5");
    expect_field(s, line, "baseline_reached", "5 of 5");
    ASSERT_NEAR(numf(s, line, "speedup"), 1.2 / 0.7, 1e-3); // medians: the misses rank last
    expect_field(s, line, "ci_low", "");                     // no interval with misses
    assert_true(line_starting(s, "conv,p:1,small,never,", line, sizeof line));
    expect_field(s, line, "tuned_reached", "0 of 5");
    expect_field(s, line, "speedup", "");
    expect_field(s, line, "verdict", "did not reach");
    free(s);
    char *v = test_read_in(test_dir, "conv/summary_by_variant.csv");
    assert_non_null(v);
    assert_true(line_starting(v, "conv,never,", line, sizeof line));
    expect_field(v, line, "verdict", "did not reach");
    expect_field(v, line, "reached", "0 of 5");
    expect_field(v, line, "geomean_speedup", "");
    free(v);
    // make compare carries it as summarize does: a row on every machine that says "did not
    // reach", no speedup and no "vs A", beside the variant that has one
    assert_int_equal(test_run("cd '%s' && rm -rf conv2 && cp -r conv conv2 && "
                              "bash '%s/scripts/compare.sh' -o cmpconv/out conv conv2 >/dev/null 2>&1",
                              test_dir, test_suite_root()), 0);
    char *sp = test_read_in(test_dir, "cmpconv/out/speedups.csv");
    assert_non_null(sp);
    const char *machines[] = {"conv,never,A,", "conv,never,B,"};
    for (int i = 0; i < 2; i++) {
        if (!line_starting(sp, machines[i], line, sizeof line)) fail_msg("compare dropped %s:\n%s", machines[i], sp);
        expect_field(sp, line, "verdict", "did not reach");
        expect_field(sp, line, "speedup", "");
        expect_field(sp, line, "vs_ref", "");
    }
    assert_true(line_starting(sp, "conv,big,B,", line, sizeof line));
    ASSERT_NEAR(numf(sp, line, "speedup"), 1.2 / 0.7, 1e-3);
    free(sp);
    char *cmp = test_read_in(test_dir, "cmpconv/out/compare.md");
    assert_non_null(cmp);
    assert_non_null(strstr(cmp, "| never | A | 1 | did not reach | n/a | did not reach |"));
    free(cmp);
}

// Accuracy parity at equal epochs (rows with accuracy_parity = 1): each variant's final
// held-out accuracy with its interval, and the tuned one's difference from the baseline.
// Baseline 0.90..0.94 (mean 0.92), large 0.80..0.84 (mean 0.82): -0.10, lower; the same
// accuracies give a difference whose interval (-0.018 to 0.018) lies within the margin
// times the baseline's accuracy (0.05 x 0.92 = 0.046): equivalent.
static void test_accuracy_parity_at_equal_epochs(void **state)
{
    (void)state;
    write_results("par", "par", "par",
                  "small,baseline,p:1,1,0,0.92,1\nlarge,tuned,p:1,1,0,0.82,1\nsame,tuned,p:1,1,0,0.92,1\n",
                  "small,baseline,p:1,1,0,0.90,1\nsmall,baseline,p:1,1,0,0.91,1\nsmall,baseline,p:1,1,0,0.92,1\n"
                  "small,baseline,p:1,1,0,0.93,1\nsmall,baseline,p:1,1,0,0.94,1\n"
                  "large,tuned,p:1,1,0,0.80,1\nlarge,tuned,p:1,1,0,0.81,1\nlarge,tuned,p:1,1,0,0.82,1\n"
                  "large,tuned,p:1,1,0,0.83,1\nlarge,tuned,p:1,1,0,0.84,1\n"
                  "same,tuned,p:1,1,0,0.94,1\nsame,tuned,p:1,1,0,0.93,1\nsame,tuned,p:1,1,0,0.92,1\n"
                  "same,tuned,p:1,1,0,0.91,1\nsame,tuned,p:1,1,0,0.90,1\n");
    char *a = summarize_dir("par", "summary_accuracy.csv"), line[1024];
    assert_non_null(a);
    assert_true(line_starting(a, "par,p:1,small,baseline,", line, sizeof line));
    ASSERT_NEAR(numf(a, line, "accuracy"), 0.92, 1e-9);
    assert_true(numf(a, line, "ci_low") <= 0.92 && numf(a, line, "ci_high") >= 0.92);
    expect_field(a, line, "repetitions", "5");
    assert_true(line_starting(a, "par,p:1,large,tuned,", line, sizeof line));
    ASSERT_NEAR(numf(a, line, "difference"), -0.10, 1e-9);
    assert_true(numf(a, line, "diff_ci_high") < 0);
    expect_field(a, line, "verdict", "lower accuracy");
    assert_true(line_starting(a, "par,p:1,same,tuned,", line, sizeof line));
    ASSERT_NEAR(numf(a, line, "difference"), 0.0, 1e-9);
    expect_field(a, line, "verdict", "equivalent");
    free(a);
    // a fixed budget's training time is no time to a target: no speedup row for it
    char *s = test_read_in(test_dir, "par/summary.csv");
    assert_non_null(s);
    assert_null(strstr(s, "\npar,"));
    free(s);
}

// Two runs on one host: their bootstrap resamples are independent (the seed is salted
// with the run), each run's tuned rows pair with its own baseline, and a second baseline
// of one group within one run is an error.
static void test_runs_stay_independent(void **state)
{
    (void)state;
    // the same accuracies in two runs (mean of 5: many distinct resampled values)
    const char *reps = "small,baseline,p:1,1,0,0.90,1\nsmall,baseline,p:1,1,0,0.91,1\nsmall,baseline,p:1,1,0,0.925,1\n"
                       "small,baseline,p:1,1,0,0.93,1\nsmall,baseline,p:1,1,0,0.97,1\n";
    write_results("runA", "par", "par", "small,baseline,p:1,1,0,0.92,1\n", reps);
    write_results("runB", "par", "par", "small,baseline,p:1,1,0,0.92,1\n", reps);
    char *v1 = summarize_dir("runA", "summary_accuracy.csv"), *v2 = summarize_dir("runB", "summary_accuracy.csv");
    char l1[1024], l2[1024];
    assert_true(line_starting(v1, "par,p:1,small,", l1, sizeof l1));
    assert_true(line_starting(v2, "par,p:1,small,", l2, sizeof l2));
    double lo1 = numf(v1, l1, "ci_low"), lo2 = numf(v2, l2, "ci_low"), hi1 = numf(v1, l1, "ci_high"),
           hi2 = numf(v2, l2, "ci_high");
    if (lo1 == lo2 && hi1 == hi2) fail_msg("runs A and B resampled the same indices: %g-%g in both", lo1, hi1);
    char *again = summarize_dir("runA", "summary_accuracy.csv");
    assert_string_equal(again, v1); // the same run gives the same interval
    free(v1);
    free(v2);
    free(again);
    assert_int_equal(test_run("cd '%s' && rm -rf r1 r2 && cp -r stats_A r1 && cp -r stats_A r2", test_dir), 0);
    // r2's baseline at n:1 twice as slow: summarized together, each run keeps its own pairs
    assert_int_equal(test_run("cd '%s' && awk -F, -v OFS=, '$2 == \"base\" && $5 == \"n:1\" { $7 *= 2; $8 *= 2 } 1' "
                              "r2/fx.reps.csv >r2/x && mv r2/x r2/fx.reps.csv && "
                              "bash '%s/scripts/summarize.sh' -o both.csv r1/fx.csv r2/fx.csv >/dev/null",
                              test_dir, test_suite_root()), 0);
    char *both = test_read_in(test_dir, "both.csv");
    assert_non_null(both);
    int rows = 0, r1 = 0;
    for (const char *p = strstr(both, "\nfx,n:1,base,fast,"); p; p = strstr(p + 1, "\nfx,n:1,base,fast,")) {
        char line[1024], run[64];
        const char *end = strchr(p + 1, '\n');
        size_t n = end ? (size_t)(end - p - 1) : strlen(p + 1);
        memcpy(line, p + 1, n);
        line[n] = '\0';
        test_csv_named_field(both, line, "run", run, sizeof run);
        if (strcmp(run, "r1") == 0) {
            r1++;
            ASSERT_NEAR(numf(both, line, "speedup"), 1.24691, 1e-4); // r1's own baseline
        }
        rows++;
    }
    assert_int_equal(rows, 2);
    assert_int_equal(r1, 1);
    free(both);
    // a duplicate baseline within one run: an error that names it
    assert_int_equal(test_run("cd '%s' && sed -n 2p r1/fx.csv >>r1/fx.csv && "
                              "bash '%s/scripts/summarize.sh' r1 >/dev/null 2>err.txt", test_dir, test_suite_root()), 2);
    char *err = test_read_in(test_dir, "err.txt");
    assert_non_null(err);
    if (!strstr(err, "two baselines")) fail_msg("no message naming the duplicate baseline: %s", err);
    free(err);
}

// A run cut at its deadline: an empty CSV (0 bytes, or a header only) is a warning that
// names it, rows with status partial (fewer repetitions than planned) are measured rows,
// and the summary and the comparison still come out (exit status 0).
static void test_cut_run_is_summarized(void **state)
{
    (void)state;
    assert_int_equal(test_run("cd '%s' && rm -rf cut && cp -r stats_A cut && : >cut/empty.csv && "
                              "head -n 1 cut/fx.csv >cut/header_only.csv && "
                              "sed -i '2,3s/,ok,,5,/,partial,cut at the deadline,5,/' cut/fx.csv && "
                              "echo '3 10' >cut/fx.partial", test_dir), 0);
    int rc = test_run("bash '%s/scripts/summarize.sh' '%s/cut' >'%s/out.txt' 2>&1", test_suite_root(), test_dir, test_dir);
    char *out = test_read_in(test_dir, "out.txt");
    assert_non_null(out);
    if (rc != 0) fail_msg("summarize of a cut run failed (%d): %s", rc, out);
    if (!strstr(out, "empty.csv")) fail_msg("no warning naming empty.csv: %s", out);
    if (!strstr(out, "fx: cut short (3 of 10 rows)")) fail_msg("no note of the cut program: %s", out);
    free(out);
    char *s = test_read_in(test_dir, "cut/summary.csv"), line[1024];
    assert_non_null(s);
    assert_true(line_starting(s, "fx,n:1,base,fast,", line, sizeof line)); // the partial rows count
    free(s);
    // compare: a folder whose only CSV is empty is a warning, not a failure
    assert_int_equal(test_run("cd '%s' && rm -rf cut2 && mkdir cut2 && cp stats_B/context.txt cut2/ && : >cut2/fx.csv && "
                              "bash '%s/scripts/compare.sh' -o cmp2/out stats_A cut2 >out.txt 2>&1",
                              test_dir, test_suite_root()), 0);
    out = test_read_in(test_dir, "out.txt");
    assert_non_null(out);
    if (!strstr(out, "fx.csv")) fail_msg("compare names no empty CSV: %s", out);
    free(out);
    // a run whose every program was cut before its first row (no CSV at all): summarize,
    // report and charts warn and succeed, so the GPU check still packs what it has
    assert_int_equal(test_run("cd '%s' && rm -rf cut3 && mkdir cut3 && cp stats_B/context.txt cut3/ && "
                              "bash '%s/scripts/summarize.sh' cut3 >out.txt 2>&1 && "
                              "bash '%s/scripts/report.sh' cut3 >>out.txt 2>&1 && "
                              "bash '%s/scripts/charts.sh' cut3 >>out.txt 2>&1",
                              test_dir, test_suite_root(), test_suite_root(), test_suite_root()), 0);
    out = test_read_in(test_dir, "out.txt");
    assert_non_null(out);
    if (!strstr(out, "no tidy CSV files")) fail_msg("no warning for a run without CSVs: %s", out);
    free(out);
    s = test_read_in(test_dir, "cut3/summary.csv");
    assert_non_null(s);
    free(s);
    // ... also without gnuplot, as on the GPU machine, where there is nothing to draw anyway;
    // a folder with rows to draw still fails there, naming gnuplot
    char bin[600];
    snprintf(bin, sizeof bin, "%s/no-gnuplot", test_dir);
    test_path_without(bin, "gnuplot");
    rc = test_run("cd '%s' && PATH='%s' bash '%s/scripts/charts.sh' cut3 >out.txt 2>&1", test_dir, bin,
                  test_suite_root());
    out = test_read_in(test_dir, "out.txt");
    assert_non_null(out);
    if (rc != 0 || !strstr(out, "charts: skipped: gnuplot is not installed"))
        fail_msg("charts.sh without gnuplot on a run without CSVs: exit %d: %s", rc, out);
    free(out);
    rc = test_run("cd '%s' && PATH='%s' bash '%s/scripts/charts.sh' stats_A >out.txt 2>&1", test_dir, bin,
                  test_suite_root());
    out = test_read_in(test_dir, "out.txt");
    assert_non_null(out);
    if (rc != 1 || !strstr(out, "charts: gnuplot is not installed"))
        fail_msg("charts.sh without gnuplot on a run with rows: exit %d: %s", rc, out);
    free(out);
}

// Goyal et al.'s claim is checked as accuracy parity at equal epochs: every variant of
// batch_size_parity sees the same number of samples (the large batch LARGE times fewer
// steps), reports its final held-out accuracy, and the summary compares accuracies.
static void test_batch_size_parity_trains_equal_epochs(void **state)
{
    (void)state;
    char csv[600];
    snprintf(csv, sizeof csv, "%s/bs/batch_size.csv", test_dir);
    assert_int_equal(test_run("mkdir -p '%s/bs' && '%s/bench_batch_size' --backend=cpu "
                              "--benchmark_filter='batch_size_parity/(small_batch|large_linear_lr_warmup)/' "
                              "--harness_csv='%s' >/dev/null 2>&1", test_dir, test_build_dir(), csv), 0);
    char *tidy = test_read_file(csv, NULL), small[1024], large[1024];
    assert_non_null(tidy);
    assert_true(line_starting(tidy, "batch_size_parity,small_batch,baseline,", small, sizeof small));
    assert_true(line_starting(tidy, "batch_size_parity,large_linear_lr_warmup,tuned,", large, sizeof large));
    double images = numf(tidy, small, "images_seen");
    assert_true(images > 0);
    ASSERT_NEAR(numf(tidy, large, "images_seen"), images, 0.5); // equal epochs
    assert_true(numf(tidy, large, "steps") * 8 == numf(tidy, small, "steps"));
    expect_field(tidy, small, "accuracy_parity", "1");
    double acc = numf(tidy, large, "final_accuracy");
    assert_true(acc > 0 && acc <= 1);
    free(tidy);
    char *a = summarize_dir("bs", "summary_accuracy.csv"), line[1024];
    assert_non_null(a);
    assert_true(line_starting(a, "batch_size_parity,preset:tiny;batch:0,large_linear_lr_warmup,tuned,", line, sizeof line));
    expect_field(a, line, "verdict", "n/a (1 repetition)");
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_speedup_interval_p_value_and_verdict),
        cmocka_unit_test(test_noisy_and_contended_flags),
        cmocka_unit_test(test_garbage_csv_is_an_error),
        cmocka_unit_test(test_single_repetition_run_degrades_to_n_a),
        cmocka_unit_test(test_compare_two_machines),
        cmocka_unit_test(test_harness_writes_every_repetition),
        cmocka_unit_test(test_gpu_state_sample),
        cmocka_unit_test(test_gpu_runs_record_state_and_cache),
        cmocka_unit_test(test_verdicts_need_enough_repetitions),
        cmocka_unit_test(test_paired_repetitions_in_order),
        cmocka_unit_test(test_harness_stops_on_precision),
        cmocka_unit_test(test_harness_budget_bounds_added_repetitions),
        cmocka_unit_test(test_missed_targets_are_results),
        cmocka_unit_test(test_accuracy_parity_at_equal_epochs),
        cmocka_unit_test(test_runs_stay_independent),
        cmocka_unit_test(test_cut_run_is_summarized),
        cmocka_unit_test(test_batch_size_parity_trains_equal_epochs),
    };
    return cmocka_run_group_tests(tests, setup, test_teardown_dir);
}
