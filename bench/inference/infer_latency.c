// infer_latency.c: the latency families, timed single requests with their percentiles:
// inference_serving (per precision, from a host batch), inference_graphs (eager against a
// captured CUDA graph) and inference_cudnn (heuristic algorithms against autotuning).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/inference/infer_family.h"

#define GRAPH_CHECK_TOL 1e-5   // graph vs eager: the same kernels (cuDNN's forward algorithms
                               // are deterministic); 1e-5 leaves room for a reordered sum
#define AUTOTUNE_TOL 2e-2      // other algorithms, TF32 convolutions in both (fp32's default)
#define VARYING_SIZES 4        // inference_cudnn's varying shapes: 8/8, 7/8, 6/8, 5/8 of the size
#define WARMUP_SECONDS 0.2     // serving and graphs: untimed requests for at least this long
                               // (and infer_warmup's count) before the clock: a GPU's SM clock
                               // ramps up from idle over a few hundred ms

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

// ---- variants --------------------------------------------------------------------------------

// Tolerances as inference_precision's (bench_inference.c), without its top-1 floor.
#define P INFER_PRECISION_VARIANT
const InferVariant infer_serving_variants[] = {
    P("fp32", HARNESS_BASELINE, false, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, 0, 0),
    P("tf32", HARNESS_TUNED, true, CORE_PRECISION_TF32, CORE_LAYOUT_NCHW, 2e-2, 0),
    P("fp16", HARNESS_TUNED, true, CORE_PRECISION_FP16, CORE_LAYOUT_NCHW, 2e-2, 0),
    P("bf16", HARNESS_TUNED, true, CORE_PRECISION_BF16, CORE_LAYOUT_NCHW, 8e-2, 0),
};
#undef P
const int infer_serving_variant_count = COUNT(infer_serving_variants);
const InferVariant infer_graph_variants[] = {
    {"eager", HARNESS_BASELINE, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_HEURISTIC, 0, 0},
    {"graph", HARNESS_TUNED, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, true,
     CORE_CONV_ALGO_HEURISTIC, GRAPH_CHECK_TOL, 1.0},
};
const int infer_graph_variant_count = COUNT(infer_graph_variants);
const InferVariant infer_cudnn_variants[] = {
    {"heuristic", HARNESS_BASELINE, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW,
     false, CORE_CONV_ALGO_HEURISTIC, 0, 0},
    {"autotune", HARNESS_TUNED, true, CORE_GRAD_OFF, CORE_PRECISION_FP32, CORE_LAYOUT_NCHW, false,
     CORE_CONV_ALGO_AUTOTUNE, AUTOTUNE_TOL, 0},
};
const int infer_cudnn_variant_count = COUNT(infer_cudnn_variants);

// ---- latency loops: serving, graphs, cudnn ------------------------------------------------------

static double sum_ms(const double *ms, int n)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) total += ms[i];
    return total;
}

// The percentiles a latency row reports, each from enough requests (INFER_PERCENTILE_TAIL).
static const double percentiles[] = {50, 90, 95, 99};

// The latency counters of `requests` timed requests of n images (ms sorted in place):
// requests, latency_mean_ms, latency_pNN_ms for each percentile with enough requests.
static void latency_counters(HarnessState *st, double *ms, int requests, int n)
{
    double total = sum_ms(ms, requests);
    harness_counter(st, "requests", requests, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "latency_mean_ms", total / requests, HARNESS_COUNTER_PLAIN);
    for (int i = 0; i < COUNT(percentiles); i++) {
        if (!infer_percentile_reported(requests, percentiles[i])) continue;
        char name[32];
        snprintf(name, sizeof name, "latency_p%.0f_ms", percentiles[i]);
        harness_counter(st, name, infer_percentile(ms, requests, percentiles[i]), HARNESS_COUNTER_PLAIN);
    }
    harness_counter(st, "images_per_second", (double)requests * n, HARNESS_COUNTER_RATE);
}

// For the label: which percentiles `requests` requests report and why the others are n/a.
static void percentile_rule(int requests, char *buf, size_t size)
{
    int used = snprintf(buf, size, "percentiles of %d requests:", requests);
    const char *sep = " ";
    for (int i = 0; i < COUNT(percentiles) && used < (int)size; i++) {
        double p = percentiles[i];
        if (infer_percentile_reported(requests, p))
            used += snprintf(buf + used, size - used, "%sp%.0f", sep, p);
        else
            used += snprintf(buf + used, size - used, "%sp%.0f n/a (needs %d)", sep, p,
                             infer_percentile_min_requests(p));
        sep = ", ";
    }
    if (used < (int)size)
        snprintf(buf + used, size - used, " (%d requests beyond a percentile; MLPerf's early "
                 "stopping asks 662 for p99)", INFER_PERCENTILE_TAIL);
}

// What the warm-up of a latency run did.
typedef struct Warmup { int requests; double seconds; } Warmup;

// Serving and graphs: the warm-up (WARMUP_SECONDS of requests, at least infer_warmup's
// count), then `requests` timed ones, each returning its logits.
static int timed_requests(const CoreConfig *cfg, const CoreBatch *b, int requests, double *ms,
                          CoreStats *stats, Warmup *w)
{
    float *logits = infer_logits_alloc(cfg, b->n);
    if (!logits) return -1;
    Core *core = NULL;
    int rc = core_create(cfg, &core);
    if (rc == 0)
        rc = infer_warm_up(core, b, CORE_GRAD_OFF, logits, WARMUP_SECONDS, infer_warmup(cfg),
                           &w->requests, &w->seconds);
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
    float *want = infer_logits_alloc(base, b->n), *got = infer_logits_alloc(tuned, b->n);
    int rc = want && got ? 0 : -1;
    if (rc == 0) rc = infer_logits_of(base, NULL, b, CORE_GRAD_OFF, want);
    if (rc == 0) rc = infer_logits_of(tuned, NULL, b, CORE_GRAD_OFF, got);
    if (rc == 0) rc = infer_check_logits(st, v, want, got, b->n, tuned->model.num_classes, against);
    free(want);
    free(got);
    return rc;
}

// Serving and graphs: the run's `requests` single requests of cfg (v's config) on a batch in
// host memory or not (host), checked first when `check` against the baseline's config on the
// same batch, then timed (timed_requests, once per iteration), and their latency and
// warm-up counters (warmup_requests, warmup_ms) and the label's account of both (how, at
// least 300 bytes). stats: the core's after the last iteration (NULL: not read). False when
// the run ended (a skip, or a failure: the batch's, the check's or the timing's).
static bool request_runs(HarnessState *st, const InferVariant *v, const CoreConfig *cfg,
                         const InferVariant *baseline, bool host, bool check, const char *against,
                         int requests, CoreStats *stats, char *how, size_t how_size)
{
    double *ms = malloc((size_t)requests * sizeof *ms);
    PracticeBatch pb;
    if (!ms || infer_batch_make(&pb, cfg, host) != 0) {
        if (ms) practice_fail_or_skip(st, "preparing the batch");
        else harness_fail(st, "latencies: out of memory");
        free(ms);
        return false;
    }
    CoreBatch b = infer_request_batch(&pb);
    CoreConfig base = *cfg;
    infer_apply(baseline, &base);
    int rc = check ? check_against(st, v, cfg, &base, &b, against) : 0;
    Warmup w = {0};
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: `requests` requests
        rc = timed_requests(cfg, &b, requests, ms, stats, &w);
        if (rc == 0) harness_set_iteration_time(st, sum_ms(ms, requests) * 1e-3);
    }
    practice_batch_free(&pb);
    if (rc != 0) {  // > 0: the check failed the row
        if (rc < 0) practice_fail_or_skip(st, "timing single requests");
        free(ms);
        return false;
    }
    latency_counters(st, ms, requests, cfg->batch_size);
    harness_counter(st, "warmup_requests", w.requests, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "warmup_ms", 1e3 * w.seconds, HARNESS_COUNTER_PLAIN);
    char rule[300];
    percentile_rule(requests, rule, sizeof rule);
    snprintf(how, how_size, "no labels (a request carries none), after %.0f ms of warm-up (%d "
             "requests; at least %.0f ms and %d); %s", 1e3 * w.seconds, w.requests,
             1e3 * WARMUP_SECONDS, infer_warmup(cfg), rule);
    free(ms);
    return true;
}

void infer_bench_serving(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!infer_run_config(st, v, &cfg)) return;
    int requests = (int)harness_option_int_value("serving_requests");
    char how[700], label[900];
    if (!request_runs(st, v, &cfg, &infer_serving_variants[0], true, v->role == HARNESS_TUNED,
                      "fp32's", requests, NULL, how, sizeof how))
        return;
    snprintf(label, sizeof label, "%s: %d single requests of %d images, each timed alone from a "
             "host batch to its logits on the host (no_grad), %s", v->name, requests,
             cfg.batch_size, how);
    harness_set_label(st, label);
}

void infer_bench_graphs(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!infer_run_config(st, v, &cfg)) return;
    int requests = (int)harness_option_int_value("serving_requests");
    CoreStats s = {0};
    char how[700], label[900];
    if (!request_runs(st, v, &cfg, &infer_graph_variants[0], false, v->cuda_graph, "eager's",
                      requests, &s, how, sizeof how))
        return;
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
    snprintf(label, sizeof label, "%s: %d single requests of %d images (device-resident), logits "
             "back to the host, each timed alone (no_grad), %s", v->name, requests,
             cfg.batch_size, how);
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

void infer_bench_cudnn(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!infer_run_config(st, v, &cfg)) return;
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
    float *logits = infer_logits_alloc(&cfg, cfg.batch_size);
    PracticeBatch pb;
    if (!ms || !logits || infer_batch_make(&pb, &cfg, false) != 0) {
        if (ms && logits) practice_fail_or_skip(st, "preparing the batch");
        else harness_fail(st, "latencies: out of memory");
        free(ms);
        free(logits);
        return;
    }
    CoreBatch b = infer_request_batch(&pb);
    CoreConfig base = cfg;
    infer_apply(&infer_cudnn_variants[0], &base);
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
    if (!practice_in_effect(st, &cfg, &s)) return;  // autotune really timed the candidates
    harness_counter(st, "first_request_ms", first, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "autotune_ms", s.autotune_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "algo_cache_misses", s.algo_cache_misses, HARNESS_COUNTER_PLAIN);
    char rule[300], label[700];
    percentile_rule(requests, rule, sizeof rule);
    snprintf(label, sizeof label, "%s: %d requests of %d images (device-resident, no labels), image "
             "size %s, algorithm cache cleared first: tuning counts in the requests (no warm-up); %s",
             v->name, requests, cfg.batch_size,
             varying ? "8/8, 7/8, 6/8, 5/8 of the preset's in turn" : "fixed", rule);
    harness_set_label(st, label);
}
