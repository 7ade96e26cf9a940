// test_precision.c: the stopping rule of a row's repetitions (bench/driver/precision.h):
// the distribution-free interval of a median at its boundaries (95% from 6 values; the
// order statistics binomial tables give), the paired speedup's precision (a drift shared
// by both sides cancels; an unpaired reading of the same times would not), and the
// decision after a block: a noise-free row stops at the minimum, a noisy one asks for more
// and then stops at the repetition cap or the time cap, saying which.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "bench/driver/precision.h"

static void test_median_interval_order_statistics(void **state)
{
    (void)state;
    double x[20], m, lo, hi;
    for (int i = 0; i < 20; i++) x[i] = 20 - i;  // 20..1, unsorted on purpose
    // n = 5: no k reaches 95% (P(B < 1) = 1/32 > 0.025): [min, max], and it says so
    assert_false(precision_median_interval(x + 15, 5, &m, &lo, &hi));
    assert_true(lo == 1 && hi == 5 && m == 3);
    // n = 6: k = 1 (P(B < 1) = 1/64 <= 0.025, P(B < 2) = 7/64 > 0.025): [x(1), x(6)]
    assert_true(precision_median_interval(x + 14, 6, &m, &lo, &hi));
    assert_true(lo == 1 && hi == 6 && m == 3.5);
    // n = 20: k = 6 (P(B <= 5) = 0.0207, P(B <= 6) = 0.0577): [x(6), x(15)]
    assert_true(precision_median_interval(x, 20, &m, &lo, &hi));
    assert_true(lo == 6 && hi == 15 && m == 10.5);
    assert_true(x[0] == 20);  // not sorted in place
}

static void test_precision_of_median(void **state)
{
    (void)state;
    double same[6] = {2, 2, 2, 2, 2, 2};
    assert_true(precision_of_median(same, 6) == 0);
    double x[6] = {0.9, 1.0, 1.0, 1.0, 1.0, 1.1};  // [0.9, 1.1] around 1: +-10%
    assert_true(fabs(precision_of_median(x, 6) - 0.1) < 1e-12);
    assert_true(isinf(precision_of_median(x, 1)));
}

static void test_paired_speedup_cancels_shared_drift(void **state)
{
    (void)state;
    // the machine drifts by 2x over the run; tuned is always 1.25x faster than its pair
    double base[8], tuned[8];
    for (int i = 0; i < 8; i++) {
        double drift = 1.0 + i / 7.0;
        base[i] = 0.10 * drift;
        tuned[i] = 0.08 * drift;
    }
    double speedup;
    double p = precision_of_paired_speedup(base, tuned, 8, &speedup);
    assert_true(fabs(speedup - 1.25) < 1e-12);
    assert_true(p < 1e-12);
    // read unpaired, each side's median would be as wide as the drift
    assert_true(precision_of_median(base, 8) > 0.2);
    // a time that is not positive gives no precision
    tuned[3] = 0;
    assert_true(isinf(precision_of_paired_speedup(base, tuned, 8, &speedup)));
}

static void test_noise_free_row_stops_at_the_minimum(void **state)
{
    (void)state;
    PrecisionBudget b = {.target = 0.05, .done = 6, .max_repetitions = 30, .seconds_used = 3, .seconds_cap = 9};
    int more = -1;
    assert_int_equal(precision_next(&b, 0.0, &more), PRECISION_TARGET_MET);
    assert_int_equal(more, 0);
    // exactly at the target is met
    assert_int_equal(precision_next(&b, 0.05, &more), PRECISION_TARGET_MET);
    // no target: the minimum is all
    b.target = 0;
    assert_int_equal(precision_next(&b, 0.5, &more), PRECISION_NO_TARGET);
}

static void test_noisy_row_goes_on_then_stops_at_a_cap(void **state)
{
    (void)state;
    PrecisionBudget b = {.target = 0.05, .done = 6, .max_repetitions = 30, .seconds_used = 3, .seconds_cap = 0};
    int more = 0;
    // +-10%: 1/sqrt(n) wants 6 * 4 * 1.2 = 28.8 in all, at most doubling: 6 more
    assert_int_equal(precision_next(&b, 0.10, &more), PRECISION_GO_ON);
    assert_int_equal(more, 6);
    // just over the target: at least 2 more
    assert_int_equal(precision_next(&b, 0.051, &more), PRECISION_GO_ON);
    assert_int_equal(more, 2);
    // an infinite width (too few values): as many again
    assert_int_equal(precision_next(&b, INFINITY, &more), PRECISION_GO_ON);
    assert_int_equal(more, 6);
    // the repetition cap: never past it, and at it, stop saying so
    b.done = 28;
    assert_int_equal(precision_next(&b, 0.10, &more), PRECISION_GO_ON);
    assert_int_equal(more, 2);
    b.done = 30;
    assert_int_equal(precision_next(&b, 0.10, &more), PRECISION_CAP_REPETITIONS);
    assert_int_equal(more, 0);
    // the time cap: 6 repetitions took 3 s, 2 s are left: 4 fit
    b = (PrecisionBudget){.target = 0.05, .done = 6, .max_repetitions = 30, .seconds_used = 3, .seconds_cap = 5};
    assert_int_equal(precision_next(&b, 0.10, &more), PRECISION_GO_ON);
    assert_int_equal(more, 4);
    // ... and when not one more fits, stop at the time cap
    b.seconds_used = 4.9;
    assert_int_equal(precision_next(&b, 0.10, &more), PRECISION_CAP_TIME);
    assert_string_equal(precision_decision_name(PRECISION_CAP_TIME), "target not met: capped at the row's time");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median_interval_order_statistics),
        cmocka_unit_test(test_precision_of_median),
        cmocka_unit_test(test_paired_speedup_cancels_shared_drift),
        cmocka_unit_test(test_noise_free_row_stops_at_the_minimum),
        cmocka_unit_test(test_noisy_row_goes_on_then_stops_at_a_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
