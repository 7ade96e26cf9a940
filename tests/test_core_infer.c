// test_core_infer.c: core_infer, the eval-mode forward with gradients on (the training
// plan's arena) or off (the inference plan, no_grad). On the CPU: the fast backend's logits
// against the reference's; both modes give the same logits bit for bit; the inference
// plan's activation bytes are at most GRAD_OFF_RATIO_* of the training plan's (tiny, small);
// core_infer's loss and accuracy are core_eval's; a change of mode re-plans and training
// after it is unchanged; bad calls are refused. On a GPU (skipped visibly without one): the
// CUDA backend's logits against the reference's per precision and layout, the two modes,
// a CUDA graph replay against the eager forward, and the inference plan's forward-only
// algorithm selection.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/core.h"
#include "kernels/synth.h"
#include "tests/support.h"

// Fast CPU vs reference logits, relative L2: the same maths in another summation order
// (OpenBLAS GEMMs, threaded BN reductions); measured ~1e-7 (tiny, mlp) to ~1e-6 (small).
#define FAST_TOL 1e-4
// GRAD_OFF's arena over GRAD_ON's, at most (batch 32, separate pointwise ops): the
// training plan holds every saved activation and the gradients' buffers, the inference plan
// two or three activations at a time. Measured 0.316 (tiny: 2.4 MiB vs 0.75 MiB) and 0.176
// (small: 68 MiB vs 12 MiB, deeper, so more saved activations per live one).
#define GRAD_OFF_RATIO_TINY 0.4
#define GRAD_OFF_RATIO_SMALL 0.25

static CoreConfig config(const char *preset, CoreBackend be, int batch)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = be;
    cfg.batch_size = batch;
    return cfg;
}

static void infer(Core *core, const CoreBatch *b, CoreGradMode g, float *logits, CoreEvalResult *r)
{
    int rc = core_infer(core, b, g, logits, r);
    if (rc != 0) printf("core_infer: %s\n", error_message());
    assert_int_equal(rc, 0);
}

static float *logits_of(const CoreConfig *cfg, const TestBatch *b, CoreGradMode g)
{
    Core *core = test_core_create(cfg);
    float *out = malloc((size_t)b->b.n * cfg->model.num_classes * sizeof(float));
    assert_non_null(out);
    infer(core, &b->b, g, out, NULL);
    core_free(core);
    return out;
}

static void test_fast_cpu_logits_match_reference(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp", "small"};
    for (int i = 0; i < 3; i++) {
        CoreConfig ref = config(presets[i], CORE_BACKEND_CPU_REF, 8), fast = ref;
        fast.backend = CORE_BACKEND_CPU;
        TestBatch b;
        test_batch_open(&b, &ref, 8, 2);
        float *want = logits_of(&ref, &b, CORE_GRAD_OFF), *got = logits_of(&fast, &b, CORE_GRAD_OFF);
        size_t count = (size_t)8 * ref.model.num_classes;
        double e = test_rel_l2(got, want, count);
        printf("%s: fast CPU logits vs reference rel L2 %.2e (tol %.0e)\n", presets[i], e, FAST_TOL);
        assert_true(e <= FAST_TOL);
        free(want);
        free(got);
        test_batch_close(&b);
    }
}

// Both modes on one core, in turn, and on fresh cores: the same logits bit for bit.
static void test_grad_modes_give_identical_logits(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp", "small"};
    CoreBackend backends[] = {CORE_BACKEND_CPU, CORE_BACKEND_CPU_REF};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            for (int fused = 0; fused < 2; fused++) {
                CoreConfig cfg = config(presets[i], backends[k], 6);
                cfg.pointwise = fused ? CORE_POINTWISE_FUSED : CORE_POINTWISE_SEPARATE;
                TestBatch b;
                test_batch_open(&b, &cfg, 6, 5);
                size_t bytes = (size_t)6 * cfg.model.num_classes * sizeof(float);
                float *on = logits_of(&cfg, &b, CORE_GRAD_ON), *off = logits_of(&cfg, &b, CORE_GRAD_OFF);
                float *again = malloc(bytes);
                assert_memory_equal(on, off, bytes);
                Core *core = test_core_create(&cfg);
                CoreGradMode order[] = {CORE_GRAD_OFF, CORE_GRAD_ON, CORE_GRAD_OFF};
                for (int j = 0; j < 3; j++) {
                    infer(core, &b.b, order[j], again, NULL);
                    assert_memory_equal(again, on, bytes);
                }
                core_free(core);
                free(on);
                free(off);
                free(again);
                test_batch_close(&b);
            }
}

// The inference plan's arena against the training plan's, and the peaks with it.
static void test_grad_off_needs_fewer_activation_bytes(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "small"};
    const double limit[] = {GRAD_OFF_RATIO_TINY, GRAD_OFF_RATIO_SMALL};
    for (int i = 0; i < 2; i++) {
        CoreConfig cfg = config(presets[i], CORE_BACKEND_CPU, 32);
        TestBatch b;
        test_batch_open(&b, &cfg, 32, 1);
        Core *core = test_core_create(&cfg);
        CoreStats on, off, back;
        infer(core, &b.b, CORE_GRAD_ON, NULL, NULL);
        assert_int_equal(core_stats(core, &on), 0);
        infer(core, &b.b, CORE_GRAD_OFF, NULL, NULL);
        assert_int_equal(core_stats(core, &off), 0);
        infer(core, &b.b, CORE_GRAD_ON, NULL, NULL);
        assert_int_equal(core_stats(core, &back), 0);
        double ratio = (double)off.activation_bytes / (double)on.activation_bytes;
        printf("%s batch 32: activation bytes grad on %zu, off %zu (ratio %.3f, at most %.2f); "
               "peak on %zu, off %zu\n", presets[i], on.activation_bytes, off.activation_bytes,
               ratio, limit[i], on.peak_bytes, off.peak_bytes);
        assert_true(off.activation_bytes > 0);
        assert_true(ratio <= limit[i]);
        // The peak restarts at a change of plan: it is the mode used last.
        assert_int_equal(on.peak_bytes - off.peak_bytes, on.activation_bytes - off.activation_bytes);
        assert_int_equal(back.activation_bytes, on.activation_bytes);
        assert_int_equal(back.peak_bytes, on.peak_bytes);
        core_free(core);
        test_batch_close(&b);
    }
}

static void test_infer_agrees_with_eval(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp"};
    for (int i = 0; i < 2; i++) {
        CoreConfig cfg = config(presets[i], CORE_BACKEND_CPU, 16);
        TestBatch train, held;
        test_batch_open(&train, &cfg, 16, 7);
        test_batch_open(&held, &cfg, 16, 1000);
        Core *core = test_core_create(&cfg);
        for (int s = 0; s < 5; s++)  // running statistics that are not the initial ones
            assert_int_equal(core_step(core, &train.b, NULL), 0);
        CoreEvalResult ev, on, off;
        assert_int_equal(core_eval(core, &held.b, &ev), 0);
        infer(core, &held.b, CORE_GRAD_ON, NULL, &on);
        infer(core, &held.b, CORE_GRAD_OFF, NULL, &off);
        printf("%s: eval loss %.6f acc %.3f; infer on %.6f %.3f, off %.6f %.3f\n", presets[i],
               ev.loss, ev.accuracy, on.loss, on.accuracy, off.loss, off.accuracy);
        assert_true(ev.loss == on.loss && ev.loss == off.loss);
        assert_true(ev.accuracy == on.accuracy && ev.accuracy == off.accuracy);
        assert_int_equal(on.n, 16);
        // Without labels: the logits, and NaN loss and accuracy.
        CoreBatch nolabels = held.b;
        nolabels.labels = NULL;
        CoreEvalResult r;
        infer(core, &nolabels, CORE_GRAD_OFF, NULL, &r);
        assert_true(isnan(r.loss) && isnan(r.accuracy));
        assert_int_equal(r.n, 16);
        core_free(core);
        test_batch_close(&train);
        test_batch_close(&held);
    }
}

// Training after inference passes of either mode (re-plans both ways) takes the same steps.
static void test_training_after_infer_is_unchanged(void **state)
{
    (void)state;
    CoreConfig cfg = config("tiny", CORE_BACKEND_CPU, 8);
    TestBatch b, other;
    test_batch_open(&b, &cfg, 8, 3);
    test_batch_open(&other, &cfg, 5, 4);
    Core *plain = test_core_create(&cfg), *mixed = test_core_create(&cfg);
    size_t np = core_param_count(plain);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(core_step(plain, &b.b, NULL), 0);
        infer(mixed, &other.b, s % 2 ? CORE_GRAD_ON : CORE_GRAD_OFF, NULL, NULL);
        infer(mixed, &b.b, CORE_GRAD_OFF, NULL, NULL);
        assert_int_equal(core_step(mixed, &b.b, NULL), 0);
    }
    float *p1 = malloc(np * sizeof(float)), *p2 = malloc(np * sizeof(float));
    assert_int_equal(core_params_get(plain, p1, np), 0);
    assert_int_equal(core_params_get(mixed, p2, np), 0);
    assert_memory_equal(p1, p2, np * sizeof(float));
    free(p1);
    free(p2);
    core_free(plain);
    core_free(mixed);
    test_batch_close(&b);
    test_batch_close(&other);
}

static void test_bad_calls_are_refused(void **state)
{
    (void)state;
    CoreConfig cfg = config("tiny", CORE_BACKEND_CPU, 4);
    TestBatch b;
    test_batch_open(&b, &cfg, 4, 0);
    Core *core = test_core_create(&cfg);
    assert_int_equal(core_infer(core, &b.b, (CoreGradMode)7, NULL, NULL), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    CoreBatch dev = b.b;
    dev.memory = CORE_MEMORY_DEVICE;
    assert_int_equal(core_infer(core, &dev, CORE_GRAD_OFF, NULL, NULL), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    CoreBatch empty = b.b;
    empty.n = 0;
    assert_int_equal(core_infer(core, &empty, CORE_GRAD_OFF, NULL, NULL), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_int_equal(core_infer(core, NULL, CORE_GRAD_OFF, NULL, NULL), -1);
    core_free(core);
    test_batch_close(&b);
}

// ---- CUDA --------------------------------------------------------------------------------

// CUDA logits vs the reference's, relative L2, per precision: cuDNN's and cuBLAS's order
// (strict fp32), TF32's 10-bit inputs, fp16's 10-bit and bf16's 7-bit storage.
static double cuda_tol(CorePrecision p)
{
    switch (p) {
    case CORE_PRECISION_FP32_STRICT: return 1e-4;
    case CORE_PRECISION_FP32: return 1e-2;
    case CORE_PRECISION_TF32: return 1e-2;
    case CORE_PRECISION_FP16: return 2e-2;
    case CORE_PRECISION_BF16: return 8e-2;
    case CORE_PRECISION_COUNT: break;
    }
    return 0.0;
}

static void test_cuda_logits_match_reference(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const char *presets[] = {"tiny", "mlp"};
    for (int i = 0; i < 2; i++) {
        CoreConfig ref = config(presets[i], CORE_BACKEND_CPU_REF, 8);
        TestBatch b;
        test_batch_open(&b, &ref, 8, 2);
        float *want = logits_of(&ref, &b, CORE_GRAD_OFF);
        size_t count = (size_t)8 * ref.model.num_classes, bytes = count * sizeof(float);
        for (int p = 0; p < CORE_PRECISION_COUNT; p++)
            for (int layout = 0; layout < 2; layout++) {
                CoreConfig cfg = ref;
                cfg.backend = CORE_BACKEND_CUDA;
                cfg.precision = (CorePrecision)p;
                cfg.layout = layout ? CORE_LAYOUT_NHWC : CORE_LAYOUT_NCHW;
                cfg.deterministic = true;
                float *off = logits_of(&cfg, &b, CORE_GRAD_OFF), *on = logits_of(&cfg, &b, CORE_GRAD_ON);
                double e = test_rel_l2(off, want, count);
                printf("%s %s %s: CUDA logits vs reference rel L2 %.2e (tol %.0e)\n", presets[i],
                       core_precision_name(cfg.precision), core_layout_name(cfg.layout), e,
                       cuda_tol(cfg.precision));
                assert_true(e <= cuda_tol(cfg.precision));
                assert_memory_equal(on, off, bytes);
                free(off);
                free(on);
            }
        free(want);
        test_batch_close(&b);
    }
}

static void test_cuda_grad_off_bytes_and_graph_replay(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = config("small", CORE_BACKEND_CUDA, 32);
    cfg.deterministic = true;
    TestBatch b;
    test_batch_open(&b, &cfg, 32, 1);
    size_t count = (size_t)32 * cfg.model.num_classes, bytes = count * sizeof(float);
    float *eager = logits_of(&cfg, &b, CORE_GRAD_OFF), *got = malloc(bytes);
    Core *core = test_core_create(&cfg);
    CoreStats on, off;
    infer(core, &b.b, CORE_GRAD_ON, NULL, NULL);
    assert_int_equal(core_stats(core, &on), 0);
    infer(core, &b.b, CORE_GRAD_OFF, NULL, NULL);
    assert_int_equal(core_stats(core, &off), 0);
    printf("small CUDA batch 32: activation bytes on %zu off %zu; peak on %zu off %zu; device "
           "used on %zu off %zu\n", on.activation_bytes, off.activation_bytes, on.peak_bytes,
           off.peak_bytes, on.device_used_bytes, off.device_used_bytes);
    assert_true((double)off.activation_bytes <= GRAD_OFF_RATIO_SMALL * (double)on.activation_bytes);
    assert_true(off.peak_bytes < on.peak_bytes);
    core_free(core);

    cfg.cuda_graph = true;  // eager, capture + replay, replay, replay
    core = test_core_create(&cfg);
    CoreEvalResult r, want;
    for (int i = 0; i < 4; i++) {
        infer(core, &b.b, CORE_GRAD_OFF, got, &r);
        assert_memory_equal(got, eager, bytes);
        if (i == 0) want = r;
        assert_true(r.loss == want.loss && r.accuracy == want.accuracy);
    }
    CoreStats s;
    assert_int_equal(core_stats(core, &s), 0);
    assert_int_equal(s.graph_captures, 1);
    assert_int_equal(s.graph_replays, 3);
    core_free(core);
    free(eager);
    free(got);
    test_batch_close(&b);
}

// core_infer's forward-only plan selects (and with autotuning times) the forward algorithms
// only, as cudnn.benchmark under no_grad does; training on the same core afterwards plans
// and tunes its backward passes too and takes a step.
static void test_cuda_infer_plan_is_forward_only(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, 8);
    cfg.conv_algo = CORE_CONV_ALGO_AUTOTUNE;
    TestBatch b;
    test_batch_open(&b, &cfg, 8, 5);
    core_conv_cache_clear();
    Core *core = test_core_create(&cfg);
    infer(core, &b.b, CORE_GRAD_OFF, NULL, NULL);
    CoreStats infer_stats, train_stats;
    assert_int_equal(core_stats(core, &infer_stats), 0);
    CoreConvAlgoInfo info[16];
    test_conv_algos(core, false, info, 16);
    char summary[2048];
    assert_int_equal(core_conv_algo_summary(core, summary, sizeof summary), 0);
    if (!strstr(summary, "(forward only)") || strstr(summary, "bwd_data")) fail_msg("summary: %s", summary);
    CoreStepResult r;
    int rc = core_step(core, &b.b, &r);
    if (rc != 0) printf("core_step after core_infer: %s\n", error_message());
    assert_int_equal(rc, 0);
    assert_true(isfinite(r.loss));
    assert_int_equal(core_stats(core, &train_stats), 0);
    test_conv_algos(core, true, info, 16);
    // the training plan is a key of its own: its shapes missed the cache and were tuned
    assert_true(train_stats.algo_cache_misses > infer_stats.algo_cache_misses);
    printf("tiny CUDA autotune: forward-only plan %.1f ms, then the training plan %.1f ms more\n",
           infer_stats.autotune_ms, train_stats.autotune_ms - infer_stats.autotune_ms);
    core_free(core);
    test_batch_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_cpu_logits_match_reference),
        cmocka_unit_test(test_grad_modes_give_identical_logits),
        cmocka_unit_test(test_grad_off_needs_fewer_activation_bytes),
        cmocka_unit_test(test_infer_agrees_with_eval),
        cmocka_unit_test(test_training_after_infer_is_unchanged),
        cmocka_unit_test(test_bad_calls_are_refused),
        cmocka_unit_test(test_cuda_logits_match_reference),
        cmocka_unit_test(test_cuda_grad_off_bytes_and_graph_replay),
        cmocka_unit_test(test_cuda_infer_plan_is_forward_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
