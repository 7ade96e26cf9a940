// infer_family.h: what the inference families of bench_inference.c share, private to
// bench/inference/: the variant type, the helpers every family runs on (the run's config,
// batches, logits and their check, the timed forwards) in infer_family.c, and the entry
// points of the families kept in files of their own: the largest-batch probe
// (infer_max_batch.c) and the latency families serving, graphs and cudnn (infer_latency.c).
// Functions that can fail return 0 or -1 with the error set (kernels/error.h).
#ifndef INFER_FAMILY_H
#define INFER_FAMILY_H

#include <stdbool.h>
#include <stddef.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "bench/inference/infer_common.h"
#include "kernels/core.h"

// ---- variants --------------------------------------------------------------------------------

// One row of a family: the config it runs and what its check allows.
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

// A no_grad variant of a precision and layout (the serving and precision tables).
#define INFER_PRECISION_VARIANT(name, role, gpu, prec, layout, tol, top1) \
    {name, role, gpu, CORE_GRAD_OFF, prec, layout, false, CORE_CONV_ALGO_HEURISTIC, tol, top1}

// The latency families' tables (infer_latency.c), the baseline first, and their lengths.
extern const InferVariant infer_serving_variants[], infer_graph_variants[], infer_cudnn_variants[];
extern const int infer_serving_variant_count, infer_graph_variant_count, infer_cudnn_variant_count;

// ---- shared helpers (infer_family.c) ------------------------------------------------------------

// Sets cfg's precision, layout, CUDA graph and convolution algorithm to the variant's.
void infer_apply(const InferVariant *v, CoreConfig *cfg);

// Untimed forwards before the clock: WARMUP on a GPU, 1 on a CPU (a CPU core only allocates
// in its first).
int infer_warmup(const CoreConfig *cfg);

// The run's backend and config (the variant applied); false when the run ended (skip/fail).
bool infer_run_config(HarnessState *st, const InferVariant *v, CoreConfig *cfg);

// Bytes in MiB, for the counters.
double infer_mib(size_t bytes);

// The logits of a fresh core of cfg (with state when not NULL) on batch b (host, n x
// classes): its third forward with cuda_graph (eager, capture + replay, replay: the check
// must see a replay), else its first.
int infer_logits_of(const CoreConfig *cfg, const InferState *state, const CoreBatch *b,
                    CoreGradMode grad, float *logits);

// The check of a tuned row: `want` the baseline's logits, `got` the tuned ones (broken
// first under --practice_selftest); counters check_rel_diff and check_top1_agreement; the
// row fails past the variant's tolerances. 0: passed; 1: failed (the row is failed, the
// run should end); -1 with the error set (a usage error).
int infer_check_logits(HarnessState *st, const InferVariant *v, float *want, float *got, int n,
                       int classes, const char *against);

// A batch in host memory (serving requests arrive from the host) or, for the CUDA backend,
// device-resident (practice_batch_make).
int infer_batch_make(PracticeBatch *b, const CoreConfig *cfg, bool host);

// A serving request over pb's images: labels NULL (a request carries none, so nothing
// uploads them; core_infer takes a batch without labels).
CoreBatch infer_request_batch(const PracticeBatch *pb);

// Host memory for the logits of n images of cfg's model; NULL with the error set.
float *infer_logits_alloc(const CoreConfig *cfg, int n);

// The timed forwards of one run (practice_time_forwards, after `warmups` untimed ones) once
// its core is made (rc: the set-up's status; nothing is timed after an error) and their
// counters: ms_per_batch, images_per_second, activation_mib. False (the run ended as a
// failure or skip) on an error, else *s holds the core's stats. The caller frees the core.
bool infer_timed_forwards(HarnessState *st, int rc, Core *core, const CoreBatch *b,
                          CoreGradMode grad, int warmups, CoreStats *s);

// ---- family entry points (user: the row's const InferVariant *) --------------------------------

// inference_grad_max_batch/*: the largest batch probed on a GPU, estimated on a CPU
// (infer_max_batch.c).
void infer_bench_max_batch(HarnessState *st, void *user);
// inference_serving/*: single requests from a host batch, per precision (infer_latency.c).
void infer_bench_serving(HarnessState *st, void *user);
// inference_graphs/*: single device-resident requests, eager or as a CUDA graph
// (infer_latency.c).
void infer_bench_graphs(HarnessState *st, void *user);
// inference_cudnn/*: heuristic algorithms against autotuning, the tuning inside the timed
// requests (infer_latency.c).
void infer_bench_cudnn(HarnessState *st, void *user);

#endif
