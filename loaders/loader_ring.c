// loader_ring.c: the loader's ring (loader_ring.h): its layout, creation (shared or
// private), reset, bad-file bits, task queues and slot semaphores.
#include "loaders/loader_ring.h"

#include "kernels/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

RingLayout ring_layout(int nworkers, int nslots, int task_cap, int64_t perm_samples,
                       int64_t dataset_samples, int batch, size_t sample_bytes)
{
    RingLayout lay = {.nworkers = nworkers, .nslots = nslots, .task_cap = task_cap};
    size_t off = ALIGN_UP(sizeof(RingHeader), 64);
    lay.workers_off = off;
    off = ALIGN_UP(off + (size_t)nworkers * sizeof(RingWorker), 64);
    lay.tasks_off = off;
    off = ALIGN_UP(off + (size_t)nworkers * task_cap * sizeof(RingTask), 64);
    lay.perm_off = off;
    off = ALIGN_UP(off + (size_t)perm_samples * sizeof(int64_t), 64);
    lay.bad_off = off;
    off = ALIGN_UP(off + (size_t)(dataset_samples + 63) / 64 * sizeof(uint64_t), 4096);
    lay.slots_off = off;
    lay.labels_off = ALIGN_UP(sizeof(SlotHeader), 64);
    lay.indices_off = ALIGN_UP(lay.labels_off + (size_t)batch * sizeof(int32_t), 64);
    lay.images_off = ALIGN_UP(lay.indices_off + (size_t)batch * sizeof(int64_t), 64);
    lay.slot_stride = ALIGN_UP(lay.images_off + (size_t)batch * sample_bytes, 4096);
    lay.total = off + (size_t)nslots * lay.slot_stride;
    return lay;
}

// An anonymous POSIX shared-memory object: its name is unlinked at once, so only the
// descriptor (inherited by the workers) and the mappings keep it alive.
static int create_shared(Ring *r)
{
    static _Atomic int counter;
    char name[64];
    snprintf(name, sizeof name, "/loaders-%d-%d", (int)getpid(), atomic_fetch_add(&counter, 1));
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return error_set(ERROR_LIBRARY, "loader: shm_open(%s) failed: %s", name, strerror(errno));
    shm_unlink(name);
    if (ftruncate(fd, (off_t)r->lay.total) != 0) {
        int e = errno;
        close(fd);
        return error_set(e == ENOSPC || e == ENOMEM ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY,
                         "loader: cannot size the %zu-byte shared ring: %s", r->lay.total,
                         strerror(e));
    }
    void *p = mmap(NULL, r->lay.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return error_set(e == ENOMEM ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY,
                         "loader: cannot map the %zu-byte shared ring: %s", r->lay.total,
                         strerror(e));
    }
    r->fd = fd;
    r->base = p;
    return 0;
}

int ring_create(Ring *r, const RingLayout *lay, bool shared)
{
    *r = (Ring){.lay = *lay, .base = NULL, .fd = -1};
    if (shared) {
        if (create_shared(r) != 0) return -1;
    } else {
        r->base = aligned_alloc(4096, lay->total);
        if (!r->base) return error_set(ERROR_OUT_OF_MEMORY, "loader: out of memory");
        memset(r->base, 0, lay->total);
    }
    ring_reset(r);
    return 0;
}

int ring_map_again(const Ring *r, Ring *out)
{
    void *p = mmap(NULL, r->lay.total, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (p == MAP_FAILED) return -1;
    *out = (Ring){.lay = r->lay, .base = p, .fd = r->fd};
    return 0;
}

void ring_reset(Ring *r)
{
    atomic_store(&ring_header(r)->shutdown, 0);
    for (int w = 0; w < r->lay.nworkers; w++) {
        RingWorker *rw = ring_worker(r, w);
        sem_destroy(&rw->tasks_ready);
        sem_init(&rw->tasks_ready, 1, 0);
        rw->head = rw->tail = 0;
        atomic_store(&rw->current_batch, -1);
    }
    for (int s = 0; s < r->lay.nslots; s++) {
        SlotHeader *h = ring_slot_header(r, s);
        sem_destroy(&h->done);
        sem_init(&h->done, 1, 0);
    }
}

void ring_destroy(Ring *r)
{
    if (r->base) {
        for (int w = 0; w < r->lay.nworkers; w++) sem_destroy(&ring_worker(r, w)->tasks_ready);
        for (int s = 0; s < r->lay.nslots; s++) sem_destroy(&ring_slot_header(r, s)->done);
        if (r->fd >= 0) munmap(r->base, r->lay.total);
        else free(r->base);
        r->base = NULL;
    }
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
}

static _Atomic uint64_t *bad_bits(const Ring *r) { return (_Atomic uint64_t *)(r->base + r->lay.bad_off); }

bool ring_is_bad(const Ring *r, int64_t i)
{
    return (atomic_load_explicit(&bad_bits(r)[i >> 6], memory_order_relaxed) >> (i & 63)) & 1u;
}

bool ring_mark_bad(Ring *r, int64_t i)
{
    uint64_t mask = (uint64_t)1 << (i & 63);
    if (atomic_fetch_or_explicit(&bad_bits(r)[i >> 6], mask, memory_order_relaxed) & mask) return false;
    atomic_fetch_add_explicit(&ring_header(r)->bad_files, 1, memory_order_relaxed);
    return true;
}

int64_t ring_bad_files(const Ring *r) { return atomic_load(&ring_header(r)->bad_files); }

// Worker w's task queue: task_cap tasks used round, by head (the parent) and tail (w).
static RingTask *task_queue(const Ring *r, int w)
{
    return (RingTask *)(r->base + r->lay.tasks_off) + (size_t)w * r->lay.task_cap;
}

void ring_push_task(Ring *r, int w, RingTask t)
{
    RingWorker *rw = ring_worker(r, w);
    task_queue(r, w)[rw->head % r->lay.task_cap] = t;
    rw->head++;
    sem_post(&rw->tasks_ready);
}

// The absolute CLOCK_REALTIME time timeout_ms from now, as sem_timedwait wants it.
static struct timespec deadline_in(int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += timeout_ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

int ring_take_task(Ring *r, int w, int timeout_ms, RingTask *t)
{
    RingWorker *rw = ring_worker(r, w);
    struct timespec ts = deadline_in(timeout_ms);
    if (sem_timedwait(&rw->tasks_ready, &ts) != 0) return 0;
    *t = task_queue(r, w)[rw->tail % r->lay.task_cap];
    rw->tail++;
    return 1;
}

void ring_request_shutdown(Ring *r) { atomic_store(&ring_header(r)->shutdown, 1); }

bool ring_shutdown_requested(const Ring *r)
{
    return atomic_load_explicit(&ring_header(r)->shutdown, memory_order_relaxed);
}

void ring_wake_worker(Ring *r, int w) { sem_post(&ring_worker(r, w)->tasks_ready); }

void ring_slot_post(Ring *r, int s) { sem_post(&ring_slot_header(r, s)->done); }

int ring_slot_wait(Ring *r, int s, int timeout_ms)
{
    struct timespec ts = deadline_in(timeout_ms);
    if (sem_timedwait(&ring_slot_header(r, s)->done, &ts) == 0) return 1;
    return errno == ETIMEDOUT || errno == EINTR ? 0 : -1;
}
