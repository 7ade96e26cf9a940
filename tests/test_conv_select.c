// test_conv_select.c: the cuDNN candidate walk (kernels/conv_select.h) on the CPU, with
// fake candidate lists and a fake trial that answers what a GPU would: the first listed
// algorithm that cannot run (NOT_SUPPORTED on its real call, a failed launch, a
// workspace allocation that fails) falls through to the next; the rules pass over what
// the workspace limit, strict fp32 or the deterministic mode exclude; when nothing works
// the error names every candidate with cuDNN's real status.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/conv_select.h"

#define MiB ((size_t)1 << 20)

// The fake device: the status each algorithm's real call returns, and the calls made.
typedef struct FakeGpu {
    cudnnStatus_t status_of[8];
    int calls[8];
    int total_calls;
} FakeGpu;

static cudnnStatus_t fake_trial(void *ctx, const ConvCandidate *c)
{
    FakeGpu *g = ctx;
    g->calls[c->algo]++;
    g->total_calls++;
    return g->status_of[c->algo];
}

static ConvCandidate cand(int algo, size_t memory, cudnnMathType_t math, cudnnDeterminism_t det)
{
    return (ConvCandidate){algo, CUDNN_STATUS_SUCCESS, memory, math, det};
}

static const ConvSelectRules default_rules = {256 * MiB, false, false};

static void test_first_working_candidate_is_kept(void **state)
{
    (void)state;
    FakeGpu g = {0};
    ConvCandidate c[3] = {cand(1, MiB, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC),
                          cand(0, 0, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC),
                          cand(6, MiB, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC)};
    assert_int_equal(conv_select(CONV_PASS_FWD, c, 3, &default_rules, fake_trial, &g, "conv"), 0);
    assert_int_equal(g.total_calls, 1);  // one real call, then kept
}

static void test_not_supported_falls_through_to_the_next(void **state)
{
    (void)state;
    FakeGpu g = {0};
    g.status_of[1] = CUDNN_STATUS_NOT_SUPPORTED;          // listed, but cannot run
    g.status_of[0] = CUDNN_STATUS_EXECUTION_FAILED_CUDART; // a launch that fails
    ConvCandidate c[3] = {cand(1, MiB, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC),
                          cand(0, 0, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC),
                          cand(6, MiB, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC)};
    assert_int_equal(conv_select(CONV_PASS_BWD_DATA, c, 3, &default_rules, fake_trial, &g, "conv"), 2);
    assert_int_equal(g.calls[1], 1);
    assert_int_equal(g.calls[0], 1);
    assert_int_equal(g.calls[6], 1);
    assert_string_equal(error_message(), "");  // success leaves no error behind
}

static void test_rules_pass_over_without_a_call(void **state)
{
    (void)state;
    FakeGpu g = {0};
    ConvCandidate c[5] = {
        {0, CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC}, // cuDNN said so
        cand(1, 300 * MiB, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC),                  // over the limit
        cand(2, MiB, CUDNN_TENSOR_OP_MATH, CUDNN_DETERMINISTIC),                      // TF32 in strict fp32
        cand(3, MiB, CUDNN_FMA_MATH, CUDNN_NON_DETERMINISTIC),                        // atomics
        cand(5, MiB, CUDNN_DEFAULT_MATH, CUDNN_DETERMINISTIC),
    };
    const ConvSelectRules strict_det = {256 * MiB, true, true};
    assert_int_equal(conv_select(CONV_PASS_BWD_FILTER, c, 5, &strict_det, fake_trial, &g, "conv"), 4);
    assert_int_equal(g.total_calls, 1);
    assert_int_equal(g.calls[5], 1);
    // Without the strict and deterministic rules the tensor-op candidate is first to pass.
    memset(&g, 0, sizeof g);
    assert_int_equal(conv_select(CONV_PASS_BWD_FILTER, c, 5, &default_rules, fake_trial, &g, "conv"), 2);
    // Strict fp32 runs what it keeps with FMA math; otherwise the reported math type.
    assert_int_equal(conv_select_run_math(&strict_det, CUDNN_DEFAULT_MATH), CUDNN_FMA_MATH);
    assert_int_equal(conv_select_run_math(&default_rules, CUDNN_TENSOR_OP_MATH), CUDNN_TENSOR_OP_MATH);
}

static void test_none_working_names_every_candidate_and_status(void **state)
{
    (void)state;
    FakeGpu g = {0};
    g.status_of[0] = CUDNN_STATUS_NOT_SUPPORTED;
    g.status_of[1] = CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    ConvCandidate c[3] = {cand(0, 0, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC),
                          cand(1, 64 * MiB, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC),
                          cand(7, 512 * MiB, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC)};
    assert_int_equal(conv_select(CONV_PASS_FWD, c, 3, &default_rules, fake_trial, &g,
                                 "conv 8x3x16x16 k16"), -1);
    const char *e = error_message();
    printf("error: %s\n", e);
    assert_non_null(strstr(e, "conv 8x3x16x16 k16"));
    assert_non_null(strstr(e, "IMPLICIT_GEMM (CUDNN_STATUS_NOT_SUPPORTED on a real call)"));
    assert_non_null(strstr(e, "IMPLICIT_PRECOMP_GEMM (its 64 MiB workspace: out of memory)"));
    assert_non_null(strstr(e, "WINOGRAD_NONFUSED (workspace 512 MiB over the 256 MiB limit)"));
    assert_null(strstr(e, "raise it"));  // the old, misleading hint
    // An empty list is an error too, not a crash.
    assert_int_equal(conv_select(CONV_PASS_FWD, c, 0, &default_rules, fake_trial, &g, "conv"), -1);
    assert_non_null(strstr(error_message(), "none offered"));
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(conv_algo_name(CONV_PASS_FWD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED),
                        "WINOGRAD_NONFUSED");
    assert_string_equal(conv_algo_name(CONV_PASS_BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1), "ALGO_1");
    assert_string_equal(conv_algo_name(CONV_PASS_BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING),
                        "FFT_TILING");
    assert_string_equal(conv_algo_name(CONV_PASS_FWD, 99), "?");
    assert_string_equal(conv_math_name(CUDNN_TENSOR_OP_MATH), "tensor_op");
    assert_string_equal(conv_math_name(CUDNN_FMA_MATH), "fma");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_working_candidate_is_kept),
        cmocka_unit_test(test_not_supported_falls_through_to_the_next),
        cmocka_unit_test(test_rules_pass_over_without_a_call),
        cmocka_unit_test(test_none_working_names_every_candidate_and_status),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
