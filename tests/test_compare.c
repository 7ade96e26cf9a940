// test_compare.c: `make compare` (scripts/compare.sh over scripts/stats_compare.py) on
// results folders with made-up numbers written to a temp folder: each machine's figures are
// those of its own summary, every point any machine measured is listed (a machine that
// skipped one says so in its cell), parameters in natural order, Holm's correction of the
// "differs" test on p-values checked by hand, warnings for runs made by different code or
// plans and none for two alike, the reference machine (REF), labels that tell two CPU-only
// machines apart, `make compare` without the CUDA toolkit, a garbage input an error, and
// `make charts` never choosing a comparison folder.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

#define ASSERT_NEAR(x, want, tol) \
    do { double x_ = (x); if (!(x_ > (want) - (tol) && x_ < (want) + (tol))) \
         fail_msg("%s = %.6g, want %.6g +- %g", #x, x_, (double)(want), (double)(tol)); } while (0)

static const char kTidyHead[] = "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,"
                                "cpu_time,time_unit,time_median,ctx_gpu_name,ctx_host\n";
static const char kRepsHead[] = "practice,variant,role,timing,params,repetition,sequence,time,cpu_time,time_unit,"
                                "iterations\n";

// One benchmark of practice hx: its variant, role, params and 5 repetition times in ms (NULL:
// skipped, with the reason).
typedef struct {
    const char *variant, *role, *params;
    double ms[5];
    const char *skipped;
} Bench;

// Machine A: base 1..5 ms, fast 0.5..2.5 ms at every point: 2x (the pairs' ratios are 2).
// The params are written out of natural order (1024, 128, 16) on purpose.
static const Bench kA[] = {
    {"base", "baseline", "bytes:1024", {1, 2, 3, 4, 5}, NULL},
    {"fast", "tuned", "bytes:1024", {0.5, 1, 1.5, 2, 2.5}, NULL},
    {"base", "baseline", "bytes:128", {1, 2, 3, 4, 5}, NULL},
    {"fast", "tuned", "bytes:128", {0.5, 1, 1.5, 2, 2.5}, NULL},
    {"base", "baseline", "bytes:16", {1, 2, 3, 4, 5}, NULL},
    {"fast", "tuned", "bytes:16", {0.5, 1, 1.5, 2, 2.5}, NULL},
};
// Machine B against A, benchmark by benchmark, the U statistic (B below A) and the exact
// two-sided U-test p-value of 5 against 5 (C(10,5) = 252 orders; P(U <= u) counts 1, 2, 4):
//   base bytes:16   all above A's            U = 0  p = 2 * 1 / 252 = 0.0079365
//   fast bytes:16   2.25 below A's 2.5       U = 1  p = 2 * 2 / 252 = 0.0158730
//   base bytes:128  3.5 below A's 4 and 5    U = 2  p = 2 * 4 / 252 = 0.0317460
//   fast bytes:128  interleaved with A's     U = 10 p = p4 (large)
// Holm over these 4 (the times table's family): 4 x 0.0079365 = 0.031746, 3 x 0.015873 =
// 0.047619, 2 x 0.031746 = 0.063492, then max(0.063492, 1 x p4) = p4. So base bytes:128 has
// a raw p below 0.05 and an adjusted one above it: not "yes". bytes:1024 B could not run.
static const Bench kB[] = {
    {"base", "baseline", "bytes:1024", {0}, "out of memory: needs 80 GiB"},
    {"fast", "tuned", "bytes:1024", {0}, "out of memory: needs 80 GiB"},
    {"base", "baseline", "bytes:128", {3.5, 6, 7, 8, 9}, NULL},
    {"fast", "tuned", "bytes:128", {0.75, 1.25, 1.75, 2.25, 2.75}, NULL},
    {"base", "baseline", "bytes:16", {6, 7, 8, 9, 10}, NULL},
    {"fast", "tuned", "bytes:16", {2.25, 3, 3.5, 4, 4.5}, NULL},
};

static void append(char **buf, size_t *len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char **buf, size_t *len, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof line);
    *buf = realloc(*buf, *len + (size_t)n + 1);
    assert_non_null(*buf);
    memcpy(*buf + *len, line, (size_t)n + 1);
    *len += (size_t)n;
}

// A results folder `name` under test_dir: context.txt (gpu_name, cpu, date), command.txt
// (command, repetitions line, git) and hx.csv + hx.reps.csv from the benchmarks.
static void write_run(const char *name, const Bench *b, size_t n, const char *gpu, const char *cpu,
                      const char *date, const char *command, const char *reps_line, const char *git)
{
    char dir[600], text[1024];
    snprintf(dir, sizeof dir, "%s/%s", test_dir, name);
    assert_int_equal(test_run("mkdir -p '%s'", dir), 0);
    snprintf(text, sizeof text,
             "driver_version=none\ngpu_name=%s\ncuda_runtime=13.0.0\ncudnn_version=9.19.0\nhost=vm\n"
             "host_cpu=%s\nrun_date=%s\n", gpu, cpu, date);
    assert_true(test_write_file(dir, "context.txt", text));
    snprintf(text, sizeof text, "command: %s\nrepetitions: %s\ngit: %s\n", command, reps_line, git);
    assert_true(test_write_file(dir, "command.txt", text));
    char *tidy = NULL, *reps = NULL;
    size_t tl = 0, rl = 0;
    append(&tidy, &tl, "%s", kTidyHead);
    append(&reps, &rl, "%s", kRepsHead);
    for (size_t i = 0; i < n; i++) {
        if (b[i].skipped) {
            append(&tidy, &tl, "hx,%s,%s,manual,%s,skipped,%s,5,,,,ms,,%s,vm\n", b[i].variant, b[i].role,
                   b[i].params, b[i].skipped, gpu);
            continue;
        }
        append(&tidy, &tl, "hx,%s,%s,manual,%s,ok,,5,10,%g,%g,ms,%g,%s,vm\n", b[i].variant, b[i].role, b[i].params,
               b[i].ms[2], b[i].ms[2], b[i].ms[2], gpu);
        for (int r = 0; r < 5; r++) // the baseline and tuned repetitions ran interleaved
            append(&reps, &rl, "hx,%s,%s,manual,%s,%d,%d,%g,%g,ms,10\n", b[i].variant, b[i].role, b[i].params, r + 1,
                   2 * r + (b[i].role[0] == 't'), b[i].ms[r], b[i].ms[r]);
    }
    assert_true(test_write_file(dir, "hx.csv", tidy));
    assert_true(test_write_file(dir, "hx.reps.csv", reps));
    free(tidy);
    free(reps);
}

static void write_ab(void)
{
    write_run("A", kA, sizeof kA / sizeof kA[0], "none", "Intel(R) Xeon(R) Processor", "2026-12-01T18:42:17Z",
              "make bench", "5 (at least; precision 0.05, at most 30)", "aaaaaaa");
    write_run("B", kB, sizeof kB / sizeof kB[0], "none", "AMD EPYC 7B13", "2026-12-02T16:03:34Z",
              "make bench", "5 (at least; precision 0.05, at most 30)", "aaaaaaa");
}

// compare.sh -o OUT [extra] A B..., its output (stdout and stderr) in test_dir/out.txt;
// returns its exit status.
static int compare(const char *out, const char *args)
{
    return test_run("cd '%s' && bash '%s/scripts/compare.sh' -o '%s' %s >out.txt 2>&1", test_dir,
                    test_suite_root(), out, args);
}

static char *output(void)
{
    char *t = test_read_in(test_dir, "out.txt");
    assert_non_null(t);
    return t;
}

static char *read_out(const char *out, const char *name)
{
    char folder[600];
    snprintf(folder, sizeof folder, "%s/%s", test_dir, out);
    char *t = test_read_in(folder, name);
    if (!t) fail_msg("no %s/%s", out, name);
    return t;
}

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

static void field(const char *csv, const char *line, const char *name, char *out, size_t n)
{
    test_csv_named_field(csv, line, name, out, n);
}

static double numf(const char *csv, const char *line, const char *name)
{
    char f[256];
    field(csv, line, name, f, sizeof f);
    if (!*f) fail_msg("field %s is empty in %s", name, line);
    return atof(f);
}

static void run_compare_ab(const char *out)
{
    write_ab();
    int rc = compare(out, "A B");
    if (rc != 0) {
        char *t = output();
        fail_msg("compare.sh failed (%d): %s", rc, t);
    }
}

// Each machine's speedups are its own summary's, point by point and by variant; B's
// skipped point is in B's cell, and A keeps all three of its points.
static void test_figures_are_each_machines_summary(void **state)
{
    (void)state;
    run_compare_ab("cmp");
    const char *machines[] = {"A", "B"};
    char *points = read_out("cmp", "speedup_points.csv"), *variants = read_out("cmp", "speedups.csv");
    char line[2048], want[2048], prefix[256], a[64], b[64];
    for (int m = 0; m < 2; m++) {
        assert_int_equal(test_run("bash '%s/scripts/summarize.sh' '%s/%s' >/dev/null 2>&1", test_suite_root(),
                                  test_dir, machines[m]), 0);
        char folder[600];
        snprintf(folder, sizeof folder, "%s/%s", test_dir, machines[m]);
        char *summary = test_read_in(folder, "summary.csv");
        assert_non_null(summary);
        int rows = 0;
        for (const char *p = strchr(summary, '\n') + 1; *p; p = strchr(p, '\n') + 1) {
            const char *end = strchr(p, '\n');
            snprintf(want, sizeof want, "%.*s", (int)(end - p), p);
            char practice[64], params[64], tuned[64];
            field(summary, want, "practice", practice, sizeof practice);
            field(summary, want, "params", params, sizeof params);
            field(summary, want, "tuned", tuned, sizeof tuned);
            snprintf(prefix, sizeof prefix, "%s,%s,%s,%s,", practice, tuned, params, machines[m]);
            if (!line_starting(points, prefix, line, sizeof line)) fail_msg("no %s in speedup_points.csv", prefix);
            const char *cols[] = {"speedup", "ci_low", "ci_high", "verdict"};
            for (int c = 0; c < 4; c++) {
                field(summary, want, cols[c], a, sizeof a);
                field(points, line, cols[c], b, sizeof b);
                if (strcmp(a, b) != 0) fail_msg("%s %s: summary %s, compare %s", prefix, cols[c], a, b);
            }
            rows++;
        }
        assert_int_equal(rows, m == 0 ? 3 : 2);
        free(summary);
        char *by = test_read_in(folder, "summary_by_variant.csv");
        assert_non_null(by);
        assert_true(line_starting(by, "hx,fast,", want, sizeof want));
        snprintf(prefix, sizeof prefix, "hx,fast,%s,", machines[m]);
        assert_true(line_starting(variants, prefix, line, sizeof line));
        field(by, want, "geomean_speedup", a, sizeof a);
        field(variants, line, "speedup", b, sizeof b);
        if (strcmp(a, b) != 0) fail_msg("%s: summary_by_variant %s, compare %s", prefix, a, b);
        field(by, want, "points", a, sizeof a);
        field(variants, line, "points", b, sizeof b);
        assert_string_equal(a, b);
        free(by);
    }
    // A's paired speedup is 2 exactly; B's point it could not run says why, in its cell
    assert_true(line_starting(points, "hx,fast,bytes:1024,A,", line, sizeof line));
    ASSERT_NEAR(numf(points, line, "speedup"), 2.0, 1e-9);
    assert_true(line_starting(points, "hx,fast,bytes:1024,B,", line, sizeof line));
    field(points, line, "status", a, sizeof a);
    assert_string_equal(a, "skipped: out of memory: needs 80 GiB");
    field(points, line, "speedup", a, sizeof a);
    assert_string_equal(a, "");
    free(points);
    free(variants);
    char *md = read_out("cmp", "compare.md");
    if (!strstr(md, "| fast | bytes:1024 | B | skipped: out of memory: needs 80 GiB |"))
        fail_msg("B's skipped point is not in its cell:\n%s", md);
    if (!strstr(md, "| hx/base | bytes:1024 | B | skipped: out of memory: needs 80 GiB |"))
        fail_msg("B's skipped benchmark is not in the times table:\n%s", md);
    free(md);
}

// bytes:16 before bytes:128 before bytes:1024, in every table and in the CSVs.
static void test_natural_order(void **state)
{
    (void)state;
    run_compare_ab("cmp");
    char *md = read_out("cmp", "compare.md");
    const char *p16 = strstr(md, "| fast | bytes:16 | A |"), *p128 = strstr(md, "| fast | bytes:128 | A |"),
               *p1024 = strstr(md, "| fast | bytes:1024 | A |");
    if (!p16 || !p128 || !p1024) fail_msg("a point is missing from the point table:\n%s", md);
    if (!(p16 < p128 && p128 < p1024)) fail_msg("the points are not in natural order:\n%s", md);
    const char *t16 = strstr(md, "| hx/base | bytes:16 | A |"), *t128 = strstr(md, "| hx/base | bytes:128 | A |"),
               *t1024 = strstr(md, "| hx/base | bytes:1024 | A |");
    if (!t16 || !t128 || !t1024 || !(t16 < t128 && t128 < t1024)) fail_msg("times not in natural order:\n%s", md);
    free(md);
    char *times = read_out("cmp", "times.csv");
    const char *c16 = strstr(times, "hx,base,bytes:16,A,"), *c1024 = strstr(times, "hx,base,bytes:1024,A,");
    assert_true(c16 && c1024 && c16 < c1024);
    free(times);
}

// Holm over the times table's 4 comparisons, against the hand computation above.
static void test_holm_correction(void **state)
{
    (void)state;
    run_compare_ab("cmp");
    char *times = read_out("cmp", "times.csv"), line[2048], f[64];
    static const struct {
        const char *prefix;
        double raw, adjusted;
    } want[] = {
        {"hx,base,bytes:16,B,", 2.0 / 252, 4 * 2.0 / 252},
        {"hx,fast,bytes:16,B,", 4.0 / 252, 3 * 4.0 / 252},
        {"hx,base,bytes:128,B,", 8.0 / 252, 2 * 8.0 / 252},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!line_starting(times, want[i].prefix, line, sizeof line)) fail_msg("no %s in times.csv", want[i].prefix);
        ASSERT_NEAR(numf(times, line, "p_value"), want[i].raw, 1e-4);
        ASSERT_NEAR(numf(times, line, "p_holm"), want[i].adjusted, 1e-4);
    }
    // raw p 0.032 < 0.05, Holm-adjusted 0.063: not a difference
    assert_true(line_starting(times, "hx,base,bytes:128,B,", line, sizeof line));
    field(times, line, "differs", f, sizeof f);
    assert_string_not_equal(f, "yes");
    // the smallest: adjusted 0.032, and B's times are all above A's: yes
    assert_true(line_starting(times, "hx,base,bytes:16,B,", line, sizeof line));
    field(times, line, "differs", f, sizeof f);
    assert_string_equal(f, "yes");
    // the largest: its raw p, no smaller than the one before it
    assert_true(line_starting(times, "hx,fast,bytes:128,B,", line, sizeof line));
    double p4 = numf(times, line, "p_value");
    assert_true(p4 > 2 * 8.0 / 252);
    ASSERT_NEAR(numf(times, line, "p_holm"), p4, 1e-4);
    // the reference's own rows and B's skipped ones are not in the family
    assert_true(line_starting(times, "hx,base,bytes:16,A,", line, sizeof line));
    field(times, line, "p_holm", f, sizeof f);
    assert_string_equal(f, "");
    free(times);
    char *md = read_out("cmp", "compare.md");
    if (!strstr(md, "Holm-adjusted over the 4 comparisons of this table"))
        fail_msg("compare.md does not state the correction and its family:\n%s", md);
    free(md);
}

// Different code, a different plan: a warning at the top of compare.md and on stderr;
// two runs made alike: none.
static void test_warnings_on_code_and_plan(void **state)
{
    (void)state;
    write_ab();
    assert_int_equal(compare("same", "A B"), 0);
    char *md = read_out("same", "compare.md"), *out = output();
    if (strstr(md, "Warning") || strstr(out, "differs")) fail_msg("a warning for two runs made alike:\n%s\n%s", md, out);
    free(md);
    free(out);
    write_run("C", kB, sizeof kB / sizeof kB[0], "none", "AMD EPYC 7B13", "2026-12-02T16:03:34Z", "make bench",
              "5 (at least; precision 0.05, at most 30)", "bbbbbbb");
    assert_int_equal(compare("code", "A C"), 0);
    md = read_out("code", "compare.md");
    out = output();
    const char *w = strstr(md, "**Code differs**");
    if (!w || w > strstr(md, "## Machines")) fail_msg("no code warning at the top:\n%s", md);
    if (!strstr(md, "aaaaaaa") || !strstr(md, "different commits")) fail_msg("the warning names no commits:\n%s", md);
    if (!strstr(out, "Code differs")) fail_msg("no code warning on stderr: %s", out);
    free(md);
    free(out);
    write_run("Q", kB, sizeof kB / sizeof kB[0], "none", "AMD EPYC 7B13", "2026-12-02T16:03:34Z", "make bench-quick",
              "2 (at least; precision 0.2, at most 3)", "aaaaaaa");
    assert_int_equal(compare("plan", "A Q"), 0);
    md = read_out("plan", "compare.md");
    out = output();
    w = strstr(md, "**Plan differs** (command)");
    if (!w || w > strstr(md, "## Machines")) fail_msg("no plan warning at the top:\n%s", md);
    if (!strstr(md, "make bench-quick") || !strstr(md, "**Plan differs** (repetitions and precision target)"))
        fail_msg("the plan warning does not say what differs:\n%s", md);
    if (strstr(md, "**Code differs**")) fail_msg("a code warning for the same commit:\n%s", md);
    if (!strstr(out, "Plan differs")) fail_msg("no plan warning on stderr: %s", out);
    free(md);
    free(out);
}

// REF by position and by name; an unknown one is a usage error. Labels: two CPU-only
// machines are told apart by their CPUs and dates, never "none none".
static void test_reference_choice_and_labels(void **state)
{
    (void)state;
    run_compare_ab("first");
    char *md = read_out("first", "compare.md"), line[2048];
    assert_non_null(strstr(md, "The reference is machine **A**"));
    free(md);
    write_ab();
    assert_int_equal(test_run("cd '%s' && REF=2 bash '%s/scripts/compare.sh' -o byindex A B >out.txt 2>&1", test_dir,
                              test_suite_root()), 0);
    assert_int_equal(compare("byname", "-r B A B"), 0);
    const char *outs[] = {"byindex", "byname"};
    for (int i = 0; i < 2; i++) {
        md = read_out(outs[i], "compare.md");
        if (!strstr(md, "The reference is machine **B**")) fail_msg("%s: B is not the reference:\n%s", outs[i], md);
        if (!strstr(md, "| vs B |")) fail_msg("%s: no ratio to B:\n%s", outs[i], md);
        free(md);
        char *sp = read_out(outs[i], "speedups.csv");
        assert_true(line_starting(sp, "hx,fast,B,", line, sizeof line));
        ASSERT_NEAR(numf(sp, line, "reference"), 1, 1e-9);
        assert_true(line_starting(sp, "hx,fast,A,", line, sizeof line));
        ASSERT_NEAR(numf(sp, line, "reference"), 0, 1e-9);
        // A against B over the 2 points both measured: A is 2x at both; B's paired medians
        // are 8 / 3.5 (bytes:16) and 4 / 1 (bytes:128): 2 / sqrt(8 / 3.5 * 4) = 0.661438
        ASSERT_NEAR(numf(sp, line, "common_points"), 2, 1e-9);
        ASSERT_NEAR(numf(sp, line, "vs_ref"), 0.661438, 1e-4);
        free(sp);
    }
    assert_int_not_equal(compare("bad", "-r Z A B"), 0);
    char *out = output();
    if (!strstr(out, "REF=Z")) fail_msg("no word on the unknown REF: %s", out);
    free(out);
    // the labels in the machines table and the charts' key: what differs (CPU, date)
    const char *labels[] = {"no GPU (Intel Xeon), run 2026-12-01 18:42", "no GPU (AMD EPYC 7B13), run 2026-12-02 16:03"};
    md = read_out("first", "compare.md");
    char *key = read_out("first", "charts/compare_hx.dat");
    for (int i = 0; i < 2; i++) {
        if (!strstr(md, labels[i])) fail_msg("no label \"%s\" in compare.md:\n%s", labels[i], md);
        if (!strstr(key, labels[i])) fail_msg("no label \"%s\" in the chart's key:\n%s", labels[i], key);
    }
    assert_null(strstr(md, "none none"));
    assert_null(strstr(key, "none none"));
    free(md);
    free(key);
}

// `make compare` needs no CUDA toolkit: CUDA_HOME pointing nowhere.
static void test_make_compare_without_cuda(void **state)
{
    (void)state;
    write_ab();
    int rc = test_run("cd '%s' && make -s --no-print-directory -C '%s' CUDA_HOME=/nowhere compare "
                      "RESULTS='%s/A %s/B' COMPARE_OUT='%s/mk' REF=B >out.txt 2>&1",
                      test_dir, test_suite_root(), test_dir, test_dir, test_dir);
    char *out = output();
    if (rc != 0) fail_msg("make compare with CUDA_HOME=/nowhere: exit status %d: %s", rc, out);
    free(out);
    char *md = read_out("mk", "compare.md");
    assert_non_null(strstr(md, "The reference is machine **B**"));
    free(md);
    // a goal that compiles still needs nvcc, and says so
    assert_int_not_equal(test_run("make -s -n --no-print-directory -C '%s' CUDA_HOME=/nowhere all >/dev/null 2>&1",
                                  test_suite_root()), 0);
}

// Garbage for a tidy CSV, or a folder that holds no run: an error that names it, no crash.
static void test_garbage_is_an_error(void **state)
{
    (void)state;
    write_ab();
    assert_int_equal(test_run("cd '%s' && mkdir -p G && cp A/context.txt G/ && "
                              "printf 'this is,not a tidy CSV\\n\\001\\002,x\\n' >G/hx.csv", test_dir), 0);
    int rc = compare("garbage", "A G");
    char *out = output();
    if (rc == 0 || !strstr(out, "hx.csv") || strstr(out, "Traceback"))
        fail_msg("garbage CSV: exit status %d: %s", rc, out);
    free(out);
    assert_int_equal(test_run("mkdir -p '%s/empty'", test_dir), 0);
    rc = compare("none", "A empty");
    out = output();
    if (rc == 0 || !strstr(out, "not a results folder") || strstr(out, "Traceback"))
        fail_msg("a folder without a run: exit status %d: %s", rc, out);
    free(out);
}

// results-dir.sh newest (what `make charts` redraws) never picks a comparison or a guide,
// even a newer one with a context.txt; charts.sh refuses one by name.
static void test_charts_never_pick_a_comparison(void **state)
{
    (void)state;
    write_ab();
    assert_int_equal(test_run("cd '%s' && mkdir -p root && cp -r A root/cpu_vm_1 && mkdir root/compare_x root/guide_y "
                              "&& cp B/context.txt root/compare_x/ && cp B/context.txt root/guide_y/ && "
                              "touch root/compare_x/compare.md", test_dir), 0);
    assert_int_equal(test_run("cd '%s' && test \"$(bash '%s/scripts/results-dir.sh' newest root)\" = root/cpu_vm_1",
                              test_dir, test_suite_root()), 0);
    assert_int_not_equal(test_run("bash '%s/scripts/charts.sh' '%s/root/compare_x' >/dev/null 2>&1", test_suite_root(),
                                  test_dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_figures_are_each_machines_summary, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_natural_order, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_holm_correction, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_warnings_on_code_and_plan, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_reference_choice_and_labels, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_make_compare_without_cuda, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_garbage_is_an_error, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_charts_never_pick_a_comparison, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
