// test_bench_ddp_guide.c: the distributed items of PyTorch's tuning guide in build/bench_ddp
// (ddp_no_sync, ddp_bucket_order, ddp_balance). It lists their variants; runs their CPU
// rows on 2 MPI ranks (one step per timed iteration): every row ok, every tuned row's
// update checked against its baseline's (wrong = 0, check_rel_diff within the program's
// tolerance: 0 for the bucket order over 2 ranks, where each element's sum is a + b
// whatever the bucketing), the mechanism in effect (4 all-reduces of every bucket per step
// without no_sync and 1 with it; several buckets in either order; every rank's
// wait at the all-reduces reported, idle_ms_max >= idle_ms_min; no timing is asserted); --practice_selftest=half_lr (every tuned row), frozen and
// drop_step (one each) fail the tuned rows; one rank only (--devices_max=1) skips the rows,
// naming why; without mpirun a row fails naming the missing tool (setup installs it).
// The rank runs skip, visibly, without mpirun or with fewer than 2 CPU cores.
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

// The program's NO_SYNC_TOLERANCE and BALANCE_TOLERANCE (CPU).
#define TOL 1e-4
#define FAMILIES "ddp_no_sync/.*preset:tiny|ddp_bucket_order|ddp_balance"
#define ARGS "--backend=cpu --guide_steps=1 --benchmark_filter='" FAMILIES "'"

static bool cannot_run_ranks(void)
{
    if (test_run("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skipped: mpirun not found (install openmpi-bin)\n");
        return true;
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("skipped: fewer than 2 CPU cores (one rank per core)\n");
        return true;
    }
    return false;
}

static void test_lists_the_families(void **state)
{
    (void)state;
    // the CPU's axes (a GPU lists small, mlp and larger batches)
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    assert_int_equal(test_run("'%s/bench_ddp' --backend=cpu --benchmark_list_tests >'%s/list.txt'", test_build_dir(), tmp), 0);
    char *list = test_read_in(tmp, "list.txt");
    test_remove_tree(tmp);
    free(tmp);
    assert_non_null(list);
    const char *want[] = {"ddp_no_sync/sync_every/preset:tiny/batch:8/accum:4/",
                          "ddp_no_sync/no_sync/preset:tiny/batch:8/accum:4/",
                          "ddp_no_sync/no_sync/preset:mlp/batch:8/accum:4/",
                          "ddp_bucket_order/forward_order/preset:tiny/batch:8/bucket_kib:4/",
                          "ddp_bucket_order/backward_order/preset:tiny/batch:8/bucket_kib:4/",
                          "ddp_balance/imbalanced/preset:mlp/batch:512/",
                          "ddp_balance/balanced/preset:mlp/batch:512/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("bench_ddp does not list %s", want[i]);
    free(list);
}

static double value(const char *csv, const char *pv, const char *params, const char *name)
{
    char v[256];
    if (!test_csv_row_value(csv, pv, params, name, v, sizeof v)) fail_msg("no row %s %s", pv, params);
    if (!v[0]) fail_msg("%s %s: no %s", pv, params, name);
    return atof(v);
}

static void expect_ok(const char *csv, const char *pv, const char *params)
{
    char v[512];
    if (!test_csv_row_value(csv, pv, params, "status", v, sizeof v)) fail_msg("no row %s %s", pv, params);
    if (strcmp(v, "ok") != 0) {
        char why[512] = "";
        test_csv_row_value(csv, pv, params, "reason", why, sizeof why);
        fail_msg("%s %s: status %s (%s)", pv, params, v, why);
    }
}

// A tuned row's check: wrong 0, within tol, and a baseline that moved.
static double expect_checked(const char *csv, const char *pv, const char *params, double tol)
{
    expect_ok(csv, pv, params);
    double rel = value(csv, pv, params, "check_rel_diff");
    printf("%s %s: check_rel_diff %.3g (tolerance %g), baseline moved %.3g\n", pv, params, rel, tol,
           value(csv, pv, params, "check_baseline_moved"));
    assert_true(value(csv, pv, params, "wrong") == 0);
    assert_true(rel <= tol);
    assert_true(value(csv, pv, params, "check_baseline_moved") > 1e-6);
    return rel;
}

static void test_rows_run_and_check(void **state)
{
    (void)state;
    if (cannot_run_ranks()) skip();
    char *csv = test_bench_csv("bench_ddp", ARGS);
    assert_non_null(csv);
    const char *accum = "preset:tiny;batch:8;accum:4", *order = "preset:tiny;batch:8;bucket_kib:4",
               *share = "preset:mlp;batch:512";
    expect_ok(csv, "ddp_no_sync,sync_every", accum);
    expect_checked(csv, "ddp_no_sync,no_sync", accum, TOL);
    // tiny fits one default bucket: 4 all-reduces per step without no_sync, 1 with it
    assert_true(value(csv, "ddp_no_sync,sync_every", accum, "buckets") == 1);
    assert_true(value(csv, "ddp_no_sync,sync_every", accum, "allreduces_per_step") == 4);
    assert_true(value(csv, "ddp_no_sync,no_sync", accum, "allreduces_per_step") == 1);
    assert_true(value(csv, "ddp_no_sync,sync_every", accum, "comm_ms") > 0);

    expect_ok(csv, "ddp_bucket_order,forward_order", order);
    assert_true(expect_checked(csv, "ddp_bucket_order,backward_order", order, 0.0) == 0.0);
    assert_true(value(csv, "ddp_bucket_order,forward_order", order, "buckets") > 1);
    assert_true(value(csv, "ddp_bucket_order,backward_order", order, "buckets") > 1);

    expect_ok(csv, "ddp_balance,imbalanced", share);
    expect_checked(csv, "ddp_balance,balanced", share, TOL);
    for (int i = 0; i < 2; i++) {
        const char *pv = i ? "ddp_balance,balanced" : "ddp_balance,imbalanced";
        double most = value(csv, pv, share, "idle_ms_max"), least = value(csv, pv, share, "idle_ms_min");
        printf("%s: idle per step %.3f .. %.3f ms, step %.3f ms\n", pv, least, most, value(csv, pv, share, "step_ms"));
        assert_true(least >= 0 && most >= least);
    }
    free(csv);
}

// The self-test breaks the tuned runs alone (a baseline row runs no check, so it is left
// out to keep the test short): each tuned row of `filter` fails with `reason`, exit 1.
static void expect_selftest_fails(const char *mode, const char *filter, int rows, const char *reason)
{
    if (cannot_run_ranks()) skip();
    char args[512];
    snprintf(args, sizeof args, "--backend=cpu --guide_steps=1 --benchmark_filter='%s' --practice_selftest=%s", filter,
             mode);
    int status = 0, failed = 0;
    char *csv = test_bench_csv_exit("bench_ddp", args, &status);
    assert_non_null(csv);
    printf("bench_ddp %s: exit status %d\n", args, status);
    assert_int_equal(status, 1);
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char variant[64], st[32], why[512];
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        test_csv_named_field(csv, line + 1, "status", st, sizeof st);
        test_csv_named_field(csv, line + 1, "reason", why, sizeof why);
        printf("  %s: %s %s\n", variant, st, why);
        if (strcmp(st, "error") != 0 || !strstr(why, reason)) fail_msg("%s: %s '%s', want an error with '%s'", variant, st, why, reason);
        failed++;
    }
    assert_int_equal(failed, rows);
    free(csv);
}

static void test_selftest_half_lr_fails(void **state)
{
    (void)state;
    expect_selftest_fails("half_lr", "ddp_no_sync/no_sync/.*preset:tiny|ddp_bucket_order/backward|ddp_balance/balanced", 3,
                          "differs from the baseline's by 0.5 ");
}

static void test_selftest_frozen_fails(void **state)
{
    (void)state;
    expect_selftest_fails("frozen", "ddp_no_sync/no_sync/.*preset:tiny", 1, "differs from the baseline's by 1 ");
}

static void test_selftest_drop_step_fails(void **state)
{
    (void)state;
    expect_selftest_fails("drop_step", "ddp_balance/balanced", 1, "differs from the baseline's by 0.6");
}

// One rank cannot show any of it: a skip naming why, never a figure.
static void test_one_rank_is_a_visible_skip(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_ddp", ARGS " --devices_max=1");
    assert_non_null(csv);
    char why[256];
    const char *rows[][2] = {{"ddp_no_sync,no_sync", "preset:tiny;batch:8;accum:4"},
                             {"ddp_bucket_order,forward_order", "preset:tiny;batch:8;bucket_kib:4"},
                             {"ddp_balance,balanced", "preset:mlp;batch:512"}};
    for (int i = 0; i < 3; i++) {
        assert_true(test_csv_row_value(csv, rows[i][0], rows[i][1], "status", why, sizeof why));
        assert_string_equal(why, "skipped");
        assert_true(test_csv_row_value(csv, rows[i][0], rows[i][1], "reason", why, sizeof why));
        assert_non_null(strstr(why, "needs 2 ranks"));
    }
    free(csv);
}

// Without mpirun a CPU row fails naming the missing tool, as every DDP row does (a skip
// only under the GPU check, SUITE_GPU_CHECK=1): PATH is an empty folder for the program.
static void test_missing_mpirun_is_a_failure(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    int status = test_run("SUITE_GPU_CHECK=0 PATH='%s' '%s/bench_ddp' --backend=cpu --devices_max=2 "
                          "--benchmark_filter='ddp_balance/balanced' --harness_csv='%s/out.csv' >'%s/out.txt' 2>&1",
                          tmp, test_build_dir(), tmp, tmp);
    char *csv = test_read_in(tmp, "out.csv");
    assert_non_null(csv);
    char v[512];
    const char *params = "preset:mlp;batch:512";
    assert_true(test_csv_row_value(csv, "ddp_balance,balanced", params, "status", v, sizeof v));
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {  // one core: that skip comes first
        assert_string_equal(v, "skipped");
    } else {
        assert_int_equal(status, 1);
        assert_string_equal(v, "error");
        assert_true(test_csv_row_value(csv, "ddp_balance,balanced", params, "reason", v, sizeof v));
        assert_non_null(strstr(v, "missing tool: mpirun"));
    }
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
}

int main(void)
{
    test_keep_mpi_leaks_nameable();  // the ranks bench_ddp starts: tests/sanitizer/lsan.supp
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_the_families),
        cmocka_unit_test(test_rows_run_and_check),
        cmocka_unit_test(test_selftest_half_lr_fails),
        cmocka_unit_test(test_selftest_frozen_fails),
        cmocka_unit_test(test_selftest_drop_step_fails),
        cmocka_unit_test(test_one_rank_is_a_visible_skip),
        cmocka_unit_test(test_missing_mpirun_is_a_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
