// test_bench_bn_fold.c: the bn_fold inference practice (build/bench_bn_fold). It lists bn
// (baseline) and folded (tuned) over its presets and batch axis; tiny runs on whatever
// backend this machine has (the fast CPU backend without a GPU): every row ok, the folded
// rows checked against the BN model's no_grad logits on a held-out batch of the row's size
// (wrong = 0, check_rel_diff within the program's tolerance, no top-1 flip) with fewer
// parameters (no BN) and, on the fast CPU backend, no bias pass (conv_bias_passes 0);
// --practice_selftest=frozen (the folded core left unfolded), =skip_all (folded without the
// running statistics) and =fold_ignore_affine (folded without gamma and beta) fail every
// folded row (exit 1) while the bn rows stay ok.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

// The program's BN_FOLD_CPU_TOL (CUDA: BN_FOLD_GPU_TOL).
#define CPU_TOL 1e-4
#define GPU_TOL 1e-2
#define TINY_ARGS "--benchmark_filter='preset:tiny/' --benchmark_min_time=0.01"
#define TINY_BATCHES 3  // the CPU's batch axis: 1, 8, 32

static void test_lists_variants_and_batches(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_bn_fold");
    assert_non_null(list);
    assert_non_null(strstr(list, "bn_fold/bn/preset:tiny/batch:1/"));
    assert_non_null(strstr(list, "bn_fold/folded/preset:tiny/batch:1/"));
    assert_non_null(strstr(list, "bn_fold/folded/preset:tiny/batch:8/"));
    assert_non_null(strstr(list, "bn_fold/folded/preset:small/"));
    assert_null(strstr(list, "preset:mlp"));  // no BN
    free(list);
}

static void test_tiny_runs_and_checks(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_bn_fold", TINY_ARGS);
    assert_non_null(csv);
    int bn_rows = 0, folded_rows = 0;
    double params_bn = 0, params_folded = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char status[32], variant[32], wrong[32], rel[32], flips[32], params[32], ms[32], batch[32],
            mib[32], passes[32];
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        assert_string_equal(status, "ok");
        test_csv_named_field(csv, line + 1, "parameters", params, sizeof params);
        test_csv_named_field(csv, line + 1, "batch_ms", ms, sizeof ms);
        test_csv_named_field(csv, line + 1, "batch", batch, sizeof batch);
        test_csv_named_field(csv, line + 1, "activation_mib", mib, sizeof mib);
        assert_true(atof(ms) > 0.0);
        printf("%s batch %s: %s ms per batch, activations %s MiB\n", variant, batch, ms, mib);
        if (strcmp(variant, "bn") == 0) {
            params_bn = atof(params);
            bn_rows++;
            continue;
        }
        assert_string_equal(variant, "folded");
        params_folded = atof(params);
        test_csv_named_field(csv, line + 1, "wrong", wrong, sizeof wrong);
        test_csv_named_field(csv, line + 1, "check_rel_diff", rel, sizeof rel);
        test_csv_named_field(csv, line + 1, "check_top1_flips", flips, sizeof flips);
        test_csv_named_field(csv, line + 1, "conv_bias_passes", passes, sizeof passes);
        double tol = test_gpu_present() ? GPU_TOL : CPU_TOL;
        printf("  folded vs bn: logits relative L2 %s (tolerance %g), top-1 flips %s, bias passes %s\n",
               rel, tol, flips, passes);
        assert_string_equal(wrong, "0");
        assert_true(atof(rel) <= tol);
        if (!test_gpu_present()) {
            assert_true(atof(flips) == 0.0);
            assert_true(atof(passes) == 0.0);  // the fast CPU backend's biases are in its GEMMs
        }
        folded_rows++;
    }
    assert_int_equal(bn_rows, TINY_BATCHES);
    assert_int_equal(folded_rows, TINY_BATCHES);
    assert_true(params_folded > 0 && params_folded < params_bn);  // gamma, beta gone
    free(csv);
}

static const char *const folded[] = {"folded"};

// Every folded row fails its check (the bn rows stay ok).
static void expect_selftest_fails(const char *mode)
{
    assert_int_equal(test_selftest_fails("bench_bn_fold", TINY_ARGS, mode, "bn_fold", "bn", folded, 1,
                                         "differ from the BN model's"),
                     TINY_BATCHES);
}

static void test_selftest_frozen_fails(void **state)
{
    (void)state;
    expect_selftest_fails("frozen");
}

static void test_selftest_skip_all_fails(void **state)
{
    (void)state;
    expect_selftest_fails("skip_all");
}

// A fold that ignores gamma and beta: the BN model's are those of a long-trained network
// (core_bn_randomize), where it shows.
static void test_selftest_fold_ignore_affine_fails(void **state)
{
    (void)state;
    expect_selftest_fails("fold_ignore_affine");
}

static void test_bad_selftest_refused(void **state)
{
    (void)state;
    int status = -1;
    char *csv = test_bench_csv_exit("bench_bn_fold", TINY_ARGS " --practice_selftest=bogus", &status);
    printf("--practice_selftest=bogus: exit status %d\n", status);
    assert_int_not_equal(status, 0);
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_variants_and_batches),
        cmocka_unit_test(test_tiny_runs_and_checks),
        cmocka_unit_test(test_selftest_frozen_fails),
        cmocka_unit_test(test_selftest_skip_all_fails),
        cmocka_unit_test(test_selftest_fold_ignore_affine_fails),
        cmocka_unit_test(test_bad_selftest_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
