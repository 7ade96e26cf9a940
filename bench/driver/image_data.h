// image_data.h: a training set of JPEGs for the programs that train on images
// (build/train, the practice driver's --data=images): the loaders' generated dataset or
// the user's ImageFolder, split (fixed seed) into train and held-out files, with one
// loader for shuffled, augmented training batches and one for every held-out file once.
// Create it before anything touches CUDA: the loaders fork their workers here.
#ifndef IMAGE_DATA_H
#define IMAGE_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/core.h"
#include "loaders/dataset.h"
#include "loaders/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

// Held-out files are chosen with this seed, not the training seed: the held-out set stays
// the same across training seeds, so their accuracies are comparable.
#define IMAGE_DATA_SPLIT_SEED 20240601ull

typedef struct ImageDataConfig {
    const char *data_dir;       // the user's ImageFolder root; NULL: the generated dataset
    const char *dataset_preset; // generated preset; NULL: small up to 64x64 images, else bench
    const char *cache_dir;      // where generated datasets live (NULL: $BENCH_CACHE_DIR,
                                // else cache/datasets)
    int image_size;             // the model's input side
    int batch_size;
    uint64_t seed;              // shuffle and augmentation
    int num_workers;            // training loader's worker processes (0: in the caller)
    LoaderPinMode pin;          // the training loader's pinning stage
    uint64_t worker_cpus;       // the training loader's LoaderConfig.worker_cpus (0: unbound)
    bool skip_bad_files;
    float holdout;              // fraction of each class held out (0, 1)
    float crop_scale_min;       // smallest random-resized-crop area fraction
    int timeout_ms;             // a batch taking longer is an error (0: no limit)
    int64_t max_image_pixels;   // largest JPEG decoded (0: PIL's default); larger: bad input
    int world, rank;            // DDP: the training loader reads rank's DistributedSampler
                                // shard of world (LoaderConfig.world); 0, 0: everything
} ImageDataConfig;

typedef struct ImageData {
    Dataset all, train, heldout;
    Loader *train_loader, *eval_loader;
    char root[4096];
    int64_t epoch;              // of the training loader
    char preset_note[256];      // "dataset preset small (10 classes x 30 images of 64x64)" or ""
} ImageData;

// Defaults for a model's image size and batch: generated data, 2 workers, 20% held out.
ImageDataConfig image_data_default_config(int image_size, int batch_size);
// The root of the images: data_dir when given, else the generated preset under cache_dir
// (NULL: $BENCH_CACHE_DIR, else cache/datasets; generated on first use; note, when not
// NULL, says which). 0 or -1 with the error set.
int image_data_root(const char *data_dir, const char *preset, const char *cache_dir, char *root,
                    size_t root_size, char *note, size_t note_size);
// Prepares the data (generating it on first use) and both loaders. 0, or -1 with the
// error set (kernels/error.h); a partly opened one is safe to close.
int image_data_open(const ImageDataConfig *cfg, ImageData *d);
// The next training batch (whole batches only; a new epoch starts when one ends). 0 or -1.
int image_data_next(ImageData *d, CoreBatch *batch);
// Evaluates held-out images (at most max_batches batches; -1: all of them), adding the
// summed loss, correct count and images to the totals. 0 or -1.
int image_data_eval(ImageData *d, Core *core, int max_batches, double *loss_sum, double *correct,
                    int64_t *seen);
// Stops the loaders' workers and frees the datasets; safe on a partly opened one.
void image_data_close(ImageData *d);

#ifdef __cplusplus
}
#endif
#endif
