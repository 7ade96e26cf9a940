// test_bench_sync.c: the sync practice. Always (CPU): the program lists every variant and,
// without a GPU, skips each kind of run with "no CUDA device" and exits 0; the loss check
// (bench/sync/sync_losses.h) accepts equal windows and catches a wrong, missing or NaN read,
// and run on the CPU backend's deferred read-back it finds every read equal to the
// baseline's means, and refuses a baseline that does not read every step. With a GPU:
// every micro variant does the same work (the count kernel's result), prints when it
// should, and times its kernels within its wall time; the CUDA core's deferred reads
// pass the same check; the program's runs are ok and unflagged.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/sync/sync_losses.h"
#include "bench/sync/sync_micro.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "tests/support.h"

static void test_lists_every_variant(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_sync");
    assert_non_null(list);
    const char *want[] = {"sync/every_step/preset:tiny/batch:8/", "sync/every_10/preset:small/batch:0/",
                          "sync/every_100/preset:resnet18/batch:8/", "sync/at_end/preset:resnet18/batch:0/",
                          "sync_micro/item/kernels:4/", "sync_micro/none/kernels:64/",
                          "sync_micro/stream_sync/kernels:16/", "sync_micro/nonzero/kernels:4/",
                          "sync_micro/print/kernels:64/", "sync_hidden_alloc/malloc_free/kernels:4/",
                          "sync_hidden_alloc/cached/kernels:16/", "sync_hidden_copy/pageable_copy/kernels:64/",
                          "sync_hidden_copy/pinned_copy/kernels:4/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("--benchmark_list_tests lacks %s", want[i]);
    assert_int_equal(test_count_lines(list), 4 * 3 * 2 + 9 * 3);  // macro: 4 variants x 3 presets x 2 batches
    free(list);
}

// One run of each kind: skipped with the reason without a GPU, ok and unflagged with one.
static void test_runs_or_skips_with_reason(void **state)
{
    (void)state;
    bool gpu = test_gpu_present();
    char *csv = test_bench_csv("bench_sync", "--benchmark_min_time=0.01 "
                               "--benchmark_filter='^(sync/every_10/preset:tiny/batch:8|sync_micro/nonzero/kernels:4|"
                               "sync_hidden_alloc/malloc_free/kernels:4)/'");
    assert_non_null(csv);
    char why[512];
    int rows = test_rows_ok_or_skipped(csv, gpu, why, sizeof why);
    if (rows < 0) fail_msg("%s", why);
    assert_int_equal(rows, 3);
    if (gpu) {
        const char *row = strstr(csv, "\nsync,every_10,");
        assert_non_null(row);
        char v[64];
        assert_true(test_csv_field(row + 1, test_csv_column(csv, "loss_reads_checked"), v, sizeof v));
        assert_true(atof(v) >= 1);
        assert_true(test_csv_field(row + 1, test_csv_column(csv, "wrong"), v, sizeof v));
        assert_string_equal(v, "0");
    }
    free(csv);
}

static void test_compare_catches_wrong_missing_and_nan_reads(void **state)
{
    (void)state;
    LossRead every[6];
    for (int s = 0; s < 6; s++) every[s] = (LossRead){s, 1, 2.0f - 0.1f * s};
    // windows of 3 steps: means of steps 0-2 and 3-5
    LossRead ok[2] = {{2, 3, (2.0f + 1.9f + 1.8f) / 3}, {5, 3, (1.7f + 1.6f + 1.5f) / 3}};
    LossComparison c = sync_losses_compare(every, 6, ok, 2, SYNC_LOSS_TOLERANCE);
    assert_int_equal(c.compared, 2);
    assert_int_equal(c.mismatched, 0);
    assert_true(c.max_rel < 1e-6);
    LossRead off[1] = {{5, 3, 1.6f * 1.001f}};  // 0.1 %: over the tolerance
    c = sync_losses_compare(every, 6, off, 1, SYNC_LOSS_TOLERANCE);
    assert_int_equal(c.mismatched, 1);
    assert_true(c.max_rel > 5e-4);
    LossRead last_only[1] = {{5, 1, 1.5f}};  // a window of one step is the step's own loss
    assert_int_equal(sync_losses_compare(every, 6, last_only, 1, SYNC_LOSS_TOLERANCE).mismatched, 0);
    LossRead missing[1] = {{7, 3, 1.5f}};  // steps the baseline never read
    assert_int_equal(sync_losses_compare(every, 6, missing, 1, SYNC_LOSS_TOLERANCE).mismatched, 1);
    LossRead nan_read[1] = {{2, 3, NAN}};
    assert_int_equal(sync_losses_compare(every, 6, nan_read, 1, SYNC_LOSS_TOLERANCE).mismatched, 1);
}

static CoreConfig tiny_config(CoreBackend backend)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = backend;
    cfg.batch_size = 8;
    return cfg;
}

static void check_deferred(CoreBackend backend, int interval, int want_reads)
{
    CoreConfig base = tiny_config(backend), tuned = base;
    tuned.readback = CORE_READBACK_DEFERRED;
    tuned.readback_interval = interval;
    LossComparison c;
    if (sync_losses_check(&base, &tuned, &c) != 0) fail_msg("interval %d: %s", interval, error_message());
    assert_int_equal(c.compared, want_reads);
    if (c.mismatched) fail_msg("interval %d: %d reads differ (max %g)", interval, c.mismatched, c.max_rel);
}

// The core's CPU backend defers its reads as the CUDA one does: honest to check here.
static void test_cpu_deferred_reads_equal_baseline_means(void **state)
{
    (void)state;
    check_deferred(CORE_BACKEND_CPU, 10, 2);  // 20 steps, 2 reads
    check_deferred(CORE_BACKEND_CPU, 60, 1);  // 60 steps, 1 read
    CoreConfig base = tiny_config(CORE_BACKEND_CPU), tuned = base;
    base.readback = CORE_READBACK_DEFERRED;  // a baseline without per-step losses
    base.readback_interval = 10;
    LossComparison c;
    assert_int_equal(sync_losses_check(&base, &tuned, &c), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    error_clear();
}

static void test_gpu_deferred_reads_equal_baseline_means(void **state)
{
    (void)state;
    REQUIRE_GPU();
    check_deferred(CORE_BACKEND_CUDA, 10, 2);
    check_deferred(CORE_BACKEND_CUDA, 100, 1);
}

static void test_gpu_every_micro_variant_does_the_work(void **state)
{
    (void)state;
    REQUIRE_GPU();
    for (int v = 0; v < SYNC_VARIANT_COUNT; v++) {
        SyncMicro m;
        SyncMicroResult r;
        int32_t count = -1;
        int rc = sync_micro_create(&m, 4, 8);
        if (rc == 0) rc = sync_micro_run(&m, (SyncVariant)v, &r);
        if (rc == 0) rc = sync_micro_read_count(&m, &count);
        sync_micro_free(&m);
        if (rc != 0) fail_msg("variant %d: %s", v, error_message());
        assert_int_equal(count, SYNC_MICRO_ELEMENTS / 2);
        assert_int_equal(r.wrong_counts, 0);
        assert_true(r.kernel_seconds > 0);
        // kernel time is inside the wall time (events resolve to about 0.5 us)
        if (r.kernel_seconds > r.wall_seconds + 1e-5)
            fail_msg("variant %d: kernel time %g s over wall time %g s", v, r.kernel_seconds, r.wall_seconds);
        if (v == SYNC_PRINT) assert_true(r.text_bytes > 8 * SYNC_MICRO_PRINT_VALUES);
        else assert_int_equal(r.text_bytes, 0);
    }
    SyncMicro m;
    assert_int_equal(sync_micro_create(&m, 1, 8), -1);  // the count kernel needs L >= 2
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    error_clear();
    sync_micro_free(&m);
}

// GPU: no row carries a speedup over "the baseline that ran last" in the process (under
// random interleaving another repetition's): speedups are the summary's, from the
// repetitions of both rows. The baseline runs first here (registration order), as the old
// code needed: a speedup counter would show up.
static void test_gpu_no_speedup_from_another_run(void **state)
{
    (void)state;
    REQUIRE_GPU();
    char *csv = test_bench_csv("bench_sync", "--benchmark_min_time=0.01 --benchmark_repetitions=2 "
                               "--benchmark_filter='^sync/(every_step|every_10)/preset:tiny/batch:8/'");
    assert_non_null(csv);
    assert_int_equal(test_csv_column(csv, "speedup"), -1);
    assert_int_equal(test_csv_column(csv, "baseline_step_ms"), -1);
    char v[64];
    assert_true(test_csv_row_value(csv, "sync,every_10", "preset:tiny;batch:8", "status", v, sizeof v));
    assert_string_equal(v, "ok");
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_every_variant),
        cmocka_unit_test(test_runs_or_skips_with_reason),
        cmocka_unit_test(test_compare_catches_wrong_missing_and_nan_reads),
        cmocka_unit_test(test_cpu_deferred_reads_equal_baseline_means),
        cmocka_unit_test(test_gpu_deferred_reads_equal_baseline_means),
        cmocka_unit_test(test_gpu_every_micro_variant_does_the_work),
        cmocka_unit_test(test_gpu_no_speedup_from_another_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
