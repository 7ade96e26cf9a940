// test_core_cpu.c: the core on the (fast) CPU backend: the tiny preset learns the
// synthetic task to a stated accuracy in a stated number of steps; both zero-grad modes
// give bit-identical weights (on the reference backend too); LR schedule values; deferred
// loss read-back; config checks.
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

#define TRAIN_STEPS 120        // tiny preset, batch 32, cosine over these steps
#define TRAIN_MIN_ACCURACY 0.90f // on 256 held-out images (chance is 0.10)

typedef struct Data { float *images; int32_t *labels; CoreBatch batch; SynthTask task; } Data;

static void data_init(Data *d, const CoreConfig *cfg, int n)
{
    const CoreModelConfig *m = &cfg->model;
    d->task = (SynthTask){m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    d->images = malloc((size_t)n * m->in_channels * m->image_size * m->image_size * sizeof(float));
    d->labels = malloc((size_t)n * sizeof(int32_t));
    d->batch = (CoreBatch){.images = d->images, .labels = d->labels, .n = n, .memory = CORE_MEMORY_HOST};
}

static void data_free(Data *d) { free(d->images); free(d->labels); }

static CoreConfig cpu_preset(const char *name)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, name), 0);
    cfg.backend = CORE_BACKEND_CPU;
    return cfg;
}

static void test_tiny_trains_to_accuracy(void **state)
{
    (void)state;
    CoreConfig cfg = cpu_preset("tiny");
    cfg.optim.total_steps = TRAIN_STEPS;
    Core *core;
    assert_int_equal(core_create(&cfg, &core), 0);
    Data d;
    data_init(&d, &cfg, 256);
    d.batch.n = cfg.batch_size;
    CoreEvalResult before, after;
    synth_batch(&d.task, 999999, 256, d.images, d.labels);
    d.batch.n = 256;
    assert_int_equal(core_eval(core, &d.batch, &before), 0);
    d.batch.n = cfg.batch_size;
    float first = 0.0f, last = 0.0f, last_acc = 0.0f;
    for (int s = 0; s < TRAIN_STEPS; s++) {
        synth_batch(&d.task, (uint64_t)s, cfg.batch_size, d.images, d.labels);
        CoreStepResult r;
        assert_int_equal(core_step(core, &d.batch, &r), 0);
        assert_true(r.loss_ready && isfinite(r.loss));
        assert_int_equal(r.step, s);
        if (s == 0) first = r.loss;
        last = r.loss;
        last_acc = r.accuracy;
        assert_true(r.accuracy >= 0.0f && r.accuracy <= 1.0f);
    }
    synth_batch(&d.task, 999999, 256, d.images, d.labels);
    d.batch.n = 256;
    assert_int_equal(core_eval(core, &d.batch, &after), 0);
    printf("tiny on CPU: train loss %.3f -> %.3f; held-out accuracy %.3f -> %.3f after %d steps "
           "(need >= %.2f)\n", first, last, before.accuracy, after.accuracy, TRAIN_STEPS,
           TRAIN_MIN_ACCURACY);
    assert_true(after.accuracy >= TRAIN_MIN_ACCURACY);
    assert_true(last < first);
    assert_true(last_acc >= 0.75f);  // the last training batch (32 images)
    CoreStats st;
    assert_int_equal(core_stats(core, &st), 0);
    assert_int_equal(st.steps, TRAIN_STEPS);
    assert_int_equal(st.backend, CORE_BACKEND_CPU);
    assert_true(st.peak_bytes > st.param_count * sizeof(float));
    core_free(core);
    data_free(&d);
}

// Trains `steps` steps and returns the final parameters (malloc'd).
static float *train_params(CoreConfig cfg, int steps, size_t *np)
{
    Core *core;
    assert_int_equal(core_create(&cfg, &core), 0);
    Data d;
    data_init(&d, &cfg, cfg.batch_size);
    for (int s = 0; s < steps; s++) {
        synth_batch(&d.task, (uint64_t)s, cfg.batch_size, d.images, d.labels);
        assert_int_equal(core_step(core, &d.batch, NULL), 0);
    }
    *np = core_param_count(core);
    float *p = malloc(*np * sizeof(float));
    assert_int_equal(core_params_get(core, p, *np), 0);
    core_free(core);
    data_free(&d);
    return p;
}

static void test_zero_grad_modes_bit_identical(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp"};
    for (int i = 0; i < 4; i++) { // both presets on the fast backend, then on the reference
        CoreConfig cfg = cpu_preset(presets[i % 2]);
        if (i >= 2) cfg.backend = CORE_BACKEND_CPU_REF;
        cfg.batch_size = 8;
        size_t n0, n1, n2;
        float *init = train_params(cfg, 0, &n0);
        cfg.zero_grad = CORE_ZERO_GRAD_MEMSET;
        float *a = train_params(cfg, 6, &n1);
        cfg.zero_grad = CORE_ZERO_GRAD_SET_TO_NONE;
        float *b = train_params(cfg, 6, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1 * sizeof(float));
        assert_memory_not_equal(a, init, n1 * sizeof(float));  // training moved the weights
        printf("%s on %s: memset and set_to_none weights bit-identical after 6 steps (%zu params)\n",
               presets[i % 2], core_backend_name(cfg.backend), n1);
        free(init); free(a); free(b);
    }
}

static void test_lr_schedule(void **state)
{
    (void)state;
    CoreOptimConfig o = {.base_lr = 0.1f, .decay = CORE_LR_COSINE, .warmup_steps = 10,
                         .total_steps = 110, .min_lr = 0.001f, .step_size = 30,
                         .step_gamma = 0.1f, .reference_batch = 256};
    // Linear warmup: step s uses base * (s + 1) / warmup.
    assert_float_equal(core_lr_at(&o, 256, 0), 0.01f, 1e-7);
    assert_float_equal(core_lr_at(&o, 256, 4), 0.05f, 1e-7);
    assert_float_equal(core_lr_at(&o, 256, 9), 0.1f, 1e-7);
    // Cosine from base at the end of warmup to min_lr at total_steps.
    assert_float_equal(core_lr_at(&o, 256, 10), 0.1f, 1e-7);
    assert_float_equal(core_lr_at(&o, 256, 60), 0.5f * (0.1f + 0.001f), 1e-6);
    assert_float_equal(core_lr_at(&o, 256, 35), 0.001f + 0.5f * 0.099f * (1.0f + cosf((float)M_PI / 4)), 1e-6);
    assert_float_equal(core_lr_at(&o, 256, 110), 0.001f, 1e-7);
    assert_float_equal(core_lr_at(&o, 256, 500), 0.001f, 1e-7);
    // Step decay: x0.1 every 30 steps after warmup.
    o.decay = CORE_LR_STEP;
    assert_float_equal(core_lr_at(&o, 256, 39), 0.1f, 1e-7);
    assert_float_equal(core_lr_at(&o, 256, 40), 0.01f, 1e-8);
    assert_float_equal(core_lr_at(&o, 256, 70), 0.001f, 1e-9);
    o.decay = CORE_LR_CONSTANT;
    assert_float_equal(core_lr_at(&o, 256, 1000), 0.1f, 1e-7);
    // Linear scaling rule: lr * batch / reference_batch (off: unchanged).
    assert_float_equal(core_lr_at(&o, 1024, 1000), 0.1f, 1e-7);
    o.linear_scaling = true;
    assert_float_equal(core_lr_at(&o, 1024, 1000), 0.4f, 1e-6);
    assert_float_equal(core_lr_at(&o, 128, 1000), 0.05f, 1e-7);
    assert_float_equal(core_lr_at(&o, 1024, 4), 0.2f, 1e-6);  // warmup towards the scaled lr
}

static void test_step_reports_lr_and_deferred_loss(void **state)
{
    (void)state;
    CoreConfig cfg = cpu_preset("mlp");
    cfg.readback = CORE_READBACK_DEFERRED;
    cfg.readback_interval = 4;
    Core *core;
    assert_int_equal(core_create(&cfg, &core), 0);
    Data d;
    data_init(&d, &cfg, cfg.batch_size);
    float sum = 0.0f, acc_sum = 0.0f;
    CoreConfig every = cfg;
    every.readback = CORE_READBACK_EVERY_STEP;
    Core *ref;
    assert_int_equal(core_create(&every, &ref), 0);
    for (int s = 0; s < 8; s++) {
        synth_batch(&d.task, (uint64_t)s, cfg.batch_size, d.images, d.labels);
        CoreStepResult r, rr;
        assert_int_equal(core_step(core, &d.batch, &r), 0);
        assert_int_equal(core_step(ref, &d.batch, &rr), 0);
        assert_true(rr.loss_ready);
        assert_float_equal(r.lr, core_lr_at(&cfg.optim, cfg.batch_size, s), 0.0);
        sum += rr.loss;
        acc_sum += rr.accuracy;
        assert_int_equal(r.loss_ready, (s + 1) % 4 == 0);
        if (r.loss_ready) {  // the mean of the last 4 per-step losses and accuracies
            assert_int_equal(r.loss_steps, 4);
            assert_float_equal(r.loss, sum / 4, 1e-5);
            assert_float_equal(r.accuracy, acc_sum / 4, 1e-6);  // equal batch sizes
            sum = acc_sum = 0.0f;
        }
    }
    core_free(core);
    core_free(ref);
    data_free(&d);
}

static void test_config_errors_are_reported(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "no-such-preset"), -1);
    const char *names[] = {"tiny", "mlp", "small", "medium", "resnet18"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(core_config_preset(&cfg, names[i]), 0);
        assert_int_equal(core_config_validate(&cfg), 0);
    }
    cfg = cpu_preset("tiny");
    cfg.model.stages = 9;  // 16x16 cannot halve 8 times
    Core *core = (Core *)&cfg;
    assert_int_equal(core_create(&cfg, &core), -1);
    assert_null(core);
    assert_non_null(strstr(error_message(), "too small"));
    cfg = cpu_preset("tiny");
    cfg.precision = CORE_PRECISION_FP16;
    cfg.scaler.backoff_factor = 1.5f;
    assert_int_equal(core_config_validate(&cfg), -1);
    // A device-memory batch cannot go to the CPU backend.
    cfg = cpu_preset("tiny");
    assert_int_equal(core_create(&cfg, &core), 0);
    float img[16 * 16 * 3] = {0};
    int32_t label = 0;
    CoreBatch b = {.images = img, .labels = &label, .n = 1, .memory = CORE_MEMORY_DEVICE};
    assert_int_equal(core_step(core, &b, NULL), -1);
    b.memory = CORE_MEMORY_HOST;
    assert_int_equal(core_step(core, &b, NULL), 0);  // a new batch size works
    b.n = 0;
    assert_int_equal(core_step(core, &b, NULL), -1);
    core_free(core);
    // Names round-trip through the parsers.
    CorePrecision p;
    assert_int_equal(core_precision_parse("bf16", &p), 0);
    assert_int_equal(p, CORE_PRECISION_BF16);
    assert_string_equal(core_precision_name(p), "bf16");
    CoreZeroGrad z;
    assert_int_equal(core_zero_grad_parse("set_to_none", &z), 0);
    assert_int_equal(z, CORE_ZERO_GRAD_SET_TO_NONE);
    assert_int_equal(core_layout_parse("nhwc ", &(CoreLayout){0}), -1);
}

// core_config_in_effect names what a CUDA core ran differently from its config (the layout,
// the activations' type, TF32 under fp32_strict or none under tf32, tuning); the CPU backends
// run fp32 NCHW by design and always pass. Stats stand in for a core here: the GPU test
// (test_core_gpu) checks real cores of every precision, layout and policy.
static void test_config_in_effect_names_the_difference(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.layout = CORE_LAYOUT_NHWC;
    cfg.precision = CORE_PRECISION_FP16;
    cfg.conv_algo = CORE_CONV_ALGO_AUTOTUNE;
    const CoreStats ran = {.backend = CORE_BACKEND_CUDA, .layout_in_effect = CORE_LAYOUT_NHWC,
                           .activation_type = CORE_DTYPE_FP16, .conv_shapes = 5, .conv_shapes_tuned = 5};
    char why[256] = "";
    assert_int_equal(core_config_in_effect(&cfg, &ran, why, sizeof why), 0);
    struct { CoreStats st; const char *says; } wrong[] = {
        {ran, "layout nhwc asked, nchw ran"},
        {ran, "fp16 activations), fp32 activations ran"},
        {ran, "3 of 5 convolutions' algorithms were timed"},
    };
    wrong[0].st.layout_in_effect = CORE_LAYOUT_NCHW;
    wrong[1].st.activation_type = CORE_DTYPE_FP32;
    wrong[2].st.conv_shapes_tuned = 3;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(core_config_in_effect(&cfg, &wrong[i].st, why, sizeof why), 1);
        printf("not in effect: %s\n", why);
        assert_non_null(strstr(why, wrong[i].says));
    }
    CoreStats cpu = wrong[0].st;  // the same figures from a CPU backend: by design
    cpu.backend = CORE_BACKEND_CPU;
    assert_int_equal(core_config_in_effect(&cfg, &cpu, why, sizeof why), 0);
    cfg.precision = CORE_PRECISION_FP32_STRICT;
    cfg.conv_algo = CORE_CONV_ALGO_HEURISTIC;
    CoreStats fp32 = {.backend = CORE_BACKEND_CUDA, .layout_in_effect = CORE_LAYOUT_NHWC,
                      .activation_type = CORE_DTYPE_FP32, .tf32_allowed = true, .conv_shapes = 5};
    assert_int_equal(core_config_in_effect(&cfg, &fp32, why, sizeof why), 1);
    assert_non_null(strstr(why, "fp32_strict"));
    fp32.tf32_allowed = false;
    assert_int_equal(core_config_in_effect(&cfg, &fp32, why, sizeof why), 0);
    cfg.precision = CORE_PRECISION_TF32;
    assert_int_equal(core_config_in_effect(&cfg, &fp32, why, sizeof why), 1);
    assert_non_null(strstr(why, "tf32 asked"));
    fp32.conv_shapes_tuned = 1;  // heuristic asked, a tuned one ran
    fp32.tf32_allowed = true;
    assert_int_equal(core_config_in_effect(&cfg, &fp32, why, sizeof why), 1);
    assert_non_null(strstr(why, "conv_algo heuristic asked"));
}

// A core reports fp32 NCHW from the CPU backend whatever the config asks, and in-effect
// checks pass there.
static void test_cpu_core_reports_what_it_runs(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.layout = CORE_LAYOUT_NHWC;
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), 0);
    CoreStats st;
    assert_int_equal(core_stats(core, &st), 0);
    assert_int_equal(st.layout_in_effect, CORE_LAYOUT_NCHW);
    assert_int_equal(st.activation_type, CORE_DTYPE_FP32);
    assert_int_equal(st.conv_shapes, 0);
    assert_int_equal(core_assert_in_effect(core, &cfg), 0);
    core_free(core);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_config_errors_are_reported),
        cmocka_unit_test(test_step_reports_lr_and_deferred_loss),
        cmocka_unit_test(test_zero_grad_modes_bit_identical),
        cmocka_unit_test(test_tiny_trains_to_accuracy),
        cmocka_unit_test(test_config_in_effect_names_the_difference),
        cmocka_unit_test(test_cpu_core_reports_what_it_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
