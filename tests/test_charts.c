// test_charts.c: the chart renderer (scripts/charts.sh over scripts/charts/render.py) on
// a fixture with made-up numbers: the points and their 95% intervals (the median's bootstrap
// interval from a sibling .reps.csv or repeated rows, a normal interval from time_stddev),
// real PNG and SVG files, the conventions of a chart one can paste (provenance in the title,
// the interval named in the legend, categories and series in natural order, whole ticks on
// a count axis, no scientific notation, no noise mark on a memory size), the
// headline chart with its interval and the claimed range, a results folder whose name
// holds a quote, a `$(...)` and backquotes (nothing runs), garbage CSVs (an error, not
// "nothing measured"), and the committed CPU run drawn into a copy. Charts need gnuplot:
// without it (the GPU machine) the drawing tests skip, visibly.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "tests/support.h"

static const char kTidy[] =
    "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,"
    "time_unit,time_median,time_stddev,time_min,time_max,param_size,rate,noisy,time_cv\n"
    "demo,base,baseline,wall,size:1,ok,,3,10,2.1,2.1,ms,1.9,0.4,1.8,2.6,1,510,0,0.01\n"
    "demo,base,baseline,wall,size:2,ok,,5,10,4.0,4.0,ms,4.0,0.2,3.8,4.2,2,250,0,0.01\n"
    "demo,fast,tuned,wall,size:1,ok,,5,10,1000,1000,us,980,50,960,1050,1,1000,1,0.01\n"
    "demo,fast,tuned,wall,size:2,ok,,5,10,2.0,2.0,ms,2.0,0.1,1.9,2.1,2,500,0,0.05\n"
    "demo,gpu,tuned,cuda_events,size:1,skipped,no CUDA device,1,,,,us,,,,,1,,,\n"
    "demo_rows,v,tuned,wall,size:3,ok,,1,10,3.0,3.0,ms,3.0,0,3.0,3.0,3,1,0,0.5\n"
    "demo_rows,v,tuned,wall,size:3,ok,,1,10,5.0,5.0,ms,5.0,0,5.0,5.0,3,1,0,\n"
    "demo_rows,v,tuned,wall,size:3,ok,,1,10,4.0,4.0,ms,4.0,0,4.0,4.0,3,1,0,\n";
static const char kReps[] =
    "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations,rate\n"
    "demo,base,baseline,wall,size:1,1,1.8,1.8,ms,10,480\n"
    "demo,base,baseline,wall,size:1,2,1.9,1.9,ms,10,490\n"
    "demo,base,baseline,wall,size:1,3,2.6,2.6,ms,10,560\n";
static const char kDescriptions[] =
    "# the fixture's charts\n"
    "[demo_time]            # bars of the time column, in ms\n"
    "practice = demo\n"
    "x = param_size\n"
    "y = time\n"
    "kind = bars\n"
    "labels = yes\n"
    "title = Demo: it's a \"title\" with `backquotes` and $(dollars)\n"
    "xlabel = size\n"
    "ylabel = ms\n"
    "\n"
    "[demo_rate]\n"
    "practice = demo, demo_rows\n"
    "x = param_size\n"
    "y = rate\n"
    "series = practice, variant\n"
    "kind = lines\n"
    "logx = yes\n"
    "logy = yes\n"
    "\n"
    "[demo_rows]\n"
    "practice = demo_rows\n"
    "x = param_size\n"
    "y = time\n"
    "kind = bars\n"
    "\n"
    "[demo_absent]          # nothing of this practice: no chart, no error\n"
    "practice = not_here\n"
    "x = param_size\n"
    "y = time\n";
static const char kSummary[] =
    "practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended\n"
    "demo,fast,Test GPU,h,2,2.0000,1.8000,2.2000,faster,0,\n"
    "demo_rows,v,Test GPU,h,1,0.5000,,,n/a (1 repetition),1,\n";
static const char kClaims[] =
    "practice,tuned,direction,claim,effect_low,effect_high,source,hardware\n"
    "demo,fast,faster,demo is faster,1.5,5.5,a test source,a test GPU\n";
static const char kContext[] = "gpu_name=Test GPU\ndriver_version=999.01\nhost=h\nrun_date=2026-01-02T03:04:05Z\n";

static void write_file(const char *folder, const char *name, const char *text)
{
    if (!test_write_file(folder, name, text)) fail_msg("cannot write %s/%s", folder, name);
}

// A results folder (with descriptions and claims beside it) under `folder`.
static const char kPoints[] = "practice,params,baseline,tuned,speedup\ndemo,size:1,base,fast,2.0\n";

static void write_fixture(const char *folder)
{
    write_file(folder, "summary.csv", kPoints);
    write_file(folder, "demo.csv", kTidy);
    write_file(folder, "demo.reps.csv", kReps);
    write_file(folder, "summary_by_variant.csv", kSummary);
    write_file(folder, "context.txt", kContext);
    char conf[1024];
    snprintf(conf, sizeof conf, "%s/conf", test_dir);
    mkdir(conf, 0755);
    write_file(conf, "demo.charts", kDescriptions);
    write_file(conf, "claims.csv", kClaims);
}

static bool gnuplot_missing(void)
{
    if (test_run("command -v python3 >/dev/null 2>&1") != 0) {
        printf("skipped: python3 is not installed here (the chart renderer needs it)\n");
        return true;
    }
    if (test_run("command -v gnuplot >/dev/null 2>&1") == 0) return false;
    printf("skipped: gnuplot is not installed here (charts are drawn where it is: make charts)\n");
    return true;
}

// Runs charts.sh on RESULTS (passed through the environment, never through a shell line)
// with the fixture's descriptions and claims; its output goes to test_dir/out.txt.
static int charts_on(const char *results)
{
    setenv("TEST_RESULTS", results, 1);
    return test_run("cd '%s' && CHARTS_DESCRIPTIONS='%s/conf' CLAIMS_CSV='%s/conf/claims.csv' "
                    "bash '%s/scripts/charts.sh' \"$TEST_RESULTS\" >'%s/out.txt' 2>&1",
                    test_dir, test_dir, test_dir, test_suite_root(), test_dir);
}

static char *output(void)
{
    char *text = test_read_in(test_dir, "out.txt");
    assert_non_null(text);
    return text;
}

// The chart NAME was drawn as an SVG with content (axes, labels, bars).
static void assert_chart(const char *folder, const char *name)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/charts/%s.svg", folder, name);
    if (!test_file_at_least(path, 2000)) fail_msg("no chart %s", path);
}

// ... and as a PNG (CHART_FORMATS with png).
static void assert_png(const char *folder, const char *name)
{
    char path[2048];
    size_t size = 0;
    snprintf(path, sizeof path, "%s/charts/%s.png", folder, name);
    char *png = test_read_file(path, &size);
    if (!png) fail_msg("no chart %s", path);
    assert_true(size > 5000); // axes, labels and bars, not an empty canvas
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
    free(png);
}

// The points the renderer draws, with their error bars: the exact values of the fixture.
static void test_points_and_error_bars(void **state)
{
    (void)state;
    if (test_run("command -v python3 >/dev/null 2>&1") != 0) {
        printf("skipped: python3 is not installed here (the chart renderer needs it)\n");
        skip();
    }
    write_fixture(test_dir);
    assert_int_equal(test_run("python3 '%s/scripts/charts/render.py' --points '%s' '%s/conf' >'%s/out.txt' 2>&1",
                              test_suite_root(), test_dir, test_dir, test_dir), 0);
    char *text = output();
    const char *want[] = {
        // from demo.reps.csv: the repetitions' median (1.9, not the tidy row's mean 2.1) and
        // its 95% bootstrap interval (of 3 values: their whole range): charts draw what the
        // summary's speedups are made of
        "demo_time\tbase\t1\t1.9\t1.8\t2.6\t0\n",
        // from time_median and time_stddev (repetitions 5), converted from us to ms: the
        // median -+ 1.96 x 1.2533 x 0.05 / sqrt(5) = 0.0549; flagged noisy
        "demo_time\tfast\t1\t0.98\t0.92507",
        "demo_time\tbase\t2\t4.0\t3.78028",
        // time_cv 5% over the 2% threshold with 5 repetitions: noisy; 50% of 1 repetition: not
        "demo_time\tfast\t2\t2.0\t1.89014",
        // a counter: its repetitions' median from the reps file (490, not the mean 510) and
        // their bootstrap interval, else no error bar; a rate can be noisy
        "demo_rate\tdemo base\t1\t490.0\t480.0\t560.0\t0\n",
        "demo_rate\tdemo fast\t1\t1000.0\tNaN\tNaN\t1\n",
        // three rows of one benchmark: their median and its bootstrap interval
        "demo_rows\tv\t3\t4.0\t3.0\t5.0\t0\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("no point '%s' in:\n%s", want[i], text);
    assert_null(strstr(text, "\tgpu\t")); // the skipped row is not drawn
    assert_null(strstr(text, "demo_absent\t"));
    free(text);
}

static void test_charts_are_real_pngs_with_headline(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    write_fixture(test_dir);
    setenv("CHART_FORMATS", "svg png", 1);
    int rc = charts_on(test_dir);
    unsetenv("CHART_FORMATS");
    assert_int_equal(rc, 0);
    char *text = output();
    assert_non_null(strstr(text, "demo_absent: nothing measured"));
    free(text);
    const char *drawn[] = {"demo_time", "demo_rate", "demo_rows", "summary_speedup"};
    for (size_t i = 0; i < sizeof drawn / sizeof drawn[0]; i++) {
        assert_chart(test_dir, drawn[i]);
        assert_png(test_dir, drawn[i]);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/charts/demo_absent.svg", test_dir);
    assert_true(test_run("test -e '%s'", path) != 0);
    // the headline: titled with the GPU, driver and date; interval, its precision (half-width
    // relative to the speedup) and claimed range shown
    snprintf(path, sizeof path, "%s/charts/summary_speedup.svg", test_dir);
    char *svg = test_read_file(path, NULL);
    assert_non_null(svg);
    assert_non_null(strstr(svg, "Test GPU; 2026-01-02")); // provenance: machine, date, versions
    assert_non_null(strstr(svg, "driver 999.01"));
    assert_non_null(strstr(svg, "fast vs base")); // the variant drawn against its named baseline
    assert_non_null(strstr(svg, "2.00x [1.80-2.20], ±10%"));
    assert_non_null(strstr(svg, "published claim (range)"));
    assert_non_null(strstr(svg, "95% interval"));
    assert_non_null(strstr(svg, "0.50x !")); // the noisy variant is marked
    free(svg);
    // a practice with a claim shows the variant the claim names beside the claimed range,
    // not its best measured variant (which would pick the luckiest)
    write_file(test_dir, "summary_by_variant.csv",
               "practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended\n"
               "demo,fast,Test GPU,h,2,2.0000,1.8000,2.2000,faster,0,\n"
               "demo,faster,Test GPU,h,2,3.0000,2.5000,3.5000,faster,0,\n");
    assert_int_equal(charts_on(test_dir), 0);
    svg = test_read_file(path, NULL);
    assert_non_null(svg);
    assert_non_null(strstr(svg, "2.00x [1.80-2.20], ±10%"));
    assert_null(strstr(svg, "3.00x"));
    free(svg);
}

// By default only SVG is drawn (a results folder stays light); an unknown CHART_FORMATS is
// refused with a message, drawing nothing.
static void test_default_is_svg_only_and_formats_are_checked(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    write_fixture(test_dir);
    assert_int_equal(charts_on(test_dir), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/charts/demo_time.svg", test_dir);
    assert_true(test_file_at_least(path, 2000));
    assert_int_not_equal(test_run("ls '%s'/charts/*.png >/dev/null 2>&1", test_dir), 0);
    setenv("CHART_FORMATS", "svg gif", 1);
    int rc = charts_on(test_dir);
    unsetenv("CHART_FORMATS");
    assert_int_not_equal(rc, 0);
    char *text = output();
    assert_non_null(strstr(text, "CHART_FORMATS='svg gif': give svg, png or both"));
    free(text);
}

// Curves compressed by run-suite.sh (<name>.curves.csv.gz) are read as they are; a dense
// curve is drawn as a line whose flat stretches are left out of the drawing (the points
// themselves are all there with --points).
static void test_gzipped_dense_curve(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    write_fixture(test_dir);
    char conf[1024];
    snprintf(conf, sizeof conf, "%s/conf", test_dir);
    write_file(conf, "c.charts", "[c_scale]\nfile = c.curves\npractice = c\nx = step\ny = value\n"
                                 "kind = lines\ntitle = scale\n");
    char *curve = malloc(64 * 1024);
    assert_non_null(curve);
    size_t len = (size_t)snprintf(curve, 64 * 1024, "practice,variant,step,value\n");
    for (int step = 1; step <= 1000; step++) // flat, one jump at 500
        len += (size_t)snprintf(curve + len, 64 * 1024 - len, "c,v,%d,%d\n", step, step < 500 ? 65536 : 32768);
    write_file(test_dir, "c.curves.csv", curve);
    free(curve);
    assert_int_equal(test_run("gzip -n '%s/c.curves.csv'", test_dir), 0);
    assert_int_equal(test_run("python3 '%s/scripts/charts/render.py' --points '%s' '%s' >'%s/out.txt' 2>&1",
                              test_suite_root(), test_dir, conf, test_dir), 0);
    char *text = output();
    assert_non_null(strstr(text, "c_scale\tv\t1\t65536.0\t"));
    assert_non_null(strstr(text, "c_scale\tv\t1000\t32768.0\t"));
    free(text);
    assert_int_equal(charts_on(test_dir), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/charts/c_scale.svg", test_dir);
    size_t size = 0;
    char *svg = test_read_file(path, &size);
    assert_non_null(svg);
    // four points drawn (the ends and both sides of the jump), no point symbols: the axes'
    // 18 kB or so, where 1,000 point symbols were over 100 kB
    assert_true(size < 25000);
    free(svg);
}

// A results folder named with a quote, a $(...) and backquotes: the charts are drawn into
// it, and neither command runs (in the folder the scripts run from, or anywhere else).
static void test_quoted_and_dollar_paths_are_data(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    char evil[1024];
    snprintf(evil, sizeof evil, "%s/it's \"$(touch pwned1)\" `touch pwned2` ';system('touch pwned3')'", test_dir);
    assert_int_equal(mkdir(evil, 0755), 0);
    write_fixture(evil);
    assert_int_equal(charts_on(evil), 0);
    assert_chart(evil, "demo_time");
    assert_chart(evil, "summary_speedup");
    // the report of that folder too
    assert_int_equal(test_run("cd '%s' && CLAIMS_CSV='%s/conf/claims.csv' bash '%s/scripts/report.sh' \"$TEST_RESULTS\" "
                              ">/dev/null 2>&1", test_dir, test_dir, test_suite_root()), 0);
    char path[2048];
    snprintf(path, sizeof path, "%s/report.md", evil);
    assert_true(test_file_at_least(path, 200));
    for (int i = 1; i <= 3; i++) { // where a command would have run: the scripts' folders
        assert_int_equal(test_run("test ! -e '%s/pwned%d' && test ! -e '%s/pwned%d' && test ! -e /tmp/pwned%d",
                                  test_dir, i, test_suite_root(), i, i), 0);
        assert_int_equal(test_run("cd '%s' && test ! -e \"$TEST_RESULTS/pwned%d\"", test_dir, i), 0);
    }
}

// A CSV that is not a results CSV is an error with a message, not "nothing measured";
// a folder whose practice was skipped throughout is "nothing measured", exit status 0.
static void test_garbage_csv_is_an_error(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    write_fixture(test_dir);
    char conf[1024], summary[1024];
    snprintf(conf, sizeof conf, "%s/conf", test_dir);
    snprintf(summary, sizeof summary, "%s/summary_by_variant.csv", test_dir);
    remove(summary); // no headline chart here: only the broken CSV matters
    const char *cases[][2] = {
        {"\x7f" "ELF\x01\x02 binary junk\n\xff\xfe\n", "demo.csv"},
        {"hello world\nthis is not a table\n", "not a results CSV"},
        {"practice,variant,status,time,time_unit\ndemo,base,ok,2.0,ms\ndemo,fast,ok\n", "line 3 has 3 fields"},
        {"practice,variant,status,time,time_unit\ndemo,base,ok,abc,ms\n", "is not a positive number"},
        {"practice,variant,status,time,time_unit\ndemo,base,maybe,1,ms\n", "status 'maybe'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(test_dir, "demo.csv", cases[i][0]);
        int rc = charts_on(test_dir);
        char *text = output();
        if (rc != 1) fail_msg("case %zu: exit status %d, want 1: %s", i, rc, text);
        if (!strstr(text, cases[i][1])) fail_msg("case %zu: message lacks '%s': %s", i, cases[i][1], text);
        assert_null(strstr(text, "nothing measured (demo.csv has no ok rows"));
        free(text);
    }
    // a description naming a column the CSV lacks: no chart and a message (a results
    // folder older than the description); checking descriptions (--points), an error
    write_file(test_dir, "demo.csv", kTidy);
    write_file(conf, "demo.charts", "[demo_typo]\npractice = demo\nx = param_size\ny = no_such_counter\n");
    assert_int_equal(charts_on(test_dir), 0);
    char *text = output();
    assert_non_null(strstr(text, "no column 'no_such_counter'"));
    free(text);
    assert_int_equal(test_run("python3 '%s/scripts/charts/render.py' --points '%s' '%s' >/dev/null 2>&1",
                              test_suite_root(), test_dir, conf), 1);
    // all skipped: nothing to draw, and that is not an error
    write_file(conf, "demo.charts", kDescriptions);
    write_file(test_dir, "demo.csv",
               "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,time_unit,param_size\n"
               "demo,gpu,tuned,cuda_events,size:1,skipped,no CUDA device,1,,,,us,1\n");
    assert_int_equal(charts_on(test_dir), 0);
    text = output();
    assert_non_null(strstr(text, "demo_time: nothing measured"));
    free(text);
}

// The committed CPU run still draws, into a copy (the committed folder is not touched):
// every practice's charts come from descriptions; no practice has a gnuplot script.
static void test_committed_run_draws_from_descriptions(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    const char *run = "results/cpu_vm_20261130-1203";
    char copy[1024];
    snprintf(copy, sizeof copy, "%s/run", test_dir);
    assert_int_equal(test_run("cp -r '%s/%s' '%s' && rm -rf '%s/charts'", test_suite_root(), run, copy, copy), 0);
    assert_int_equal(test_run("bash '%s/scripts/charts.sh' '%s' >'%s/out.txt' 2>&1", test_suite_root(), copy,
                              test_dir), 0);
    const char *charts[] = {"summary_speedup", "zero_grad_step", "zero_grad_micro", "batch_size_throughput",
                            "batch_size_convergence_time", "workers_images_per_second", "workers_wait_per_step"};
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++) assert_chart(copy, charts[i]);
    assert_int_equal(test_run("ls '%s'/scripts/charts/*.gp >/dev/null 2>&1", test_suite_root()) != 0, 1);
}

// A run cut at its deadline (issue 22): an empty CSV (0 bytes: the program was cut before
// its first row) and a header-only one are warnings that name them; rows with status
// partial are drawn; a variant that did not reach its target (no speedup) is left out of
// the headline chart; charts.sh exits 0 and draws what exists.
static void test_cut_run_draws_what_exists(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    write_fixture(test_dir);
    assert_int_equal(test_run("sed -i 's/^demo,fast,tuned,wall,size:2,ok,,/demo,fast,tuned,wall,size:2,partial,cut at the deadline,/' "
                              "'%s/demo.csv'", test_dir), 0);
    write_file(test_dir, "cut.csv", "");
    write_file(test_dir, "header.csv", "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,time_unit\n");
    write_file(test_dir, "cut.partial", "0 12\n");
    write_file(test_dir, "summary_by_variant.csv",
               "practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended,repetitions,reached,run\n"
               "demo,fast,Test GPU,h,2,2.0000,1.8000,2.2000,faster,0,,5,,r\n"
               "conv,never,Test GPU,h,1,,,,did not reach,0,,5,0 of 5,r\n");
    int rc = charts_on(test_dir);
    char *text = output();
    if (rc != 0) fail_msg("charts of a cut run: exit status %d: %s", rc, text);
    if (!strstr(text, "cut.csv")) fail_msg("no warning naming cut.csv: %s", text);
    if (!strstr(text, "header.csv")) fail_msg("no warning naming header.csv: %s", text);
    free(text);
    assert_chart(test_dir, "demo_time");
    assert_chart(test_dir, "summary_speedup");
    // the partial row is drawn: size 2 of the fast variant
    assert_int_equal(test_run("python3 '%s/scripts/charts/render.py' --points '%s' '%s/conf' >'%s/p.txt' 2>&1",
                              test_suite_root(), test_dir, test_dir, test_dir), 0);
    text = test_read_in(test_dir, "p.txt");
    assert_non_null(text);
    if (!strstr(text, "demo_time\tfast\t2\t")) fail_msg("the partial row is not drawn: %s", text);
    free(text);
}

// What a chart needs to be pasted: provenance in the title, the interval named in the
// legend, categories and series in natural order (not the rows' order), "batch 32" in the
// legend rather than "32", whole ticks on a count axis, fixed notation (2000, 1048576), no
// noise mark on a memory size even where the row is noisy, and a target line where the
// rows record one.
static void test_chart_conventions(void **state)
{
    (void)state;
    if (gnuplot_missing()) skip();
    write_fixture(test_dir);
    write_file(test_dir, "w.csv",
               "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,time_unit,"
               "time_median,time_stddev,time_min,time_max,param_workers,param_batch,peak_bytes,noisy,time_cv,goal_bytes\n"
               "w,v10,tuned,wall,workers:1,ok,,5,1,2000000,2000000,us,2000000,1000,1990000,2010000,1,32,1048576,1,0.5,4000000\n"
               "w,v2,tuned,wall,workers:2,ok,,5,1,3000000,3000000,us,3000000,1000,2990000,3010000,2,32,2097152,1,0.5,4000000\n"
               "w,v2,tuned,wall,workers:1,ok,,5,1,2500000,2500000,us,2500000,1000,2490000,2510000,1,32,1048576,1,0.5,4000000\n"
               "w,v10,tuned,wall,workers:2,ok,,5,1,2200000,2200000,us,2200000,1000,2190000,2210000,2,32,3145728,1,0.5,4000000\n");
    char conf[1024];
    snprintf(conf, sizeof conf, "%s/conf", test_dir);
    write_file(conf, "w.charts",
               "[w_bars]\npractice = w\nx = variant\ny = time\nseries = param_batch\nfilter = param_workers=1\n"
               "kind = bars\nlabels = yes\ntitle = bars\n\n"
               "[w_memory]\npractice = w\nx = param_workers\ny = peak_bytes\nkind = lines\ntitle = memory\n"
               "target = goal_bytes\n\n"
               "[w_no_target]\npractice = w\nx = param_workers\ny = time\nkind = lines\ntarget = absent\n");
    assert_int_equal(charts_on(test_dir), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/charts/w_bars.svg", test_dir);
    char *svg = test_read_file(path, NULL);
    assert_non_null(svg);
    assert_non_null(strstr(svg, "Test GPU; 2026-01-02"));
    assert_non_null(strstr(svg, "95% interval of the median"));
    assert_non_null(strstr(svg, "batch 32"));
    char *v2 = strstr(svg, ">v2<"), *v10 = strstr(svg, ">v10<");
    assert_non_null(v2);
    assert_non_null(v10);
    assert_true(v2 < v10); // natural order, though v10's rows come first
    assert_non_null(strstr(svg, "2000 !")); // fixed notation, the noisy time marked
    free(svg);
    snprintf(path, sizeof path, "%s/charts/w_memory.svg", test_dir);
    svg = test_read_file(path, NULL);
    assert_non_null(svg);
    assert_null(strstr(svg, "noisy")); // a memory size is not noisy
    assert_null(strstr(svg, ">1.5<")); // whole ticks on the workers axis
    assert_non_null(strstr(svg, ">2<"));
    assert_non_null(strstr(svg, "000000<")); // a tick of millions in fixed notation
    assert_non_null(strstr(svg, "target 4000000")); // the target the rows record, drawn
    free(svg);
    snprintf(path, sizeof path, "%s/charts/w_no_target.svg", test_dir);
    svg = test_read_file(path, NULL);
    assert_non_null(svg);
    assert_null(strstr(svg, "target")); // a run that records none: no line
    free(svg);
    assert_int_not_equal(test_run("grep -l 'e+0' '%s'/charts/*.svg >/dev/null 2>&1", test_dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_points_and_error_bars, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_charts_are_real_pngs_with_headline, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_default_is_svg_only_and_formats_are_checked, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_gzipped_dense_curve, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_quoted_and_dollar_paths_are_data, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_garbage_csv_is_an_error, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_committed_run_draws_from_descriptions, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_cut_run_draws_what_exists, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_chart_conventions, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
