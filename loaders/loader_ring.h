// loader_ring.h: the loader's shared-memory layout and state, shared by the
// parent side (loader.c) and the worker processes (loader_worker.c). Not public.
#ifndef LOADERS_LOADER_INTERNAL_H
#define LOADERS_LOADER_INTERNAL_H

#include "kernels/clock.h"
#include "kernels/error.h"
#include "loaders/jpeg.h"
#include "loaders/loader.h"
#include "loaders/pin_thread.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

enum { TASK_BATCH = 1, TASK_EXIT = 2 };
enum { SLOT_OK = 0, SLOT_ERROR = 1 };
enum { LOADER_ERROR_LEN = 1024 };

typedef struct {
    int64_t batch_index, epoch;
    int32_t slot, kind;
} LoaderTask;

// Per worker, in shared memory: a task queue written by the parent.
typedef struct {
    sem_t tasks_ready;             // posted once per task pushed
    int64_t head;                  // next task index the parent writes
    int64_t tail;                  // next task index the worker reads
    _Atomic int64_t current_batch; // batch being filled, -1 when idle
} WorkerShared;

// Head of each ring slot; the labels, indices and images follow it.
typedef struct {
    sem_t done;         // posted by the worker when the slot holds its batch
    int32_t status;     // SLOT_OK or SLOT_ERROR
    int32_t error_kind; // SLOT_ERROR: the ErrorKind of error (also of the last skip)
    int32_t count, skipped, worker;
    int64_t batch_index, epoch;
    char error[LOADER_ERROR_LEN];
} SlotHeader;

typedef struct {
    _Atomic int32_t shutdown;  // workers stop at their next sample when set
    _Atomic int64_t bad_files; // distinct bad files found (bits set in the bad-file bitmap)
} RingHeader;

// Offsets inside one mapping of the ring (identical in every process).
typedef struct {
    size_t workers_off, tasks_off, perm_off, bad_off, slots_off;
    size_t slot_stride, labels_off, indices_off, images_off; // within a slot
    size_t total;
    int task_cap;
} RingLayout;

struct Loader {
    LoaderConfig cfg;
    const Dataset *ds;
    int nslots;
    size_t sample_bytes;
    RingLayout lay;
    int shm_fd;
    uint8_t *ring;          // the shared mapping (or the private buffer when N = 0)
    bool ring_registered;
    void *pinned;           // LOADER_PIN_COPY target with num_workers = 0
    PinThread *pin_thread;  // LOADER_PIN_COPY with workers: copies ring slots, in order
    _Atomic int64_t pin_consumed; // batches whose slot semaphore the pin thread has taken
    int64_t pin_held;       // batch whose pinned buffer the caller holds, -1 when none
    _Atomic int64_t pin_copy_ns; // time the pin thread spent copying (not waiting)
    int64_t *perm;          // sampler order of this epoch (inside the ring when N > 0)
    int64_t nsamples;       // samples in perm: num_samples, or this rank's share
    int64_t *global_perm;   // world > 1: the whole epoch's order before the split
    pid_t parent_pid;
    pid_t *pids;            // [num_workers], 0 when not running
    JpegDecoder *dec;       // N = 0 only
    Image img;              // N = 0 only
    int64_t epoch, nbatches, next, issued;
    bool epoch_active, failed;
    char error[LOADER_ERROR_LEN]; // once failed, every call fails with this error
    ErrorKind error_kind;
    LoaderStats stats;
    double reaped_cpu;
};

static inline RingHeader *ring_header(uint8_t *ring) { return (RingHeader *)ring; }
static inline WorkerShared *ring_worker(const RingLayout *lay, uint8_t *ring, int w)
{
    return (WorkerShared *)(ring + lay->workers_off) + w;
}
static inline LoaderTask *ring_tasks(const RingLayout *lay, uint8_t *ring, int w)
{
    return (LoaderTask *)(ring + lay->tasks_off) + (size_t)w * lay->task_cap;
}
// One bit per dataset file, set once the file is known to be bad; it lives in the shared
// ring, so it is mapped before the workers fork and every process sees every bit.
static inline _Atomic uint64_t *ring_bad_bits(const RingLayout *lay, uint8_t *ring)
{
    return (_Atomic uint64_t *)(ring + lay->bad_off);
}
static inline bool bad_bit_test(_Atomic uint64_t *bits, int64_t i)
{
    return (atomic_load_explicit(&bits[i >> 6], memory_order_relaxed) >> (i & 63)) & 1u;
}
// Sets bit i; true when this call set it (the file was not known to be bad before).
static inline bool bad_bit_set(_Atomic uint64_t *bits, int64_t i)
{
    uint64_t mask = (uint64_t)1 << (i & 63);
    return !(atomic_fetch_or_explicit(&bits[i >> 6], mask, memory_order_relaxed) & mask);
}
static inline uint8_t *ring_slot(const RingLayout *lay, uint8_t *ring, int s)
{
    return ring + lay->slots_off + (size_t)s * lay->slot_stride;
}

// Offsets of the ring for these sizes (tasks, sampler order of perm_samples, the bad-file
// bitmap of dataset_samples bits, slots of batch samples).
RingLayout loader_ring_layout(int nworkers, int nslots, int task_cap, int64_t perm_samples,
                              int64_t dataset_samples, int batch, size_t sample_bytes);
// Creates and maps the ring as an unlinked POSIX shared-memory object. 0 or -1.
int loader_ring_map(Loader *l);
// Re-initialises semaphores and queues; no worker may be running.
void loader_ring_reset(Loader *l);
// CPU seconds a live process has used so far, from /proc (0 if unreadable).
double loader_proc_cpu_seconds(pid_t pid);
// The scheduler state of a live process from /proc ("stopped (T)", "sleeping (S)"...).
void loader_proc_state(pid_t pid, char *buf, size_t size);
// Adds a reaped worker's CPU time to the loader's total.
void loader_record_reaped(Loader *l, const struct rusage *ru);
// True while any worker process is running.
bool loader_workers_running(const Loader *l);
// Forks the workers (after a ring reset). 0 or -1.
int loader_workers_start(Loader *l);
// Says how a reaped worker ended ("killed by signal 11 (Segmentation fault)", "exited
// with status 4 (could not map the shared ring)") into buf; false for a clean exit 0.
bool loader_describe_exit(int status, char *buf, size_t size);
// SIGKILLs worker w and reaps it, waiting at most 2 s (a process in uninterruptible sleep,
// on a hung network file system, dies only when its I/O returns: it is then left to be
// reaped never rather than hang the caller). Its slot is free either way; true if reaped.
bool loader_kill_worker(Loader *l, int w);
// Asks the workers to stop (continuing stopped ones), SIGKILLs them after 2 s, reaps
// them all. 0, or -1 with the error set naming the first worker that had died on its
// own (a signal the loader did not send, a non-zero exit): every abnormal exit counts.
int loader_workers_stop(Loader *l);

// Fills ring slot `slot` with batch b of the epoch whose order is perm. Runs in a worker
// (or in the caller when N = 0); stops early if `shutdown` becomes set.
void loader_fill_slot(const Loader *l, uint8_t *ring, const int64_t *perm, int slot,
                      int64_t b, int64_t epoch, int worker, JpegDecoder *dec, Image *img);
// The body of worker process w: maps the ring, serves tasks, never returns.
_Noreturn void loader_worker_main(Loader *l, int w);

#endif
