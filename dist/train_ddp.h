// train_ddp.h: DDP for a training program (build/train --ddp) in four calls: start the
// local ranks when asked (--nproc-per-node), join the world around a core, take steps on
// this rank's share of each global batch, leave. The world comes from dist/env.h (torchrun
// variables, mpirun, srun); CPU ranks all-reduce over Open MPI, GPU ranks over NCCL.
#ifndef DIST_TRAIN_DDP_H
#define DIST_TRAIN_DDP_H

#include <stdbool.h>

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DistTrain DistTrain;

// With nproc > 0: runs argv (the flag "--nproc-per-node" and its value, "=N" or a second
// word, replaced by "--ddp") as nproc local ranks of a world of their own (mpirun for the
// CPU backend; launcher variables this process inherited are not passed on), waits, stores
// their exit status in *exit_code and returns 1. Returns 0 with nproc <= 0 (go on), -1 on error.
int dist_train_launch(int nproc, bool cpu, int argc, char **argv, int *exit_code);
// Joins the world around core (created from cfg: its backend picks MPI or NCCL; on CUDA
// the rank's device is LOCAL_RANK, which cfg->device must already be). global_batch must
// divide by the world. Ranks other than 0 print nothing on stdout from here on.
int dist_train_create(Core *core, const CoreConfig *cfg, int global_batch, DistTrain **out);
int dist_train_rank(const DistTrain *t);
int dist_train_world(const DistTrain *t);
// This rank's images of a global batch: samples [rank * local, (rank + 1) * local).
int dist_train_local_batch(const DistTrain *t, const CoreBatch *global, CoreBatch *local);
// One DDP step on this rank's batch; the LR is the global batch's.
int dist_train_step(DistTrain *t, const CoreBatch *local, CoreStepResult *result);
// Replaces values[0..n) (n <= 8) by their mean over the ranks: one all-reduce of n
// scalars (every rank must call it at the same point). For the global batch's loss and
// accuracy: the ranks' batches are of equal size, so the mean of their means is the
// global batch's.
int dist_train_global_mean(DistTrain *t, float *values, int n);
// Leaves the world; NULL is fine.
void dist_train_free(DistTrain *t);

#ifdef __cplusplus
}
#endif
#endif
