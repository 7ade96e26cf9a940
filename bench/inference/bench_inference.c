// bench_inference.c: the inference practices, on core_infer (kernels/core.h): the forward
// alone with BN's running statistics (model.eval()), logits back to the host.
// Gradients (inference_grad/*): the memory a forward holds with gradients on (grad_on,
//   baseline: the training plan's arena, every activation a backward would read kept)
//   against torch.no_grad() (no_grad, tuned: an inference plan that frees each activation
//   once its consumers ran), over batch sizes: the plan's activation bytes and the core's
//   peak, beside ms per batch and images/s. The core has no autograd: both run the same
//   kernels, so inference_mode's documented speed-up (no view tracking or version counters)
//   is a reference it cannot test. Check: the no_grad logits equal grad_on's
//   (GRAD_CHECK_TOL, top-1 all).
// Largest batch (inference_grad_max_batch/*): within --max_batch_memory_mib
//   (bench/driver/max_batch.h): on a GPU the batch doubles from 1 until the forward runs out
//   of memory, the rest of the device held as ballast (or --max_batch_cap, or the 2^31-value
//   guard); on a CPU it is estimated from the core's bytes at two batches against the budget
//   (a CPU swaps long before an allocation fails, so there is no probe).
// Serving (inference_serving/*): latency of --serving_requests single requests (a host batch
//   in, no labels, its logits out, each timed alone, after at least 200 ms of warm-up
//   requests) and throughput against the batch size, per precision (fp32 baseline; tf32,
//   fp16, bf16 on a GPU): mean and p50/p90/p95/p99, each from enough requests (p99 from
//   1,000: infer_common.h). Check: logits within the precision's tolerance of fp32's on the
//   request batch.
// Precision and layout (inference_precision/*): the forward at fp32 (baseline) against
//   tf32, fp16, bf16, channels_last (nhwc) and fp16 + nhwc, GPU only. Check: on a held-out
//   batch, with weights trained CHECK_TRAIN_STEPS steps (so that the classes separate), the
//   logits within the stated tolerance of fp32's and top-1 agreement at least the stated
//   share.
// CUDA graphs (inference_graphs/*, GPU only): single requests at batch 1..16 launched op by
//   op (eager) or as one captured forward (graph). Check: the graph's logits are eager's and
//   every timed request replayed.
// cudnn.benchmark (inference_cudnn/*, GPU only): heuristic algorithms against autotuning
//   (each shape's forward candidates timed once, as under no_grad; cache cleared at the
//   start of every run, as in a fresh process), for a fixed request shape and for image
//   sizes that change every request (4 sizes in turn); the tuning is inside the timed
//   requests. Check: autotune's logits within AUTOTUNE_TOL of the heuristic's.
// --practice_selftest (any mode) zeroes the tuned logits before each check: every check
// must then fail.
// Files: this one holds inference_grad and inference_precision (their variant tables and
// checks), the registration and main(); infer_max_batch.c inference_grad_max_batch;
// infer_latency.c inference_serving, inference_graphs and inference_cudnn (their tables,
// tolerances and timed-request loops); infer_family.c the helpers every family shares
// (infer_family.h); infer_common.c the timed requests, held-out batch, trained states and
// logits comparison underneath (infer_common.h).
#include <stdio.h>
#include <stdlib.h>

#include "bench/driver/harness.h"
#include "bench/driver/max_batch.h"
#include "bench/driver/practice.h"
#include "bench/inference/infer_family.h"
#include "kernels/check.h"

#define GRAD_CHECK_TOL 1e-6    // no_grad vs grad_on logits, relative L2: the same kernels in
                               // the same order on other buffers, so bit for bit (0) here
#define CHECK_TRAIN_STEPS 30   // SGD steps before the precision check's forward
#define HELD_OUT_MAX 256       // held-out images (fewer when larger than HELD_OUT_BYTES)
#define HELD_OUT_BYTES ((size_t)64 << 20)

// ---- variants --------------------------------------------------------------------------------

static const InferVariant grad_variants[] = {
    {"grad_on", HARNESS_BASELINE, false, CORE_GRAD_ON, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_HEURISTIC, 0, 0},
    {"no_grad", HARNESS_TUNED, false, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_HEURISTIC, GRAD_CHECK_TOL, 1.0},
};

// Tolerances of the precision rows: fp32 (PyTorch's default lets cuDNN's convolutions round
// their inputs to TF32, 10 mantissa bits) against TF32 GEMMs too, fp16 storage (10 bits),
// bf16 (7 bits), and NHWC (other algorithms): relative L2 of the held-out logits, top-1
// agreement on the trained model (a flip needs two classes within the rounding).
#define P INFER_PRECISION_VARIANT
static const InferVariant precision_variants[] = {
    P("fp32", HARNESS_BASELINE, false, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, 0, 0),
    P("tf32", HARNESS_TUNED, true, CORE_PRECISION_TF32, CORE_LAYOUT_NCHW, 2e-2, 0.98),
    P("fp16", HARNESS_TUNED, true, CORE_PRECISION_FP16, CORE_LAYOUT_NCHW, 2e-2, 0.98),
    P("bf16", HARNESS_TUNED, true, CORE_PRECISION_BF16, CORE_LAYOUT_NCHW, 8e-2, 0.95),
    P("nhwc", HARNESS_TUNED, true, CORE_PRECISION_FP32, CORE_LAYOUT_NHWC, 2e-2, 0.98),
    P("fp16_nhwc", HARNESS_TUNED, true, CORE_PRECISION_FP16, CORE_LAYOUT_NHWC, 2e-2, 0.98),
};
#undef P

// ---- inference_grad ----------------------------------------------------------------------------

// A row's batch, core and (a tuned row's) check logits, made at its first run and on a CPU
// kept between its runs (harness_keep: its repetitions time forwards alone, as a training
// row's, docs/statistics.md "What a repetition is"); on CUDA each run makes its own
// (device_used_mib counts from a core's creation).
typedef struct GradRun {
    PracticeBatch pb;
    bool batch_made;
    Core *core;
    float *on, *off;  // the check's logits: grad_on's and no_grad's on one core
} GradRun;

static void grad_run_free(void *obj)
{
    GradRun *g = obj;
    if (!g) return;
    core_free(g->core);
    if (g->batch_made) practice_batch_free(&g->pb);
    free(g->on);
    free(g->off);
    free(g);
}

// no_grad's logits against grad_on's on one core (both plans in turn) for batch b: computed
// at the row's first run, compared (and the counters given) at every run.
static int check_grad(HarnessState *st, const InferVariant *v, const CoreConfig *cfg,
                      const CoreBatch *b, GradRun *g)
{
    if (!g->on) {
        g->on = infer_logits_alloc(cfg, b->n);
        g->off = infer_logits_alloc(cfg, b->n);
        Core *core = NULL;
        int rc = g->on && g->off ? core_create(cfg, &core) : -1;
        if (rc == 0) rc = core_infer(core, b, CORE_GRAD_ON, g->on, NULL);
        if (rc == 0) rc = core_infer(core, b, CORE_GRAD_OFF, g->off, NULL);
        core_free(core);
        TRY(rc);
    }
    return infer_check_logits(st, v, g->on, g->off, b->n, cfg->model.num_classes, "grad_on's");
}

static void bench_grad(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!infer_run_config(st, v, &cfg)) return;
    GradRun *g = harness_take_kept(st);
    bool first = !g;
    if (first && !(g = calloc(1, sizeof *g))) {
        error_set(ERROR_OUT_OF_MEMORY, "out of memory (host)");
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    if (first) {
        if (infer_batch_make(&g->pb, &cfg, false) != 0) {
            practice_fail_or_skip(st, "preparing the batch");
            grad_run_free(g);
            return;
        }
        g->batch_made = true;
    }
    CoreBatch b = practice_batch_view(&g->pb, g->pb.n);
    int rc = v->role == HARNESS_TUNED ? check_grad(st, v, &cfg, &b, g) : 0;
    if (rc != 0) {  // > 0: the check failed the row
        if (rc < 0) practice_fail_or_skip(st, "checking against grad_on");
        grad_run_free(g);
        return;
    }
    if (first) rc = core_create(&cfg, &g->core);
    CoreStats s;
    if (!infer_timed_forwards(st, rc, g->core, &b, v->grad, first ? infer_warmup(&cfg) : 0, &s)) {
        grad_run_free(g);
        return;
    }
    harness_counter(st, "peak_mib", infer_mib(s.peak_bytes), HARNESS_COUNTER_PLAIN);
    if (cfg.backend == CORE_BACKEND_CUDA)
        harness_counter(st, "device_used_mib", infer_mib(s.device_used_bytes), HARNESS_COUNTER_PLAIN);
    char label[300];
    snprintf(label, sizeof label, "%s: eval forward of a batch of %d (%s), %s; activation_mib: "
             "the plan's arena, peak_mib: the core's buffers since the plan", v->name,
             cfg.batch_size, cfg.backend == CORE_BACKEND_CUDA ? "device-resident" : "host",
             v->grad == CORE_GRAD_ON ? "the training plan's arena (autograd on)"
                                     : "the inference plan (no_grad)");
    harness_set_label(st, label);
    if (cfg.backend == CORE_BACKEND_CUDA) grad_run_free(g);
    else harness_keep(st, g, grad_run_free);
}

// ---- inference_precision ------------------------------------------------------------------------

// The held-out check: weights trained at fp32, logits of fp32 and of the variant.
static int check_precision(HarnessState *st, const InferVariant *v, const CoreConfig *cfg)
{
    CoreConfig base = *cfg;
    infer_apply(&precision_variants[0], &base);
    const CoreModelConfig *m = &cfg->model;
    size_t image_bytes = (size_t)m->in_channels * m->image_size * m->image_size * sizeof(float);
    int n = HELD_OUT_MAX;
    while (n > 16 && (size_t)n * image_bytes > HELD_OUT_BYTES) n /= 2;
    InferState state;
    PracticeHostBatch h = {0};
    TRY(infer_state_train(&base, CHECK_TRAIN_STEPS, &state));
    float *want = infer_logits_alloc(cfg, n), *got = infer_logits_alloc(cfg, n);
    int rc = want && got ? practice_host_batch(&h, cfg, n, INFER_HELD_OUT_INDEX) : -1;
    if (rc == 0) rc = infer_logits_of(&base, &state, &h.b, CORE_GRAD_OFF, want);
    if (rc == 0) rc = infer_logits_of(cfg, &state, &h.b, CORE_GRAD_OFF, got);
    if (rc == 0) rc = infer_check_logits(st, v, want, got, n, m->num_classes, "fp32's");
    practice_host_batch_free(&h);
    infer_state_free(&state);
    free(want);
    free(got);
    return rc;
}

static void bench_precision(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!infer_run_config(st, v, &cfg)) return;
    int checked = v->role == HARNESS_TUNED ? check_precision(st, v, &cfg) : 0;
    if (checked != 0) {  // > 0: the check failed the row
        if (checked < 0) practice_fail_or_skip(st, "checking against fp32");
        return;
    }
    PracticeBatch pb;
    if (infer_batch_make(&pb, &cfg, false) != 0) {
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    CoreBatch b = practice_batch_view(&pb, pb.n);
    Core *core = NULL;
    int rc = core_create(&cfg, &core);
    CoreStats s;
    bool timed = infer_timed_forwards(st, rc, core, &b, CORE_GRAD_OFF, infer_warmup(&cfg), &s);
    core_free(core);
    practice_batch_free(&pb);
    if (!timed) return;
    if (!practice_in_effect(st, &cfg, &s)) return;  // tf32, fp16, bf16, nhwc really ran
    char label[300];
    snprintf(label, sizeof label, "%s (%s, %s): no_grad forward of a batch of %d; checked on %s",
             v->name, core_precision_name(cfg.precision), core_layout_name(cfg.layout),
             cfg.batch_size, v->role == HARNESS_TUNED ? "held-out images after 30 fp32 training steps"
                                                      : "nothing (the baseline)");
    harness_set_label(st, label);
}

// ---- registration -------------------------------------------------------------------------------

// as_reference: the rows time something that is not the practice's speed (the largest-batch
// probe), so no speedup is computed from them: every variant a yardstick.
static void register_family(const char *practice, const InferVariant *variants, int count,
                            HarnessFn fn, const HarnessAxis *axes, int64_t iterations, bool as_reference,
                            double min_time)
{
    for (int i = 0; i < count; i++) {
        HarnessSpec spec = {.practice = practice, .variant = variants[i].name,
                            .role = as_reference ? HARNESS_REFERENCE : variants[i].role,
                            .timing = HARNESS_TIMING_MANUAL, .fn = fn,
                            .user = (void *)&variants[i], .unit = HARNESS_MS,
                            .iterations = iterations, .gpu_only = variants[i].gpu_only,
                            .min_time = min_time};
        harness_register_axes(&spec, axes);
    }
}

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

int main(int argc, char **argv)
{
    harness_option_int("serving_requests", 1000, 1, 1000000, NULL,
                       "inference_serving, _graphs, _cudnn: single requests timed per run (a "
                       "percentile needs 10 beyond it: p99 1000, p95 200, p90 100; fewer: n/a)");
    harness_option_int("max_batch_cap", 1 << 20, 1, 1 << 20, NULL,
                       "inference_grad_max_batch: the largest batch probed (or estimated)");
    max_batch_option();
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    // Presets and batches that fit the machine: a CPU times tiny and small up to 256 images.
    const char *presets = gpu ? "tiny,small,resnet18" : "tiny,small";
    const HarnessAxis grad_axes[] = {{"preset", presets, true},
                                     {"batch", gpu ? "1:1024:*4" : "1:256:*4", false},
                                     {NULL, NULL, false}};
    // a CPU keeps a row's core between its runs: short repetitions, as a training row's
    register_family("inference_grad", grad_variants, COUNT(grad_variants), bench_grad, grad_axes, 0, false,
                    gpu ? 0 : PRACTICE_CPU_MIN_TIME);
    const HarnessAxis max_axes[] = {{"preset", presets, true}, {"batch", "0", false}, {NULL, NULL, false}};
    register_family("inference_grad_max_batch", grad_variants, COUNT(grad_variants),
                    infer_bench_max_batch, max_axes, 1, true, 0);
    const HarnessAxis serving_axes[] = {{"preset", presets, true},
                                        {"batch", gpu ? "1:256:*2" : "1:32:*2", false},
                                        {NULL, NULL, false}};
    register_family("inference_serving", infer_serving_variants, infer_serving_variant_count,
                    infer_bench_serving, serving_axes, 1, false, 0);
    const HarnessAxis precision_axes[] = {{"preset", presets, true}, {"batch", "0", false},
                                          {NULL, NULL, false}};
    register_family("inference_precision", precision_variants, COUNT(precision_variants),
                    bench_precision, precision_axes, 0, false, 0);
    // GPU only: without a GPU every row skips with the reason, over the GPU's presets.
    const HarnessAxis graph_axes[] = {{"preset", "tiny,small,resnet18", true},
                                      {"batch", "1,2,4,8,16", false}, {NULL, NULL, false}};
    register_family("inference_graphs", infer_graph_variants, infer_graph_variant_count,
                    infer_bench_graphs, graph_axes, 1, false, 0);
    const HarnessAxis cudnn_axes[] = {{"preset", "tiny,small,resnet18", true}, {"batch", "0", false},
                                      {"shapes", "fixed,varying", true}, {NULL, NULL, false}};
    register_family("inference_cudnn", infer_cudnn_variants, infer_cudnn_variant_count,
                    infer_bench_cudnn, cudnn_axes, 1, false, 0);
    return harness_run();
}
