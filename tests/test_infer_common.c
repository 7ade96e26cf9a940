// test_infer_common.c: the serving rules of the inference practices (bench/inference/
// infer_common.h, infer_family.h): a request carries no labels (the request batch has none;
// infer_requests refuses a batch with labels); the warm-up runs requests for a time, not a
// count; a percentile is reported only from enough requests (10 beyond it: p99 from 1,000)
// and is the nearest rank. On the fast CPU backend with the tiny preset.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/inference/infer_common.h"
#include "bench/inference/infer_family.h"
#include "kernels/error.h"
#include "tests/support.h"

static CoreConfig tiny(int batch)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.batch_size = batch;
    return cfg;
}

static void test_requests_carry_no_labels(void **state)
{
    (void)state;
    CoreConfig cfg = tiny(4);
    PracticeBatch pb;
    assert_int_equal(infer_batch_make(&pb, &cfg, true), 0);
    assert_non_null(pb.labels);
    CoreBatch request = infer_request_batch(&pb);
    assert_null(request.labels);
    assert_ptr_equal(request.images, pb.images);
    assert_int_equal(request.n, 4);
    Core *core = test_core_create(&cfg);
    double ms[3];
    assert_int_equal(infer_requests(core, &request, CORE_GRAD_OFF, 3, NULL, 0, NULL, ms), 0);
    assert_true(ms[0] > 0.0 && ms[2] > 0.0);
    // A labelled batch is not a request: refused, naming why.
    CoreBatch labelled = practice_batch_view(&pb, pb.n);
    assert_int_equal(infer_requests(core, &labelled, CORE_GRAD_OFF, 3, NULL, 0, NULL, ms), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_non_null(strstr(error_message(), "carries no labels"));
    core_free(core);
    practice_batch_free(&pb);
}

static void test_warm_up_runs_for_a_time(void **state)
{
    (void)state;
    CoreConfig cfg = tiny(1);
    PracticeBatch pb;
    assert_int_equal(infer_batch_make(&pb, &cfg, true), 0);
    CoreBatch request = infer_request_batch(&pb);
    Core *core = test_core_create(&cfg);
    int requests = 0;
    double seconds = 0.0;
    assert_int_equal(infer_warm_up(core, &request, CORE_GRAD_OFF, NULL, 0.2, 3, &requests, &seconds), 0);
    printf("warm-up: %d requests in %.0f ms\n", requests, 1e3 * seconds);
    assert_true(seconds >= 0.2);
    assert_true(requests > 3);  // a tiny request takes well under 70 ms
    // The count is a floor too: no time asked, the count made.
    assert_int_equal(infer_warm_up(core, &request, CORE_GRAD_OFF, NULL, 0.0, 2, &requests, &seconds), 0);
    assert_int_equal(requests, 2);
    core_free(core);
    practice_batch_free(&pb);
}

static void test_percentiles_need_ten_requests_beyond(void **state)
{
    (void)state;
    assert_false(infer_percentile_reported(999, 99));
    assert_true(infer_percentile_reported(1000, 99));
    assert_false(infer_percentile_reported(199, 95));
    assert_true(infer_percentile_reported(200, 95));
    assert_false(infer_percentile_reported(99, 90));
    assert_true(infer_percentile_reported(100, 90));
    assert_false(infer_percentile_reported(19, 50));
    assert_true(infer_percentile_reported(20, 50));
    assert_int_equal(infer_percentile_min_requests(99), 1000);
    assert_int_equal(infer_percentile_min_requests(95), 200);
    assert_int_equal(infer_percentile_min_requests(90), 100);
    assert_int_equal(infer_percentile_min_requests(100), 0);
    // Nearest rank: p99 of 1..1000 is 990, the value with 10 beyond it.
    double *v = malloc(1000 * sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < 1000; i++) v[i] = 1000 - i;
    assert_true(infer_percentile(v, 1000, 99) == 990.0);
    assert_true(infer_percentile(v, 1000, 50) == 500.0);
    assert_true(infer_percentile(v, 100, 99) == 99.0);  // of 1..100 after the sort: the 2nd largest
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_carry_no_labels),
        cmocka_unit_test(test_warm_up_runs_for_a_time),
        cmocka_unit_test(test_percentiles_need_ten_requests_beyond),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
