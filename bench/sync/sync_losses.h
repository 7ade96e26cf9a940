// sync_losses.h: the sync practice's correctness check. Reading the loss every K steps
// instead of every step must not change what is read: each deferred read (the mean of
// the K losses since the last one, accumulated on the device) must equal the mean of the
// losses the every-step baseline reads over the same steps, from the same start on the
// same batches. All functions return 0 or -1 with the error set (kernels/error.h).
#ifndef SYNC_LOSSES_H
#define SYNC_LOSSES_H

#include <stddef.h>

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

// Relative tolerance of a read: a sum of at most a few hundred fp32 losses in a
// different order (on the device, in fp32) than the baseline's mean (on the host, in double).
#define SYNC_LOSS_TOLERANCE 1e-4

typedef struct LossRead {
    int last_step; // 0-based index of the step that made the read
    int steps;     // losses averaged into it
    float loss;
} LossRead;

// Trains cfg for `steps` steps on synthetic batches (2, in turn) from its seed's
// initial weights and records every loss read; *count of them (at most max).
int sync_losses_record(const CoreConfig *cfg, int steps, LossRead *reads, int max, int *count);

typedef struct LossComparison {
    int compared;     // reads of the tuned run
    int mismatched;   // reads off by more than the tolerance (or with no baseline window)
    double max_rel;   // the largest relative difference
} LossComparison;

// Compares every read of a tuned run with the mean of the every-step reads over its window.
LossComparison sync_losses_compare(const LossRead *every, int n_every, const LossRead *tuned,
                                   int n_tuned, double tolerance);

// The check of a tuned config against its every-step baseline: both trained from the
// same start (deterministic cuDNN algorithms, so that only the read-back differs) for
// enough steps that the tuned one reads at least once. *cmp says how they compared.
int sync_losses_check(const CoreConfig *baseline, const CoreConfig *tuned, LossComparison *cmp);

#ifdef __cplusplus
}
#endif
#endif
