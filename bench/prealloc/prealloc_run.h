// prealloc_run.h: one run of the prealloc practice: a fresh core trained over a schedule of
// image sizes (variable input length), the shapes met as they come (grow) or after one
// untimed forward and backward at the largest size that updates nothing (preallocated).
#ifndef PREALLOC_RUN_H
#define PREALLOC_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/driver/practice.h"
#include "kernels/core.h"

// The steps' image sizes: `distinct` sizes evenly spaced from half the preset's size to its
// size (fewer when that range has fewer pixels), each used steps / distinct times or once
// more, in an order shuffled from a fixed seed (the same for every variant and run).
typedef struct PreallocSchedule {
    int steps, *size;
    int lo, hi, distinct; // hi: the largest size, the one a preallocation plans
    int changes;          // steps whose size differs from the step before (the first counts)
} PreallocSchedule;

int prealloc_schedule_make(PreallocSchedule *s, int image_size, int distinct, int steps, uint64_t seed);
void prealloc_schedule_free(PreallocSchedule *s);

typedef enum {
    PREALLOC_GROW,     // the baseline: every shape planned when its first batch arrives
    PREALLOC_RESERVED, // the tuned: core_loss_grad at the largest size first (no update)
    PREALLOC_BROKEN,   // the self-test's broken tuned variant: its preallocation is a core_step
                       // (the update of the extra step is applied)
} PreallocMode;

// What a run measured. The parameters and BN buffers are written only when asked for.
typedef struct PreallocResult {
    double prealloc_ms;   // the preallocation step, wall clock to core_sync (0: grow)
    double schedule_ms;   // the schedule's steps, wall clock to the last step's core_sync
    int arena_growths;    // probe runs only: steps after which the plan's arena was larger than
                          // every plan before it (both backends reallocate the arena exactly then)
    CoreStats stats;      // the core's counters after the schedule
    float *params, *buffers; // NULL, or core_param_count / core_buffer_count floats
} PreallocResult;

// One fresh core of cfg (its creation untimed) over schedule s on batch b (at least s->hi
// pixels a side). probe: core_stats after every step to count the arena's growths (a sync
// per step: never in a timed run). 0 or -1 with the error set.
int prealloc_run(const CoreConfig *cfg, const PracticeBatch *b, const PreallocSchedule *s,
                 PreallocMode mode, bool probe, PreallocResult *r);

// The parameter and BN-buffer counts of cfg's model, for PreallocResult's arrays.
int prealloc_counts(const CoreConfig *cfg, size_t *params, size_t *buffers);

#endif
