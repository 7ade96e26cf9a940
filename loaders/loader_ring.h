// loader_ring.h: the loader's ring, its lowest layer: one block of memory holding the
// workers' task queues, the epoch's sampler order, the bad-file bits and the batch slots.
// Shared (a POSIX shared-memory object, unlinked at once, mapped again by each worker
// from the inherited descriptor) when there are workers, private memory without. It
// knows nothing of the loader, its workers' processes or the dataset. Not public.
#ifndef LOADERS_LOADER_RING_H
#define LOADERS_LOADER_RING_H

#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { TASK_BATCH = 1, TASK_EXIT = 2 };
enum { SLOT_OK = 0, SLOT_ERROR = 1 };
enum { RING_ERROR_LEN = 1024 };

typedef struct {
    int64_t batch_index, epoch;
    int32_t slot, kind;
} RingTask;

// Per worker: a task queue written by the parent.
typedef struct {
    sem_t tasks_ready;             // posted once per task pushed
    int64_t head;                  // next task index the parent writes
    int64_t tail;                  // next task index the worker reads
    _Atomic int64_t current_batch; // batch being filled, -1 when idle
} RingWorker;

// Head of each slot; the labels, indices and images follow it.
typedef struct {
    sem_t done;         // posted by the worker when the slot holds its batch
    int32_t status;     // SLOT_OK or SLOT_ERROR
    int32_t error_kind; // SLOT_ERROR: the ErrorKind of error (also of the last skip)
    int32_t count, skipped, worker;
    int64_t batch_index, epoch;
    char error[RING_ERROR_LEN];
} SlotHeader;

typedef struct {
    _Atomic int32_t shutdown;  // workers stop at their next sample when set
    _Atomic int64_t bad_files; // distinct bad files found (bits set in the bad-file bitmap)
} RingHeader;

// Offsets inside one mapping of the ring (identical in every process).
typedef struct {
    int nworkers, nslots, task_cap;
    size_t workers_off, tasks_off, perm_off, bad_off, slots_off;
    size_t slot_stride, labels_off, indices_off, images_off; // within a slot
    size_t total;
} RingLayout;

typedef struct {
    RingLayout lay;
    uint8_t *base; // the mapping, or the private block
    int fd;        // the shared-memory object; -1 when private
} Ring;

// Offsets of a ring for these sizes: nworkers task queues of task_cap tasks, a sampler
// order of perm_samples, the bad-file bitmap of dataset_samples bits, nslots slots of
// batch samples of sample_bytes.
RingLayout ring_layout(int nworkers, int nslots, int task_cap, int64_t perm_samples,
                       int64_t dataset_samples, int batch, size_t sample_bytes);
// Creates the ring, zeroed: shared (an unlinked POSIX shared-memory object, for workers)
// or private. 0, or -1 with the error set; *r is then unmapped (ring_destroy is harmless).
int ring_create(Ring *r, const RingLayout *lay, bool shared);
// Maps a shared ring again from its descriptor (in a forked worker: memory the parent has
// pinned through CUDA may be marked "don't fork", so the inherited mapping is not trusted).
// 0 or -1.
int ring_map_again(const Ring *r, Ring *out);
// (Re)initialises the semaphores and task queues and clears the shutdown request; no
// worker may be running.
void ring_reset(Ring *r);
// Destroys the semaphores, unmaps or frees the ring, closes its descriptor. Idempotent.
void ring_destroy(Ring *r);

static inline RingHeader *ring_header(const Ring *r) { return (RingHeader *)r->base; }
static inline RingWorker *ring_worker(const Ring *r, int w)
{
    return (RingWorker *)(r->base + r->lay.workers_off) + w;
}
static inline uint8_t *ring_slot(const Ring *r, int s)
{
    return r->base + r->lay.slots_off + (size_t)s * r->lay.slot_stride;
}
static inline SlotHeader *ring_slot_header(const Ring *r, int s) { return (SlotHeader *)ring_slot(r, s); }
// The epoch's sampler order (dataset indices), written by the parent before any task.
static inline int64_t *ring_order(const Ring *r) { return (int64_t *)(r->base + r->lay.perm_off); }

// The bad-file bits: one per dataset file, set once the file is known to be bad; in the
// shared ring they are mapped before the workers fork, so every process sees every bit.
bool ring_is_bad(const Ring *r, int64_t i);
// Sets bit i and, when it was not set, counts a distinct bad file; true then.
bool ring_mark_bad(Ring *r, int64_t i);
int64_t ring_bad_files(const Ring *r);

// Parent: appends a task to worker w's queue and wakes it.
void ring_push_task(Ring *r, int w, RingTask t);
// Worker: waits up to timeout_ms for its next task: 1 with *t set, 0 when none came.
int ring_take_task(Ring *r, int w, int timeout_ms, RingTask *t);
// Asks every worker to stop (at its next sample, or when it next looks for a task).
void ring_request_shutdown(Ring *r);
bool ring_shutdown_requested(const Ring *r);
// Wakes worker w if it waits for a task (so that it sees the shutdown request).
void ring_wake_worker(Ring *r, int w);

// Worker: slot s holds its batch.
void ring_slot_post(Ring *r, int s);
// Waits up to timeout_ms for slot s's batch: 1 when it is there, 0 not yet, -1 (errno)
// when the wait failed.
int ring_slot_wait(Ring *r, int s, int timeout_ms);

#endif
