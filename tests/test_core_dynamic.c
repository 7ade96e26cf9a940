// test_core_dynamic.c: the core with an image size that changes from step to step
// (core_set_image_size), what the dynamic-shape part of bench_cudnn_benchmark trains.
// CPU (both backends): a step, loss and gradient at size S taken after steps at other
// sizes are bit-identical to a fresh core's at S from the same weights; training with a
// size drawn per step learns the task; buffers grow to the largest shape and no further;
// bad sizes are clear errors that leave the core usable. GPU (skipped, visibly, without a
// device): the same comparison against the CPU reference at the tolerances of
// test_core_gpu.c, and the per-shape algorithm cache: each new shape is planned (and
// autotuned) once, a shape met again is a cache hit, core_conv_cache_clear forces a re-plan.
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

#define MAX_SIZE 24
#define BATCH 8
#define LEARN_STEPS 100          // tiny, sizes drawn from 12..24, batch 32
#define LEARN_MIN_ACCURACY 0.80f // held-out, at the preset's 16x16 (chance is 0.10)
// Strict fp32 on the GPU against the CPU reference (as test_core_gpu.c states them).
#define GPU_GRAD_TOL 2e-3
#define GPU_LOSS_TOL 1e-4

// Batches of up to `cap` images of up to MAX_SIZE x MAX_SIZE, generated at any size.
typedef struct Data { float *images; int32_t *labels; int cap; int channels, classes; } Data;

static void data_open(Data *d, const CoreConfig *cfg, int cap)
{
    d->cap = cap;
    d->channels = cfg->model.in_channels;
    d->classes = cfg->model.num_classes;
    d->images = malloc((size_t)cap * d->channels * MAX_SIZE * MAX_SIZE * sizeof(float));
    d->labels = malloc((size_t)cap * sizeof(int32_t));
    assert_non_null(d->images);
    assert_non_null(d->labels);
}

static void data_close(Data *d) { free(d->images); free(d->labels); }

// Batch `index` of n images at size x size.
static CoreBatch data_batch(Data *d, int size, int n, uint64_t index)
{
    assert_true(n <= d->cap && size <= MAX_SIZE);
    SynthTask t = {d->channels, size, d->classes, 0.5f, 1};
    synth_batch(&t, index, n, d->images, d->labels);
    return (CoreBatch){.images = d->images, .labels = d->labels, .n = n, .memory = CORE_MEMORY_HOST};
}

static CoreConfig preset(const char *name, CoreBackend backend)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, name), 0);
    cfg.backend = backend;
    cfg.batch_size = BATCH;
    // A constant LR, so that a step's update does not depend on how many came before.
    cfg.optim.decay = CORE_LR_CONSTANT;
    cfg.optim.warmup_steps = 0;
    return cfg;
}

static void step_ok(Core *core, const CoreBatch *b)
{
    int rc = core_step(core, b, NULL);
    if (rc != 0) printf("core_step: %s\n", error_message());
    assert_int_equal(rc, 0);
}


// The sizes and batch counts the "dynamic" core goes through before the compared step
// (odd sizes too: stride-2 layers round them up, as cuDNN's output size must agree).
static const int warm_sizes[] = {24, 13, 20, 17, 24};
static const int warm_n[] = {8, 8, 5, 8, 3};
#define WARM_STEPS 5

// Trains `dyn` through the sizes above, then returns its parameters (malloc'd).
static float *train_through_sizes(Core *dyn, Data *d)
{
    for (int i = 0; i < WARM_STEPS; i++) {
        assert_int_equal(core_set_image_size(dyn, warm_sizes[i]), 0);
        assert_int_equal(core_image_size(dyn), warm_sizes[i]);
        CoreBatch b = data_batch(d, warm_sizes[i], warm_n[i], (uint64_t)i);
        step_ok(dyn, &b);
    }
    size_t np = core_param_count(dyn);
    float *p = malloc(np * sizeof(float));
    assert_non_null(p);
    assert_int_equal(core_params_get(dyn, p, np), 0);
    return p;
}

// Loss, gradient and one SGD step at size S (batch 7, fresh momentum: core_params_set
// resets it) on the dynamic core, against a fresh core made for S with the same weights.
static void compare_with_fresh(CoreBackend backend)
{
    const int S = 20, N = 7;
    CoreConfig cfg = preset("tiny", backend);
    Data d;
    data_open(&d, &cfg, BATCH);
    Core *dyn = test_core_create(&cfg);
    float *p = train_through_sizes(dyn, &d);
    size_t np = core_param_count(dyn);

    CoreConfig fcfg = cfg;
    fcfg.model.image_size = S;
    Core *fresh = test_core_create(&fcfg);
    assert_int_equal(core_params_set(fresh, p, np), 0);
    assert_int_equal(core_params_set(dyn, p, np), 0);  // same momentum (zero) on both
    assert_int_equal(core_set_image_size(dyn, S), 0);

    float *ga = malloc(np * sizeof(float)), *gb = malloc(np * sizeof(float));
    float *pa = malloc(np * sizeof(float)), *pb = malloc(np * sizeof(float));
    assert_true(ga && gb && pa && pb);
    float la = NAN, lb = NAN;
    CoreBatch b = data_batch(&d, S, N, 77);
    assert_int_equal(core_loss_grad(dyn, &b, &la, ga), 0);
    assert_int_equal(core_loss_grad(fresh, &b, &lb, gb), 0);
    printf("%s: loss at %dx%d after sizes 24,13,20,17,24: %.6f, fresh core %.6f\n",
           core_backend_name(backend), S, S, la, lb);
    assert_true(isfinite(la));
    assert_memory_equal(&la, &lb, sizeof la);
    assert_memory_equal(ga, gb, np * sizeof(float));
    step_ok(dyn, &b);
    step_ok(fresh, &b);
    assert_int_equal(core_params_get(dyn, pa, np), 0);
    assert_int_equal(core_params_get(fresh, pb, np), 0);
    assert_memory_equal(pa, pb, np * sizeof(float));
    assert_true(test_rel_l2(pa, p, np) > 0.0);  // the step did change something

    free(ga); free(gb); free(pa); free(pb); free(p);
    core_free(dyn);
    core_free(fresh);
    data_close(&d);
}

static void test_step_after_other_sizes_equals_fresh_cpu(void **state)
{
    (void)state;
    compare_with_fresh(CORE_BACKEND_CPU);
}

static void test_step_after_other_sizes_equals_fresh_cpu_ref(void **state)
{
    (void)state;
    compare_with_fresh(CORE_BACKEND_CPU_REF);
}

// Variable-resolution training: every step draws its size from 12..24; the model still
// learns the task (measured at the preset's own 16x16 on held-out batches).
static void test_training_with_changing_sizes_learns(void **state)
{
    (void)state;
    CoreConfig cfg = preset("tiny", CORE_BACKEND_CPU);
    cfg.batch_size = 32;
    cfg.optim.decay = CORE_LR_COSINE;
    cfg.optim.warmup_steps = 10;
    cfg.optim.total_steps = LEARN_STEPS;
    Data d;
    data_open(&d, &cfg, 256);
    Core *core = test_core_create(&cfg);
    static const int sizes[] = {12, 16, 20, 24};
    uint64_t rng = 12345;
    for (int s = 0; s < LEARN_STEPS; s++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int size = sizes[(rng >> 33) % 4];
        assert_int_equal(core_set_image_size(core, size), 0);
        CoreBatch b = data_batch(&d, size, cfg.batch_size, (uint64_t)s);
        CoreStepResult r;
        assert_int_equal(core_step(core, &b, &r), 0);
        assert_true(r.loss_ready && isfinite(r.loss));
    }
    assert_int_equal(core_set_image_size(core, 0), 0);  // back to the config's size
    assert_int_equal(core_image_size(core), cfg.model.image_size);
    CoreBatch held = data_batch(&d, cfg.model.image_size, 256, 999999);
    CoreEvalResult e;
    assert_int_equal(core_eval(core, &held, &e), 0);
    printf("tiny, sizes 12..24 drawn per step: held-out accuracy %.3f at 16x16 after %d steps "
           "(need >= %.2f)\n", e.accuracy, LEARN_STEPS, LEARN_MIN_ACCURACY);
    assert_true(e.accuracy >= LEARN_MIN_ACCURACY);
    core_free(core);
    data_close(&d);
}

// Buffers grow with the largest (n, size) met; a second pass over the same shapes
// allocates nothing new, so the peak does not move (activations are kept at their
// largest; the CPU scratch is laid out per size and freed before the next is made).
static void test_buffers_grow_once(void **state)
{
    (void)state;
    CoreConfig cfg = preset("tiny", CORE_BACKEND_CPU);
    Data d;
    data_open(&d, &cfg, BATCH);
    Core *core = test_core_create(&cfg);
    static const int sizes[] = {MAX_SIZE, 12, 16, 20};
    size_t peak[3];
    CoreStats s;
    assert_int_equal(core_stats(core, &s), 0);
    peak[0] = s.peak_bytes;
    for (int pass = 1; pass <= 2; pass++) {
        for (int i = 0; i < 4; i++) {
            assert_int_equal(core_set_image_size(core, sizes[i]), 0);
            CoreBatch b = data_batch(&d, sizes[i], BATCH - i, (uint64_t)i);
            step_ok(core, &b);
        }
        assert_int_equal(core_stats(core, &s), 0);
        peak[pass] = s.peak_bytes;
    }
    printf("peak: %zu bytes at 16x16, %zu after sizes 24,12,16,20, %zu after them again\n",
           peak[0], peak[1], peak[2]);
    assert_true(peak[1] > peak[0]);
    assert_true(peak[2] == peak[1]);
    core_free(core);
    data_close(&d);
}

static void test_bad_sizes_are_errors(void **state)
{
    (void)state;
    CoreConfig cfg = preset("mlp", CORE_BACKEND_CPU);
    Core *mlp = test_core_create(&cfg);
    assert_int_equal(core_set_image_size(mlp, cfg.model.image_size), 0);
    assert_int_equal(core_set_image_size(mlp, 20), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_non_null(strstr(error_message(), "MLP"));
    assert_int_equal(core_image_size(mlp), cfg.model.image_size);
    core_free(mlp);

    cfg = preset("tiny", CORE_BACKEND_CPU);
    Core *core = test_core_create(&cfg);
    assert_int_equal(core_set_image_size(core, -3), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_int_equal(core_set_image_size(core, 1), -1);  // too small for two stages
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_int_equal(core_image_size(core), cfg.model.image_size);
    Data d;
    data_open(&d, &cfg, BATCH);
    CoreBatch b = data_batch(&d, cfg.model.image_size, BATCH, 3);
    step_ok(core, &b);  // still usable
    core_free(core);
    data_close(&d);
}

// The split step (core_forward_backward + core_apply_update, what DDP drives) equals
// core_step, and an update without a fresh backward is refused rather than applying stale
// gradients (or those core_loss_grad left).
static void test_split_step_equals_step_and_needs_a_backward(void **state)
{
    (void)state;
    CoreConfig cfg = preset("tiny", CORE_BACKEND_CPU);
    Data d;
    data_open(&d, &cfg, BATCH);
    Core *a = test_core_create(&cfg), *b = test_core_create(&cfg);
    size_t np = core_param_count(a);
    float *pa = malloc(np * sizeof(float)), *pb = malloc(np * sizeof(float)), *g = malloc(np * sizeof(float));
    assert_true(pa && pb && g);
    assert_int_equal(core_apply_update(b, BATCH, NULL), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    CoreBatch batch = data_batch(&d, cfg.model.image_size, BATCH, 5);
    step_ok(a, &batch);
    assert_int_equal(core_forward_backward(b, &batch, false), 0);
    assert_int_equal(core_apply_update(b, BATCH, NULL), 0);
    assert_int_equal(core_params_get(a, pa, np), 0);
    assert_int_equal(core_params_get(b, pb, np), 0);
    assert_memory_equal(pa, pb, np * sizeof(float));
    assert_int_equal(core_apply_update(b, BATCH, NULL), -1);  // no new backward
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_int_equal(core_forward_backward(b, &batch, false), 0);
    float loss = NAN;
    assert_int_equal(core_loss_grad(b, &batch, &loss, g), 0);
    assert_int_equal(core_apply_update(b, BATCH, NULL), -1);  // loss_grad replaced them
    free(pa); free(pb); free(g);
    core_free(a);
    core_free(b);
    data_close(&d);
}

// ---- GPU --------------------------------------------------------------------------------

// The CUDA core through the same sizes (strict fp32, deterministic algorithms, heuristic or
// autotuned), then loss and gradient at S against the CPU reference made for S.
static void gpu_against_reference(CoreConvAlgo policy)
{
    const int S = 20, N = 7;
    CoreConfig cfg = preset("tiny", CORE_BACKEND_CUDA);
    cfg.precision = CORE_PRECISION_FP32_STRICT;
    cfg.deterministic = true;
    cfg.conv_algo = policy;
    Data d;
    data_open(&d, &cfg, BATCH);
    Core *gpu = test_core_create(&cfg);
    float *p = train_through_sizes(gpu, &d);
    size_t np = core_param_count(gpu);
    CoreConfig rcfg = cfg;
    rcfg.backend = CORE_BACKEND_CPU_REF;
    rcfg.model.image_size = S;
    Core *ref = test_core_create(&rcfg);
    assert_int_equal(core_params_set(ref, p, np), 0);
    assert_int_equal(core_set_image_size(gpu, S), 0);
    float *gg = malloc(np * sizeof(float)), *gr = malloc(np * sizeof(float));
    assert_true(gg && gr);
    float lg = NAN, lr = NAN;
    CoreBatch b = data_batch(&d, S, N, 77);
    int rc = core_loss_grad(gpu, &b, &lg, gg);
    if (rc != 0) printf("core_loss_grad: %s\n", error_message());
    assert_int_equal(rc, 0);
    assert_int_equal(core_loss_grad(ref, &b, &lr, gr), 0);
    double grad_err = test_rel_l2(gg, gr, np), loss_err = fabs((double)lg - lr) / fabs((double)lr);
    printf("cuda %s at %dx%d after other sizes: loss %.6f vs cpu-ref %.6f (rel %.2g, tol %.0e), "
           "gradient rel L2 %.2g (tol %.0e)\n", core_conv_algo_name(policy), S, S, lg, lr,
           loss_err, GPU_LOSS_TOL, grad_err, GPU_GRAD_TOL);
    assert_true(loss_err <= GPU_LOSS_TOL);
    assert_true(grad_err <= GPU_GRAD_TOL);
    free(gg); free(gr); free(p);
    core_free(gpu);
    core_free(ref);
    data_close(&d);
}

static void test_gpu_dynamic_heuristic_matches_reference(void **state)
{
    (void)state;
    REQUIRE_GPU();
    gpu_against_reference(CORE_CONV_ALGO_HEURISTIC);
}

static void test_gpu_dynamic_autotune_matches_reference(void **state)
{
    (void)state;
    REQUIRE_GPU();
    gpu_against_reference(CORE_CONV_ALGO_AUTOTUNE);
}

// Autotuning: a new shape misses the cache and is timed; a shape met again hits it; after
// core_conv_cache_clear, the same shape is timed again.
static void test_gpu_autotune_once_per_shape(void **state)
{
    (void)state;
    REQUIRE_GPU();
    core_conv_cache_clear();
    CoreConfig cfg = preset("tiny", CORE_BACKEND_CUDA);
    cfg.conv_algo = CORE_CONV_ALGO_AUTOTUNE;
    Data d;
    data_open(&d, &cfg, BATCH);
    Core *core = test_core_create(&cfg);  // plans nothing yet
    CoreStats s[5];
    assert_int_equal(core_stats(core, &s[0]), 0);
    assert_int_equal(s[0].algo_cache_misses + s[0].algo_cache_hits, 0);
    CoreBatch first = data_batch(&d, cfg.model.image_size, BATCH, 8);
    step_ok(core, &first);  // plans (and tunes) the config's own shape
    assert_int_equal(core_stats(core, &s[0]), 0);
    static const int sizes[] = {20, 24, 20, 16};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(core_set_image_size(core, sizes[i]), 0);
        CoreBatch b = data_batch(&d, sizes[i], BATCH, (uint64_t)i);
        step_ok(core, &b);
        assert_int_equal(core_stats(core, &s[i + 1]), 0);
        printf("step at %dx%d: cache misses %d, hits %d, tuning %.1f ms so far\n", sizes[i],
               sizes[i], s[i + 1].algo_cache_misses, s[i + 1].algo_cache_hits,
               s[i + 1].autotune_ms);
    }
    assert_true(s[0].algo_cache_misses > 0 && s[0].autotune_ms > 0.0);
    assert_true(s[1].algo_cache_misses > s[0].algo_cache_misses);  // 20: new
    assert_true(s[2].algo_cache_misses > s[1].algo_cache_misses);  // 24: new
    assert_true(s[2].autotune_ms > s[1].autotune_ms);
    assert_int_equal(s[3].algo_cache_misses, s[2].algo_cache_misses);  // 20 again: hits only
    assert_true(s[3].algo_cache_hits > s[2].algo_cache_hits);
    assert_int_equal(s[4].algo_cache_misses, s[3].algo_cache_misses);  // 16: the first shape
    core_conv_cache_clear();
    CoreBatch b = data_batch(&d, 16, BATCH, 9);
    step_ok(core, &b);
    CoreStats after;
    assert_int_equal(core_stats(core, &after), 0);
    assert_true(after.algo_cache_misses > s[4].algo_cache_misses);  // planned and tuned again
    core_free(core);
    data_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_after_other_sizes_equals_fresh_cpu),
        cmocka_unit_test(test_step_after_other_sizes_equals_fresh_cpu_ref),
        cmocka_unit_test(test_training_with_changing_sizes_learns),
        cmocka_unit_test(test_buffers_grow_once),
        cmocka_unit_test(test_bad_sizes_are_errors),
        cmocka_unit_test(test_split_step_equals_step_and_needs_a_backward),
        cmocka_unit_test(test_gpu_dynamic_heuristic_matches_reference),
        cmocka_unit_test(test_gpu_dynamic_autotune_matches_reference),
        cmocka_unit_test(test_gpu_autotune_once_per_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
