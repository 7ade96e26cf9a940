// test_core_checkpoint.c: activation checkpointing (CoreConfig.checkpoint_segments, as
// torch.utils.checkpoint.checkpoint_sequential). The recompute runs the same kernels on the
// same inputs, so on each CPU backend a checkpointed core must train bit for bit as a plain
// one: the loss of every step, the gradient, the parameters after several steps, the BN
// running statistics (updated once per step, not again by the recompute) and the eval loss
// that reads them; also with fp16 loss scaling, set_to_none and clipping, and through the split
// step accumulating micro-batches. The reference keeps every tensor in its own buffer, so
// there the recomputed values come on top (its arena grows); the fast backend's plan reuses
// bytes, so a recompute that did not run, or landed on live bytes, shows there. The arena must shrink by a stated factor on the deeper presets, the fast
// backend must match the reference with checkpointing on, a negative segment count is bad
// usage, and on a GPU the CUDA backend (eager and as a captured CUDA graph) must train as
// its own plain core does. GPU tests skip visibly without a device.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/model.h"
#include "kernels/model_plan.h"
#include "kernels/synth.h"
#include "tests/support.h"

#define STEPS 4

// What a few training steps leave: every step's loss, the gradient at the start and at the
// end (core_loss_grad), parameters, running statistics, eval loss, stats.
typedef struct Trace {
    float loss[STEPS];
    float loss0, loss_end, eval_loss;
    float *grad0, *grad_end, *params, *buffers;
    size_t np, nb;
    CoreStats stats;
} Trace;

static CoreConfig config(const char *preset, CoreBackend be, int batch, int segments)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = be;
    cfg.batch_size = batch;
    cfg.checkpoint_segments = segments;
    cfg.deterministic = true;  // CUDA: the same cuDNN algorithms run after run
    return cfg;
}

static Trace trace_run(const CoreConfig *cfg)
{
    Core *core = test_core_create(cfg);
    const CoreModelConfig *m = &cfg->model;
    int n = cfg->batch_size;
    size_t img = (size_t)m->in_channels * m->image_size * m->image_size;
    float *images = malloc((size_t)n * img * sizeof(float));
    int32_t *labels = malloc((size_t)n * sizeof(int32_t));
    Trace t = {.np = core_param_count(core), .nb = core_buffer_count(core)};
    t.grad0 = malloc(t.np * sizeof(float));
    t.grad_end = malloc(t.np * sizeof(float));
    t.params = malloc(t.np * sizeof(float));
    t.buffers = malloc((t.nb ? t.nb : 1) * sizeof(float));
    assert_true(images && labels && t.grad0 && t.grad_end && t.params && t.buffers);
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    CoreBatch b = {.images = images, .labels = labels, .n = n, .memory = CORE_MEMORY_HOST};
    synth_batch(&task, 0, n, images, labels);
    assert_int_equal(core_loss_grad(core, &b, &t.loss0, t.grad0), 0);
    for (int s = 0; s < STEPS; s++) {
        synth_batch(&task, (uint64_t)s + 1, n, images, labels);
        CoreStepResult r;
        if (core_step(core, &b, &r) != 0) fail_msg("core_step: %s", error_message());
        assert_true(r.loss_ready);
        t.loss[s] = r.loss;
    }
    assert_int_equal(core_loss_grad(core, &b, &t.loss_end, t.grad_end), 0);
    CoreEvalResult ev;
    assert_int_equal(core_eval(core, &b, &ev), 0);
    t.eval_loss = ev.loss;
    assert_int_equal(core_params_get(core, t.params, t.np), 0);
    memset(t.buffers, 0, (t.nb ? t.nb : 1) * sizeof(float));
    if (t.nb && cfg->backend != CORE_BACKEND_CUDA) {  // CUDA's are in device memory: the eval
        float *buf = NULL;                            // loss, which reads them, stands in
        void *stream = NULL;
        assert_int_equal(core_buffers(core, &buf, &stream), 0);
        memcpy(t.buffers, buf, t.nb * sizeof(float));
    }
    assert_int_equal(core_stats(core, &t.stats), 0);
    core_free(core);
    free(images);
    free(labels);
    return t;
}

static void trace_free(Trace *t)
{
    free(t->grad0); free(t->grad_end); free(t->params); free(t->buffers);
    *t = (Trace){0};
}

static bool same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

// Bit for bit: the checkpointed run against the plain one.
static void expect_identical(const Trace *plain, const Trace *ck, const char *what)
{
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&plain->loss[s], &ck->loss[s], sizeof(float)) != 0)
            fail_msg("%s: step %d loss %.9g with checkpointing, %.9g without", what, s, ck->loss[s],
                     plain->loss[s]);
    assert_true(memcmp(&plain->loss0, &ck->loss0, sizeof(float)) == 0);
    assert_true(memcmp(&plain->loss_end, &ck->loss_end, sizeof(float)) == 0);
    if (!same(plain->grad0, ck->grad0, plain->np)) fail_msg("%s: first gradient differs", what);
    if (!same(plain->grad_end, ck->grad_end, plain->np)) fail_msg("%s: last gradient differs", what);
    if (!same(plain->params, ck->params, plain->np)) fail_msg("%s: parameters differ", what);
    if (!same(plain->buffers, ck->buffers, plain->nb))
        fail_msg("%s: BN running statistics differ", what);
    if (memcmp(&plain->eval_loss, &ck->eval_loss, sizeof(float)) != 0)
        fail_msg("%s: eval loss %.9g vs %.9g", what, ck->eval_loss, plain->eval_loss);
}

static void check_config_identical(CoreConfig cfg, int segments, const char *what)
{
    cfg.checkpoint_segments = 0;
    Trace plain = trace_run(&cfg);
    cfg.checkpoint_segments = segments;
    Trace ck = trace_run(&cfg);
    expect_identical(&plain, &ck, what);
    printf("%s: identical over %d steps; activation bytes %zu -> %zu\n", what, STEPS,
           plain.stats.activation_bytes, ck.stats.activation_bytes);
    trace_free(&plain);
    trace_free(&ck);
}

static void check_identical(const char *preset, CoreBackend be, int batch, int segments,
                            CorePointwise pw)
{
    CoreConfig cfg = config(preset, be, batch, 0);
    cfg.pointwise = pw;
    char what[128];
    snprintf(what, sizeof what, "%s %s batch %d segments %d %s", preset, core_backend_name(be),
             batch, segments, core_pointwise_name(pw));
    check_config_identical(cfg, segments, what);
}

// The units a checkpoint_sequential sees: stem, each block, head (ResNet); each hidden
// layer, head (MLP).
static void test_units(void **state)
{
    (void)state;
    const struct { const char *preset; int units; } want[] = {
        {"tiny", 1 + 2 * 1 + 1}, {"small", 1 + 3 * 2 + 1}, {"medium", 1 + 4 * 2 + 1},
        {"resnet18", 1 + 4 * 2 + 1}, {"mlp", 2 + 1},
    };
    ModelGraph *g = malloc(sizeof *g);
    assert_non_null(g);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        CoreConfig cfg;
        assert_int_equal(core_config_preset(&cfg, want[k].preset), 0);
        assert_int_equal(model_build(&cfg.model, g), 0);
        int first[MODEL_MAX_OPS];
        int units = model_plan_units(g, first, MODEL_MAX_OPS);
        assert_int_equal(units, want[k].units);
        assert_int_equal(first[0], 0);
        for (int u = 1; u < units; u++) assert_int_equal(g->ops[first[u] - 1].kind, OP_RELU);
    }
    free(g);
}

// The reference backend: bit for bit, several segment counts (every unit, 2, 3 segments).
static void test_reference_identical(void **state)
{
    (void)state;
    check_identical("tiny", CORE_BACKEND_CPU_REF, 8, CORE_CHECKPOINT_EACH_UNIT, CORE_POINTWISE_SEPARATE);
    check_identical("tiny", CORE_BACKEND_CPU_REF, 8, 2, CORE_POINTWISE_SEPARATE);
    check_identical("small", CORE_BACKEND_CPU_REF, 2, 3, CORE_POINTWISE_SEPARATE);
    check_identical("mlp", CORE_BACKEND_CPU_REF, 8, CORE_CHECKPOINT_EACH_UNIT, CORE_POINTWISE_SEPARATE);
}

// The fast backend (its plan reuses buffers, so a recompute landing on live bytes would show):
// bit for bit too, separate and fused pointwise ops.
static void test_fast_identical(void **state)
{
    (void)state;
    core_cpu_set_threads(2);
    check_identical("tiny", CORE_BACKEND_CPU, 16, CORE_CHECKPOINT_EACH_UNIT, CORE_POINTWISE_SEPARATE);
    check_identical("tiny", CORE_BACKEND_CPU, 16, CORE_CHECKPOINT_EACH_UNIT, CORE_POINTWISE_FUSED);
    check_identical("small", CORE_BACKEND_CPU, 8, CORE_CHECKPOINT_EACH_UNIT, CORE_POINTWISE_SEPARATE);
    check_identical("small", CORE_BACKEND_CPU, 8, CORE_CHECKPOINT_EACH_UNIT, CORE_POINTWISE_FUSED);
    check_identical("small", CORE_BACKEND_CPU, 8, 3, CORE_POINTWISE_FUSED);
    check_identical("mlp", CORE_BACKEND_CPU, 16, 2, CORE_POINTWISE_SEPARATE);
    core_cpu_set_threads(0);
}

// Other paths through the step: fp16 with GradScaler (the CPU runs its loss scaling),
// set_to_none, clipping; and the split step accumulating two micro-batches (no_sync
// gradient accumulation) before one update.
static void test_other_paths_identical(void **state)
{
    (void)state;
    CoreConfig cfg = config("tiny", CORE_BACKEND_CPU, 16, 0);
    cfg.precision = CORE_PRECISION_FP16;
    cfg.zero_grad = CORE_ZERO_GRAD_SET_TO_NONE;
    cfg.optim.clip_norm = 1.0f;
    check_config_identical(cfg, CORE_CHECKPOINT_EACH_UNIT, "tiny cpu fp16 set_to_none clip 1");
    cfg = config("small", CORE_BACKEND_CPU_REF, 2, 0);
    float *params[2] = {NULL, NULL};
    size_t np = 0;
    for (int k = 0; k < 2; k++) {
        cfg.checkpoint_segments = k ? 2 : 0;
        Core *core = NULL;
        assert_int_equal(core_create(&cfg, &core), 0);
        np = core_param_count(core);
        const CoreModelConfig *m = &cfg.model;
        size_t img = (size_t)m->in_channels * m->image_size * m->image_size;
        float *images = malloc(2 * img * sizeof(float));
        int32_t labels[2];
        params[k] = malloc(np * sizeof(float));
        assert_true(images && params[k]);
        SynthTask task = {m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
        CoreBatch b = {.images = images, .labels = labels, .n = 2, .memory = CORE_MEMORY_HOST};
        for (int micro = 0; micro < 2; micro++) {
            synth_batch(&task, (uint64_t)micro, 2, images, labels);
            assert_int_equal(core_forward_backward(core, &b, micro > 0), 0);
        }
        CoreStepResult r;
        assert_int_equal(core_apply_update(core, 4, &r), 0);
        assert_int_equal(core_params_get(core, params[k], np), 0);
        core_free(core);
        free(images);
    }
    assert_true(same(params[0], params[1], np));
    free(params[0]);
    free(params[1]);
}

// Fast against the reference, both checkpointed: test_cpu_fast.c's tolerances (relative L2).
static void test_fast_matches_reference(void **state)
{
    (void)state;
    CoreConfig cfg = config("tiny", CORE_BACKEND_CPU_REF, 16, CORE_CHECKPOINT_EACH_UNIT);
    Trace ref = trace_run(&cfg);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.pointwise = CORE_POINTWISE_FUSED;
    Trace fast = trace_run(&cfg);
    double eg = test_rel_l2(fast.grad_end, ref.grad_end, ref.np);
    double ep = test_rel_l2(fast.params, ref.params, ref.np);
    double es = test_rel_l2(fast.buffers, ref.buffers, ref.nb);
    double el = fabs((double)fast.loss_end - ref.loss_end) / fabs((double)ref.loss_end);
    printf("tiny, checkpointed: fast vs reference after %d steps: loss %.2g, gradient %.2g, "
           "parameters %.2g, running statistics %.2g (relative)\n", STEPS, el, eg, ep, es);
    assert_true(el <= 1e-5);
    assert_true(eg <= 2e-5);
    assert_true(ep <= 1e-6);
    assert_true(es <= 1e-5);
    trace_free(&ref);
    trace_free(&fast);
}

// The arena: plans of the deeper presets need at most this share of the plain plan's bytes
// with a checkpoint around every unit (fp32, batch 32, separate pointwise ops).
#define ARENA_RATIO_MAX 0.6

static void test_arena_smaller(void **state)
{
    (void)state;
    const char *presets[] = {"small", "medium", "resnet18"};
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    for (size_t k = 0; k < 3; k++) {
        CoreConfig cfg;
        assert_int_equal(core_config_preset(&cfg, presets[k]), 0);
        assert_int_equal(model_build(&cfg.model, g), 0);
        for (int fuse = 0; fuse <= 1; fuse++) {
            ModelPlanOptions o = {.training = true, .reuse = true, .fuse = fuse};
            assert_int_equal(model_plan_make(g, 32, 4, &o, p), 0);
            size_t plain = p->arena_bytes;
            o.checkpoint_segments = CORE_CHECKPOINT_EACH_UNIT;
            assert_int_equal(model_plan_make(g, 32, 4, &o, p), 0);
            size_t each = p->arena_bytes;
            assert_int_equal(p->checkpointed_segments, model_plan_units(g, NULL, 0) - 1);
            o.checkpoint_segments = 2;
            assert_int_equal(model_plan_make(g, 32, 4, &o, p), 0);
            size_t two = p->arena_bytes;
            printf("%s batch 32 fp32 %s: arena %.2f MiB plain, %.2f MiB checkpointing every unit "
                   "(%.2fx), %.2f MiB in 2 segments (%.2fx)\n", presets[k],
                   fuse ? "fused" : "separate", plain / 1048576.0, each / 1048576.0,
                   (double)each / plain, two / 1048576.0, (double)two / plain);
            assert_true((double)each <= ARENA_RATIO_MAX * (double)plain);
            assert_true(two < plain);
        }
    }
    free(p);
    free(g);
    // Through a core (fast backend): CoreStats.activation_bytes follows the plan.
    CoreConfig cfg = config("small", CORE_BACKEND_CPU, 8, 0);
    Trace plain = trace_run(&cfg);
    cfg.checkpoint_segments = CORE_CHECKPOINT_EACH_UNIT;
    Trace ck = trace_run(&cfg);
    printf("small batch 8 core: activation_bytes %zu plain, %zu checkpointed\n",
           plain.stats.activation_bytes, ck.stats.activation_bytes);
    assert_true((double)ck.stats.activation_bytes <= ARENA_RATIO_MAX * (double)plain.stats.activation_bytes);
    trace_free(&plain);
    trace_free(&ck);
}

// One segment, or none, is no checkpointing (as checkpoint_sequential(f, 1)); a negative
// count is bad usage; eval plans ignore it.
static void test_segments_and_usage(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    ModelPlan *p = malloc(sizeof *p);
    assert_non_null(g);
    assert_non_null(p);
    CoreConfig cfg = config("small", CORE_BACKEND_CPU, 8, 0);
    assert_int_equal(model_build(&cfg.model, g), 0);
    ModelPlanOptions o = {.training = true, .reuse = true, .checkpoint_segments = 1};
    assert_int_equal(model_plan_make(g, 4, 4, &o, p), 0);
    assert_int_equal(p->checkpointed_segments, 0);
    o.checkpoint_segments = 3;  // 8 units: 2 checkpointed segments of 2 units, the rest plain
    assert_int_equal(model_plan_make(g, 4, 4, &o, p), 0);
    assert_int_equal(p->checkpointed_segments, 2);
    o.training = false;
    assert_int_equal(model_plan_make(g, 4, 4, &o, p), 0);
    assert_int_equal(p->checkpointed_segments, 0);
    o.training = true;
    o.checkpoint_segments = -1;
    assert_int_equal(model_plan_make(g, 4, 4, &o, p), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    cfg.checkpoint_segments = -2;
    assert_int_equal(core_config_validate(&cfg), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    printf("refused: %s\n", error_message());
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), -1);
    assert_null(core);
    free(p);
    free(g);
}

// The running-statistics check can fail: a recompute that updated them a second time (what
// PyTorch's checkpoint does to BN unless care is taken) is simulated on a plain core's
// statistics after one step (r1 = 0.9 r0 + 0.1 x, then again r2 = 0.9 r1 + 0.1 x) and the
// comparison of expect_identical tells them apart.
static void test_double_update_is_caught(void **state)
{
    (void)state;
    CoreConfig cfg = config("tiny", CORE_BACKEND_CPU_REF, 8, 0);
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), 0);
    const CoreModelConfig *m = &cfg.model;
    size_t img = (size_t)m->in_channels * m->image_size * m->image_size, nb = core_buffer_count(core);
    float *images = malloc(8 * img * sizeof(float)), *r0 = malloc(nb * sizeof(float));
    float *twice = malloc(nb * sizeof(float));
    int32_t labels[8];
    assert_true(images && r0 && twice && nb > 0);
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    CoreBatch b = {.images = images, .labels = labels, .n = 8, .memory = CORE_MEMORY_HOST};
    synth_batch(&task, 1, 8, images, labels);
    float *r = NULL;
    void *stream = NULL;
    assert_int_equal(core_buffers(core, &r, &stream), 0);
    memcpy(r0, r, nb * sizeof(float));
    assert_int_equal(core_step(core, &b, NULL), 0);
    const float mom = MODEL_BN_MOMENTUM;
    for (size_t i = 0; i < nb; i++) {
        float x = (r[i] - (1.0f - mom) * r0[i]) / mom;  // the step's batch statistic
        twice[i] = (1.0f - mom) * r[i] + mom * x;
    }
    assert_false(same(r, twice, nb));
    printf("a second running-statistics update moves them by %.3g (relative L2)\n",
           test_rel_l2(twice, r, nb));
    core_free(core);
    free(images);
    free(r0);
    free(twice);
}

// CUDA: checkpointed against plain on the same device (deterministic cuDNN algorithms,
// strict fp32), eager and as a captured CUDA graph; relative L2 tolerance 1e-6 (the
// recompute repeats the same kernels, so it is normally exact).
static void check_gpu(bool graph, CorePrecision precision)
{
    CoreConfig cfg = config("small", CORE_BACKEND_CUDA, 32, 0);
    cfg.precision = precision;
    cfg.cuda_graph = graph;
    cfg.readback = CORE_READBACK_EVERY_STEP;
    Trace plain = trace_run(&cfg);
    cfg.checkpoint_segments = CORE_CHECKPOINT_EACH_UNIT;
    Trace ck = trace_run(&cfg);
    double eg = test_rel_l2(ck.grad_end, plain.grad_end, plain.np);
    double ep = test_rel_l2(ck.params, plain.params, plain.np);
    double el = fabs((double)ck.eval_loss - plain.eval_loss) / fabs((double)plain.eval_loss);
    printf("cuda %s %s: checkpointed vs plain: gradient %.2g, parameters %.2g, eval loss %.2g; "
           "activation bytes %zu -> %zu\n", graph ? "graph" : "eager", core_precision_name(precision),
           eg, ep, el, plain.stats.activation_bytes, ck.stats.activation_bytes);
    assert_true(eg <= 1e-6);
    assert_true(ep <= 1e-6);
    assert_true(el <= 1e-6);
    assert_true(ck.stats.activation_bytes < plain.stats.activation_bytes);
    if (graph) assert_true(ck.stats.graph_replays > 0);
    trace_free(&plain);
    trace_free(&ck);
}

static void test_gpu_identical(void **state)
{
    (void)state;
    REQUIRE_GPU();
    check_gpu(false, CORE_PRECISION_FP32_STRICT);
    check_gpu(false, CORE_PRECISION_FP16);
    check_gpu(true, CORE_PRECISION_FP32_STRICT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_reference_identical),
        cmocka_unit_test(test_fast_identical),
        cmocka_unit_test(test_other_paths_identical),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_arena_smaller),
        cmocka_unit_test(test_segments_and_usage),
        cmocka_unit_test(test_double_update_is_caught),
        cmocka_unit_test(test_gpu_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
