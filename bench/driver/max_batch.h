// max_batch.h: what every largest-batch probe shares (bench_inference's
// inference_grad_max_batch, bench_checkpoint's checkpoint_max_batch), so that both answer one
// question one way: the largest batch that fits in a memory budget.
// - The budget: --max_batch_memory_mib (max_batch_option; 0: all there is). On a GPU the
//   probe holds the rest of the device's free memory as ballast (cudaMalloc'd, released
//   after it), so the modes are compared well below cuDNN's 2^31-value limit on any GPU
//   instead of both running into that limit on a large one.
// - The search (GPU): from a start batch, halve until one fits, else double until one does
//   not. One guard (no tensor of 2^31 values or more: cuDNN's limit, and int-indexed
//   kernels') and the cap end it too, and one "stopped by" rule names what ended it: memory,
//   the cap, the guard, or another error after a batch that fitted.
// - The estimate (CPU, which swaps long before an allocation fails): the core's peak bytes at
//   two batches give a line, read against the budget (or the machine's memory), with the
//   same cap and guard.
// - The rows' counters and the label's text.
// Functions that can fail return 0 or -1 with the error set (kernels/error.h).
#ifndef MAX_BATCH_H
#define MAX_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "bench/driver/harness.h"
#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

// The default budget, about the smallest MIG slice of an A100 (1g.5gb). Every preset runs
// out of it far below the 2^31-value guard (ResNet-18's is 10,699 images), so the modes
// differ by their memory alone: the CPU estimates at 4096 MiB are grad_on / no_grad 53,087 /
// 155,329 images for tiny, 1,910 / 10,560 for small, 273 / 1,366 for resnet18, and keep_all /
// checkpoint 217 / 557 for medium, 273 / 661 for resnet18. And each probe stays short: a few
// hundred ResNet-18 images at most.
#define MAX_BATCH_DEFAULT_MIB 4096
// The batches the CPU estimate measures the core's peak at (the peak is linear in the batch:
// the per-thread scratch is sized per image).
#define MAX_BATCH_ESTIMATE_N1 1
#define MAX_BATCH_ESTIMATE_N2 2
#define MAX_BATCH_BALLAST_BLOCKS 64

// Declares --max_batch_memory_mib (before harness_init), with its help.
void max_batch_option(void);

// One probe's parameters.
typedef struct MaxBatchSearch {
    int start;               // the first batch tried (the GPU search halves or doubles from it)
    int cap;                 // no batch above it is tried or estimated
    const char *cap_flag;    // the flag that sets the cap, for the label
    size_t values_per_image; // the largest tensor's values per image (the guard)
    size_t budget;           // bytes of memory the probe may use (0: all there is)
    int device;              // the CUDA device (its ballast)
} MaxBatchSearch;

// The search for cfg's model from batch `start`, with the cap of option `cap_flag` and the
// budget of --max_batch_memory_mib.
int max_batch_search_init(const CoreConfig *cfg, int start, const char *cap_flag, MaxBatchSearch *s);

// The values one image puts in the model's largest tensor (any activation, the input).
int max_batch_values_per_image(const CoreModelConfig *m, size_t *values);
// The largest batch whose tensors stay under 2^31 values (the guard).
int max_batch_guard(size_t values_per_image);

// What ended a search.
typedef enum {
    MAX_BATCH_STOP_MEMORY, // the next batch ran out of memory (the answer the row is for)
    MAX_BATCH_STOP_CAP,    // the next batch is past the cap, still fitting
    MAX_BATCH_STOP_GUARD,  // the next batch would put 2^31 values or more in one tensor
    MAX_BATCH_STOP_ERROR,  // the next batch failed otherwise, after one that fitted
} MaxBatchStop;

// A probe's or an estimate's answer.
typedef struct MaxBatchResult {
    int largest;            // the largest batch that fits (0: not even the smallest)
    int next;               // the batch that ended the search (tried or not)
    MaxBatchStop stop;
    int probes;             // batches tried (GPU)
    bool estimated;         // from the CPU estimate, not a probe
    double bytes_per_image; // the estimate's slope (its input included)
    double memory;          // bytes it had: GPU free memory while probing, CPU the
                            // budget or the machine's memory, whichever is smaller
    char error[512];        // MAX_BATCH_STOP_ERROR: the error that ended it
} MaxBatchResult;

// Runs batch n once (a fresh core, its batch, one pass): 0 when it fits; -1 with the error
// set when not (ERROR_OUT_OF_MEMORY: it does not fit; any other kind: an error).
typedef int (*MaxBatchRunFn)(void *ctx, int n);
// The core's peak bytes after a pass of batch n (CPU).
typedef int (*MaxBatchPeakFn)(void *ctx, int n, size_t *peak);

// The GPU search: r->memory the device's free memory while probing. With a budget: one
// untimed run(start) first (the libraries load their kernels), then the search with the
// ballast held. An error other than out of memory before any batch fitted: -1.
int max_batch_probe(const MaxBatchSearch *s, MaxBatchRunFn run, void *ctx, MaxBatchResult *r);
// The search alone, no ballast (what max_batch_probe runs inside it); r->memory 0.
int max_batch_search(const MaxBatchSearch *s, MaxBatchRunFn run, void *ctx, MaxBatchResult *r);
// The CPU estimate: peak at MAX_BATCH_ESTIMATE_N1 and _N2, plus input_bytes per image
// (what the caller holds outside the core), against `memory` bytes (the budget or the
// machine's memory, max_batch_memory).
int max_batch_estimate(const MaxBatchSearch *s, MaxBatchPeakFn peak, void *ctx, size_t input_bytes,
                       double memory, MaxBatchResult *r);
// The memory a CPU estimate reads against: the budget, or the machine's when smaller or 0.
double max_batch_memory(const MaxBatchSearch *s);

// Device memory held so that a probe has only its budget (cudaMalloc'd blocks).
typedef struct MaxBatchBallast {
    void *blocks[MAX_BATCH_BALLAST_BLOCKS];
    int count;
    size_t held;                    // bytes held
    size_t free_before, free_after; // the device's free bytes before and while held
} MaxBatchBallast;
// Holds all of the device's free memory but `budget` bytes (2 MiB granules; nothing when
// less is free).
int max_batch_ballast_hold(int device, size_t budget, MaxBatchBallast *b);
// Frees what max_batch_ballast_hold held; a zeroed ballast is fine.
void max_batch_ballast_release(MaxBatchBallast *b);

// The row's end when nothing fits: true after skipping the run (out of memory, with the
// budget) when r found no batch; false when there is an answer to report.
bool max_batch_skip_if_none(HarnessState *st, const MaxBatchSearch *s, const MaxBatchResult *r);
// The row's counters: max_batch, max_batch_capped, max_batch_at_guard,
// max_batch_out_of_memory (1: memory ended it), max_batch_estimated, memory_budget_mib,
// memory_available_mib and, probed, max_batch_probes or, estimated, bytes_per_image.
void max_batch_counters(HarnessState *st, const MaxBatchSearch *s, const MaxBatchResult *r);
// The label's account of the search: how the batch was found, within what memory, and
// what stopped it.
void max_batch_describe(const MaxBatchSearch *s, const MaxBatchResult *r, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
