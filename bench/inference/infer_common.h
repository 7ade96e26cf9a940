// infer_common.h: what the inference practices (bench/inference/) share: timed single
// requests through core_infer with their latency percentiles, the held-out batch, a trained
// model state copied between cores of different precision or layout, and the comparison of
// two sets of logits (relative L2 and top-1 agreement) that every check uses, with the
// self-test's breakage of the tuned logits.
#ifndef INFER_COMMON_H
#define INFER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

// `requests` calls of core_infer on batch b, each timed alone from the call to its result on
// the host (logits read back when `logits` is not NULL, else core_sync): ms[i] per request.
// The image size of request i is sizes[i % size_count] when sizes is not NULL. A request
// carries no labels: a batch with labels is bad usage.
int infer_requests(Core *core, const CoreBatch *b, CoreGradMode grad, int requests,
                   const int *sizes, int size_count, float *logits, double *ms);

// Untimed requests (as infer_requests, one at a time) until at least min_seconds have passed
// and at least min_requests were made: a GPU's clocks ramp up from idle over a few hundred
// ms, whatever the count. The count made and their seconds into *requests and *seconds.
int infer_warm_up(Core *core, const CoreBatch *b, CoreGradMode grad, float *logits,
                  double min_seconds, int min_requests, int *requests, double *seconds);

// The p-th percentile (0..100, nearest rank) of n values (sorted in place).
double infer_percentile(double *v, int n, double p);

// Requests a percentile needs beyond it (the tail) before it is reported: 10, so p99 needs
// 1,000 requests, p95 200, p90 100, p50 20 (MLPerf's early-stopping rule asks 662 for p99 at
// 99% confidence; the nearest rank of p99 over 100 requests is their second largest).
#define INFER_PERCENTILE_TAIL 10
// Whether the p-th percentile of n requests is reported (INFER_PERCENTILE_TAIL beyond it).
bool infer_percentile_reported(int n, double p);
// The fewest requests for the p-th percentile (0 for p >= 100: never).
int infer_percentile_min_requests(double p);

// The checks' held-out batch: synthetic batch INFER_HELD_OUT_INDEX (practice_host_batch).
#define INFER_HELD_OUT_INDEX 1000003  // a batch index no timed or training batch uses

// The model state a check compares on: `steps` SGD steps of cfg on synthetic host batches
// from the seed's initial weights (so that the logits separate the classes), then the
// parameters and BN running statistics read out (host memory, malloc'd).
typedef struct InferState { float *params, *stats; size_t n_params, n_stats; } InferState;
int infer_state_train(const CoreConfig *cfg, int steps, InferState *s);
// Puts a state into a core of the same model (any backend, precision, layout).
int infer_state_load(Core *core, const InferState *s);
void infer_state_free(InferState *s);

// --practice_selftest: when it asks for a broken tuned variant, overwrites the tuned logits
// (count values) with zeros, as if the tuned forward had produced nothing. 0 or -1.
int infer_selftest_break(float *logits, size_t count, bool *broken);

#ifdef __cplusplus
}
#endif
#endif
