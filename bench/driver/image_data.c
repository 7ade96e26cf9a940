// image_data.c: the train/held-out JPEG data of image_data.h.
#include "bench/driver/image_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/error.h"
#include "loaders/dataset_gen.h"

ImageDataConfig image_data_default_config(int image_size, int batch_size)
{
    ImageDataConfig c = {
        .data_dir = NULL, .dataset_preset = NULL, .cache_dir = NULL,
        .image_size = image_size, .batch_size = batch_size, .seed = 1, .num_workers = 2,
        .pin = LOADER_PIN_NONE, .skip_bad_files = false, .holdout = 0.2f,
        .crop_scale_min = 0.25f, .timeout_ms = 0, .max_image_pixels = 0,
    };
    return c;
}

int image_data_root(const char *data_dir, const char *preset, const char *cache_dir, char *root,
                    size_t root_size, char *note, size_t note_size)
{
    if (note && note_size) note[0] = '\0';
    if (data_dir && *data_dir) {
        snprintf(root, root_size, "%s", data_dir);
        return 0;
    }
    if (!cache_dir || !*cache_dir) cache_dir = getenv("BENCH_CACHE_DIR");
    if (!cache_dir || !*cache_dir) cache_dir = "cache/datasets";
    DatasetGenConfig gen;
    if (dataset_gen_preset(preset, &gen) != 0 || dataset_gen_ensure(&gen, cache_dir, root, root_size) != 0)
        return error_wrap("the generated dataset '%s' under %s", preset, cache_dir);
    if (note && note_size)
        snprintf(note, note_size, "dataset preset %s (%d classes x %d images of %dx%d) under %s", preset,
                 gen.num_classes, gen.images_per_class, gen.width, gen.height, cache_dir);
    return 0;
}

int image_data_open(const ImageDataConfig *c, ImageData *d)
{
    memset(d, 0, sizeof *d);
    const char *preset = c->dataset_preset ? c->dataset_preset : c->image_size <= 64 ? "small" : "bench";
    TRY(image_data_root(c->data_dir, preset, c->cache_dir, d->root, sizeof d->root, d->preset_note,
                        sizeof d->preset_note));
    if (dataset_scan(d->root, &d->all) != 0) return error_wrap("reading the dataset");
    if (dataset_split(&d->all, c->holdout, IMAGE_DATA_SPLIT_SEED, &d->train, &d->heldout) != 0)
        return error_wrap("splitting the dataset");
    if (d->train.num_samples < c->batch_size)
        return error_set(ERROR_BAD_USAGE,
                         "only %lld training images in %s, fewer than one batch of %d (use a "
                         "smaller batch or a bigger dataset)",
                         (long long)d->train.num_samples, d->root, c->batch_size);

    // Training: shuffled, random-resized crops and flips, whole batches only (one shape).
    LoaderConfig tc = loader_default_config(&d->train, c->batch_size);
    tc.num_workers = c->num_workers;
    tc.seed = c->seed;
    tc.drop_last = true;
    tc.skip_bad_files = c->skip_bad_files;
    tc.pin = c->pin;
    tc.worker_cpus = c->worker_cpus;
    tc.timeout_ms = c->timeout_ms;
    tc.max_image_pixels = c->max_image_pixels;
    tc.augment = augment_default_config(c->image_size);
    tc.augment.scale_min = c->crop_scale_min;
    tc.world = c->world;
    tc.rank = c->rank;
    // Evaluation: every held-out file once, the whole image resized, no flip.
    LoaderConfig ec = loader_default_config(&d->heldout, c->batch_size);
    ec.shuffle = false;
    ec.skip_bad_files = c->skip_bad_files;
    ec.timeout_ms = c->timeout_ms;
    ec.max_image_pixels = c->max_image_pixels;
    ec.augment = augment_default_config(c->image_size);
    ec.augment.random_crop = false;
    ec.augment.flip = false;
    if (loader_create(&tc, &d->train_loader) != 0 || loader_create(&ec, &d->eval_loader) != 0)
        return error_wrap("creating the loaders");
    return 0;
}

int image_data_next(ImageData *d, CoreBatch *batch)
{
    LoaderBatch b;
    for (int tries = 0; tries < 2;) {
        int rc = loader_next_batch(d->train_loader, &b);
        if (rc < 0) return error_wrap("loading training images");
        if (rc == 0) { // the epoch is over
            if (loader_begin_epoch(d->train_loader, ++d->epoch) != 0)
                return error_wrap("loading training images");
            tries++;
            continue;
        }
        if (b.count == 0) continue; // every file of the batch was bad and skipped
        *batch = (CoreBatch){.images = b.images, .labels = b.labels, .n = b.count, .memory = CORE_MEMORY_HOST};
        return 0;
    }
    return error_set(ERROR_BAD_DATA, "an epoch of %s gave no usable images", d->root);
}

void image_data_close(ImageData *d)
{
    loader_destroy(d->train_loader);
    loader_destroy(d->eval_loader);
    dataset_free(&d->train);
    dataset_free(&d->heldout);
    dataset_free(&d->all);
    memset(d, 0, sizeof *d);
}

int image_data_eval(ImageData *d, Core *core, int max_batches, double *loss_sum, double *correct,
                    int64_t *seen)
{
    if (loader_begin_epoch(d->eval_loader, 0) != 0) return error_wrap("loading held-out images");
    LoaderBatch b;
    int rc;
    for (int n = 0; (max_batches < 0 || n < max_batches) &&
                    (rc = loader_next_batch(d->eval_loader, &b)) != 0; n++) {
        if (rc < 0) return error_wrap("loading held-out images");
        if (b.count == 0) continue;
        CoreBatch cb = {.images = b.images, .labels = b.labels, .n = b.count, .memory = CORE_MEMORY_HOST};
        CoreEvalResult er;
        if (core_eval(core, &cb, &er) != 0) return error_wrap("evaluating held-out images");
        *loss_sum += (double)er.loss * cb.n;
        *correct += (double)er.accuracy * cb.n;
        *seen += cb.n;
    }
    return 0;
}
