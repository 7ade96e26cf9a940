// ddp.h: DistributedDataParallel over the shared core. Construction broadcasts rank 0's
// parameters (every replica starts equal) and groups the gradients into buckets in
// reverse parameter order: a first bucket of first_bucket_bytes, then bucket_cap_bytes
// each (PyTorch: 1 MiB, then bucket_cap_mb = 25 MiB). During backward, the core's
// gradients-ready hook counts each bucket down; when a bucket's last gradient is written,
// its all-reduce (sum, then / world) starts on the communication stream (CUDA: after the
// event of that gradient; CPU: a communication thread with MPI), in bucket order, while
// backward goes on. The update waits for every bucket, so the GradScaler's inf check and
// clipping see the reduced gradients. BatchNorm: each rank normalises its own micro-batch
// with its own batch statistics (DDP is not SyncBatchNorm), and rank 0's running statistics
// are broadcast before each step's first forward (broadcast_buffers=True), so DDP over N
// ranks is DataParallel's maths over N chunks, not one process's over the global batch.
// no_sync: accumulation_steps micro-batches, only the
// last one all-reduces (divided by world x accumulation_steps: the large batch's mean).
// sync_every_micro_batch is what training without no_sync does: every micro-batch's
// backward all-reduces (bucketed, overlapped) into the gradients accumulated so far, each
// micro-batch's loss weighted 1 / accumulation_steps and every all-reduce divided by world
// (the mean over ranks of (reduced so far + local) is reduced so far + the mean of the
// local ones, since the reduced part is the same on every rank): the same gradient in exact
// arithmetic, accumulation_steps all-reduces of every gradient per step instead of one.
// bucket_order_forward cuts the buckets in forward (parameter) order, what DDP keeps when
// it never rebuilds its buckets (find_unused_parameters=True) and the constructor's layer
// order is the reverse of the execution order: the first bucket then holds the first
// layers, whose gradients backward writes last, so no all-reduce starts before backward
// ends. Each element's sum is the same whatever the bucketing.
// loss_weight (uneven shares of a global batch): each micro-batch's loss times it, e.g.
// local batch x world / global batch, so that DDP's mean over ranks is the global mean.
#ifndef DIST_DDP_H
#define DIST_DDP_H

#include <stdbool.h>
#include <stddef.h>

#include "dist/comm.h"
#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DDP_DEFAULT_BUCKET_CAP_BYTES ((size_t)25 << 20)
#define DDP_DEFAULT_FIRST_BUCKET_BYTES ((size_t)1 << 20)

typedef struct DdpConfig {
    size_t bucket_cap_bytes;   // 0: all gradients in one bucket
    size_t first_bucket_bytes; // 0: the first bucket is capped like the others
    bool overlap;              // false: one all-reduce of every gradient after backward
    int accumulation_steps;    // micro-batches per update (no_sync for all but the last)
    bool keep_local_buffers;   // PyTorch's broadcast_buffers=False: each rank keeps its own
                               // BatchNorm running statistics. false (the default, as
                               // broadcast_buffers=True): rank 0's are broadcast to every rank
                               // at construction and before each step's first forward
    bool sync_every_micro_batch; // false (no_sync): only the last micro-batch all-reduces;
                                 // true: every one does (training without no_sync)
    bool bucket_order_forward; // false: buckets in backward order (PyTorch after its first
                               // iteration's rebuild); true: in forward order (never rebuilt,
                               // constructor order the reverse of execution)
    float loss_weight;         // each micro-batch's loss x this (0: 1); uneven shares of a
                               // global batch: local batch x world / global batch
} DdpConfig;

// PyTorch's defaults: 25 MiB buckets, 1 MiB first bucket, overlapped, no accumulation.
DdpConfig ddp_config_default(void);

typedef struct DdpStats {
    int buckets;             // bucket count
    size_t largest_bucket;   // bytes
    double comm_ms;          // CPU: time the communication thread spent in all-reduces
    double wait_ms;          // time the update waited for the last all-reduce (exposed),
                             // and with sync_every_micro_batch each micro-batch's end too
    long long allreduces;    // all-reduce calls made (buckets, or one of every gradient)
    int steps;
} DdpStats;

typedef struct Ddp Ddp;

// Wraps core (its backend: CPU with an MPI communicator, CUDA with NCCL). Broadcasts rank
// 0's parameters to every rank and installs the core's gradient hooks.
int ddp_create(Core *core, DistComm *comm, const DdpConfig *cfg, Ddp **out);
// One optimizer step from this rank's micro-batches (cfg.accumulation_steps of them):
// forward/backward each, all-reducing only during the last (every one with
// sync_every_micro_batch), then the update at the LR of global_batch images (the sum of
// every rank's micro-batches).
int ddp_step(Ddp *ddp, const CoreBatch *micro_batches, int global_batch, CoreStepResult *result);
// broadcast_buffers: rank 0's BatchNorm running statistics to every rank now (what the
// next step's forward does first); a no-op without BN or with keep_local_buffers.
int ddp_broadcast_buffers(Ddp *ddp);
// Bucket layout and timings so far.
void ddp_stats(const Ddp *ddp, DdpStats *stats);
// Removes the hooks and frees (the core and communicator stay the caller's); NULL is fine.
void ddp_free(Ddp *ddp);

#ifdef __cplusplus
}
#endif
#endif
