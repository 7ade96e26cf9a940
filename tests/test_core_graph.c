// test_core_graph.c: the core's cuda_graph field (a training step captured as a CUDA graph
// and replayed). On every machine: the field's name and parser, its validation (the CPU
// backends refuse it: ERROR_BAD_USAGE; auto without a GPU: ERROR_NO_DEVICE; so does train's
// --cuda-graph on the CPU backend). With a GPU (skipped visibly without one): graph replay
// against eager steps of the same config with deterministic cuDNN, bit for bit wherever
// two eager runs agree bit for bit (see compare), over steps that change the batch and the
// image size, with host and device batches, fp16 with injected inf (skipped steps; SGD and
// AdamW), bf16 NHWC, and the MLP with clipping (its norm sums squares with atomics: 1e-5 relative L2);
// plus the counters that say what ran (captures, replays, eager steps), gradient hooks
// refused, and a re-capture after core_conv_cache_clear and after an eval of another size.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "kernels/synth.h"
#include "tests/support.h"

// ---- everywhere: the config field --------------------------------------------------------------

static void test_cuda_graph_names_parse(void **state)
{
    (void)state;
    bool on = true;
    assert_int_equal(core_cuda_graph_parse("eager", &on), 0);
    assert_false(on);
    assert_int_equal(core_cuda_graph_parse("graph", &on), 0);
    assert_true(on);
    assert_int_equal(core_cuda_graph_parse("graphs", &on), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_true(on);  // unchanged on error
    assert_int_equal(core_cuda_graph_parse(NULL, &on), -1);
    assert_string_equal(core_cuda_graph_name(false), "eager");
    assert_string_equal(core_cuda_graph_name(true), "graph");
}

static void test_cuda_graph_validation(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp", "small", "medium", "resnet18"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        CoreConfig cfg;
        assert_int_equal(core_config_preset(&cfg, presets[i]), 0);
        assert_false(cfg.cuda_graph);  // off unless asked for
        cfg.cuda_graph = true;
        cfg.backend = CORE_BACKEND_CUDA;
        assert_int_equal(core_config_validate(&cfg), 0);
        cfg.backend = CORE_BACKEND_AUTO;
        assert_int_equal(core_config_validate(&cfg), 0);
        CoreBackend cpus[] = {CORE_BACKEND_CPU, CORE_BACKEND_CPU_REF};
        for (int b = 0; b < 2; b++) {
            cfg.backend = cpus[b];
            error_clear();
            assert_int_equal(core_config_validate(&cfg), -1);
            assert_int_equal(error_kind(), ERROR_BAD_USAGE);
            assert_non_null(strstr(error_message(), "cuda_graph"));
            Core *core = NULL;
            assert_int_equal(core_create(&cfg, &core), -1);
            assert_null(core);
            assert_int_equal(error_kind(), ERROR_BAD_USAGE);
        }
    }
}

// AUTO: CUDA when a device is usable; without one, cuda_graph cannot be honoured.
static void test_cuda_graph_auto_backend(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_AUTO;
    cfg.cuda_graph = true;
    cfg.batch_size = 4;
    Core *core = NULL;
    if (test_gpu_present()) {
        assert_int_equal(core_create(&cfg, &core), 0);
        CoreStats st;
        assert_int_equal(core_stats(core, &st), 0);
        assert_int_equal(st.backend, CORE_BACKEND_CUDA);
        core_free(core);
    } else {
        error_clear();
        assert_int_equal(core_create(&cfg, &core), -1);
        assert_null(core);
        assert_int_equal(error_kind(), ERROR_NO_DEVICE);
        assert_non_null(strstr(error_message(), "cuda_graph"));
    }
}

// The CPU backends report no graph work.
static void test_cpu_stats_have_no_graph_work(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.batch_size = 4;
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), 0);
    const CoreModelConfig *m = &cfg.model;
    SynthTask t = {m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    float *images = malloc((size_t)4 * m->in_channels * m->image_size * m->image_size * sizeof(float));
    int32_t labels[4];
    assert_non_null(images);
    synth_batch(&t, 0, 4, images, labels);
    CoreBatch b = {.images = images, .labels = labels, .n = 4, .memory = CORE_MEMORY_HOST};
    assert_int_equal(core_step(core, &b, NULL), 0);
    CoreStats st;
    assert_int_equal(core_stats(core, &st), 0);
    assert_int_equal(st.graph_captures, 0);
    assert_int_equal(st.graph_replays, 0);
    assert_int_equal(st.eager_steps, 0);
    assert_true(st.capture_ms == 0.0);
    free(images);
    core_free(core);
}

// train --cuda-graph sets the field: on the CPU backend the run stops at once, saying why.
static void test_train_flag_on_cpu_is_refused(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    int rc = test_run("'%s/train' --preset tiny --data tensor --backend cpu --cuda-graph --steps 1 "
                      ">'%s/out.txt' 2>&1", test_build_dir(), tmp);
    assert_int_not_equal(rc, 0);
    char *out = test_read_in(tmp, "out.txt");
    assert_non_null(out);
    if (!strstr(out, "cuda_graph needs the CUDA backend")) fail_msg("train said: %s", out);
    free(out);
    test_remove_tree(tmp);
    free(tmp);
}

// ---- with a GPU: graph replay against eager --------------------------------------------------------

typedef struct Step { int size, n; bool fault; } Step;

typedef struct Run {
    float *params;
    float losses[64];
    CoreStats stats;
} Run;

// Trains a fresh core of cfg through `steps` (batch index i for step i; host or device
// memory); fills r.
static void run_steps(const CoreConfig *cfg, const Step *steps, int count, bool device, Run *r)
{
    assert_true(count <= 64);
    Core *core = NULL;
    int rc = core_create(cfg, &core);
    if (rc != 0) printf("core_create: %s\n", error_message());
    assert_int_equal(rc, 0);
    const CoreModelConfig *m = &cfg->model;
    int max_size = 0, max_n = 0;
    for (int i = 0; i < count; i++) {
        if (steps[i].size > max_size) max_size = steps[i].size;
        if (steps[i].n > max_n) max_n = steps[i].n;
    }
    size_t floats = (size_t)max_n * m->in_channels * max_size * max_size;
    float *images = malloc(floats * sizeof(float));
    int32_t *labels = malloc((size_t)max_n * sizeof(int32_t));
    assert_true(images && labels);
    float *d_images = NULL;
    int32_t *d_labels = NULL;
    if (device) {
        assert_int_equal(cudaMalloc((void **)&d_images, floats * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&d_labels, (size_t)max_n * sizeof(int32_t)), cudaSuccess);
    }
    for (int i = 0; i < count; i++) {
        const Step *s = &steps[i];
        SynthTask t = {m->in_channels, s->size, m->num_classes, 0.5f, 1};
        synth_batch(&t, (uint64_t)i, s->n, images, labels);
        assert_int_equal(core_set_image_size(core, s->size), 0);
        CoreBatch b = {.images = images, .labels = labels, .n = s->n, .memory = CORE_MEMORY_HOST};
        if (device) {
            // the previous step may still read the device batch: wait, then overwrite it
            assert_int_equal(core_sync(core), 0);
            size_t count_f = (size_t)s->n * m->in_channels * s->size * s->size;
            assert_int_equal(cudaMemcpy(d_images, images, count_f * sizeof(float), cudaMemcpyHostToDevice),
                             cudaSuccess);
            assert_int_equal(cudaMemcpy(d_labels, labels, (size_t)s->n * sizeof(int32_t),
                                        cudaMemcpyHostToDevice), cudaSuccess);
            assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
            b = (CoreBatch){.images = d_images, .labels = d_labels, .n = s->n, .memory = CORE_MEMORY_DEVICE};
        }
        if (s->fault) assert_int_equal(core_inject_grad_fault(core, INFINITY), 0);
        CoreStepResult res;
        rc = core_step(core, &b, &res);
        if (rc != 0) printf("core_step %d: %s\n", i, error_message());
        assert_int_equal(rc, 0);
        r->losses[i] = res.loss_ready ? res.loss : NAN;
    }
    size_t np = core_param_count(core);
    r->params = malloc(np * sizeof(float));
    assert_non_null(r->params);
    assert_int_equal(core_params_get(core, r->params, np), 0);
    assert_int_equal(core_stats(core, &r->stats), 0);
    if (device) {
        cudaFree(d_images);
        cudaFree(d_labels);
    }
    free(images);
    free(labels);
    core_free(core);
}

static size_t param_count(const CoreConfig *cfg)
{
    Core *core = NULL;
    assert_int_equal(core_create(cfg, &core), 0);
    size_t np = core_param_count(core);
    core_free(core);
    return np;
}


static CoreConfig gpu_config(const char *preset, CorePrecision p)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = CORE_BACKEND_CUDA;
    cfg.precision = p;
    cfg.batch_size = 8;
    cfg.deterministic = true;  // the same algorithms and results run to run
    return cfg;
}

// Eager and graph cores of cfg through the same steps, and the graph core's counters as
// expected. The bar is eager's own reproducibility: when two eager runs agree bit for bit,
// the graph run must too (tolerance 0) or stay within `tolerance` (relative L2 of the
// parameters); when they do not (float atomics in a reduction whose order varies), the
// graph run may differ from eager by no more than 10x what eager differs from itself (or
// `tolerance`, the larger). Losses likewise, with 1e-6 relative as the floor (their sums
// use float atomics).
static void compare(CoreConfig cfg, const Step *steps, int count, bool device, double tolerance,
                    int captures, int eager_steps)
{
    size_t np = param_count(&cfg);
    Run eager = {0}, again = {0}, graph = {0};
    cfg.cuda_graph = false;
    run_steps(&cfg, steps, count, false, &eager);  // the reference: host batches, op by op
    run_steps(&cfg, steps, count, false, &again);
    cfg.cuda_graph = true;
    run_steps(&cfg, steps, count, device, &graph);
    bool reproducible = memcmp(eager.params, again.params, np * sizeof(float)) == 0;
    double noise = test_rel_l2(again.params, eager.params, np);
    double bound = reproducible ? tolerance : fmax(tolerance, 10.0 * noise);
    double rel = test_rel_l2(graph.params, eager.params, np);
    printf("graph vs eager parameters: relative L2 %.3g (bound %.3g; eager vs eager %.3g%s)\n", rel,
           bound, noise, reproducible ? ", bit for bit" : "");
    if (bound == 0.0) assert_memory_equal(graph.params, eager.params, np * sizeof(float));
    else assert_true(rel <= bound);
    for (int i = 0; i < count; i++) {
        assert_int_equal(isnan(graph.losses[i]), isnan(eager.losses[i]));
        if (isnan(eager.losses[i])) continue;
        double own = fabs((double)again.losses[i] - eager.losses[i]);
        double limit = fmax(1e-6 * fabs((double)eager.losses[i]) + 1e-7, 10.0 * own);
        assert_true(fabs((double)graph.losses[i] - eager.losses[i]) <= limit);
    }
    assert_int_equal(graph.stats.skipped_steps, eager.stats.skipped_steps);
    assert_true(graph.stats.loss_scale == eager.stats.loss_scale);
    assert_int_equal(graph.stats.growth_tracker, eager.stats.growth_tracker);
    assert_int_equal(graph.stats.graph_captures, captures);
    assert_int_equal(graph.stats.eager_steps, eager_steps);
    assert_int_equal(graph.stats.graph_replays, count - eager_steps);
    assert_true(graph.stats.capture_ms > 0.0);
    assert_int_equal(eager.stats.graph_captures, 0);
    assert_int_equal(eager.stats.graph_replays, 0);
    free(eager.params);
    free(again.params);
    free(graph.params);
}

// 11 steps: 4 at 16x16 (eager, capture, 2 replays), 3 at 12x12 (eager, capture, replay),
// 2 at 16x16 again (the plans were remade: eager, capture) and 2 with a batch of 6 (eager,
// capture): 4 captures, 4 eager steps, 7 replays.
static const Step shape_changes[] = {
    {16, 8, false}, {16, 8, false}, {16, 8, false}, {16, 8, false},
    {12, 8, false}, {12, 8, false}, {12, 8, false},
    {16, 8, false}, {16, 8, false},
    {16, 6, false}, {16, 6, false},
};
#define SHAPE_STEPS ((int)(sizeof shape_changes / sizeof shape_changes[0]))

static void test_gpu_graph_equals_eager_across_shapes(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = gpu_config("tiny", CORE_PRECISION_FP32);
    compare(cfg, shape_changes, SHAPE_STEPS, false, 0.0, 4, 4);
    cfg.zero_grad = CORE_ZERO_GRAD_SET_TO_NONE;
    compare(cfg, shape_changes, SHAPE_STEPS, false, 0.0, 4, 4);
    cfg.readback = CORE_READBACK_DEFERRED;
    cfg.readback_interval = 3;
    compare(cfg, shape_changes, SHAPE_STEPS, false, 0.0, 4, 4);
}

// Device batches go through one device-to-device copy into the graph's input.
static void test_gpu_graph_device_batches(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = gpu_config("tiny", CORE_PRECISION_FP32);
    compare(cfg, shape_changes, SHAPE_STEPS, true, 0.0, 4, 4);
}

// Staged steps (fp16, bf16 NHWC: input conversion and weight casts inside the graph), and fp16's
// GradScaler: inf injected at two later steps forces them eager and skips them; the scale
// and the skipped count follow eager's. init_scale 1024: real fp16 overflow adds no skips.
static void test_gpu_graph_fp16_skipped_steps(void **state)
{
    (void)state;
    REQUIRE_GPU();
    Step steps[10];
    for (int i = 0; i < 10; i++) steps[i] = (Step){16, 8, i == 4 || i == 7};
    CoreConfig cfg = gpu_config("tiny", CORE_PRECISION_FP16);
    cfg.scaler.init_scale = 1024.0f;
    cfg.scaler.growth_interval = 3;
    // eager: step 0 and the two faults; one capture (step 1); 7 replays
    compare(cfg, steps, 10, false, 0.0, 1, 3);
    // AdamW: its step count t is on the device, advanced by replays and not by skipped steps
    cfg.optim.optimizer = CORE_OPTIM_ADAMW;
    compare(cfg, steps, 10, false, 0.0, 1, 3);
    cfg.optim.optimizer = CORE_OPTIM_SGD;
    // NHWC batch-norm sums per channel with float atomics: see compare for the bar
    cfg.precision = CORE_PRECISION_BF16;
    cfg.layout = CORE_LAYOUT_NHWC;
    for (int i = 0; i < 10; i++) steps[i].fault = false;
    compare(cfg, steps, 10, true, 0.0, 1, 1);
}

// The MLP (cuBLAS GEMMs in the graph) with clipping: the norm's atomics may round
// differently from run to run, so within 1e-5 relative L2 after 8 steps.
static void test_gpu_graph_mlp_with_clipping(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = gpu_config("mlp", CORE_PRECISION_FP32);
    cfg.optim.clip_norm = 0.5f;
    Step steps[8];
    for (int i = 0; i < 8; i++) steps[i] = (Step){cfg.model.image_size, 8, false};
    compare(cfg, steps, 8, false, 1e-5, 1, 1);
}

static int dummy_ready(void *user, const CoreGradReady *ready)
{
    (void)user;
    (void)ready;
    return 0;
}

static int dummy_before(void *user, float *grads, size_t count, void *stream)
{
    (void)user;
    (void)grads;
    (void)count;
    (void)stream;
    return 0;
}

// Gradient hooks (DDP) are refused on a graph core; core_conv_cache_clear re-captures.
static void test_gpu_graph_hooks_and_cache_clear(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = gpu_config("tiny", CORE_PRECISION_FP32);
    cfg.cuda_graph = true;
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), 0);
    CoreGradHooks hooks = {dummy_ready, dummy_before, NULL};
    error_clear();
    assert_int_equal(core_set_grad_hooks(core, &hooks), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_int_equal(core_set_grad_hooks(core, NULL), 0);  // removing none is fine
    const CoreModelConfig *m = &cfg.model;
    SynthTask t = {m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    float *images = malloc((size_t)8 * m->in_channels * m->image_size * m->image_size * sizeof(float));
    int32_t labels[8];
    assert_non_null(images);
    synth_batch(&t, 0, 8, images, labels);
    CoreBatch b = {.images = images, .labels = labels, .n = 8, .memory = CORE_MEMORY_HOST};
    for (int i = 0; i < 3; i++) assert_int_equal(core_step(core, &b, NULL), 0);
    CoreStats st;
    assert_int_equal(core_stats(core, &st), 0);
    assert_int_equal(st.graph_captures, 1);
    core_conv_cache_clear();  // new plans: the old graph's algorithms may be stale
    for (int i = 0; i < 3; i++) assert_int_equal(core_step(core, &b, NULL), 0);
    assert_int_equal(core_stats(core, &st), 0);
    assert_int_equal(st.graph_captures, 2);
    assert_int_equal(st.eager_steps, 2);
    assert_int_equal(st.graph_replays, 4);
    // an eval of another batch size in between re-plans the step's shape: eager again
    CoreEvalResult er;
    CoreBatch half = {.images = images, .labels = labels, .n = 4, .memory = CORE_MEMORY_HOST};
    assert_int_equal(core_eval(core, &half, &er), 0);
    assert_int_equal(core_step(core, &b, NULL), 0);
    assert_int_equal(core_stats(core, &st), 0);
    assert_int_equal(st.eager_steps, 3);
    free(images);
    core_free(core);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_graph_names_parse),
        cmocka_unit_test(test_cuda_graph_validation),
        cmocka_unit_test(test_cuda_graph_auto_backend),
        cmocka_unit_test(test_cpu_stats_have_no_graph_work),
        cmocka_unit_test(test_train_flag_on_cpu_is_refused),
        cmocka_unit_test(test_gpu_graph_equals_eager_across_shapes),
        cmocka_unit_test(test_gpu_graph_device_batches),
        cmocka_unit_test(test_gpu_graph_fp16_skipped_steps),
        cmocka_unit_test(test_gpu_graph_mlp_with_clipping),
        cmocka_unit_test(test_gpu_graph_hooks_and_cache_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
