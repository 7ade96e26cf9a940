// loader.c: the loader, the top of its three layers: it owns the ring (loader_ring.h)
// and the worker pool (loader_worker.h) and does the caller's side: configuration, the
// sampler order, handing out tasks, in-order delivery, dead-worker and timeout checks
// (through the pool), pinning, shutdown.
#include "loaders/loader.h"

#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/pinned.h"
#include "kernels/rng.h"
#include "loaders/loader_ring.h"
#include "loaders/loader_worker.h"
#include "loaders/pin_thread.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LOADER_ERROR_LEN = 1024 };

struct Loader {
    LoaderConfig cfg;
    BatchSpec spec;         // what filling a batch takes (the dataset, sizes, augmentation)
    Ring ring;              // shared with the workers (private when N = 0)
    WorkerPool pool;        // the worker processes (none when N = 0)
    bool ring_registered;
    void *pinned;           // LOADER_PIN_COPY target with num_workers = 0
    PinThread *pin_thread;  // LOADER_PIN_COPY with workers: copies ring slots, in order
    _Atomic int64_t pin_consumed; // batches whose slot semaphore the pin thread has taken
    int64_t pin_held;       // batch whose pinned buffer the caller holds, -1 when none
    _Atomic int64_t pin_copy_ns; // time the pin thread spent copying (not waiting)
    int64_t *global_perm;   // world > 1: the whole epoch's order before the split
    JpegDecoder *dec;       // N = 0 only
    Image img;              // N = 0 only
    int64_t epoch, nbatches, next, issued;
    bool epoch_active, failed;
    char error[LOADER_ERROR_LEN]; // once failed, every call fails with this error
    ErrorKind error_kind;
    LoaderStats stats;
};

LoaderConfig loader_default_config(const Dataset *ds, int batch_size)
{
    LoaderConfig c = {
        .dataset = ds, .batch_size = batch_size, .num_workers = 0, .prefetch_factor = 2,
        .shuffle = true, .seed = 0, .drop_last = false, .persistent_workers = true,
        .skip_bad_files = false, .pin = LOADER_PIN_NONE,
        .augment = augment_default_config(224), .timeout_ms = 0, .max_image_pixels = 0,
    };
    return c;
}

// worker_cpus must name a CPU of this machine (one the process may not use makes every
// worker exit at start, WORKER_EXIT_NO_CPUS: the calling thread's own binding is no guide).
static int check_worker_cpus(uint64_t cpus)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    if (!cpus || n <= 0 || n >= 64 || cpus & (((uint64_t)1 << n) - 1)) return 0;
    return error_set(ERROR_BAD_USAGE, "loader: worker_cpus 0x%llx names no CPU of this machine's %ld",
                     (unsigned long long)cpus, n);
}

static int check_config(const LoaderConfig *c)
{
    if (!c->dataset || c->dataset->num_samples < 1)
        return error_set(ERROR_BAD_USAGE, "loader: no dataset or an empty one");
    if (c->batch_size < 1) return error_set(ERROR_BAD_USAGE, "loader: batch_size must be >= 1");
    if (c->num_workers < 0 || c->num_workers > 256)
        return error_set(ERROR_BAD_USAGE, "loader: num_workers %d out of range 0..256", c->num_workers);
    if (c->prefetch_factor < 0 || c->prefetch_factor > 64)
        return error_set(ERROR_BAD_USAGE, "loader: prefetch_factor %d out of range 0..64 (0: the default, 2)",
                            c->prefetch_factor);
    if (c->pin != LOADER_PIN_NONE && c->pin != LOADER_PIN_COPY && c->pin != LOADER_PIN_REGISTER)
        return error_set(ERROR_BAD_USAGE, "loader: unknown pin mode %d", (int)c->pin);
    if (c->timeout_ms < 0) return error_set(ERROR_BAD_USAGE, "loader: timeout_ms must be >= 0");
    if (c->world < 0 || c->rank < 0 || c->rank >= (c->world > 1 ? c->world : 1))
        return error_set(ERROR_BAD_USAGE, "loader: rank %d of world %d: need 0 <= rank < world (world 0 or 1: "
                         "one process, rank 0)", c->rank, c->world);
    if (c->max_image_pixels < 0)
        return error_set(ERROR_BAD_USAGE, "loader: max_image_pixels must be >= 0 (0: the default, %lld)",
                         (long long)JPEG_DEFAULT_MAX_PIXELS);
    if (check_worker_cpus(c->worker_cpus) != 0) return -1;
    return augment_check_config(&c->augment);
}

// Marks the loader failed with this thread's error, which every later call repeats, and
// stops the pin thread and the workers; returns -1.
static int loader_failed(Loader *l)
{
    l->failed = true;
    l->error_kind = error_kind();
    snprintf(l->error, sizeof l->error, "%s", error_message());
    if (l->pin_thread) pin_thread_stop(l->pin_thread);  // before the semaphores go
    worker_pool_stop(&l->pool, &l->ring, l->epoch);
    return error_restore(l->error_kind, l->error);
}

static int slot_of(const Loader *l, int64_t b) { return (int)(b % l->ring.lay.nslots); }

// The pin thread's side of LOADER_PIN_COPY with workers: waits for batch b's ring slot
// (polling for cancellation), then copies the slot (header, labels, indices, images)
// into a pinned buffer. The caller checks the copied header as it would the slot.
static int pin_fill_from_ring(void *ctx, int64_t b, void *dst, size_t capacity, size_t *used,
                              const atomic_bool *cancel)
{
    Loader *l = ctx;
    uint8_t *base = ring_slot(&l->ring, slot_of(l, b));
    SlotHeader *h = (SlotHeader *)base;
    for (;;) {
        int rc = ring_slot_wait(&l->ring, slot_of(l, b), 20);
        if (rc == 1) break;
        if (rc < 0)
            return error_set(ERROR_LIBRARY, "loader: pin thread: waiting for batch %lld failed: %s",
                             (long long)b, strerror(errno));
        if (atomic_load(cancel)) return 1;
    }
    atomic_store(&l->pin_consumed, b + 1);  // its semaphore is spent: drain() skips it
    size_t payload = l->ring.lay.images_off;
    if (h->status == SLOT_OK) payload += (size_t)h->count * l->spec.sample_bytes;
    if (payload > capacity)
        return error_set(ERROR_LIBRARY, "loader: pin thread: batch %lld needs %zu bytes, buffer %zu",
                         (long long)b, payload, capacity);
    double t0 = clock_seconds();
    memcpy(dst, base, payload);
    atomic_fetch_add(&l->pin_copy_ns, (int64_t)(1e9 * (clock_seconds() - t0)));
    *used = payload;
    return 0;
}

static int create_pin_thread(Loader *l)
{
    PinThreadConfig pc = {
        .depth = 2, .buffer_bytes = l->ring.lay.slot_stride, .fill = pin_fill_from_ring, .ctx = l,
        .fresh_buffer_per_item = false, .alloc = l->cfg.pin_host_alloc,
        .free = l->cfg.pin_host_free,
    };
    if (!pc.alloc && pinned_check_available() != 0) return -1;
    return pin_thread_create(&pc, &l->pin_thread);
}

// Files the scan found not to be regular (a FIFO, a dangling link...) are bad input from
// the start: an error naming the first, or (skip_bad_files) marked bad, so that every
// epoch skips them without opening them. 0 or -1.
static int mark_irregular_files(Loader *l)
{
    const Dataset *ds = l->spec.ds;
    if (ds->num_irregular == 0) return 0;
    for (int64_t i = 0; i < ds->num_samples; i++) {
        DatasetFileKind kind = dataset_file_kind(ds, i);
        if (kind == DATASET_FILE_REGULAR) continue;
        if (!l->cfg.skip_bad_files)
            return error_set(ERROR_BAD_DATA, "loader: '%s' is %s, not a regular file, so it cannot be "
                             "read as a JPEG (skip_bad_files skips it and counts it)",
                             ds->paths[i], dataset_file_kind_name(kind));
        ring_mark_bad(&l->ring, i);
    }
    return 0;
}

int loader_create(const LoaderConfig *cfg, Loader **out)
{
    *out = NULL;
    if (check_config(cfg) != 0) return -1;
    Loader *l = calloc(1, sizeof *l);
    if (!l) return error_set(ERROR_OUT_OF_MEMORY, "loader: out of memory");
    l->cfg = *cfg;
    if (l->cfg.prefetch_factor == 0) l->cfg.prefetch_factor = 2;
    l->ring.fd = -1;
    l->epoch = -1;
    l->pin_held = -1;
    atomic_init(&l->pin_consumed, 0);
    atomic_init(&l->pin_copy_ns, 0);
    const Dataset *ds = cfg->dataset;
    int n = cfg->num_workers;
    int64_t world = cfg->world > 1 ? cfg->world : 1;
    int64_t nsamples = (ds->num_samples + world - 1) / world;  // padded to a multiple of world
    l->spec = (BatchSpec){
        .ds = ds, .batch_size = cfg->batch_size, .nsamples = nsamples, .seed = cfg->seed,
        .augment = cfg->augment, .sample_bytes = augment_sample_bytes(&cfg->augment),
        .skip_bad_files = cfg->skip_bad_files, .max_image_pixels = cfg->max_image_pixels,
        .worker_cpus = cfg->worker_cpus,
    };
    int64_t full = nsamples / cfg->batch_size;
    l->nbatches = cfg->drop_last || nsamples % cfg->batch_size == 0 ? full : full + 1;
    if (l->nbatches < 1) {
        error_set(ERROR_BAD_USAGE, "loader: %lld samples%s make no batch of %d with drop_last",
                  (long long)nsamples, world > 1 ? " per rank" : "", cfg->batch_size);
        goto fail;
    }
    if (world > 1 && !(l->global_perm = malloc((size_t)ds->num_samples * sizeof *l->global_perm))) {
        error_set(ERROR_OUT_OF_MEMORY, "loader: out of memory");
        goto fail;
    }
    // N * prefetch batches in flight while the caller holds one more.
    int nslots = n > 0 ? n * l->cfg.prefetch_factor + 1 : 1;
    int task_cap = l->cfg.prefetch_factor + 3;
    RingLayout lay = ring_layout(n, nslots, task_cap, nsamples, ds->num_samples, cfg->batch_size,
                                 l->spec.sample_bytes);
    if (worker_pool_init(&l->pool, n) != 0 || ring_create(&l->ring, &lay, n > 0) != 0) goto fail;
    if (mark_irregular_files(l) != 0) goto fail;
    if (n > 0) {
        // Fork before anything touches CUDA (the pinning stage below is the first).
        if (cfg->persistent_workers && worker_pool_start(&l->pool, &l->ring, &l->spec) != 0) goto fail;
    } else {
        if (!(l->dec = jpeg_decoder_create())) goto fail;
        jpeg_decoder_set_max_pixels(l->dec, cfg->max_image_pixels);
    }
    // Without a GPU these fail with "no CUDA device ..." and the workers are stopped.
    if (cfg->pin == LOADER_PIN_REGISTER) {
        void *base = l->ring.base + lay.slots_off;
        if (pinned_register(base, lay.total - lay.slots_off) != 0) goto fail;
        l->ring_registered = true;
    } else if (cfg->pin == LOADER_PIN_COPY && n > 0) {
        if (create_pin_thread(l) != 0) goto fail;
    } else if (cfg->pin == LOADER_PIN_COPY) {
        int rc = cfg->pin_host_alloc ? cfg->pin_host_alloc(lay.slot_stride, &l->pinned)
                                     : pinned_alloc(lay.slot_stride, &l->pinned);
        if (rc != 0) goto fail;
    }
    *out = l;
    return 0;
fail:;
    char msg[LOADER_ERROR_LEN];
    ErrorKind kind = error_kind();
    snprintf(msg, sizeof msg, "%s", error_message());
    loader_destroy(l);
    return error_restore(kind, msg);
}

// The epoch's order: the permutation of (seed, epoch) (or the identity); with world > 1,
// this rank's every world-th position of it, padded by wrapping (DistributedSampler).
static void make_order(Loader *l, int64_t epoch)
{
    int64_t n = l->spec.ds->num_samples;
    int64_t *order = ring_order(&l->ring);
    int64_t *perm = l->global_perm ? l->global_perm : order;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (l->cfg.shuffle) {
        Rng r = rng_make(l->cfg.seed, 0x5A3D1E5ull, (uint64_t)epoch);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = rng_below(&r, i + 1);
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    if (!l->global_perm) return;
    for (int64_t i = 0; i < l->spec.nsamples; i++) order[i] = perm[(l->cfg.rank + i * l->cfg.world) % n];
}

static void issue(Loader *l, int64_t b)
{
    RingTask t = {.batch_index = b, .epoch = l->epoch, .slot = slot_of(l, b), .kind = TASK_BATCH};
    ring_push_task(&l->ring, (int)(b % l->cfg.num_workers), t);
}

// Checks every worker; on a death, fails the loader naming the worker, its pid, how it
// ended and the batch it held (or waiting_for, the batch awaited from it; -1: none).
static int check_workers(Loader *l, int64_t waiting_for)
{
    if (worker_pool_poll(&l->pool, &l->ring, l->epoch, waiting_for) != 0) return loader_failed(l);
    return 0;
}

// The time a wait for one batch has lasted, not counting gaps of over a second between
// two polls (20 ms apart): then this process itself was stopped (Ctrl-Z) or starved of
// CPU, which is no worker's fault and must not end a run as a timeout.
typedef struct {
    double start, last;
} WaitClock;

static WaitClock wait_clock_start(void)
{
    double t = clock_seconds();
    return (WaitClock){t, t};
}

static double wait_clock_waited(WaitClock *c)
{
    double t = clock_seconds();
    if (t - c->last > 1.0) c->start += t - c->last;
    c->last = t;
    return t - c->start;
}

// When batch b has been waited for longer than timeout_ms: kills the worker that holds
// it (stopped or stuck, it would never finish) and fails the loader naming the worker,
// its pid and state, the batch and the epoch. 0 while within the limit, else -1.
static int check_timeout(Loader *l, int64_t b, WaitClock *c)
{
    if (l->cfg.timeout_ms <= 0 || wait_clock_waited(c) * 1000 <= l->cfg.timeout_ms) return 0;
    worker_pool_time_out(&l->pool, (int)(b % l->cfg.num_workers), b, l->epoch, l->cfg.timeout_ms);
    return loader_failed(l);
}

// Waits for batch b's slot; dead workers and the timeout end the wait with an error.
static int wait_slot(Loader *l, int64_t b)
{
    WaitClock clock = wait_clock_start();
    for (;;) {
        int rc = ring_slot_wait(&l->ring, slot_of(l, b), 20);
        if (rc == 1) return 0;
        if (rc < 0) {
            error_set(ERROR_LIBRARY, "loader: waiting for batch %lld failed: %s", (long long)b,
                      strerror(errno));
            return loader_failed(l);
        }
        if (check_workers(l, b) != 0) return -1;
        if (check_timeout(l, b, &clock) != 0) return -1;
    }
}

// Waits out the batches still in flight so their slots can be reused (the pin thread,
// stopped first, has already taken the semaphores of the batches it copied).
static int drain(Loader *l)
{
    int64_t from = l->next;
    if (l->pin_thread && atomic_load(&l->pin_consumed) > from) from = atomic_load(&l->pin_consumed);
    for (int64_t b = from; b < l->issued; b++)
        if (wait_slot(l, b) != 0) return -1;
    l->next = l->issued;
    return 0;
}

static void stop_pin_thread(Loader *l)
{
    if (!l->pin_thread) return;
    pin_thread_stop(l->pin_thread);
    l->pin_held = -1;
}

// Waits for batch b from the pin thread, polling for dead workers and the timeout as
// wait_slot does; *base is the pinned copy of the slot.
static int wait_pinned(Loader *l, int64_t b, uint8_t **base)
{
    WaitClock clock = wait_clock_start();
    for (;;) {
        void *buf;
        size_t bytes;
        int rc = pin_thread_next(l->pin_thread, b, &buf, &bytes, 20);
        if (rc == 1) {
            l->pin_held = b;
            *base = buf;
            return 0;
        }
        if (rc < 0) return loader_failed(l);
        if (check_workers(l, b) != 0) return -1;
        if (check_timeout(l, b, &clock) != 0) return -1;
    }
}

int loader_begin_epoch(Loader *l, int64_t epoch)
{
    if (l->failed) return error_restore(l->error_kind, l->error);
    int n = l->cfg.num_workers;
    stop_pin_thread(l);
    if (l->epoch_active && n > 0) {
        if (l->cfg.persistent_workers) {
            if (drain(l) != 0) return -1;
        } else if (worker_pool_stop(&l->pool, &l->ring, l->epoch) != 0) {
            return loader_failed(l);
        }
    }
    l->epoch = epoch;
    make_order(l, epoch);
    l->next = 0;
    l->issued = 0;
    l->epoch_active = true;
    atomic_store(&l->pin_consumed, 0);
    if (n > 0) {
        if (!worker_pool_running(&l->pool) && worker_pool_start(&l->pool, &l->ring, &l->spec) != 0) {
            l->epoch_active = false;
            return -1;
        }
        while (l->issued < l->nbatches && l->issued < l->ring.lay.nslots) issue(l, l->issued++);
        if (l->pin_thread && pin_thread_start(l->pin_thread, 0, l->nbatches) != 0) return -1;
    }
    return 0;
}

// Ends the epoch: re-spawned workers are joined, persistent ones checked, so that a
// worker that died after its last batch is reported too. 0 or -1.
static int end_epoch(Loader *l)
{
    l->epoch_active = false;
    stop_pin_thread(l);
    if (l->cfg.num_workers == 0) return 0;
    if (!l->cfg.persistent_workers)
        return worker_pool_stop(&l->pool, &l->ring, l->epoch) != 0 ? loader_failed(l) : 0;
    return check_workers(l, -1);
}

int loader_next_batch(Loader *l, LoaderBatch *batch)
{
    memset(batch, 0, sizeof *batch);
    if (l->failed) return error_restore(l->error_kind, l->error);
    if (!l->epoch_active && loader_begin_epoch(l, l->epoch + 1) != 0) return -1;
    int n = l->cfg.num_workers;
    for (;;) {
        if (l->pin_thread && l->pin_held >= 0) {  // the caller is done with the last batch
            pin_thread_release(l->pin_thread, l->pin_held);
            l->pin_held = -1;
        }
        if (n > 0 && l->next > 0) {
            // The caller is done with batch next-1: its slot takes the next batch.
            if (l->issued < l->nbatches) issue(l, l->issued++);
        }
        if (l->next >= l->nbatches) return end_epoch(l) != 0 ? -1 : 0;
        int64_t b = l->next;
        int slot = slot_of(l, b);
        double t0 = clock_seconds();
        uint8_t *base = ring_slot(&l->ring, slot);
        if (n > 0 && l->pin_thread) {
            if (wait_pinned(l, b, &base) != 0) return -1;
        } else if (n > 0) {
            if (wait_slot(l, b) != 0) return -1;
        } else {
            worker_fill_slot(&l->spec, &l->ring, 0, b, l->epoch, -1, l->dec, &l->img);
        }
        l->stats.wait_seconds += clock_seconds() - t0;
        l->next++;
        SlotHeader *h = (SlotHeader *)base;
        if (h->status != SLOT_OK) {
            error_restore((ErrorKind)h->error_kind, h->error);
            return loader_failed(l);
        }
        if (h->batch_index != b || h->epoch != l->epoch) {
            error_set(ERROR_LIBRARY, "loader: slot %d holds batch %lld of epoch %lld, "
                      "expected batch %lld of epoch %lld", slot, (long long)h->batch_index,
                      (long long)h->epoch, (long long)b, (long long)l->epoch);
            return loader_failed(l);
        }
        l->stats.skipped += h->skipped;
        if (h->skipped) snprintf(l->stats.last_skip, sizeof l->stats.last_skip, "%s", h->error);
        if (h->count == 0) continue; // every file of this batch was skipped
        const RingLayout *lay = &l->ring.lay;
        size_t payload = lay->images_off + (size_t)h->count * l->spec.sample_bytes;
        if (l->cfg.pin == LOADER_PIN_COPY && !l->pin_thread) {  // num_workers = 0
            double p0 = clock_seconds();
            memcpy(l->pinned, base, payload);
            l->stats.pin_seconds += clock_seconds() - p0;
            base = l->pinned;
        }
        batch->images = base + lay->images_off;
        batch->labels = (const int32_t *)(base + lay->labels_off);
        batch->indices = (const int64_t *)(base + lay->indices_off);
        batch->count = h->count;
        batch->skipped = h->skipped;
        batch->batch_index = b;
        batch->epoch = l->epoch;
        batch->height = l->cfg.augment.out_height;
        batch->width = l->cfg.augment.out_width;
        batch->dtype = l->cfg.augment.dtype;
        batch->image_bytes = (size_t)h->count * l->spec.sample_bytes;
        batch->pinned = l->cfg.pin != LOADER_PIN_NONE;
        l->stats.batches++;
        l->stats.images += h->count;
        return 1;
    }
}

int64_t loader_num_batches(const Loader *l) { return l->nbatches; }

int64_t loader_epoch_samples(const Loader *l) { return l->spec.nsamples; }

void loader_epoch_order(const Loader *l, int64_t *order)
{
    memcpy(order, ring_order(&l->ring), (size_t)l->spec.nsamples * sizeof *order);
}

int loader_worker_pid(const Loader *l, int i) { return worker_pool_pid(&l->pool, i); }

void loader_get_stats(const Loader *l, LoaderStats *s)
{
    *s = l->stats;
    s->pin_seconds += 1e-9 * (double)atomic_load(&l->pin_copy_ns);
    s->worker_cpu_seconds = worker_pool_cpu_seconds(&l->pool);
    s->worker_failures = l->pool.failures;
    s->worker_spawns = l->pool.spawns;
    s->bad_files = ring_bad_files(&l->ring);
}

void loader_destroy(Loader *l)
{
    if (!l) return;
    pin_thread_destroy(l->pin_thread);  // before the workers and their semaphores go
    l->pin_thread = NULL;
    worker_pool_stop(&l->pool, &l->ring, l->epoch);
    if (l->ring_registered) pinned_unregister(l->ring.base + l->ring.lay.slots_off);
    if (l->cfg.pin_host_free) l->cfg.pin_host_free(l->pinned);
    else pinned_free(l->pinned);
    ring_destroy(&l->ring);
    jpeg_decoder_destroy(l->dec);
    image_free(&l->img);
    worker_pool_free(&l->pool);
    free(l->global_perm);
    free(l);
}
