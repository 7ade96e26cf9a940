// loader_worker.c: what a worker process does (and the batch fill the caller shares
// with it when num_workers = 0): decode, augment and collate one batch into a slot.
#include "loaders/loader_worker.h"

#include "kernels/error.h"
#include "kernels/rng.h"
#include "loaders/sample.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

// A file already known to be bad (found bad in an earlier epoch, or not a regular file):
// skipped without reading it; why goes to the slot's error, as for any skipped file.
static void skip_known_bad(const BatchSpec *spec, SlotHeader *h, int64_t idx)
{
    DatasetFileKind kind = dataset_file_kind(spec->ds, idx);
    if (kind != DATASET_FILE_REGULAR)
        snprintf(h->error, sizeof h->error, "loader: '%s' is %s, not a regular file (never opened)",
                 spec->ds->paths[idx], dataset_file_kind_name(kind));
    else
        snprintf(h->error, sizeof h->error, "loader: '%s' was found bad earlier in this run "
                 "(not read again)", spec->ds->paths[idx]);
    h->error_kind = ERROR_BAD_DATA;
    if (spec->skip_bad_files) h->skipped++;
    else h->status = SLOT_ERROR;
}

void worker_fill_slot(const BatchSpec *spec, Ring *ring, int slot, int64_t b, int64_t epoch,
                      int worker, JpegDecoder *dec, Image *img)
{
    const RingLayout *lay = &ring->lay;
    uint8_t *base = ring_slot(ring, slot);
    SlotHeader *h = (SlotHeader *)base;
    int32_t *labels = (int32_t *)(base + lay->labels_off);
    int64_t *indices = (int64_t *)(base + lay->indices_off);
    uint8_t *images = base + lay->images_off;
    const int64_t *order = ring_order(ring);

    h->status = SLOT_OK;
    h->count = 0;
    h->skipped = 0;
    h->worker = worker;
    h->batch_index = b;
    h->epoch = epoch;
    h->error[0] = '\0';
    h->error_kind = ERROR_NONE;
    int64_t start = b * spec->batch_size;
    int64_t end = start + spec->batch_size;
    if (end > spec->nsamples) end = spec->nsamples;
    for (int64_t pos = start; pos < end; pos++) {
        if (ring_shutdown_requested(ring)) {
            h->status = SLOT_ERROR;
            h->error_kind = ERROR_LIBRARY;
            snprintf(h->error, sizeof h->error, "loader: shut down while loading batch %lld",
                     (long long)b);
            return;
        }
        int64_t idx = order[pos];
        const char *path = spec->ds->paths[idx];
        if (ring_is_bad(ring, idx)) {
            skip_known_bad(spec, h, idx);
            if (h->status != SLOT_OK) return;
            continue;
        }
        uint64_t seed = rng_make(spec->seed, (uint64_t)epoch, (uint64_t)idx).state;
        if (sample_load(dec, path, &spec->augment, seed, img,
                        images + (size_t)h->count * spec->sample_bytes) != 0) {
            // Remembered for the run (every process sees the bit): later epochs skip the
            // file without reading it. Not a machine limit (out of memory), which may pass.
            ErrorKind kind = error_kind();
            if (kind == ERROR_BAD_DATA || kind == ERROR_IO) ring_mark_bad(ring, idx);
            if (spec->skip_bad_files) {
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
        labels[h->count] = spec->ds->labels[idx];
        indices[h->count] = idx;
        h->count++;
    }
}

// Runs this process on the CPUs of mask (bit i: CPU i) only. 0 or -1.
static int bind_to_cpus(uint64_t mask)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < 64; i++)
        if (mask >> i & 1) CPU_SET(i, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

_Noreturn void worker_main(const Ring *shared, const BatchSpec *spec, int w, pid_t parent)
{
    // Die with the parent; leave Ctrl-C to the parent, which then shuts us down.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(WORKER_EXIT_ORPHAN);
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    if (spec->worker_cpus && bind_to_cpus(spec->worker_cpus) != 0) _exit(WORKER_EXIT_NO_CPUS);
    Ring ring;
    if (ring_map_again(shared, &ring) != 0) _exit(WORKER_EXIT_NO_RING);
    JpegDecoder *dec = jpeg_decoder_create();
    if (!dec) _exit(WORKER_EXIT_NO_DECODER);
    jpeg_decoder_set_max_pixels(dec, spec->max_image_pixels);
    Image img = {0};
    RingWorker *self = ring_worker(&ring, w);
    for (;;) {
        RingTask t;
        int got = ring_take_task(&ring, w, 200, &t);
        if (ring_shutdown_requested(&ring)) break;
        if (!got) {
            if (getppid() != parent) break;
            continue;
        }
        if (t.kind == TASK_EXIT) break;
        atomic_store(&self->current_batch, t.batch_index);
        worker_fill_slot(spec, &ring, t.slot, t.batch_index, t.epoch, w, dec, &img);
        atomic_store(&self->current_batch, -1);
        ring_slot_post(&ring, t.slot);
    }
    jpeg_decoder_destroy(dec);
    image_free(&img);
    _exit(0);
}
