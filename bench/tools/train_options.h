// train_options.h: the `train` tool's command line (bench/tools/train_options.c): what it
// reads into the core's config and into TrainArgs, the tool's own settings. The training
// loop and its log are bench/tools/train_main.c.
#ifndef TRAIN_OPTIONS_H
#define TRAIN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/core.h"

typedef enum { TRAIN_DATA_IMAGES, TRAIN_DATA_TENSOR } TrainData;

typedef struct TrainArgs {
    const char *preset;
    int steps, log_every;
    int eval_batches;       // -1: the default (tensor: 4; images: the whole held-out split)
    float noise;
    float target_accuracy;  // exit status 2 when the final accuracy is below it
    TrainData data;
    const char *data_dir;       // images: the user's ImageFolder root (NULL: generated)
    const char *dataset_preset; // images: generated preset (NULL: chosen by image size)
    int num_workers;            // images: loader worker processes (0: in this process)
    bool skip_bad_files;
    int loader_timeout_s;       // images: a batch taking longer is an error (0: no limit)
    int64_t max_image_pixels;   // images: largest JPEG decoded (0: PIL's default)
    float holdout;              // images: fraction of each class held out for evaluation
    float crop_scale_min;       // images: smallest random-resized-crop area fraction
    bool classes_set;           // --classes was given
    bool verbose;               // print the convolution algorithms in use
    bool ddp;                   // DistributedDataParallel over the launcher's world
    int nproc_per_node;         // > 0: start this many local ranks (implies ddp)
    const char *tokens_file;    // gpt presets: train on this token file (NULL: the generated task)
} TrainArgs;

// Reads argv into cfg (the --preset's config, then every flag that overrides it) and a
// (whose defaults the caller sets); 1 means --help was printed, -1 a bad flag (printed).
int train_parse_args(int argc, char **argv, CoreConfig *cfg, TrainArgs *a);

#endif
