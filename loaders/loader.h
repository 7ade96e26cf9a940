// loader.h: the batch loader, PyTorch DataLoader semantics in C.
// Bad input: an undecodable file (or a dataset entry that is not a regular file, found
// at scan time) fails the loader with an error naming it, or, with skip_bad_files, is
// skipped and counted; a skipped file is remembered for the run (a bitmap in the shared
// ring, so every worker sees it) and never read again, so later epochs skip it at once
// and batches stay the same for any num_workers. A worker that dies (any signal or
// non-zero exit, even after its last batch) or takes longer than timeout_ms over a batch
// is an error naming its pid, the batch and the epoch.
// num_workers = 0 decodes and augments in the caller (the baseline). num_workers = N
// forks N worker processes (before any CUDA call when workers are persistent) that fill
// slots of a shared-memory ring; batch b goes to worker b % N and ring slot
// b % (N * prefetch_factor + 1), and batches come back in sampler order. Augmentation
// is seeded per sample from (seed, epoch, dataset index), so a seed gives the same
// batches whatever num_workers is. The ring's shared-memory object is unlinked as soon
// as it is mapped, so nothing is left in /dev/shm even if the process is killed;
// workers die with their parent (PR_SET_PDEATHSIG: with the *thread* that created the
// loader, so create it from a thread that outlives it) and ignore SIGINT.
#ifndef LOADERS_LOADER_H
#define LOADERS_LOADER_H

#include "loaders/augment.h"
#include "loaders/dataset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    LOADER_PIN_NONE,     // batches stay in pageable (or shared) memory
    LOADER_PIN_COPY,     // each batch is copied into a cudaHostAlloc'd buffer: by a pin
                         // thread with workers (as PyTorch's DataLoader), in the caller
                         // with num_workers = 0 (as PyTorch's single-process loading)
    LOADER_PIN_REGISTER, // the ring (or the num_workers=0 buffer) is cudaHostRegister'ed once
} LoaderPinMode;

typedef struct {
    const Dataset *dataset;   // must outlive the loader
    int batch_size;
    int num_workers;          // 0: load in the caller
    int prefetch_factor;      // batches in flight per worker; 0 means 2
    bool shuffle;             // new permutation every epoch, from (seed, epoch)
    uint64_t seed;
    bool drop_last;           // drop the final partial batch
    bool persistent_workers;  // false: fork workers at each epoch start, join at its end
    bool skip_bad_files;      // skip undecodable files (counted) instead of failing
    LoaderPinMode pin;
    AugmentConfig augment;
    int timeout_ms;           // >0: fail if a batch takes longer (workers only; the stuck
                              // worker is killed); 0: no limit
    uint64_t worker_cpus;     // nonzero: each worker process runs on these CPUs only (bit i:
                              // CPU i, the first 64; sched_setaffinity in the worker after
                              // fork, as a launcher's core binding; workers only): one this
                              // process may not use makes the worker fail at start (named).
                              // 0: the CPUs of the thread that forks them
    int64_t max_image_pixels; // largest width x height decoded; 0: PIL's default
                              // (JPEG_DEFAULT_MAX_PIXELS); larger files are bad input
    // LOADER_PIN_COPY's buffers: NULL means cudaHostAlloc/cudaFreeHost; tests pass plain
    // allocators to run the pinning stage (and its thread) without a GPU.
    int (*pin_host_alloc)(size_t bytes, void **ptr);
    void (*pin_host_free)(void *ptr);
    // torch.utils.data.DistributedSampler (DDP: one loader per rank, with its own workers).
    // world > 1: each epoch's order is the one a single loader of the same seed makes,
    // padded by wrapping to a multiple of world, and this loader reads every world-th
    // sample of it from position rank: ceil(num_samples / world) samples per epoch, the
    // same on every rank, so every rank takes the same number of batches. Batch b of rank
    // r with batch_size B is then positions [b*B*world, (b+1)*B*world) of the padded order
    // taken every world-th from r: together, the ranks' batch b is a single loader's batch b
    // with batch_size B*world. Augmentation stays seeded by (seed, epoch, dataset index).
    // world 0 or 1: the whole dataset (rank must be 0).
    int world, rank;
} LoaderConfig;

// One batch; valid until the next loader_next_batch/loader_begin_epoch/loader_destroy.
typedef struct {
    const void *images;       // (count, 3, H, W) float32 or fp16 (augment.dtype)
    const int32_t *labels;    // [count]
    const int64_t *indices;   // [count] dataset index of each sample
    int count;                // samples (less than batch_size for the last or with skips)
    int skipped;              // bad files skipped in this batch
    int64_t batch_index;      // position in this epoch's sampler order
    int64_t epoch;
    int height, width;
    AugmentDtype dtype;
    size_t image_bytes;       // bytes at images
    bool pinned;              // images lie in page-locked memory
} LoaderBatch;

typedef struct {
    int64_t batches;            // delivered so far
    int64_t images;             // delivered so far
    int64_t skipped;            // bad files skipped so far (a file once per epoch)
    int64_t bad_files;          // distinct bad files found so far; each was read once (or,
                                // not being a regular file, never) and is remembered
    int64_t worker_failures;    // workers that died (signal, non-zero exit) or timed out
    double wait_seconds;        // time loader_next_batch spent blocked (or loading, N=0)
    double pin_seconds;         // time spent copying into pinned buffers (on the pin
                                // thread with workers: not on the caller's)
    double worker_cpu_seconds;  // CPU time of all workers, live and exited
    int64_t worker_spawns;      // worker processes forked so far
    char last_skip[1024];       // why the last skipped file was bad (names it); "" if none
} LoaderStats;

typedef struct Loader Loader;

// The programs' default batch timeout (build/train, the practice driver): a batch that
// takes minutes is a stuck worker, not a measurement.
#define LOADER_PROGRAM_TIMEOUT_S 120

// Defaults: batch_size, no workers, prefetch 2, shuffle, persistent workers, training
// augmentation to 224x224, no pinning, no timeout.
LoaderConfig loader_default_config(const Dataset *ds, int batch_size);
// Validates cfg, maps the ring and (persistent workers) forks the workers. 0 or -1.
int loader_create(const LoaderConfig *cfg, Loader **out);
// Starts epoch `epoch` (its shuffle and augmentation seeds); abandons any unfinished
// epoch. Forks workers in the re-spawn mode. 0 or -1.
int loader_begin_epoch(Loader *l, int64_t epoch);
// Next batch of the epoch: 1 with *batch filled, 0 at the end of the epoch, -1 on error
// (a bad file, a dead worker, a timeout; the message names it; a worker that died after
// its last batch of the epoch makes the end of the epoch -1). Begins epoch 0 (or the
// one after the last) if none is running.
int loader_next_batch(Loader *l, LoaderBatch *batch);
// Batches per epoch.
int64_t loader_num_batches(const Loader *l);
// Samples per epoch: num_samples, or this rank's share (world > 1).
int64_t loader_epoch_samples(const Loader *l);
// Copies the sampler order (dataset indices) of the current epoch into
// order[loader_epoch_samples(l)] (this rank's share when world > 1).
void loader_epoch_order(const Loader *l, int64_t *order);
// Process id of worker i, or -1 when it is not running.
int loader_worker_pid(const Loader *l, int i);
// Counters since creation.
void loader_get_stats(const Loader *l, LoaderStats *stats);
// Stops the workers, unpins and unmaps everything (a stopped worker is continued or
// killed; none is left behind). NULL is fine.
void loader_destroy(Loader *l);

#ifdef __cplusplus
}
#endif
#endif
