// test_report.c: is each published claim true on this machine? The verdict rules of
// scripts/claims.py on fixed numbers; report.md's headline claims table (first after the
// machine) on a fixture with made-up numbers; bench/claims.csv (every claim names its
// source, every practice has a claim); the few lines `make bench` ends with; and the
// harness's console, which prints a skipped run as "SKIPPED (reason)" and a real error as
// an error, while the JSON keeps Google Benchmark's own error fields.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench/harness.h"
#include "tests/support.h"

// The claims table and the charts are Python (standard library): where python3 is missing
// those tests say so and skip.
static bool python_missing(void)
{
    if (test_run("command -v python3 >/dev/null 2>&1") == 0) return false;
    printf("skipped: python3 is not installed here (the claims table needs it)\n");
    return true;
}

static void write_file(const char *name, const char *text)
{
    if (!test_write_file(test_dir, name, text)) fail_msg("cannot write %s/%s", test_dir, name);
}

static char *read_in_dir(const char *name)
{
    char *text = test_read_in(test_dir, name);
    if (!text) fail_msg("cannot read %s/%s", test_dir, name);
    return text;
}

static void test_verdict_rules_on_fixed_numbers(void **state)
{
    (void)state;
    if (python_missing()) skip();
    // measured speedup [interval] against the claim: the verdict in words
    const char *cases[][2] = {
        {"1.30 1.10 1.50 --claim 1.5 5.5", "holds"},          // intervals overlap
        {"1.20 1.10 1.30 --claim 1.5 5.5", "smaller here"},   // wholly below the claim
        {"7.0 6.0 8.0 --claim 1.5 5.5", "larger here"},       // wholly above it
        {"1.02 0.97 1.08 --claim 1.5 5.5", "no effect here"}, // the interval holds 1
        {"0.80 0.70 0.90 --claim 1.5 5.5", "reversed here"},  // slower, claimed faster
        {"1.40 1.20 1.60", "holds"},                          // a claim without a range
        {"1.03", "no effect here"},                           // no interval: within 5% of 1
        {"0.96", "no effect here"},
        {"1.10", "holds"},
        {"0.90", "reversed here"},
        {"6.5 6.2 6.8 --claim 7 7", "smaller here"},          // a point claim ("~7x")
        {"0.50 0.40 0.60 --slower", "holds"},                 // a claimed slowdown
        {"0.50 0.40 0.60 --claim 0.8 0.9 --slower", "larger here"},
        {"0.85 0.82 0.88 --claim 0.5 0.6 --slower", "smaller here"},
        {"1.5 1.4 1.6 --slower", "reversed here"},
        {"0.95 0.90 1.10 --claim 0.9 1.2", "holds"},          // the claim itself holds 1
    };
    size_t n = sizeof cases / sizeof cases[0];
    char input[2048] = "";
    for (size_t i = 0; i < n; i++) {
        strcat(input, cases[i][0]);
        strcat(input, "\n");
    }
    write_file("cases.txt", input);
    assert_int_equal(test_run("python3 '%s/scripts/claims.py' verdicts <'%s/cases.txt' >'%s/v.txt' 2>&1",
                              test_suite_root(), test_dir, test_dir), 0);
    char *got = read_in_dir("v.txt");
    char *line = got;
    for (size_t i = 0; i < n; i++) {
        char *end = strchr(line, '\n');
        if (!end) fail_msg("verdict %s: no answer in:\n%s", cases[i][0], got);
        *end = '\0';
        if (strcmp(line, cases[i][1]) != 0) fail_msg("verdict %s: '%s', want '%s'", cases[i][0], line, cases[i][1]);
        line = end + 1;
    }
    assert_string_equal(line, "");
    free(got);
    // bad numbers are refused
    assert_int_equal(test_run("python3 '%s/scripts/claims.py' verdict abc >/dev/null 2>&1", test_suite_root()), 1);
    assert_int_equal(test_run("python3 '%s/scripts/claims.py' verdict 0 >/dev/null 2>&1", test_suite_root()), 1);
}

static const char kClaims[] =
    "practice,tuned,direction,claim,effect_low,effect_high,source,hardware\n"
    "demo,*,faster,demo is 1.5-5.5x faster,1.5,5.5,Demo paper 2020,a test GPU\n"
    "demo_small,fast,faster,small is faster,1.5,5.5,Small source,\n"
    "gpu_demo,*,faster,gpu is faster,,,GPU source,H100\n"
    "ghost,*,faster,never run,,,Ghost source,A100\n";
static const char kSummary[] =
    "practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended\n"
    "demo,fast,none,h,2,2.0000,1.8000,2.2000,faster,0,\n"
    "demo,faster,none,h,2,3.0000,2.5000,3.5000,faster,1,\n"
    "demo_small,fast,none,h,1,1.2000,1.1000,1.3000,faster,0,cores used 0.9 of 2\n"
    "extra,x,none,h,1,1.0100,,,no significant difference,0,\n";
static const char kSkippedCsv[] =
    "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,time_unit\n"
    "gpu_demo,base,baseline,cuda_events,n:1,skipped,kernels/x.c:3: no CUDA device (no driver),1,,,,us\n"
    "gpu_demo,fast,tuned,cuda_events,n:1,skipped,kernels/x.c:3: no CUDA device (no driver),1,,,,us\n";

static void write_results_fixture(void)
{
    write_file("claims.txt", kClaims); // not *.csv: it is no results file
    write_file("summary_by_variant.csv", kSummary);
    write_file("gpu_demo.csv", kSkippedCsv);
    write_file("context.txt", "gpu_name=none\nhost=h\nhost_cpu=Test CPU\nhost_cores=2\n"
                              "no_gpu_reason=no CUDA device (test)\n");
    write_file("suite-status.tsv", "program\tstatus\tok\tskipped\terrors\tseconds\treason\n"
                                   "demo\tran\t3\t1\t0\t5\t\n"
                                   "gpu_demo\tskipped\t0\t2\t0\t1\tno CUDA device\n"
                                   "broken\tfailed\t0\t0\t1\t1\tboom\n");
}

static void expect_line(const char *text, const char *want)
{
    if (!strstr(text, want)) fail_msg("missing '%s' in:\n%s", want, text);
}

static void test_report_headline_claims_table(void **state)
{
    (void)state;
    if (python_missing()) skip();
    write_results_fixture();
    assert_int_equal(test_run("CLAIMS_CSV='%s/claims.txt' bash '%s/scripts/report.sh' '%s' >/dev/null 2>&1",
                              test_dir, test_suite_root(), test_dir), 0);
    char *report = read_in_dir("report.md");
    // first thing after the machine, before what ran
    const char *machine = strstr(report, "## Machine");
    const char *claims = strstr(report, "## Published claims, checked on this machine");
    const char *ran = strstr(report, "## What ran");
    assert_non_null(machine);
    assert_non_null(claims);
    assert_non_null(ran);
    assert_true(machine < claims && claims < ran);
    // the best variant (*), its interval and flag; the claim with its range and source
    expect_line(report, "| demo | demo is 1.5-5.5x faster [1.5-5.5x] | Demo paper 2020 (a test GPU) | "
                        "faster: 3.00x (95% CI 2.50-3.50); noisy | **holds** |");
    expect_line(report, "| demo_small / fast | small is faster [1.5-5.5x] | Small source (hardware not stated) | "
                        "fast: 1.20x (95% CI 1.10-1.30); contended: cores used 0.9 of 2 | **smaller here** |");
    expect_line(report, "| gpu_demo | gpu is faster | GPU source (H100) | - | **not measured here (no CUDA device)** |");
    expect_line(report, "| ghost | never run | Ghost source (A100) | - | **not measured here (not in this run)** |");
    expect_line(report, "Measured here without a published claim to check: extra");
    // the speedups table carries intervals and flags; n/a where there is none
    expect_line(report, "| demo | fast | 2 | 2.00x | 1.80-2.20 | faster |  |");
    expect_line(report, "| extra | x | 1 | 1.01x | n/a | no significant difference |  |");
    free(report);

    // a claim without a source is refused, and the report says the table failed
    write_file("claims.txt", "practice,tuned,direction,claim,effect_low,effect_high,source,hardware\n"
                             "demo,*,faster,unsourced,,,,\n");
    assert_int_equal(test_run("CLAIMS_CSV='%s/claims.txt' bash '%s/scripts/report.sh' '%s' >/dev/null 2>'%s/err.txt'",
                              test_dir, test_suite_root(), test_dir, test_dir), 1);
    char *err = read_in_dir("err.txt");
    expect_line(err, "a claim without a source");
    free(err);
}

static void test_end_of_run_digest(void **state)
{
    (void)state;
    if (python_missing()) skip();
    write_results_fixture();
    assert_int_equal(test_run("python3 '%s/scripts/claims.py' digest '%s' >'%s/d.txt'", test_suite_root(), test_dir,
                              test_dir), 0);
    char *text = read_in_dir("d.txt");
    expect_line(text, "Machine:    no GPU (no CUDA device (test)); host h, Test CPU, 2 cores\n");
    expect_line(text, "Benchmarks: 3 ran, 3 skipped, 1 failed\n");
    // each practice's largest effect, the three largest: 3.00x, 1.20x, 1.01x
    expect_line(text, "Largest:    demo/faster 3.00x [2.50-3.50]; demo_small/fast 1.20x [1.10-1.30]; extra/x 1.01x\n");
    char want[1200];
    snprintf(want, sizeof want, "Report:     %s/report.md\n", test_dir);
    expect_line(text, want);
    free(text);
}

// bench/claims.csv: every claim names its source and its direction, ranges are numbers,
// and every practice of the suite has a claim (names as the results' practice column:
// amp_gemm/tf32 is the TF32 row, layout_fp16/channels_last the channels_last row).
static void test_claims_file_covers_every_practice(void **state)
{
    (void)state;
    if (python_missing()) skip();
    char path[1024];
    snprintf(path, sizeof path, "%s/bench/claims.csv", test_suite_root());
    char *text = test_read_file(path, NULL);
    assert_non_null(text);
    const char *practices[] = {"amp", "amp_gemm", "layout_fp16", "cudnn_benchmark", "cudnn_benchmark_dynamic",
                               "sync", "on_device", "ddp_scaling", "ddp_overlap", "num_workers", "num_workers_train", "pin_memory",
                               "zero_grad", "batch_size_convergence", "fusion", "cuda_graphs"};
    for (size_t i = 0; i < sizeof practices / sizeof practices[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "\n%s,", practices[i]);
        if (!strstr(text, want)) fail_msg("bench/claims.csv has no claim for %s", practices[i]);
    }
    free(text);
    // claims.py validates it (a source on every row, direction, ranges) on the committed run
    assert_int_equal(test_run("python3 '%s/scripts/claims.py' table '%s/results/cpu_vm_20261130-1203' '%s' "
                              ">'%s/t.txt' 2>&1", test_suite_root(), test_suite_root(), path, test_dir), 0);
    char *table = read_in_dir("t.txt");
    expect_line(table, "| pin_memory / pinned_async |");
    expect_line(table, "**not measured here (no CUDA device)** |");
    expect_line(table, "| zero_grad / set_to_none |");
    free(table);
}

// ---- the console reporter ------------------------------------------------------------

static void bench_ok(HarnessState *st, void *user)
{
    (void)user;
    volatile int sink = 0;
    while (harness_keep_running(st)) sink++;
}

static void bench_skips(HarnessState *st, void *user)
{
    (void)user;
    harness_skip(st, "no CUDA device");
}

static void bench_fails(HarnessState *st, void *user)
{
    (void)user;
    harness_fail(st, "the check failed");
}

// This test program run again as a tiny harness program (TEST_REPORT_HARNESS=1).
static int run_as_harness(int argc, char **argv)
{
    harness_register(&(HarnessSpec){.practice = "tiny", .variant = "base", .role = HARNESS_BASELINE,
                                     .timing = HARNESS_TIMING_WALL, .fn = bench_ok, .iterations = 3});
    harness_register(&(HarnessSpec){.practice = "tiny", .variant = "gpu", .role = HARNESS_TUNED,
                                     .timing = HARNESS_TIMING_CUDA_EVENTS, .fn = bench_skips});
    harness_register(&(HarnessSpec){.practice = "tiny", .variant = "bad", .role = HARNESS_TUNED,
                                     .timing = HARNESS_TIMING_WALL, .fn = bench_fails});
    return harness_main(argc, argv);
}

static void test_console_prints_skips_as_skipped(void **state)
{
    (void)state;
    int rc = test_run("TEST_REPORT_HARNESS=1 /proc/%d/exe --benchmark_color=false --benchmark_out='%s/tiny.json' "
                      "--benchmark_out_format=json --harness_csv='%s/tiny.csv' >'%s/console.txt' 2>/dev/null",
                      (int)getpid(), test_dir, test_dir, test_dir);
    assert_int_equal(rc, 1); // the real error fails the program, the skip does not
    char *console = read_in_dir("console.txt");
    expect_line(console, "SKIPPED (no CUDA device)\n");
    assert_non_null(strstr(console, "tiny/gpu/"));
    assert_null(strstr(console, "ERROR OCCURRED: 'skipped:"));
    expect_line(console, "ERROR OCCURRED: 'error: the check failed'");
    free(console);
    // the JSON and the CSV say what they said before
    char *json = read_in_dir("tiny.json");
    expect_line(json, "\"error_message\": \"skipped: no CUDA device\"");
    expect_line(json, "\"error_message\": \"error: the check failed\"");
    free(json);
    char *csv = read_in_dir("tiny.csv");
    expect_line(csv, ",skipped,no CUDA device,");
    expect_line(csv, ",error,the check failed,");
    free(csv);
}

int main(int argc, char **argv)
{
    if (getenv("TEST_REPORT_HARNESS")) return run_as_harness(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_verdict_rules_on_fixed_numbers, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_report_headline_claims_table, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_end_of_run_digest, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_claims_file_covers_every_practice, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_console_prints_skips_as_skipped, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
