// test_guide.c: `make guide` (scripts/guide.sh over scripts/guide.py) on two fixture runs
// with made-up numbers, one per "machine": guide.md has the machines table (what differs in
// bold), per practice the claim, the chart across machines, the variant x machine table (a
// variant one machine did not measure says so) and a recommendation line per machine; the
// variants come in natural order whatever order each run's rows came in; no SVG holds
// scientific notation; a garbage run is an error. And scripts/fleet.sbatch without SLURM:
// its syntax, the array task's folder naming, and its guide step over fake runs.
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

// Run A lists v10 before v2, run B the other way round; B did not measure `slow`.
static const char kByVariantA[] =
    "practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended,repetitions,"
    "reached,run,equivalence_margin\n"
    "demo,v10,GPU A,ha,1,2.0000,1.8000,2.2000,faster,0,,5,,a,0.05\n"
    "demo,v2,GPU A,ha,1,1.0100,0.9800,1.0300,equivalent,0,,5,,a,0.05\n"
    "demo,slow,GPU A,ha,1,0.9000,0.7000,1.2000,inconclusive,0,,5,,a,0.05\n";
static const char kByVariantB[] =
    "practice,tuned,gpu_name,host,points,geomean_speedup,ci_low,ci_high,verdict,noisy,contended,repetitions,"
    "reached,run,equivalence_margin\n"
    "demo,v2,GPU B,hb,1,1.5000,1.4000,1.6000,faster,0,,5,,b,0.05\n"
    "demo,v10,GPU B,hb,1,0.5000,0.4500,0.5500,slower,0,,5,,b,0.05\n";
static const char kPoints[] =
    "practice,params,baseline,tuned,baseline_s,tuned_s,speedup,ci_low,ci_high,verdict\n"
    "demo,size:1,base,v2,1.0,0.5,2.0,1.8,2.2,faster\n";
static const char kTidy[] =
    "practice,variant,role,timing,params,status,reason,repetitions,time,time_unit,images_per_second\n"
    "demo,base,baseline,wall,size:1,ok,,5,2.0,ms,1048576\n"
    "demo,v2,tuned,wall,size:1,ok,,5,1.0,ms,2097152\n"
    "demo,slow,tuned,wall,size:1,skipped,no CUDA device,1,,ms,\n";
static const char kClaims[] =
    "practice,tuned,direction,claim,effect_low,effect_high,source,hardware\n"
    "demo,v2,faster,v2 makes demo faster,1.5,2.5,a test source,a test GPU\n";

static void write_file(const char *folder, const char *name, const char *text)
{
    if (!test_write_file(folder, name, text)) fail_msg("cannot write %s/%s", folder, name);
}

// A fake run test_dir/NAME measured on GPU (its rows in by_variant).
static void write_run(const char *name, const char *gpu, const char *by_variant, const char *commit)
{
    char dir[1024], text[512];
    snprintf(dir, sizeof dir, "%s/%s", test_dir, name);
    mkdir(dir, 0755);
    snprintf(text, sizeof text,
             "gpu_name=%s\ndriver_version=550.1\ncuda_runtime=12.4\ncudnn_version=9.1\nhost=h\n"
             "run_date=2026-01-02T03:04:05Z\n", gpu);
    write_file(dir, "context.txt", text);
    snprintf(text, sizeof text, "command: make bench\nrepetitions: 5 (randomly interleaved)\ngit: %s\n", commit);
    write_file(dir, "command.txt", text);
    write_file(dir, "summary_by_variant.csv", by_variant);
    write_file(dir, "summary.csv", kPoints);
    write_file(dir, "demo.csv", kTidy);
}

static bool tools_missing(void)
{
    if (test_run("command -v python3 >/dev/null 2>&1 && command -v gnuplot >/dev/null 2>&1") == 0) return false;
    printf("skipped: python3 or gnuplot is not installed here (make guide needs both)\n");
    return true;
}

// make guide's script on RESULTS (the environment, as `make guide` passes it) into test_dir/guide.
static int guide_on(const char *results)
{
    setenv("RESULTS", results, 1);
    write_file(test_dir, "claims.csv", kClaims);
    int rc = test_run("cd '%s' && CLAIMS_CSV='%s/claims.csv' GUIDE_DIR='%s/guide' bash '%s/scripts/guide.sh' "
                      ">'%s/out.txt' 2>&1",
                      test_dir, test_dir, test_dir, test_suite_root(), test_dir);
    unsetenv("RESULTS");
    return rc;
}

static char *guide_md(void)
{
    char *text = test_read_in(test_dir, "guide/guide.md");
    if (!text) fail_msg("no guide.md: %s", test_read_in(test_dir, "out.txt"));
    return text;
}

static void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want)) fail_msg("no '%s' in:\n%s", want, text);
}

static void test_guide_from_two_runs(void **state)
{
    (void)state;
    if (tools_missing()) skip();
    write_run("run_a", "GPU A", kByVariantA, "aaaa111");
    write_run("run_b", "GPU B", kByVariantB, "bbbb222");
    assert_int_equal(guide_on("run_a run_b"), 0);
    char *md = guide_md();
    // the machines table: what differs in bold, what does not plain
    assert_has(md, "| **GPU** | GPU A | GPU B |");
    assert_has(md, "| **suite commit** | aaaa111 | bbbb222 |");
    assert_has(md, "| CUDA | 12.4 | 12.4 |");
    // the claim and its source; the chart, with the baseline named
    assert_has(md, "v2 makes demo faster");
    assert_has(md, "Source: a test source");
    assert_has(md, "median time of `base`");
    assert_has(md, "](charts/guide_demo.svg)");
    char path[1024];
    snprintf(path, sizeof path, "%s/guide/charts/guide_demo.svg", test_dir);
    assert_true(test_file_at_least(path, 2000));
    // the matrix: effect, interval and verdict per machine; a variant B did not measure
    assert_has(md, "| `v2` | 1.01x [0.98-1.03], ±2.5% — equivalent | 1.50x [1.40-1.60], ±6.7% — faster |");
    assert_has(md, "| `slow` | 0.90x [0.70-1.20], ±28% — inconclusive | not measured here (");
    // a recommendation line per machine, from the verdicts
    assert_has(md, "- on GPU A: slow inconclusive (±28%); v2 makes no difference (equivalent within ±5%); "
                   "turn on v10 (2.00x [1.80-2.20])");
    assert_has(md, "- on GPU B: turn on v2 (1.50x [1.40-1.60]); leave v10 off: slower (0.50x [0.45-0.55])");
    // absolute throughput: fixed notation
    assert_has(md, "| `v2` | size:1 | 2097152 | 2097152 |");
    // natural order (v2 before v10) in the table, whatever order the rows came in
    char *v2 = strstr(md, "| `v2` | 1.01x"), *v10 = strstr(md, "| `v10` | 2.00x");
    assert_non_null(v2);
    assert_non_null(v10);
    assert_true(v2 < v10);
    free(md);
    // ... and on the chart's axis
    char *svg = test_read_file(path, NULL);
    assert_non_null(svg);
    char *t2 = strstr(svg, ">v2<"), *t10 = strstr(svg, ">v10<");
    assert_non_null(t2);
    assert_non_null(t10);
    assert_true(t2 < t10);
    assert_has(svg, "95% interval");
    assert_has(svg, "1x = no effect");
    assert_has(svg, "GPU A: 2026-01-02, driver 550.1, CUDA 12.4, cuDNN 9.1"); // provenance
    free(svg);
    // no scientific notation in any chart (throughputs of a million images/s included)
    assert_int_not_equal(test_run("grep -l 'e+0' '%s'/guide/charts/*.svg >/dev/null 2>&1", test_dir), 0);
    snprintf(path, sizeof path, "%s/guide/charts/guide_throughput_demo.svg", test_dir);
    assert_true(test_file_at_least(path, 2000));
}

// One run is a guide too; the same variant order and colours as in two.
static void test_guide_of_one_run(void **state)
{
    (void)state;
    if (tools_missing()) skip();
    write_run("run_b", "GPU B", kByVariantB, "bbbb222");
    assert_int_equal(guide_on("run_b"), 0);
    char *md = guide_md();
    assert_has(md, "| GPU | GPU B |");
    char *v2 = strstr(md, "| `v2` |"), *v10 = strstr(md, "| `v10` |");
    assert_non_null(v2);
    assert_non_null(v10);
    assert_true(v2 < v10);
    free(md);
}

// A garbage run (a summary that is not one, a folder that is not a run, none at all) is an
// error naming it, never a guide.
static void test_garbage_run_is_an_error(void **state)
{
    (void)state;
    if (tools_missing()) skip();
    write_run("run_a", "GPU A", kByVariantA, "aaaa111");
    write_run("bad", "GPU X", "this is,not\na summary\n", "cccc333");
    assert_int_not_equal(guide_on("run_a bad"), 0);
    char *out = test_read_in(test_dir, "out.txt");
    assert_non_null(out);
    assert_has(out, "guide: ");
    assert_has(out, "summary_by_variant.csv");
    free(out);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/empty", test_dir);
    mkdir(dir, 0755);
    assert_int_not_equal(guide_on("run_a empty"), 0);
    out = test_read_in(test_dir, "out.txt");
    assert_has(out, "not a results folder");
    free(out);
    assert_int_not_equal(guide_on("run_a missing_folder"), 0);
    assert_int_not_equal(guide_on(""), 0);
}

// scripts/fleet.sbatch without SLURM: valid bash; an array task's folder is named by its
// index and node; the launcher submits the array and a guide job that waits for it; the
// guide step over fake runs writes the guide.
static void test_fleet_without_slurm(void **state)
{
    (void)state;
    const char *root = test_suite_root();
    assert_int_equal(test_run("bash -n '%s/scripts/fleet.sbatch'", root), 0);
    assert_int_equal(test_run("cd '%s' && FLEET_DRY_RUN=1 FLEET_ROOT='%s/fleet' SLURM_ARRAY_TASK_ID=3 "
                              "SLURM_ARRAY_JOB_ID=77 bash scripts/fleet.sbatch >'%s/out.txt' 2>&1",
                              root, test_dir, test_dir), 0);
    char *out = test_read_in(test_dir, "out.txt");
    assert_non_null(out);
    assert_has(out, "/fleet/fleet_77/task03-");
    assert_has(out, "RESULTS_ROOT=");
    assert_has(out, " bench");
    free(out);
    assert_int_equal(test_run("cd '%s' && FLEET_DRY_RUN=1 FLEET_ROOT='%s/fleet' FLEET_ID=f1 "
                              "bash scripts/fleet.sbatch 4 >'%s/out.txt' 2>&1", root, test_dir, test_dir), 0);
    out = test_read_in(test_dir, "out.txt");
    assert_has(out, "--array=0-3");
    assert_has(out, "--dependency=afterany:");
    free(out);
    assert_int_not_equal(test_run("cd '%s' && FLEET_DRY_RUN=1 FLEET_ROOT=x bash scripts/fleet.sbatch zero "
                                  ">/dev/null 2>&1", root), 0);
    assert_int_not_equal(test_run("cd '%s' && env -u FLEET_ROOT bash scripts/fleet.sbatch >/dev/null 2>&1", root), 0);
    if (tools_missing()) return;
    // the guide step: the newest run of every task folder (fake runs), into FLEET_DIR/guide
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fleet", test_dir);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/fleet/f2", test_dir);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/fleet/f2/task00-a", test_dir);
    mkdir(dir, 0755);
    write_run("fleet/f2/task00-a/run_a", "GPU A", kByVariantA, "aaaa111");
    snprintf(dir, sizeof dir, "%s/fleet/f2/task01-b", test_dir);
    mkdir(dir, 0755);
    write_run("fleet/f2/task01-b/run_b", "GPU B", kByVariantB, "bbbb222");
    write_file(test_dir, "claims.csv", kClaims);
    assert_int_equal(test_run("cd '%s' && CLAIMS_CSV='%s/claims.csv' FLEET_STEP=guide FLEET_ROOT='%s/fleet' "
                              "FLEET_ID=f2 bash scripts/fleet.sbatch >'%s/out.txt' 2>&1",
                              root, test_dir, test_dir, test_dir), 0);
    char *md = test_read_in(test_dir, "fleet/f2/guide/guide.md");
    if (!md) fail_msg("no fleet guide: %s", test_read_in(test_dir, "out.txt"));
    assert_has(md, "| **GPU** | GPU A | GPU B |");
    free(md);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_guide_from_two_runs, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_guide_of_one_run, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_garbage_run_is_an_error, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_fleet_without_slurm, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
