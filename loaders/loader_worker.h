// loader_worker.h: the loader's middle layer, a user of the ring (loader_ring.h) that
// knows nothing of the Loader: the fill of one batch into a ring slot (decode, augment,
// collate; in a worker process, or in the caller when there are no workers), the body of
// a worker process, and the parent's pool of them (fork, poll, kill, stop, reap, CPU
// accounting). Not public.
#ifndef LOADERS_LOADER_WORKER_H
#define LOADERS_LOADER_WORKER_H

#include "loaders/augment.h"
#include "loaders/dataset.h"
#include "loaders/jpeg.h"
#include "loaders/loader_ring.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// What filling a batch takes besides the ring: the dataset and how its samples become
// a batch. The epoch's order (nsamples dataset indices) is in the ring.
typedef struct {
    const Dataset *ds;
    int batch_size;
    int64_t nsamples;         // samples in the ring's order
    uint64_t seed;            // with the epoch and the dataset index, each sample's crop/flip
    AugmentConfig augment;
    size_t sample_bytes;      // one augmented sample
    bool skip_bad_files;      // skip (and count) bad files instead of failing the batch
    int64_t max_image_pixels; // the decoder's limit (0: its default)
    uint64_t worker_cpus;     // LoaderConfig.worker_cpus (0: not bound)
} BatchSpec;

// Fills ring slot `slot` with batch b of the epoch whose order is in the ring; worker -1
// is the caller. Stops early if a shutdown has been requested.
void worker_fill_slot(const BatchSpec *spec, Ring *ring, int slot, int64_t b, int64_t epoch,
                      int worker, JpegDecoder *dec, Image *img);

// The body of worker process w (forked by worker_pool_start from parent): maps the ring
// again, serves its task queue until told to stop or its parent goes, never returns.
// Its own early exits, by status (the pool's reports name them).
enum { WORKER_EXIT_ORPHAN = 3, WORKER_EXIT_NO_RING = 4, WORKER_EXIT_NO_DECODER = 5,
       WORKER_EXIT_NO_CPUS = 6 };
_Noreturn void worker_main(const Ring *ring, const BatchSpec *spec, int w, pid_t parent);

// The parent's handles on its worker processes.
typedef struct {
    int n;
    pid_t *pids;              // [n], 0 when not running
    pid_t parent_pid;         // the process that made the pool (the workers' parent)
    double reaped_cpu;        // CPU seconds of the workers reaped so far
    int64_t failures;         // workers that died (signal, non-zero exit) or timed out
    int64_t spawns;           // worker processes forked so far
} WorkerPool;

// n workers, none running yet. 0 or -1 (out of memory).
int worker_pool_init(WorkerPool *p, int n);
void worker_pool_free(WorkerPool *p);
// Resets the ring and forks the workers, each serving its queue of the ring with spec.
// 0, or -1 with the error set (those forked are stopped).
int worker_pool_start(WorkerPool *p, Ring *ring, const BatchSpec *spec);
// True while any worker process is running.
bool worker_pool_running(const WorkerPool *p);
// Process id of worker w, or -1 when it is not running.
int worker_pool_pid(const WorkerPool *p, int w);
// Checks every worker without waiting: on the first that has ended, counts a failure,
// reaps it and returns -1 with the error naming the worker, its pid, how it ended and the
// batch it held (or waiting_for, the batch awaited from it; -1: none) in `epoch`. Else 0.
int worker_pool_poll(WorkerPool *p, Ring *ring, int64_t epoch, int64_t waiting_for);
// Worker w holds batch b, awaited for longer than timeout_ms: kills and reaps it (stopped
// or stuck, it would never finish), counts a failure and returns -1 with the error naming
// the worker, its pid and state, the batch and the epoch.
int worker_pool_time_out(WorkerPool *p, int w, int64_t b, int64_t epoch, int timeout_ms);
// Asks the workers to stop (continuing stopped ones), SIGKILLs them after 2 s, reaps
// them all. 0, or -1 with the error set naming the first worker that had died on its
// own in `epoch` (a signal the pool did not send, a non-zero exit): every abnormal exit
// counts.
int worker_pool_stop(WorkerPool *p, Ring *ring, int64_t epoch);
// CPU seconds of all workers, reaped and running.
double worker_pool_cpu_seconds(const WorkerPool *p);

#endif
