// checkpoint_max_batch.h: the checkpointing practice's largest-batch family (private to
// bench/checkpointing/): for each mode the largest training batch that fits within
// --max_batch_memory_mib (bench/driver/max_batch.h), then the throughput there.
#ifndef CHECKPOINT_MAX_BATCH_H
#define CHECKPOINT_MAX_BATCH_H

#include "bench/driver/harness.h"

// checkpoint_max_batch/*: user is the row's const PracticeVariant *. On a GPU the batch
// halves or doubles from the batch axis (0: the preset's) until a step runs out of memory
// within the budget (or --checkpoint_max_batch_cap, or the 2^31-value guard), then
// --checkpoint_max_steps timed steps at it: the time is seconds per image. On a CPU the
// batch is estimated from the core's peak bytes after a step at two batches against the
// budget, and nothing is timed at it (the time is the estimate's).
void checkpoint_bench_max_batch(HarnessState *st, void *user);

#endif
