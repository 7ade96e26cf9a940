// test_twin_bench.c: the PyTorch side of `make bench` (scripts/twin/bench.py,
// docs/pytorch-side.md):
// - its stopping rule (twin/timing.py) decides as bench/driver/precision.c does on the same
//   inputs (a grid of budgets and widths; intervals of random pairs), with plain python3;
// - fairness: torch.get_num_threads() is --threads (ctx_torch_threads), the first repetition
//   excludes the warm-up (a fixture whose first step sleeps 0.5 s; without a warm-up step
//   the same fixture's first repetition shows it), zero_grad tiny's batch is the core's;
// - under --harness_budget each practice gets an equal share, spent precision first (a
//   later group that finds less of it left than the previous took is a visible skip; a
//   CUDA-only group takes none);
// - its tidy CSV's header is the core's (bench_zero_grad's, the same schema);
// - a PyTorch variant that does not train fails its row (--practice_selftest=no_update:
//   an error row naming the check, exit status 1), the baseline's row stays ok;
// - bad flags exit 2 naming the flag;
// - run-suite.sh (a fake build with steptime): BENCH_TWIN=0 leaves the PyTorch side out and
//   says so; a Python without torch gives skipped rows naming why, and the plan says so.
// The torch tests skip without torch (SUITE_REQUIRE_TORCH=1: fail), as tests/test_twin.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/driver/precision.h"
#include "tests/support.h"

static const char *python(void)
{
    static char venv[4096];
    const char *p = getenv("PYTHON");
    if (p && *p) return p;
    snprintf(venv, sizeof venv, "%s/cache/venv/bin/python", test_suite_root());
    return access(venv, X_OK) == 0 ? venv : "python3";
}

static bool torch_required(void)
{
    const char *r = getenv("SUITE_REQUIRE_TORCH");
    return r && strcmp(r, "1") == 0;
}

static bool torch_missing(void)
{
    static int missing = -1;
    if (missing < 0) {
        missing = test_run("'%s' -c 'import torch' >/dev/null 2>&1", python()) != 0;
        if (missing)
            printf("%s: %s cannot import torch, so the PyTorch side cannot run; scripts/setup.sh "
                   "installs it into cache/venv, or set PYTHON to a Python that has it\n",
                   torch_required() ? "FAILED" : "skipped", python());
        fflush(stdout);
    }
    return missing;
}

#define REQUIRE_TORCH() do { \
        if (torch_missing()) { \
            if (torch_required()) fail_msg("SUITE_REQUIRE_TORCH=1 and %s has no torch", python()); \
            skip(); \
        } \
    } while (0)

// Runs bench.py with `args`, its CSV to test_dir/<name>.csv; its exit status.
static int twin(const char *name, const char *args)
{
    fflush(stdout);
    return test_run("cd '%s' && '%s' scripts/twin/bench.py --context_program='%s/context' %s "
                    "--harness_csv='%s/%s.csv' --benchmark_out='%s/%s.json' >'%s/%s.log' 2>&1",
                    test_suite_root(), python(), test_build_dir(), args, test_dir, name, test_dir, name,
                    test_dir, name);
}

static char *read_out(const char *name)
{
    char *text = test_read_in(test_dir, name);
    if (!text) fail_msg("%s/%s was not written", test_dir, name);
    return text;
}

// The value of column `col` of the row practice,variant (any params); fails when none.
static void value_of(const char *csv, const char *practice_variant, const char *params, const char *col,
                     char *out, size_t size)
{
    if (!test_csv_row_value(csv, practice_variant, params, col, out, size))
        fail_msg("no row %s %s (column %s) in:\n%s", practice_variant, params, col, csv);
}

// ---- the stopping rule against precision.c --------------------------------------------

static const char *compare_py =
    "import math, sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from twin import timing\n"
    "for line in open(sys.argv[2]):\n"
    "    f = line.split()\n"
    "    if f[0] == 'next':\n"
    "        t, done, mx, used, cap, reached = float(f[1]), int(f[2]), int(f[3]), float(f[4]), float(f[5]), float(f[6])\n"
    "        d, more = timing.precision_next(t, done, mx, used, cap, reached)\n"
    "        print('next %d %d' % (d, more))\n"
    "    else:\n"
    "        n = int(f[1]); v = [float(x) for x in f[2:]]\n"
    "        b, tu = v[:n], v[n:]\n"
    "        p, s = timing.precision_of_paired_speedup(b, tu)\n"
    "        m = timing.precision_of_median(b)\n"
    "        print('pair %.17g %.17g %.17g' % (p, s, m))\n";

static bool close_to(double a, double b)
{
    if (isinf(a) || isinf(b) || isnan(a) || isnan(b)) return (isinf(a) && isinf(b)) || (isnan(a) && isnan(b));
    return fabs(a - b) <= 1e-12 * fmax(1.0, fabs(b));
}

static void test_stopping_rule_matches_c(void **state)
{
    (void)state;
    char cases[4096], want[4096];
    snprintf(cases, sizeof cases, "%s/cases.txt", test_dir);
    snprintf(want, sizeof want, "%s/want.txt", test_dir);
    FILE *fc = fopen(cases, "w"), *fw = fopen(want, "w");
    assert_non_null(fc);
    assert_non_null(fw);
    const double targets[] = {0, 0.02, 0.05};
    const int dones[] = {1, 2, 5, 6, 12, 29, 30};
    const int maxes[] = {6, 30};
    const double used_cap[][2] = {{1, 0}, {2, 3}, {5, 6}, {10, 10.5}, {3, 2}};
    const double reached[] = {0.01, 0.02, 0.049, 0.07, 0.2, 1.0, INFINITY};
    int n = 0;
    for (size_t a = 0; a < sizeof targets / sizeof *targets; a++)
        for (size_t b = 0; b < sizeof dones / sizeof *dones; b++)
            for (size_t c = 0; c < sizeof maxes / sizeof *maxes; c++)
                for (size_t d = 0; d < sizeof used_cap / sizeof *used_cap; d++)
                    for (size_t e = 0; e < sizeof reached / sizeof *reached; e++) {
                        if (dones[b] > maxes[c]) continue;
                        PrecisionBudget pb = {targets[a], dones[b], maxes[c], used_cap[d][0], used_cap[d][1]};
                        int more = 0;
                        PrecisionDecision dec = precision_next(&pb, reached[e], &more);
                        fprintf(fc, "next %.17g %d %d %.17g %.17g %.17g\n", targets[a], dones[b], maxes[c],
                                used_cap[d][0], used_cap[d][1], reached[e]);
                        fprintf(fw, "next %d %d\n", (int)dec, more);
                        n++;
                    }
    srand(33);
    for (int k = 1; k <= 40; k++) {
        double base[40], tuned[40];
        fprintf(fc, "pair %d", k);
        for (int i = 0; i < k; i++) base[i] = 1.0 + (double)rand() / RAND_MAX;
        for (int i = 0; i < k; i++) tuned[i] = 0.8 + 0.5 * (double)rand() / RAND_MAX;
        for (int i = 0; i < k; i++) fprintf(fc, " %.17g", base[i]);
        for (int i = 0; i < k; i++) fprintf(fc, " %.17g", tuned[i]);
        fprintf(fc, "\n");
        double speedup;
        double p = precision_of_paired_speedup(base, tuned, k, &speedup);
        fprintf(fw, "pair %.17g %.17g %.17g\n", p, speedup, precision_of_median(base, k));
    }
    fclose(fc);
    fclose(fw);
    assert_true(test_write_file(test_dir, "compare.py", compare_py));
    // plain python3: timing.py is the standard library only
    assert_int_equal(test_run("python3 '%s/compare.py' '%s/scripts' '%s' >'%s/got.txt' 2>&1", test_dir,
                              test_suite_root(), cases, test_dir), 0);
    char *got = read_out("got.txt"), *exp = read_out("want.txt");
    char *gs = NULL, *ws = NULL;
    char *g = strtok_r(got, "\n", &gs), *w = strtok_r(exp, "\n", &ws);
    int lines = 0;
    for (; g && w; g = strtok_r(NULL, "\n", &gs), w = strtok_r(NULL, "\n", &ws), lines++) {
        if (strncmp(w, "next", 4) == 0) {
            if (strcmp(g, w) != 0) fail_msg("case %d: python says '%s', precision.c '%s'", lines + 1, g, w);
            continue;
        }
        double a[3], b[3];
        assert_int_equal(sscanf(g, "pair %lf %lf %lf", &a[0], &a[1], &a[2]), 3);
        assert_int_equal(sscanf(w, "pair %lf %lf %lf", &b[0], &b[1], &b[2]), 3);
        for (int i = 0; i < 3; i++)
            if (!close_to(a[i], b[i])) fail_msg("case %d: python '%s', precision.c '%s'", lines + 1, g, w);
    }
    assert_null(g);
    assert_null(w);
    assert_int_equal(lines, n + 40);
    printf("twin/timing.py decides as precision.c on %d budgets and 40 interval cases\n", n);
    free(got);
    free(exp);
}

// ---- fairness --------------------------------------------------------------------------

static void test_threads_and_warmup(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char fixture[4096], args[4400], f[128];
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/twin_bench_fixture.py", test_suite_root());
    for (int threads = 1; threads <= 2; threads++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", threads);
        snprintf(args, sizeof args, "--twin_modules='%s' --threads=%d --benchmark_repetitions=1 --harness_precision=0",
                 fixture, threads);
        assert_int_equal(twin(name, args), 0);
        char file[32];
        snprintf(file, sizeof file, "%s.csv", name);
        char *csv = read_out(file);
        char want[8];
        snprintf(want, sizeof want, "%d", threads);
        value_of(csv, "pytorch_fixture_warmup,base", "preset:tiny;batch:0", "ctx_torch_threads", f, sizeof f);
        assert_string_equal(f, want);
        value_of(csv, "pytorch_fixture_warmup,base", "preset:tiny;batch:0", "ctx_cpu_threads", f, sizeof f);
        assert_string_equal(f, want);
        value_of(csv, "pytorch_fixture_warmup,base", "preset:tiny;batch:0", "cpu_cores_used", f, sizeof f);
        assert_int_equal(atoi(f), threads);  // what torch.get_num_threads() said inside a step
        free(csv);
    }
    // warm-up: the first step sleeps 0.5 s, later ones 2 ms; min_time 0.02 s
    char *reps = read_out("t1.reps.csv");
    const char *rows[][2] = {{"pytorch_fixture_warmup,base", "warm"}, {"pytorch_fixture_warmup,tuned", "warm"},
                             {"pytorch_fixture_no_warmup,base", "cold"}, {"pytorch_fixture_no_warmup,tuned", "cold"}};
    for (size_t i = 0; i < 4; i++) {
        assert_true(test_csv_row_value(reps, rows[i][0], "preset:tiny;batch:0", "time", f, sizeof f));
        double us = atof(f);
        printf("%s first repetition: %.0f us per step (%s)\n", rows[i][0], us, rows[i][1]);
        if (strcmp(rows[i][1], "warm") == 0 && !(us < 100000))
            fail_msg("%s: the first repetition includes the warm-up step (%.0f us per step)", rows[i][0], us);
        if (strcmp(rows[i][1], "cold") == 0 && !(us > 400000))
            fail_msg("%s: without a warm-up the first step (0.5 s) should show (%.0f us)", rows[i][0], us);
    }
    free(reps);
}

// Under --harness_budget each practice gets an equal share of what is left and spends it
// precision first, as the core's harness (tests/test_stats.c): its first group adds
// repetitions until the share is spent ("capped at N s"), a later group that would start
// with less of the share left than the previous group took is a visible skip naming it, the next practice still gets its
// figures, and a CUDA-only group on a machine without CUDA takes no share.
static void test_budget_is_shared_by_practices(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char fixture[4096], args[4400];
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/twin_budget_fixture.py", test_suite_root());
    snprintf(args, sizeof args, "--twin_modules='%s' --device=cpu --benchmark_repetitions=3 "
             "--harness_precision=0.000001 --harness_max_repetitions=1000 --harness_budget=2", fixture);
    double t0 = test_now_s();
    assert_int_equal(twin("budget", args), 0);
    double seconds = test_now_s() - t0;
    char *csv = read_out("budget.csv");
    const char *practices[] = {"pytorch_fixture_budget_a", "pytorch_fixture_budget_b"};
    const char *presets[] = {"tiny", "mlp", "small"};
    int not_run = 0;
    for (int p = 0; p < 2; p++) {
        for (int k = 0; k < 3; k++) {
            char pv[96], params[64], status[32], why[256];
            snprintf(pv, sizeof pv, "%s,base", practices[p]);
            snprintf(params, sizeof params, "preset:%s;batch:0", presets[k]);
            value_of(csv, pv, params, "status", status, sizeof status);
            if (k == 0 || strcmp(status, "ok") == 0) {
                assert_string_equal(status, "ok");  // a practice's first group always runs
                value_of(csv, pv, params, "stop", why, sizeof why);
                if (!strstr(why, "target not met: capped at") || !strstr(why, " s ("))
                    fail_msg("%s %s stopped: %s", pv, params, why);
            } else {
                assert_string_equal(status, "skipped");
                value_of(csv, pv, params, "reason", why, sizeof why);
                if (!strstr(why, "not run: less of its practice's share of --harness_budget"))
                    fail_msg("%s %s skipped: %s", pv, params, why);
                not_run++;
            }
        }
    }
    char status[32];
    value_of(csv, "pytorch_fixture_budget_a,base", "preset:gpu_only;batch:0", "status", status, sizeof status);
    assert_string_equal(status, "skipped");
    assert_true(not_run >= 2);  // 1000 repetitions of every group cannot fit in 2 s
    printf("%d groups not run; %.1f s under a 2 s budget (Python and torch start-up included)\n", not_run, seconds);
    assert_true(seconds < 2 + 20);
    free(csv);
}

// zero_grad tiny: the batch is the core's (batch 0: the preset's default), the header is the
// core's, the context names the torch; then the self-test fails the tuned row.
static void test_zero_grad_batch_header_and_selftest(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char core_csv[4200], f[256], g[256];
    snprintf(core_csv, sizeof core_csv, "%s/core.csv", test_dir);
    assert_int_equal(test_run("'%s/bench_zero_grad' --preset=tiny --threads=1 --benchmark_filter='^zero_grad/' "
                              "--benchmark_min_time=0.01 --benchmark_repetitions=1 --harness_csv='%s' >/dev/null 2>&1",
                              test_build_dir(), core_csv), 0);
    int rc = twin("zg", "--preset=tiny --threads=1 --twin_modules=zero_grad --benchmark_min_time=0.02 "
                        "--benchmark_repetitions=2 --harness_precision=0");
    char *csv = read_out("zg.csv"), *core = read_out("core.csv");
    if (rc != 0) fail_msg("bench.py exit %d:\n%s", rc, csv);
    const char *eol = strchr(core, '\n');
    assert_non_null(eol);
    if (strncmp(csv, core, (size_t)(eol - core + 1)) != 0)
        fail_msg("the PyTorch side's header differs from the core's:\n%.*s\n%s", (int)(eol - core), core, csv);
    value_of(core, "zero_grad,memset", "preset:tiny;batch:0", "batch", g, sizeof g);
    value_of(csv, "pytorch_zero_grad,memset", "preset:tiny;batch:0", "batch", f, sizeof f);
    assert_string_equal(f, g);
    value_of(csv, "pytorch_zero_grad,set_to_none", "preset:tiny;batch:0", "status", f, sizeof f);
    assert_string_equal(f, "ok");
    value_of(csv, "pytorch_zero_grad,set_to_none", "preset:tiny;batch:0", "ctx_torch_device", f, sizeof f);
    assert_string_equal(f, "cpu");
    value_of(csv, "pytorch_zero_grad,set_to_none", "preset:tiny;batch:0", "ctx_torch_version", f, sizeof f);
    assert_true(strlen(f) > 0);
    free(csv);
    free(core);
    // a tuned variant that does not train: its row an error naming the check, exit 1
    rc = twin("st", "--preset=tiny --threads=1 --twin_modules=zero_grad --benchmark_min_time=0.02 "
                    "--benchmark_repetitions=1 --harness_precision=0 --practice_selftest=no_update");
    csv = read_out("st.csv");
    assert_int_equal(rc, 1);
    value_of(csv, "pytorch_zero_grad,set_to_none", "preset:tiny;batch:0", "status", f, sizeof f);
    assert_string_equal(f, "error");
    value_of(csv, "pytorch_zero_grad,set_to_none", "preset:tiny;batch:0", "reason", f, sizeof f);
    assert_non_null(strstr(f, "check: the update"));
    printf("no_update: %s\n", f);
    value_of(csv, "pytorch_zero_grad,memset", "preset:tiny;batch:0", "status", f, sizeof f);
    assert_string_equal(f, "ok");
    free(csv);
}

static void test_bad_flags(void **state)
{
    (void)state;
    // parsed before torch is imported: no torch needed
    const char *bad[] = {"--benchmark_repetitions=0", "--harness_precision=2", "--device=tpu", "--threads=x",
                         "--benchmark_filter=(", "--benchmark_min_time=-1", "--no_such_flag=1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(bad[i], "="), bad[i]);
        int rc = test_run("cd '%s' && python3 scripts/twin/bench.py '%s' >/dev/null 2>'%s/err.txt'",
                          test_suite_root(), bad[i], test_dir);
        char *err = read_out("err.txt");
        if (rc != 2 || !strstr(err, flag)) fail_msg("%s: exit %d, stderr: %s", bad[i], rc, err);
        free(err);
    }
}

// ---- run-suite.sh ------------------------------------------------------------------------

// A fake build in test_dir/build: context, steptime (a full build) and one core program
// that lists a row and writes the pin_memory fixture as its CSV.
static void fake_build(void)
{
    char build[4200], body[1500];
    snprintf(build, sizeof build, "%s/build", test_dir);
    assert_int_equal(test_run("mkdir -p '%s' '%s/results'", build, test_dir), 0);
    test_write_script(build, "context",
                      "if [ \"$1\" = --slug ]; then echo cpu_fake; else echo gpu_name=none; echo host_cpu=Fake; "
                      "echo host_cores=2; fi");
    test_write_script(build, "steptime", "exit 0");
    snprintf(body, sizeof body,
             "case \"$*\" in *--benchmark_list_tests*) echo p/row/1/min_time:0.010; exit 0;; esac\n"
             "for a in \"$@\"; do case $a in --harness_csv=*) cp '%s/tests/fixtures/pin_memory_fixture.csv' "
             "\"${a#*=}\";; esac; done\n",
             test_suite_root());
    test_write_script(build, "bench_fake", body);
}

static int suite(const char *env, const char *folder)
{
    fflush(stdout);
    return test_run("cd '%s' && %s BENCH_NO_CHARTS=1 BENCH_REPETITIONS=2 RESULTS_DIR='%s/results/%s' "
                    "bash scripts/run-suite.sh '%s/build' >'%s/%s.txt' 2>&1 </dev/null",
                    test_suite_root(), env, test_dir, folder, test_dir, test_dir, folder);
}

static void test_run_suite_twin_off_and_no_torch(void **state)
{
    (void)state;
    fake_build();
    // BENCH_TWIN=0: not run, said in the plan
    int rc = suite("BENCH_TWIN=0", "off");
    char *out = read_out("off.txt");
    if (rc != 0 || !strstr(out, "pytorch: not run (BENCH_TWIN=0)")) fail_msg("BENCH_TWIN=0 (exit %d):\n%s", rc, out);
    char path[4300];
    snprintf(path, sizeof path, "%s/results/off/pytorch.csv", test_dir);
    assert_int_not_equal(access(path, F_OK), 0);
    free(out);
    // a Python without torch: the rows are skips naming why, and the plan says so
    char fake[4200];
    snprintf(fake, sizeof fake, "%s/notorch", test_dir);
    assert_int_equal(test_run("mkdir -p '%s'", fake), 0);
    assert_true(test_write_file(fake, "torch.py", "raise ImportError(\"No module named 'torch' (fake)\")\n"));
    char script[4400];
    snprintf(script, sizeof script, "PYTHONPATH='%s' exec python3 \"$@\"", fake);
    test_write_script(fake, "python", script);
    char env[4400];
    snprintf(env, sizeof env, "PYTHON='%s/python'", fake);
    rc = suite(env, "notorch");
    out = read_out("notorch.txt");
    if (rc != 0 || !strstr(out, "pytorch: no torch in") || !strstr(out, "pytorch:"))
        fail_msg("no torch (exit %d):\n%s", rc, out);
    char *csv = read_out("results/notorch/pytorch.csv");
    char f[512];
    value_of(csv, "pytorch_zero_grad,all", "", "status", f, sizeof f);
    assert_string_equal(f, "skipped");
    value_of(csv, "pytorch_zero_grad,all", "", "reason", f, sizeof f);
    assert_non_null(strstr(f, "no torch"));
    printf("no torch: %s\n", f);
    char *st = read_out("results/notorch/suite-status.tsv");
    assert_non_null(strstr(st, "pytorch\tskipped"));
    free(st);
    free(csv);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stopping_rule_matches_c, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_bad_flags, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_run_suite_twin_off_and_no_torch, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_threads_and_warmup, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_budget_is_shared_by_practices, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_zero_grad_batch_header_and_selftest, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
