// test_max_batch.c: the largest-batch probes' shared rules (bench/driver/max_batch.h), on a
// fake device whose batches fit while fixed + n x per_image bytes stay within its memory:
// the search doubles from the start until a batch runs out of memory, halves from a start
// that does not fit, never runs a batch past the 2^31-value guard or the cap and says which
// ended it; an error after a batch that fitted ends it with that error, one before any fails
// the probe. The guard of the presets (their largest tensor). The CPU estimate reads the peak's
// line against the budget, with the same cap and guard. The label names the budget and what
// stopped the search. On a GPU (skipped visibly without one): the ballast leaves the budget
// free while held and gives it all back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "bench/driver/max_batch.h"
#include "kernels/error.h"
#include "tests/support.h"

#define MIB ((size_t)1 << 20)

// The fake device: batch n needs fixed + n x per_image bytes of `memory`.
typedef struct Fake {
    double fixed, per_image, memory;
    int error_at;      // a batch that fails with a library error (0: none)
    int largest_run;   // the largest batch run
    int runs;
} Fake;

static int fake_run(void *ctx, int n)
{
    Fake *f = ctx;
    f->runs++;
    if (n > f->largest_run) f->largest_run = n;
    if (n == f->error_at) return error_set(ERROR_LIBRARY, "fake: CUDNN_STATUS_BAD_PARAM at %d", n);
    if (f->fixed + n * f->per_image > f->memory)
        return error_set(ERROR_OUT_OF_MEMORY, "fake: out of memory at %d", n);
    return 0;
}

static int fake_peak(void *ctx, int n, size_t *peak)
{
    Fake *f = ctx;
    f->runs++;
    *peak = (size_t)(f->fixed + n * f->per_image);
    return 0;
}

static MaxBatchSearch search(int start, int cap, size_t values)
{
    return (MaxBatchSearch){.start = start, .cap = cap, .cap_flag = "max_batch_cap",
                            .values_per_image = values, .budget = 256 * MIB};
}

static void test_search_doubles_until_out_of_memory(void **state)
{
    (void)state;
    Fake f = {.fixed = 1000, .per_image = 100, .memory = 1000 + 100 * 300};  // 300 fit
    MaxBatchSearch s = search(1, 1 << 20, 1000);
    MaxBatchResult r;
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    assert_int_equal(r.largest, 256);
    assert_int_equal(r.next, 512);
    assert_int_equal(r.stop, MAX_BATCH_STOP_MEMORY);
    assert_int_equal(r.probes, 10);  // 1, 2, ..., 512
    assert_int_equal(f.runs, 10);
    assert_false(r.estimated);
}

static void test_search_halves_from_a_start_that_does_not_fit(void **state)
{
    (void)state;
    Fake f = {.fixed = 0, .per_image = 1, .memory = 100};
    MaxBatchSearch s = search(256, 1 << 20, 1000);
    MaxBatchResult r;
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    assert_int_equal(r.largest, 64);
    assert_int_equal(r.next, 128);
    assert_int_equal(r.stop, MAX_BATCH_STOP_MEMORY);
    assert_int_equal(r.probes, 3);  // 256, 128, 64
    // Not even one fits: largest 0, and the row skips (below).
    f.memory = 0.5;
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    assert_int_equal(r.largest, 0);
    assert_int_equal(r.next, 1);
}

static void test_search_never_runs_past_the_guard_or_the_cap(void **state)
{
    (void)state;
    // ResNet-18's stem output, 64 x 56 x 56 values per image: the guard is 10,699 images.
    size_t values = 64 * 56 * 56;
    assert_int_equal(max_batch_guard(values), 10699);
    Fake f = {.fixed = 0, .per_image = 1, .memory = 1e12};  // memory never runs out
    MaxBatchSearch s = search(1, 1 << 20, values);
    MaxBatchResult r;
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    assert_int_equal(r.stop, MAX_BATCH_STOP_GUARD);
    assert_int_equal(r.largest, 8192);
    assert_int_equal(r.next, 16384);
    assert_int_equal(f.largest_run, 8192);
    // A start past the guard (--harness_axis=batch=...) starts at the guard.
    f = (Fake){.fixed = 0, .per_image = 1, .memory = 1e12};
    s = search(20000, 1 << 20, values);
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    assert_int_equal(r.largest, 10699);
    assert_int_equal(r.stop, MAX_BATCH_STOP_GUARD);
    assert_int_equal(f.largest_run, 10699);
    f = (Fake){.fixed = 0, .per_image = 1, .memory = 1e12};
    s = search(1, 1000, values);
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    assert_int_equal(r.stop, MAX_BATCH_STOP_CAP);
    assert_int_equal(r.largest, 512);
    assert_true(f.largest_run <= 1000);
}

static void test_search_error_after_a_fit_ends_it_named(void **state)
{
    (void)state;
    Fake f = {.fixed = 0, .per_image = 1, .memory = 1e9, .error_at = 64};
    MaxBatchSearch s = search(1, 1 << 20, 1000);
    MaxBatchResult r;
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    assert_int_equal(r.largest, 32);
    assert_int_equal(r.next, 64);
    assert_int_equal(r.stop, MAX_BATCH_STOP_ERROR);
    assert_non_null(strstr(r.error, "CUDNN_STATUS_BAD_PARAM at 64"));
    // Before any batch fitted, the error is the probe's: -1, the error kept.
    f = (Fake){.fixed = 0, .per_image = 1, .memory = 1e9, .error_at = 1};
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), -1);
    assert_int_equal(error_kind(), ERROR_LIBRARY);
}

static void test_guard_of_the_presets(void **state)
{
    (void)state;
    // The largest tensor per image: the stem's output (tiny, small, resnet18), the input (mlp).
    const struct { const char *preset; size_t values; } want[] = {
        {"tiny", 8 * 16 * 16}, {"small", 32 * 32 * 32}, {"resnet18", 64 * 56 * 56}, {"mlp", 3 * 16 * 16}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CoreConfig cfg;
        assert_int_equal(core_config_preset(&cfg, want[i].preset), 0);
        size_t values = 0;
        assert_int_equal(max_batch_values_per_image(&cfg.model, &values), 0);
        printf("%s: %zu values per image, guard %d images\n", want[i].preset, values, max_batch_guard(values));
        assert_int_equal(values, want[i].values);
    }
}

static void test_estimate_reads_the_line_against_the_budget(void **state)
{
    (void)state;
    Fake f = {.fixed = 4e6, .per_image = 1e5};
    MaxBatchSearch s = search(1, 1 << 20, 1000);
    MaxBatchResult r;
    // 256 MiB: (268435456 - 4e6) / (1e5 + 3072 of input) = 2565.4 images.
    assert_int_equal(max_batch_estimate(&s, fake_peak, &f, 3072, 256.0 * MIB, &r), 0);
    assert_true(r.estimated);
    assert_int_equal(f.runs, 2);
    assert_true(r.bytes_per_image == 1e5 + 3072);
    assert_int_equal(r.largest, 2565);
    assert_int_equal(r.stop, MAX_BATCH_STOP_MEMORY);
    assert_true(r.memory == 256.0 * MIB);
    s.cap = 1000;
    assert_int_equal(max_batch_estimate(&s, fake_peak, &f, 3072, 256.0 * MIB, &r), 0);
    assert_int_equal(r.largest, 1000);
    assert_int_equal(r.stop, MAX_BATCH_STOP_CAP);
    s = search(1, 1 << 20, 1 << 20);  // 2^20 values per image: the guard is 2047 images
    assert_int_equal(max_batch_estimate(&s, fake_peak, &f, 3072, 256.0 * MIB, &r), 0);
    assert_int_equal(r.largest, 2047);
    assert_int_equal(r.stop, MAX_BATCH_STOP_GUARD);
    // The budget against the machine: the smaller of the two; 0 is the machine's.
    s.budget = 256 * MIB;
    assert_true(max_batch_memory(&s) == 256.0 * MIB);
    s.budget = 0;
    assert_true(max_batch_memory(&s) > 256.0 * MIB);
}

static void expect_in(const char *text, const char *want)
{
    if (!strstr(text, want)) fail_msg("'%s' lacks '%s'", text, want);
}

static void test_label_names_the_budget_and_the_stop(void **state)
{
    (void)state;
    Fake f = {.fixed = 0, .per_image = 1, .memory = 100};
    MaxBatchSearch s = search(1, 1 << 20, 1000);
    MaxBatchResult r;
    char label[1200];
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    max_batch_describe(&s, &r, label, sizeof label);
    printf("%s\n", label);
    expect_in(label, "--max_batch_memory_mib=256");
    expect_in(label, "largest 64, stopped at 128 by: out of memory");
    s.cap = 16;
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    max_batch_describe(&s, &r, label, sizeof label);
    expect_in(label, "stopped at 32 by: the cap (--max_batch_cap=16), still fitting");
    s = search(1, 1 << 20, 1 << 24);
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    max_batch_describe(&s, &r, label, sizeof label);
    printf("%s\n", label);
    expect_in(label, "by: the guard, still fitting: a tensor of 2147483648 values");
    f.error_at = 8;
    s = search(1, 1 << 20, 1000);
    assert_int_equal(max_batch_search(&s, fake_run, &f, &r), 0);
    max_batch_describe(&s, &r, label, sizeof label);
    expect_in(label, "stopped at 8 by: an error: ");
    expect_in(label, "CUDNN_STATUS_BAD_PARAM at 8");
    assert_int_equal(max_batch_estimate(&s, fake_peak, &f, 0, 256.0 * MIB, &r), 0);
    max_batch_describe(&s, &r, label, sizeof label);
    printf("%s\n", label);
    expect_in(label, "estimated, not probed");
    expect_in(label, "256 MiB (--max_batch_memory_mib=256; the machine's memory when less)");
}

// GPU: with the ballast held the device has the budget free (to a 2 MiB granule and what
// the runtime itself keeps); released, it has what it had.
static void test_gpu_ballast_leaves_the_budget(void **state)
{
    (void)state;
    REQUIRE_GPU();
    size_t budget = 512 * MIB, free_b = 0, total = 0;
    MaxBatchBallast b;
    assert_int_equal(max_batch_ballast_hold(0, budget, &b), 0);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    printf("ballast: %zu MiB held, %zu MiB free before, %zu MiB while held\n", b.held / MIB,
           b.free_before / MIB, free_b / MIB);
    assert_true(b.count > 0);
    assert_true(free_b >= budget - 64 * MIB && free_b <= budget + 64 * MIB);
    max_batch_ballast_release(&b);
    assert_int_equal(b.count, 0);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_true(free_b + 64 * MIB >= b.free_before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_doubles_until_out_of_memory),
        cmocka_unit_test(test_search_halves_from_a_start_that_does_not_fit),
        cmocka_unit_test(test_search_never_runs_past_the_guard_or_the_cap),
        cmocka_unit_test(test_search_error_after_a_fit_ends_it_named),
        cmocka_unit_test(test_guard_of_the_presets),
        cmocka_unit_test(test_estimate_reads_the_line_against_the_budget),
        cmocka_unit_test(test_label_names_the_budget_and_the_stop),
        cmocka_unit_test(test_gpu_ballast_leaves_the_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
