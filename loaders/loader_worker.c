// loader_worker.c: what a worker process does (and the batch fill the caller shares
// with it when num_workers = 0): decode, augment and collate one batch into a slot.
#include "kernels/error.h"
#include "loaders/loader_ring.h"
#include "kernels/rng.h"
#include "loaders/sample.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

// A file already known to be bad (found bad in an earlier epoch, or not a regular file):
// skipped without reading it; why goes to the slot's error, as for any skipped file.
static void skip_known_bad(const Loader *l, SlotHeader *h, int64_t idx)
{
    DatasetFileKind kind = dataset_file_kind(l->ds, idx);
    if (kind != DATASET_FILE_REGULAR)
        snprintf(h->error, sizeof h->error, "loader: '%s' is %s, not a regular file (never opened)",
                 l->ds->paths[idx], dataset_file_kind_name(kind));
    else
        snprintf(h->error, sizeof h->error, "loader: '%s' was found bad earlier in this run "
                 "(not read again)", l->ds->paths[idx]);
    h->error_kind = ERROR_BAD_DATA;
    if (l->cfg.skip_bad_files) h->skipped++;
    else h->status = SLOT_ERROR;
}

void loader_fill_slot(const Loader *l, uint8_t *ring, const int64_t *perm, int slot,
                      int64_t b, int64_t epoch, int worker, JpegDecoder *dec, Image *img)
{
    const RingLayout *lay = &l->lay;
    uint8_t *base = ring_slot(lay, ring, slot);
    SlotHeader *h = (SlotHeader *)base;
    int32_t *labels = (int32_t *)(base + lay->labels_off);
    int64_t *indices = (int64_t *)(base + lay->indices_off);
    uint8_t *images = base + lay->images_off;
    RingHeader *head = ring_header(ring);
    RingHeader *rh = l->cfg.num_workers > 0 ? head : NULL; // shutdown requests: workers only
    _Atomic uint64_t *bad = ring_bad_bits(lay, ring);

    h->status = SLOT_OK;
    h->count = 0;
    h->skipped = 0;
    h->worker = worker;
    h->batch_index = b;
    h->epoch = epoch;
    h->error[0] = '\0';
    h->error_kind = ERROR_NONE;
    int64_t start = b * l->cfg.batch_size;
    int64_t end = start + l->cfg.batch_size;
    if (end > l->nsamples) end = l->nsamples;
    for (int64_t pos = start; pos < end; pos++) {
        if (rh && atomic_load_explicit(&rh->shutdown, memory_order_relaxed)) {
            h->status = SLOT_ERROR;
            h->error_kind = ERROR_LIBRARY;
            snprintf(h->error, sizeof h->error, "loader: shut down while loading batch %lld",
                     (long long)b);
            return;
        }
        int64_t idx = perm[pos];
        const char *path = l->ds->paths[idx];
        if (bad_bit_test(bad, idx)) {
            skip_known_bad(l, h, idx);
            if (h->status != SLOT_OK) return;
            continue;
        }
        uint64_t seed = rng_make(l->cfg.seed, (uint64_t)epoch, (uint64_t)idx).state;
        if (sample_load(dec, path, &l->cfg.augment, seed, img,
                        images + (size_t)h->count * l->sample_bytes) != 0) {
            // Remembered for the run (every process sees the bit): later epochs skip the
            // file without reading it. Not a machine limit (out of memory), which may pass.
            ErrorKind kind = error_kind();
            if ((kind == ERROR_BAD_DATA || kind == ERROR_IO) && bad_bit_set(bad, idx))
                atomic_fetch_add_explicit(&head->bad_files, 1, memory_order_relaxed);
            if (l->cfg.skip_bad_files) {
                h->skipped++; // the message of the last one goes back in h->error
                h->error_kind = (int32_t)error_kind();
                snprintf(h->error, sizeof h->error, "%s", error_message());
                continue;
            }
            h->status = SLOT_ERROR;
            h->error_kind = (int32_t)error_kind();
            snprintf(h->error, sizeof h->error, "%s", error_message());
            return;
        }
        labels[h->count] = l->ds->labels[idx];
        indices[h->count] = idx;
        h->count++;
    }
}

static void worker_wait_deadline(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

_Noreturn void loader_worker_main(Loader *l, int w)
{
    // Die with the parent; leave Ctrl-C to the parent, which then shuts us down.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != l->parent_pid) _exit(3);
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    // Map the ring afresh from the inherited descriptor: memory the parent has pinned
    // through CUDA may be marked "don't fork", so the inherited mapping is not trusted.
    uint8_t *ring = mmap(NULL, l->lay.total, PROT_READ | PROT_WRITE, MAP_SHARED, l->shm_fd, 0);
    if (ring == MAP_FAILED) _exit(4);
    RingHeader *rh = ring_header(ring);
    WorkerShared *ws = ring_worker(&l->lay, ring, w);
    LoaderTask *tasks = ring_tasks(&l->lay, ring, w);
    const int64_t *perm = (const int64_t *)(ring + l->lay.perm_off);
    JpegDecoder *dec = jpeg_decoder_create();
    if (!dec) _exit(5);
    jpeg_decoder_set_max_pixels(dec, l->cfg.max_image_pixels);
    Image img = {0};
    for (;;) {
        struct timespec ts;
        worker_wait_deadline(&ts, 200);
        if (sem_timedwait(&ws->tasks_ready, &ts) != 0) {
            if (atomic_load(&rh->shutdown) || getppid() != l->parent_pid) break;
            continue;
        }
        if (atomic_load(&rh->shutdown)) break;
        LoaderTask t = tasks[ws->tail % l->lay.task_cap];
        ws->tail++;
        if (t.kind == TASK_EXIT) break;
        atomic_store(&ws->current_batch, t.batch_index);
        loader_fill_slot(l, ring, perm, t.slot, t.batch_index, t.epoch, w, dec, &img);
        atomic_store(&ws->current_batch, -1);
        sem_post(&((SlotHeader *)ring_slot(&l->lay, ring, t.slot))->done);
    }
    jpeg_decoder_destroy(dec);
    image_free(&img);
    _exit(0);
}
