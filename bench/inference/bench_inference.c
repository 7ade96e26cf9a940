// bench_inference.c: the inference practices, on core_infer (kernels/core.h): the forward
// alone with BN's running statistics (model.eval()), logits back to the host.
// Gradients (inference_grad/*): a forward under autograd (grad_on, baseline: the training
//   plan's arena, every activation a backward would read kept) against torch.no_grad() /
//   inference_mode (no_grad, tuned: an inference plan that frees each activation once its
//   consumers ran), over batch sizes: ms per batch, images/s, the plan's activation bytes and
//   the core's peak. Check: the no_grad logits equal grad_on's (GRAD_CHECK_TOL, top-1 all).
// Largest batch (inference_grad_max_batch/*): on a GPU the batch doubles from 1 until the
//   forward runs out of memory (or --max_batch_cap); on a CPU it is estimated from the
//   core's bytes at two batches against the machine's memory (a CPU swaps long before an
//   allocation fails, so there is no probe).
// Serving (inference_serving/*): latency p50/p99 of --serving_requests single requests (a
//   host batch in, its logits out, each timed alone) and throughput against the batch size,
//   per precision (fp32 baseline; tf32, fp16, bf16 on a GPU). Check: logits within the
//   precision's tolerance of fp32's on the request batch.
// Precision and layout (inference_precision/*): the forward at fp32 (baseline) against
//   tf32, fp16, bf16, channels_last (nhwc) and fp16 + nhwc, GPU only. Check: on a held-out
//   batch, with weights trained CHECK_TRAIN_STEPS steps (so that the classes separate), the
//   logits within the stated tolerance of fp32's and top-1 agreement at least the stated
//   share.
// CUDA graphs (inference_graphs/*, GPU only): single requests at batch 1..16 launched op by
//   op (eager) or as one captured forward (graph). Check: the graph's logits are eager's and
//   every timed request replayed.
// cudnn.benchmark (inference_cudnn/*, GPU only): heuristic algorithms against autotuning
//   (each shape's candidates timed once, cache cleared at the start of every run, as in a
//   fresh process), for a fixed request shape and for image sizes that change every request
//   (4 sizes in turn); the tuning is inside the timed requests. Check: autotune's logits
//   within AUTOTUNE_TOL of the heuristic's.
// --practice_selftest=frozen|skip_all zeroes the tuned logits before each check: every
// check must then fail.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "bench/inference/infer_common.h"
#include "kernels/check.h"
#include "kernels/clock.h"

#define WARMUP 3               // untimed forwards before the clock on a GPU (plans,
                               // autotuning, a graph's eager forward and capture); 1 on a CPU
#define GRAD_CHECK_TOL 1e-6    // no_grad vs grad_on logits, relative L2: the same kernels in
                               // the same order on other buffers, so bit for bit (0) here
#define GRAPH_CHECK_TOL 1e-5   // graph vs eager: the same kernels (cuDNN's forward algorithms
                               // are deterministic); 1e-5 leaves room for a reordered sum
#define AUTOTUNE_TOL 2e-2      // other algorithms, TF32 convolutions in both (fp32's default)
#define CHECK_TRAIN_STEPS 30   // SGD steps before the precision check's forward
#define HELD_OUT_MAX 256       // held-out images (fewer when larger than HELD_OUT_BYTES)
#define HELD_OUT_BYTES ((size_t)64 << 20)
#define VARYING_SIZES 4        // inference_cudnn's varying shapes: 8/8, 7/8, 6/8, 5/8 of the size

// ---- variants --------------------------------------------------------------------------------

typedef struct InferVariant {
    const char *name;
    HarnessRole role;
    bool gpu_only;          // means something on a GPU only (the CPU computes in fp32, NCHW)
    CoreGradMode grad;
    CorePrecision precision;
    CoreLayout layout;
    bool cuda_graph;
    CoreConvAlgo algo;
    double tol;             // the check: relative L2 of the logits against the baseline's
    double min_top1;        // the check: top-1 agreement at least (precision only)
} InferVariant;

static void apply(const InferVariant *v, CoreConfig *cfg)
{
    cfg->precision = v->precision;
    cfg->layout = v->layout;
    cfg->cuda_graph = v->cuda_graph;
    cfg->conv_algo = v->algo;
}

// Tolerances of the precision rows: fp32 (PyTorch's default lets cuDNN's convolutions round
// their inputs to TF32, 10 mantissa bits) against TF32 GEMMs too, fp16 storage (10 bits),
// bf16 (7 bits), and NHWC (other algorithms): relative L2 of the held-out logits, top-1
// agreement on the trained model (a flip needs two classes within the rounding).
static const InferVariant grad_variants[] = {
    {"grad_on", HARNESS_BASELINE, false, CORE_GRAD_ON, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_HEURISTIC, 0, 0},
    {"no_grad", HARNESS_TUNED, false, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_HEURISTIC, GRAD_CHECK_TOL, 1.0},
};

#define P(name, role, gpu, prec, layout, tol, top1) \
    {name, role, gpu, CORE_GRAD_OFF, prec, layout, false, CORE_CONV_ALGO_HEURISTIC, tol, top1}
static const InferVariant serving_variants[] = {
    P("fp32", HARNESS_BASELINE, false, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, 0, 0),
    P("tf32", HARNESS_TUNED, true, CORE_PRECISION_TF32, CORE_LAYOUT_NCHW, 2e-2, 0),
    P("fp16", HARNESS_TUNED, true, CORE_PRECISION_FP16, CORE_LAYOUT_NCHW, 2e-2, 0),
    P("bf16", HARNESS_TUNED, true, CORE_PRECISION_BF16, CORE_LAYOUT_NCHW, 8e-2, 0),
};
static const InferVariant precision_variants[] = {
    P("fp32", HARNESS_BASELINE, false, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, 0, 0),
    P("tf32", HARNESS_TUNED, true, CORE_PRECISION_TF32, CORE_LAYOUT_NCHW, 2e-2, 0.98),
    P("fp16", HARNESS_TUNED, true, CORE_PRECISION_FP16, CORE_LAYOUT_NCHW, 2e-2, 0.98),
    P("bf16", HARNESS_TUNED, true, CORE_PRECISION_BF16, CORE_LAYOUT_NCHW, 8e-2, 0.95),
    P("nhwc", HARNESS_TUNED, true, CORE_PRECISION_FP32, CORE_LAYOUT_NHWC, 2e-2, 0.98),
    P("fp16_nhwc", HARNESS_TUNED, true, CORE_PRECISION_FP16, CORE_LAYOUT_NHWC, 2e-2, 0.98),
};
#undef P
static const InferVariant graph_variants[] = {
    {"eager", HARNESS_BASELINE, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_HEURISTIC, 0, 0},
    {"graph", HARNESS_TUNED, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, true,
     CORE_CONV_ALGO_HEURISTIC, GRAPH_CHECK_TOL, 1.0},
};
static const InferVariant cudnn_variants[] = {
    {"heuristic", HARNESS_BASELINE, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW,
     false, CORE_CONV_ALGO_HEURISTIC, 0, 0},
    {"autotune", HARNESS_TUNED, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_AUTOTUNE, AUTOTUNE_TOL, 0},
};

// ---- shared pieces -----------------------------------------------------------------------------

// Untimed forwards before the clock: a CPU core only allocates in its first.
static int warmup(const CoreConfig *cfg) { return cfg->backend == CORE_BACKEND_CUDA ? WARMUP : 1; }

// The run's backend and config (the variant applied); false when the run ended (skip/fail).
static bool run_config(HarnessState *st, const InferVariant *v, CoreConfig *cfg)
{
    CoreBackend be;
    if (!practice_backend(st, v->gpu_only, &be)) return false;
    if (practice_config(st, be, NULL, cfg) != 0) {
        practice_fail_or_skip(st, "the config");
        return false;
    }
    apply(v, cfg);
    if (core_config_validate(cfg) != 0) {
        practice_fail_or_skip(st, "the variant's config");
        return false;
    }
    return true;
}

static double mib(size_t bytes) { return (double)bytes / (1 << 20); }

// The logits of a fresh core of cfg (with state when not NULL) on batch b (host, n x
// classes): its third forward with cuda_graph (eager, capture + replay, replay: the check
// must see a replay), else its first.
static int logits_of(const CoreConfig *cfg, const InferState *state, const CoreBatch *b,
                     CoreGradMode grad, float *logits)
{
    Core *core = NULL;
    TRY(core_create(cfg, &core));
    int rc = state ? infer_state_load(core, state) : 0;
    for (int i = 0; i < (cfg->cuda_graph ? 3 : 1) && rc == 0; i++)
        rc = core_infer(core, b, grad, logits, NULL);
    core_free(core);
    return rc;
}

// The check of a tuned row: `want` the baseline's logits, `got` the tuned ones (broken
// first under --practice_selftest); counters check_rel_diff and check_top1_agreement; the
// row fails past the variant's tolerances. 0: passed; 1: failed (the row is failed, the
// run should end); -1 with the error set (a usage error).
static int check_logits(HarnessState *st, const InferVariant *v, float *want, float *got, int n,
                        int classes, const char *against)
{
    bool broken = false;
    TRY(infer_selftest_break(got, (size_t)n * classes, &broken));
    double rel = 0.0, top1 = 0.0;
    infer_compare(want, got, n, classes, &rel, &top1);
    harness_counter(st, "check_rel_diff", rel, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_top1_agreement", top1, HARNESS_COUNTER_PLAIN);
    if (rel <= v->tol && top1 >= v->min_top1) return 0;
    char msg[400];
    snprintf(msg, sizeof msg, "%s's logits differ from %s: relative L2 %.3g (tolerance %g), top-1 "
             "agreement %.4f (at least %g) over %d images%s", v->name, against, rel, v->tol, top1,
             v->min_top1, n, broken ? " (--practice_selftest broke them)" : "");
    harness_fail(st, msg);
    return 1;
}

// A batch in host memory (serving requests arrive from the host) or, for the CUDA backend,
// device-resident (practice_batch_make).
static int batch_make(PracticeBatch *b, const CoreConfig *cfg, bool host)
{
    CoreConfig c = *cfg;
    if (host) c.backend = CORE_BACKEND_CPU;
    return practice_batch_make(b, &c, cfg->model.image_size);
}

static float *logits_alloc(const CoreConfig *cfg, int n)
{
    float *p = malloc((size_t)n * cfg->model.num_classes * sizeof(float));
    if (!p) error_set(ERROR_OUT_OF_MEMORY, "logits of %d images: out of memory (host)", n);
    return p;
}

// ---- inference_grad ----------------------------------------------------------------------------

// no_grad's logits against grad_on's on one core (both plans in turn) for batch b.
static int check_grad(HarnessState *st, const InferVariant *v, const CoreConfig *cfg,
                      const CoreBatch *b)
{
    float *on = logits_alloc(cfg, b->n), *off = logits_alloc(cfg, b->n);
    Core *core = NULL;
    int rc = on && off ? core_create(cfg, &core) : -1;
    if (rc == 0) rc = core_infer(core, b, CORE_GRAD_ON, on, NULL);
    if (rc == 0) rc = core_infer(core, b, CORE_GRAD_OFF, off, NULL);
    if (rc == 0) rc = check_logits(st, v, on, off, b->n, cfg->model.num_classes, "grad_on's");
    core_free(core);
    free(on);
    free(off);
    return rc;
}

// The timed forwards of one run (practice_time_forwards, after its warm-up) once its core
// is made (rc: the set-up's status; nothing is timed after an error) and their counters:
// ms_per_batch, images_per_second, activation_mib. Frees core and pb; false (the run ended
// as a failure or skip) on an error, else *s holds the core's stats.
static bool timed_forwards(HarnessState *st, int rc, Core *core, const CoreBatch *b, CoreGradMode grad,
                           int warmups, PracticeBatch *pb, CoreStats *s)
{
    int64_t batches = 0;
    double seconds = 0.0;
    if (rc == 0) rc = practice_time_forwards(st, core, b, grad, warmups, &batches, &seconds);
    if (rc == 0) rc = core_stats(core, s);
    core_free(core);
    practice_batch_free(pb);
    if (rc != 0) {
        practice_fail_or_skip(st, "timing the forward");
        return false;
    }
    harness_counter(st, "ms_per_batch", batches ? 1e3 * seconds / batches : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "images_per_second", (double)batches * b->n, HARNESS_COUNTER_RATE);
    harness_counter(st, "activation_mib", mib(s->activation_bytes), HARNESS_COUNTER_PLAIN);
    return true;
}

static void bench_grad(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!run_config(st, v, &cfg)) return;
    PracticeBatch pb;
    if (batch_make(&pb, &cfg, false) != 0) {
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    CoreBatch b = practice_batch_view(&pb, pb.n);
    Core *core = NULL;
    int rc = v->role == HARNESS_TUNED ? check_grad(st, v, &cfg, &b) : 0;
    if (rc != 0) {  // > 0: the check failed the row
        if (rc < 0) practice_fail_or_skip(st, "checking against grad_on");
        practice_batch_free(&pb);
        return;
    }
    rc = core_create(&cfg, &core);
    CoreStats s;
    if (!timed_forwards(st, rc, core, &b, v->grad, warmup(&cfg), &pb, &s)) return;
    harness_counter(st, "peak_mib", mib(s.peak_bytes), HARNESS_COUNTER_PLAIN);
    if (cfg.backend == CORE_BACKEND_CUDA)
        harness_counter(st, "device_used_mib", mib(s.device_used_bytes), HARNESS_COUNTER_PLAIN);
    char label[300];
    snprintf(label, sizeof label, "%s: eval forward of a batch of %d (%s), %s; activation_mib: "
             "the plan's arena, peak_mib: the core's buffers since the plan", v->name,
             cfg.batch_size, cfg.backend == CORE_BACKEND_CUDA ? "device-resident" : "host",
             v->grad == CORE_GRAD_ON ? "the training plan's arena (autograd on)"
                                     : "the inference plan (no_grad)");
    harness_set_label(st, label);
}

// ---- inference_grad_max_batch ---------------------------------------------------------------

// Whether a forward of n images fits on the GPU: a fresh core (planned for 1), n zero images
// in device memory, one forward. *fits false on out-of-memory; -1 on any other error.
static int probe_gpu(const CoreConfig *cfg, CoreGradMode grad, int n, bool *fits)
{
    CoreConfig c = *cfg;
    c.batch_size = 1;
    const CoreModelConfig *m = &c.model;
    size_t bytes = (size_t)n * m->in_channels * m->image_size * m->image_size * sizeof(float);
    float *images = NULL;
    *fits = false;
    cudaError_t e = cudaMalloc((void **)&images, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return 0;
    }
    if (e == cudaSuccess) e = cudaMemset(images, 0, bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        cudaFree(images);
        return check_cuda_failed(e, __FILE__, __LINE__, "probe batch");
    }
    Core *core = NULL;
    CoreBatch b = {images, NULL, n, CORE_MEMORY_DEVICE};
    int rc = core_create(&c, &core);
    if (rc == 0) rc = core_infer(core, &b, grad, NULL, NULL);
    if (rc == 0) rc = core_sync(core);
    core_free(core);
    cudaFree(images);
    if (rc == 0) *fits = true;
    else if (error_kind() == ERROR_OUT_OF_MEMORY) rc = 0;
    return rc;
}

// The core's peak bytes (model, workspace, the plan's arena) after one forward of n on the CPU.
static int cpu_peak(const CoreConfig *cfg, CoreGradMode grad, int n, size_t *peak)
{
    CoreConfig c = *cfg;
    c.batch_size = n;
    PracticeBatch pb;
    TRY(batch_make(&pb, &c, true));
    CoreBatch b = practice_batch_view(&pb, n);
    Core *core = NULL;
    CoreStats s;
    int rc = core_create(&c, &core);
    if (rc == 0) rc = core_infer(core, &b, grad, NULL, NULL);
    if (rc == 0) rc = core_stats(core, &s);
    if (rc == 0) *peak = s.peak_bytes;
    core_free(core);
    practice_batch_free(&pb);
    return rc;
}

// The most values one image puts in a single tensor: the input, the stem's output (the
// ResNets' largest activation: later stages halve the size as they double the width) or
// an MLP's hidden layer.
static size_t largest_tensor_per_image(const CoreModelConfig *m)
{
    size_t in = (size_t)m->in_channels * m->image_size * m->image_size;
    size_t act = (size_t)m->mlp_hidden;
    if (m->kind == CORE_MODEL_RESNET) {
        size_t size = (size_t)(m->image_size - 1) / m->stem_stride + 1;
        act = (size_t)m->width * size * size;
    }
    return in > act ? in : act;
}

static void bench_max_batch(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!run_config(st, v, &cfg)) return;
    int cap = (int)harness_option_int_value("max_batch_cap");
    const CoreModelConfig *m = &cfg.model;
    size_t image_bytes = (size_t)m->in_channels * m->image_size * m->image_size * sizeof(float);
    char label[700];
    if (cfg.backend == CORE_BACKEND_CUDA) {
        int largest = 0, rc = 0;
        bool fits = true;
        char stopped[300] = "";
        while (rc == 0 && harness_keep_running(st)) {  // one iteration: the whole probe
            double t0 = clock_seconds();
            largest = 0;
            fits = true;
            for (int n = 1; n <= cap && rc == 0 && fits; n *= 2) {
                // cuDNN (and int-indexed kernels) take tensors of fewer than 2^31 values: the
                // probe stops there rather than asking a library past its limit.
                if ((size_t)n * largest_tensor_per_image(m) > INT32_MAX) {
                    snprintf(stopped, sizeof stopped, "; stopped at %d: a tensor of %zu values "
                             "(2^31 is cuDNN's limit), still fitting", n,
                             (size_t)n * largest_tensor_per_image(m));
                    break;
                }
                rc = probe_gpu(&cfg, v->grad, n, &fits);
                if (rc == 0 && fits) largest = n;
                // Another error past a batch that fitted (a library's limit on a tensor's
                // elements, say) ends the probe there; it is said in the label.
                if (rc != 0 && largest > 0) {
                    snprintf(stopped, sizeof stopped, "; stopped at %d by: %s", n, error_message());
                    rc = 0;
                    fits = false;
                }
            }
            harness_set_iteration_time(st, clock_seconds() - t0);
        }
        if (rc != 0) {
            practice_fail_or_skip(st, "probing the largest batch");
            return;
        }
        harness_counter(st, "max_batch", largest, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "max_batch_capped", fits, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "max_batch_estimated", 0, HARNESS_COUNTER_PLAIN);
        snprintf(label, sizeof label, "%s: batch doubled from 1 until the forward ran out of device "
                 "memory%s%s", v->name, fits ? " (stopped at --max_batch_cap, still fitting)" : "",
                 stopped);
        harness_set_label(st, label);
        return;
    }
    // CPU: the peak grows linearly in the batch; the machine's memory over the slope.
    enum { N1 = 4, N2 = 8 };
    size_t p1 = 0, p2 = 0;
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: both measurements
        double t0 = clock_seconds();
        rc = cpu_peak(&cfg, v->grad, N1, &p1);
        if (rc == 0) rc = cpu_peak(&cfg, v->grad, N2, &p2);
        harness_set_iteration_time(st, clock_seconds() - t0);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "measuring the core's bytes");
        return;
    }
    double per_image = (double)(p2 - p1) / (N2 - N1) + (double)image_bytes;  // + the input
    double fixed = (double)p1 - per_image * N1 + (double)image_bytes * N1;
    double memory = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    double largest = per_image > 0 ? floor((memory - fixed) / per_image) : 0;
    if (largest > cap) largest = cap;
    harness_counter(st, "max_batch", largest, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_capped", largest >= cap, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_estimated", 1, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "bytes_per_image", per_image, HARNESS_COUNTER_PLAIN);
    snprintf(label, sizeof label, "%s: estimated, not probed (a CPU swaps long before an allocation "
             "fails): %.1f GiB of memory over %.0f bytes per image (the core's peak at batch %d and "
             "%d, plus the input)", v->name, memory / (1 << 30), per_image, N1, N2);
    harness_set_label(st, label);
}

// ---- latency loops: serving, graphs, cudnn ------------------------------------------------------

static double sum_ms(const double *ms, int n)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) total += ms[i];
    return total;
}

// The latency counters of `requests` timed requests of n images (ms sorted in place).
static void latency_counters(HarnessState *st, double *ms, int requests, int n)
{
    double total = sum_ms(ms, requests);
    harness_counter(st, "latency_mean_ms", total / requests, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "latency_p50_ms", infer_percentile(ms, requests, 50), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "latency_p99_ms", infer_percentile(ms, requests, 99), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "images_per_second", (double)requests * n, HARNESS_COUNTER_RATE);
}

// Serving and graphs: WARMUP requests, then `requests` timed ones, each returning its logits.
static int timed_requests(const CoreConfig *cfg, const CoreBatch *b, int requests, double *ms,
                          CoreStats *stats)
{
    float *logits = logits_alloc(cfg, b->n);
    if (!logits) return -1;
    Core *core = NULL;
    int rc = core_create(cfg, &core);
    for (int i = 0; i < warmup(cfg) && rc == 0; i++) rc = core_infer(core, b, CORE_GRAD_OFF, logits, NULL);
    if (rc == 0) rc = infer_requests(core, b, CORE_GRAD_OFF, requests, NULL, 0, logits, ms);
    if (rc == 0 && stats) rc = core_stats(core, stats);
    core_free(core);
    free(logits);
    return rc;
}

// The tuned config's logits against the baseline config's on batch b (fresh cores).
static int check_against(HarnessState *st, const InferVariant *v, const CoreConfig *tuned,
                         const CoreConfig *base, const CoreBatch *b, const char *against)
{
    float *want = logits_alloc(base, b->n), *got = logits_alloc(tuned, b->n);
    int rc = want && got ? 0 : -1;
    if (rc == 0) rc = logits_of(base, NULL, b, CORE_GRAD_OFF, want);
    if (rc == 0) rc = logits_of(tuned, NULL, b, CORE_GRAD_OFF, got);
    if (rc == 0) rc = check_logits(st, v, want, got, b->n, tuned->model.num_classes, against);
    free(want);
    free(got);
    return rc;
}

static void bench_serving(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!run_config(st, v, &cfg)) return;
    int requests = (int)harness_option_int_value("serving_requests");
    double *ms = malloc((size_t)requests * sizeof *ms);
    PracticeBatch pb;
    if (!ms || batch_make(&pb, &cfg, true) != 0) {
        if (ms) practice_fail_or_skip(st, "preparing the batch");
        else harness_fail(st, "latencies: out of memory");
        free(ms);
        return;
    }
    CoreBatch b = practice_batch_view(&pb, pb.n);
    CoreConfig base = cfg;
    apply(&serving_variants[0], &base);
    int rc = v->role == HARNESS_TUNED ? check_against(st, v, &cfg, &base, &b, "fp32's") : 0;
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: `requests` requests
        rc = timed_requests(&cfg, &b, requests, ms, NULL);
        if (rc == 0) harness_set_iteration_time(st, sum_ms(ms, requests) * 1e-3);
    }
    practice_batch_free(&pb);
    if (rc != 0) {  // > 0: the check failed the row
        if (rc < 0) practice_fail_or_skip(st, "timing single requests");
        free(ms);
        return;
    }
    latency_counters(st, ms, requests, cfg.batch_size);
    free(ms);
    char label[300];
    snprintf(label, sizeof label, "%s: %d single requests of %d images, each timed alone from a "
             "host batch to its logits on the host (no_grad, after %d warm-up requests)", v->name,
             requests, cfg.batch_size, warmup(&cfg));
    harness_set_label(st, label);
}

static void bench_graphs(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!run_config(st, v, &cfg)) return;
    int requests = (int)harness_option_int_value("serving_requests");
    double *ms = malloc((size_t)requests * sizeof *ms);
    PracticeBatch pb;
    if (!ms || batch_make(&pb, &cfg, false) != 0) {
        if (ms) practice_fail_or_skip(st, "preparing the batch");
        else harness_fail(st, "latencies: out of memory");
        free(ms);
        return;
    }
    CoreBatch b = practice_batch_view(&pb, pb.n);
    CoreConfig base = cfg;
    apply(&graph_variants[0], &base);
    CoreStats s = {0};
    int rc = v->cuda_graph ? check_against(st, v, &cfg, &base, &b, "eager's") : 0;
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: `requests` requests
        rc = timed_requests(&cfg, &b, requests, ms, &s);
        if (rc == 0) harness_set_iteration_time(st, sum_ms(ms, requests) * 1e-3);
    }
    practice_batch_free(&pb);
    if (rc != 0) {  // > 0: the check failed the row
        if (rc < 0) practice_fail_or_skip(st, "timing single requests");
        free(ms);
        return;
    }
    latency_counters(st, ms, requests, cfg.batch_size);
    free(ms);
    harness_counter(st, "graph_captures", s.graph_captures, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "graph_replays", s.graph_replays, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "capture_ms", s.capture_ms, HARNESS_COUNTER_PLAIN);
    // Warm-up: one eager forward, one capture (and its replay), then replays only.
    if (v->cuda_graph && (s.graph_captures != 1 || s.graph_replays < requests)) {
        char msg[200];
        snprintf(msg, sizeof msg, "the graph variant did not replay its forward: %d captures, %d "
                 "replays for %d timed requests", s.graph_captures, s.graph_replays, requests);
        harness_fail(st, msg);
    }
    char label[300];
    snprintf(label, sizeof label, "%s: %d single requests of %d images (device-resident), logits "
             "back to the host, each timed alone (no_grad, after %d warm-up requests)", v->name,
             requests, cfg.batch_size, warmup(&cfg));
    harness_set_label(st, label);
}

// The image size of request i under the `shapes` axis.
static void request_sizes(int image_size, bool varying, int *sizes)
{
    for (int i = 0; i < VARYING_SIZES; i++) {
        int s = varying ? image_size * (8 - i) / 8 : image_size;
        sizes[i] = s > 0 ? s : 1;
    }
}

static void bench_cudnn(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!run_config(st, v, &cfg)) return;
    const char *shapes = harness_axis_str(st, "shapes");
    bool varying = strcmp(shapes, "varying") == 0;
    if (!varying && strcmp(shapes, "fixed") != 0) {
        harness_fail(st, "shapes must be fixed or varying");
        return;
    }
    if (cfg.model.kind != CORE_MODEL_RESNET) {
        harness_skip(st, "the MLP has no convolutions (and its first layer fixes its input size)");
        return;
    }
    int requests = (int)harness_option_int_value("serving_requests");
    double *ms = malloc((size_t)requests * sizeof *ms);
    float *logits = logits_alloc(&cfg, cfg.batch_size);
    PracticeBatch pb;
    if (!ms || !logits || batch_make(&pb, &cfg, false) != 0) {
        if (ms && logits) practice_fail_or_skip(st, "preparing the batch");
        else harness_fail(st, "latencies: out of memory");
        free(ms);
        free(logits);
        return;
    }
    CoreBatch b = practice_batch_view(&pb, pb.n);
    CoreConfig base = cfg;
    apply(&cudnn_variants[0], &base);
    int sizes[VARYING_SIZES];
    request_sizes(cfg.model.image_size, varying, sizes);
    int rc = v->algo == CORE_CONV_ALGO_AUTOTUNE ? check_against(st, v, &cfg, &base, &b, "the heuristic's") : 0;
    CoreStats s = {0};
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: `requests` requests
        Core *core = NULL;
        core_conv_cache_clear();  // every run tunes from scratch, as a fresh process does
        rc = core_create(&cfg, &core);
        if (rc == 0) rc = infer_requests(core, &b, CORE_GRAD_OFF, requests, sizes, VARYING_SIZES, logits, ms);
        if (rc == 0) rc = core_stats(core, &s);
        core_free(core);
        if (rc == 0) harness_set_iteration_time(st, sum_ms(ms, requests) * 1e-3);
    }
    practice_batch_free(&pb);
    free(logits);
    if (rc != 0) {  // > 0: the check failed the row
        if (rc < 0) practice_fail_or_skip(st, "timing requests");
        free(ms);
        return;
    }
    double first = ms[0];
    latency_counters(st, ms, requests, cfg.batch_size);
    free(ms);
    harness_counter(st, "first_request_ms", first, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "autotune_ms", s.autotune_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "algo_cache_misses", s.algo_cache_misses, HARNESS_COUNTER_PLAIN);
    char label[300];
    snprintf(label, sizeof label, "%s: %d requests of %d images (device-resident), image size %s, "
             "algorithm cache cleared first: tuning counts in the requests (no warm-up)", v->name,
             requests, cfg.batch_size, varying ? "8/8, 7/8, 6/8, 5/8 of the preset's in turn" : "fixed");
    harness_set_label(st, label);
}

// ---- inference_precision ------------------------------------------------------------------------

// The held-out check: weights trained at fp32, logits of fp32 and of the variant.
static int check_precision(HarnessState *st, const InferVariant *v, const CoreConfig *cfg)
{
    CoreConfig base = *cfg;
    apply(&precision_variants[0], &base);
    const CoreModelConfig *m = &cfg->model;
    size_t image_bytes = (size_t)m->in_channels * m->image_size * m->image_size * sizeof(float);
    int n = HELD_OUT_MAX;
    while (n > 16 && (size_t)n * image_bytes > HELD_OUT_BYTES) n /= 2;
    InferState state;
    InferHeldOut h = {0};
    TRY(infer_state_train(&base, CHECK_TRAIN_STEPS, &state));
    float *want = logits_alloc(cfg, n), *got = logits_alloc(cfg, n);
    int rc = want && got ? infer_held_out(cfg, n, &h) : -1;
    CoreBatch b = infer_held_out_batch(&h);
    if (rc == 0) rc = logits_of(&base, &state, &b, CORE_GRAD_OFF, want);
    if (rc == 0) rc = logits_of(cfg, &state, &b, CORE_GRAD_OFF, got);
    if (rc == 0) rc = check_logits(st, v, want, got, n, m->num_classes, "fp32's");
    infer_held_out_free(&h);
    infer_state_free(&state);
    free(want);
    free(got);
    return rc;
}

static void bench_precision(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!run_config(st, v, &cfg)) return;
    int checked = v->role == HARNESS_TUNED ? check_precision(st, v, &cfg) : 0;
    if (checked != 0) {  // > 0: the check failed the row
        if (checked < 0) practice_fail_or_skip(st, "checking against fp32");
        return;
    }
    PracticeBatch pb;
    if (batch_make(&pb, &cfg, false) != 0) {
        practice_fail_or_skip(st, "preparing the batch");
        return;
    }
    CoreBatch b = practice_batch_view(&pb, pb.n);
    Core *core = NULL;
    int rc = core_create(&cfg, &core);
    CoreStats s;
    if (!timed_forwards(st, rc, core, &b, CORE_GRAD_OFF, warmup(&cfg), &pb, &s)) return;
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
                            HarnessFn fn, const HarnessAxis *axes, int64_t iterations, bool as_reference)
{
    for (int i = 0; i < count; i++) {
        HarnessSpec spec = {.practice = practice, .variant = variants[i].name,
                            .role = as_reference ? HARNESS_REFERENCE : variants[i].role,
                            .timing = HARNESS_TIMING_MANUAL, .fn = fn,
                            .user = (void *)&variants[i], .unit = HARNESS_MS,
                            .iterations = iterations};
        for (int a = 0; a < HARNESS_MAX_AXES && axes[a].name; a++) spec.axes[a] = axes[a];
        harness_register(&spec);
    }
}

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

int main(int argc, char **argv)
{
    harness_option_int("serving_requests", 200, 1, 1000000, NULL,
                       "inference_serving, _graphs, _cudnn: single requests timed per run");
    harness_option_int("max_batch_cap", 1 << 20, 1, 1 << 20, NULL,
                       "inference_grad_max_batch: the largest batch probed (or estimated)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    // Presets and batches that fit the machine: a CPU times tiny and small up to 256 images.
    const char *presets = gpu ? "tiny,small,resnet18" : "tiny,small";
    const HarnessAxis grad_axes[] = {{"preset", presets, true},
                                     {"batch", gpu ? "1:1024:*4" : "1:256:*4", false},
                                     {NULL, NULL, false}};
    register_family("inference_grad", grad_variants, COUNT(grad_variants), bench_grad, grad_axes, 0, false);
    const HarnessAxis max_axes[] = {{"preset", presets, true}, {"batch", "0", false}, {NULL, NULL, false}};
    register_family("inference_grad_max_batch", grad_variants, COUNT(grad_variants), bench_max_batch,
                    max_axes, 1, true);
    const HarnessAxis serving_axes[] = {{"preset", presets, true},
                                        {"batch", gpu ? "1:256:*2" : "1:32:*2", false},
                                        {NULL, NULL, false}};
    register_family("inference_serving", serving_variants, COUNT(serving_variants), bench_serving,
                    serving_axes, 1, false);
    const HarnessAxis precision_axes[] = {{"preset", presets, true}, {"batch", "0", false},
                                          {NULL, NULL, false}};
    register_family("inference_precision", precision_variants, COUNT(precision_variants),
                    bench_precision, precision_axes, 0, false);
    // GPU only: without a GPU every row skips with the reason, over the GPU's presets.
    const HarnessAxis graph_axes[] = {{"preset", "tiny,small,resnet18", true},
                                      {"batch", "1,2,4,8,16", false}, {NULL, NULL, false}};
    register_family("inference_graphs", graph_variants, COUNT(graph_variants), bench_graphs,
                    graph_axes, 1, false);
    const HarnessAxis cudnn_axes[] = {{"preset", "tiny,small,resnet18", true}, {"batch", "0", false},
                                      {"shapes", "fixed,varying", true}, {NULL, NULL, false}};
    register_family("inference_cudnn", cudnn_variants, COUNT(cudnn_variants), bench_cudnn,
                    cudnn_axes, 1, false);
    return harness_run();
}
