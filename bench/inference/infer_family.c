// infer_family.c: the helpers the inference families share (infer_family.h): the run's
// config, batches, logits and their check, and the timed forwards.
#include "bench/inference/infer_family.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/check.h"

#define WARMUP 3               // untimed forwards before the clock on a GPU (plans,
                               // autotuning, a graph's eager forward and capture); 1 on a CPU

// The variant's precision, layout, CUDA graph and convolution algorithm into cfg.
void infer_apply(const InferVariant *v, CoreConfig *cfg)
{
    cfg->precision = v->precision;
    cfg->layout = v->layout;
    cfg->cuda_graph = v->cuda_graph;
    cfg->conv_algo = v->algo;
}

// Untimed forwards before the clock: a CPU core only allocates in its first.
int infer_warmup(const CoreConfig *cfg) { return cfg->backend == CORE_BACKEND_CUDA ? WARMUP : 1; }

// The run's backend and config (the variant applied); false when the run ended (skip/fail).
bool infer_run_config(HarnessState *st, const InferVariant *v, CoreConfig *cfg)
{
    if (!practice_run_config(st, v->gpu_only, NULL, cfg)) return false;
    infer_apply(v, cfg);
    if (core_config_validate(cfg) != 0) {
        practice_fail_or_skip(st, "the variant's config");
        return false;
    }
    return true;
}

// Bytes in MiB.
double infer_mib(size_t bytes) { return (double)bytes / (1 << 20); }

// The logits of a fresh core of cfg (with state when not NULL) on batch b (host, n x
// classes): its third forward with cuda_graph (eager, capture + replay, replay: the check
// must see a replay), else its first.
int infer_logits_of(const CoreConfig *cfg, const InferState *state, const CoreBatch *b,
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
int infer_check_logits(HarnessState *st, const InferVariant *v, float *want, float *got, int n,
                       int classes, const char *against)
{
    bool broken = false;
    TRY(infer_selftest_break(got, (size_t)n * classes, &broken));
    double rel = 0.0;
    int agree = 0;
    practice_compare_logits(want, got, n, classes, &rel, &agree);
    double top1 = n > 0 ? (double)agree / n : 0.0;
    harness_counter(st, "check_rel_diff", rel, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_tolerance", v->tol, HARNESS_COUNTER_PLAIN);
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
int infer_batch_make(PracticeBatch *b, const CoreConfig *cfg, bool host)
{
    CoreConfig c = *cfg;
    if (host) c.backend = CORE_BACKEND_CPU;
    return practice_batch_make(b, &c, cfg->model.image_size);
}

// A serving request over pb's images: labels NULL.
CoreBatch infer_request_batch(const PracticeBatch *pb)
{
    CoreBatch b = practice_batch_view(pb, pb->n);
    b.labels = NULL;
    return b;
}

// Host memory for the logits of n images; NULL with the error set.
float *infer_logits_alloc(const CoreConfig *cfg, int n)
{
    float *p = malloc((size_t)n * cfg->model.num_classes * sizeof(float));
    if (!p) error_set(ERROR_OUT_OF_MEMORY, "logits of %d images: out of memory (host)", n);
    return p;
}

// The timed forwards of one run (infer_family.h). The caller frees the core.
bool infer_timed_forwards(HarnessState *st, int rc, Core *core, const CoreBatch *b,
                          CoreGradMode grad, int warmups, CoreStats *s)
{
    int64_t batches = 0;
    double seconds = 0.0;
    if (rc == 0) rc = practice_time_forwards(st, core, b, grad, warmups, &batches, &seconds);
    if (rc == 0) rc = core_stats(core, s);
    if (rc != 0) {
        practice_fail_or_skip(st, "timing the forward");
        return false;
    }
    harness_counter(st, "ms_per_batch", batches ? 1e3 * seconds / batches : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "images_per_second", (double)batches * b->n, HARNESS_COUNTER_RATE);
    harness_counter(st, "activation_mib", infer_mib(s->activation_bytes), HARNESS_COUNTER_PLAIN);
    return true;
}
